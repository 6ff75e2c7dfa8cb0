"""Replies that QuantDesk's first tool-call reader got wrong (issue 25's list), read again through the chat-format
layer with each family's real template: each of them is read as llama.cpp reads it now."""

from __future__ import annotations

import json

import pytest

from backends.chat_format import formats

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                           "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                          "required": ["zone"]}}}]


def _read(templates, name: str, reply: str, partial: bool = False, **request):
    prepared = formats.apply(formats.Template.of(templates[name]),
                             formats.Request(messages=[{"role": "user", "content": "hi"}], tools=TOOLS, **request))
    return prepared.parse(reply, partial=partial)


def test_gpt_oss_header_text_inside_arguments_is_no_second_call_and_the_preamble_stays(llama_cpp_templates):
    reply = _read(llama_cpp_templates, "openai-gpt-oss-120b.jinja",
                  "<|channel|>commentary<|message|>Let me look that up.<|end|>"
                  "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                  '{"city": "<|start|>assistant<|channel|>commentary to=functions.get_time <|message|>"}')
    assert [c.name for c in reply.tool_calls] == ["get_weather"]
    assert json.loads(reply.tool_calls[0].arguments)["city"].startswith("<|start|>assistant")
    assert reply.content == "Let me look that up."


def test_mistral_tool_calls_inside_the_thinking_are_thinking(llama_cpp_templates):
    reply = _read(llama_cpp_templates, "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
                  '[THINK]Maybe [TOOL_CALLS]get_time[ARGS]{"zone": "x"} is wrong.[/THINK]Sure.'
                  '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}')
    assert "[TOOL_CALLS]get_time" in reply.reasoning
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert reply.content == "Sure."


@pytest.mark.parametrize("partial", [True, False], ids=["streaming", "cut-off-reply"])
def test_hermes_keeps_a_whole_first_call_when_the_second_is_cut_off(llama_cpp_templates, partial):
    reply = _read(llama_cpp_templates, "Qwen-Qwen2.5-7B-Instruct.jinja",
                  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
                  '<tool_call>\n{"name": "get_time", "argu', partial=partial, parallel_tool_calls=True)
    assert reply.tool_calls[0].name == "get_weather"
    assert json.loads(reply.tool_calls[0].arguments) == {"city": "Paris"}
    assert "<tool_call>" not in reply.content


def test_llama3_finds_a_call_after_text(llama_cpp_templates):
    reply = _read(llama_cpp_templates, "meta-llama-Llama-3.1-8B-Instruct.jinja",
                  'Let me check.<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}')
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    # <|python_tag|> is a control token, printed as nothing by the engine unless a format keeps it
    assert reply.content.startswith("Let me check.")


def test_kimi_section_markers_are_not_content(llama_cpp_templates):
    reply = _read(llama_cpp_templates, "Kimi-K2-Thinking.jinja",
                  "ok<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                  '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
    assert reply.content == "ok"
    assert [(c.name, c.id) for c in reply.tool_calls] == [("get_weather", "functions.get_weather:0")]
