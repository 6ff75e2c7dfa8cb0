"""llama.cpp's generic tool format for a template that shows the model no tools (families/generic.py): the prompt
common_chat_params_init_generic and minja's polyfills made, the reply read as common_chat_parse_generic read it."""

from __future__ import annotations

import json

from backends.chat_format import bundled, formats
from backends.chat_format.families import generic
from backends.chat_format.reply import ReplyReader

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CHATML = formats.Template.of(bundled.bundled_source("chatml"))


def test_a_template_without_tools_or_calls_is_the_generic_format_and_others_are_not(llama_cpp_sources):
    assert formats.tools_name(bundled.bundled_source("chatml")) == "generic"
    assert formats.tools_name(bundled.bundled_source("gemma")) == "generic"
    assert formats.tools_name(bundled.bundled_source("qwen2")) == "auto"  # it shows the tools itself
    # writes calls but never the tool list: read as llama.cpp reads it, not the generic format
    distill = llama_cpp_sources.templates["deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"]
    assert formats.tools_name(distill) == ""
    assert formats.tools_name("") == ""


def test_the_system_prompt_asks_for_json_and_lists_the_tools_after_the_user_s_own():
    request = formats.Request(messages=[{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Weather in Paris?"}], tools=TOOLS)
    prepared = formats.apply(CHATML, request)
    assert prepared.format == "generic" and prepared.grammar and not prepared.grammar_lazy
    system = ("Be brief.\n\n" + generic.RESPOND_IN_JSON + "\n\n" + generic.TOOLS_INTRO
              + json.dumps(TOOLS, indent=2))
    assert prepared.prompt == (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                               "<|im_start|>assistant\n")
    # without tools the template renders as always
    plain = formats.apply(CHATML, formats.Request(messages=request.messages))
    assert generic.RESPOND_IN_JSON not in plain.prompt and plain.format != "generic"


def test_the_reply_shape_is_a_call_or_a_response_and_only_a_call_when_one_is_required():
    auto = generic.schema(formats.Request(messages=[], tools=TOOLS))
    call, response = auto["anyOf"]
    assert call["required"] == ["tool_calls"] and response["properties"]["response"] == {"type": "string"}
    assert call["properties"]["tool_calls"]["items"]["required"] == ["name", "arguments", "id"]
    one = generic.schema(formats.Request(messages=[], tools=TOOLS, tool_choice="required", parallel_tool_calls=False))
    assert one["required"] == ["tool_call"] and one["properties"]["tool_call"]["properties"]["name"] == {
        "type": "string", "const": "get_weather"}


def test_a_template_that_renders_no_calls_or_results_gets_them_as_json():
    """Gemma's template alternates user and model turns and knows no tool role: the call goes in the model's turn as
    the JSON the format writes, the result as a user turn {"tool_response": ...}, as minja's polyfills wrote them."""
    gemma = formats.Template.of(bundled.bundled_source("gemma"), "<bos>")
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call1", "content": "Sunny"}]
    prompt = formats.apply(gemma, formats.Request(messages=messages, tools=TOOLS)).prompt
    call = json.dumps({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call1"}]},
                      indent=2)
    result = json.dumps({"tool_response": {"content": "Sunny", "tool_call_id": "call1"}}, indent=2)
    assert f"<start_of_turn>model\n{call}<end_of_turn>\n<start_of_turn>user\n{result}<end_of_turn>\n" in prompt
    assert prompt.endswith("<start_of_turn>model\n")


def test_the_reply_is_read_as_llama_cpp_read_it_and_streams_without_taking_back():
    prepared = formats.apply(CHATML, formats.Request(messages=[{"role": "user", "content": "Hi"}], tools=TOOLS))
    called = prepared.parse('{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "ab12"}]}')
    assert [(c.name, json.loads(c.arguments), c.id) for c in called.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "ab12")]
    one = prepared.parse('{"tool_call": {"name": "get_weather", "arguments": {"city": "Rome"}}}')
    assert one.tool_calls[0].name == "get_weather" and not one.content
    assert prepared.parse('{"response": "Hello \\u00e9"}').content == "Hello é"
    assert prepared.parse("Just text").content == "Just text"  # a model that ignored the format is not lost
    reader = ReplyReader(prepared)
    streamed = ""
    for piece in ['{"resp', 'onse": "Hel', 'lo\\', 'n wor', 'ld"}']:
        reader.feed(piece)
        streamed += "".join(d.content for d in reader.deltas())
    streamed += "".join(d.content for d in reader.deltas(final=True))
    assert streamed == "Hello\n world"
