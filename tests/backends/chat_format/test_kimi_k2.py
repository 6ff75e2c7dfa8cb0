"""Kimi K2 (backends/chat_format/families/kimi_k2.py): the generation prompts llama.cpp's test-chat checks
(test_template_generation_prompt), and the tool call section read as llama.cpp reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import formats

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "Hey there!"}
GET_TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TEMPLATES = ["moonshotai-Kimi-K2.jinja", "Kimi-K2-Instruct.jinja", "Kimi-K2-Thinking.jinja"]


def prepared(templates: dict[str, str], name: str, messages: list[dict[str, Any]],
             **request: Any) -> formats.Prepared:
    return formats.apply(formats.Template.of(templates[name]), formats.Request(messages=messages, **request))


def test_generation_prompts_are_llama_cpps(llama_cpp_templates):
    name = "moonshotai-Kimi-K2.jinja"
    basic = prepared(llama_cpp_templates, name, [SYSTEM, USER])
    assert basic.generation_prompt == "<|im_assistant|>assistant<|im_middle|>"
    content = prepared(llama_cpp_templates, name,
                       [SYSTEM, USER, {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}],
                       add_generation_prompt=False, continue_final_message="content")
    assert content.generation_prompt == "<|im_assistant|>assistant<|im_middle|><think>I'm thinking</think>Hello, "
    reasoning = prepared(llama_cpp_templates, name,
                         [SYSTEM, USER, {"role": "assistant", "content": "", "reasoning_content": "I'm"}],
                         add_generation_prompt=False, continue_final_message="reasoning")
    assert reasoning.generation_prompt == "<|im_assistant|>assistant<|im_middle|><think>I'm"
    for prep in (basic, content, reasoning):
        assert prep.prompt.endswith(prep.generation_prompt)


@pytest.mark.parametrize("name", TEMPLATES)
def test_reads_parallel_calls_with_their_ids(llama_cpp_templates, name):
    prep = prepared(llama_cpp_templates, name, [USER], tools=[GET_TIME])
    assert prep.grammar_lazy and prep.grammar_triggers == (("word", "<|tool_call_begin|>"),)
    reply = ("<think>Two cities.</think>Checking.<|tool_calls_section_begin|>"
             "<|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
             "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{\"city\": \"Rome\"}<|tool_call_end|>"
             "<|tool_calls_section_end|>")
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("Two cities.", "Checking.")
    assert [(c.name, json.loads(c.arguments), c.id) for c in parsed.tool_calls] == [
        ("get_time", {"city": "Paris"}, "functions.get_time:0"), ("get_time", {"city": "Rome"}, "functions.get_time:1")]


def test_a_call_at_the_end_of_unclosed_thinking_is_a_call(llama_cpp_templates):
    """The model may call a tool at the end of its thinking without closing it."""
    prep = prepared(llama_cpp_templates, "Kimi-K2-Thinking.jinja", [USER], tools=[GET_TIME])
    reply = ("<think>I need the time<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
             "<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>")
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("I need the time", "")
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [("get_time", {"city": "Oslo"})]


def test_one_call_only_without_parallel_calls(llama_cpp_templates):
    prep = prepared(llama_cpp_templates, "Kimi-K2-Thinking.jinja", [USER], tools=[GET_TIME],
                    parallel_tool_calls=False)
    call = "<|tool_call_begin|>functions.get_time:{}<|tool_call_argument_begin|>{{\"city\": \"X\"}}<|tool_call_end|>"
    with pytest.raises(ValueError):
        prep.parse("<|tool_calls_section_begin|>" + call.format(0) + call.format(1) + "<|tool_calls_section_end|>")


def test_thinking_closed_without_being_opened_is_held_back_then_read_as_reasoning(llama_cpp_templates):
    """Kimi K2 Thinking may write its thinking and ``</think>`` without ``<think>`` (the template leaves the block
    for the model to open): until the ``</think>`` (or a call, or the end) comes, the text cannot be placed, so the
    stream holds it back rather than send it as content and take it back."""
    from backends.chat_format.reply import ReplyReader

    prep = prepared(llama_cpp_templates, "Kimi-K2-Thinking.jinja", [USER], tools=[GET_TIME])
    reply = ("The user wants the time.</think>Checking. <|tool_calls_section_begin|><|tool_call_begin|>get_time:0 "
             "<|tool_call_argument_begin|>{\"city\": \"Oslo\"}<|tool_call_end|><|tool_calls_section_end|>")
    reader = ReplyReader(prep)
    sent = []
    for i in range(0, len(reply), 3):
        reader.feed(reply[i:i + 3])
        sent.extend(reader.deltas())
        if i + 3 < reply.index("</think>"):
            assert not sent
    sent.extend(reader.deltas(final=True))
    assert "".join(d.reasoning for d in sent) == "The user wants the time."
    content, reasoning, calls = reader.finish()
    assert (content, reasoning) == ("Checking. ", "The user wants the time.")
    assert [(c.name, json.loads(c.arguments), c.id) for c in calls] == [("get_time", {"city": "Oslo"}, "get_time:0")]
    # an answer without thinking is content once whole
    plain = ReplyReader(prep)
    plain.feed("It is noon in Oslo.")
    assert plain.finish()[:2] == ("It is noon in Oslo.", "")


def test_the_instruct_model_keeps_a_stray_close_tag_as_content(llama_cpp_templates):
    """Kimi K2 Instruct's template is not a thinking model's: its text is content even with a ``</think>`` in it."""
    prep = prepared(llama_cpp_templates, "Kimi-K2-Instruct.jinja", [USER])
    assert prep.parse("Fine.</think>Sure.").content == "Fine.</think>Sure."
