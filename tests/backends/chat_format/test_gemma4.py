"""Gemma 4 (backends/chat_format/families/gemma4.py): the generation prompts and the turn after a tool result that
llama.cpp's test-chat checks beside its reply cases (test_template_generation_prompt, PR 21760's checks), the older
template's tool results folded into the calling message, and the arguments built from Gemma's value syntax as the
reply streams."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import formats
from backends.chat_format.families.gemma4 import convert_tool_responses

OFFICIAL = "google-gemma-4-31B-it.jinja"
OLDER = "google-gemma-4-31B-it-interleaved.jinja"
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "Hey there!"}
SPECIAL = {"type": "function", "function": {
    "name": "special_function", "description": "I'm special",
    "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}}
SET_CONFIG = {"type": "function", "function": {
    "name": "set_config", "parameters": {"type": "object", "properties": {"config": {"type": "object"}}}}}


def prepared(templates: dict[str, str], name: str, messages: list[dict[str, Any]],
             **request: Any) -> formats.Prepared:
    return formats.apply(formats.Template.of(templates[name]), formats.Request(messages=messages, **request))


def call_message(content: str, call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"type": "function", "function": {"name": "special_function", "arguments": '{"arg1": 1}'}, "id": call_id}]}


def tool_message(content: str, call_id: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": call_id, "name": "special_function"}


def test_generation_prompts_are_llama_cpps(llama_cpp_templates):
    basic = prepared(llama_cpp_templates, OFFICIAL, [SYSTEM, USER])
    assert basic.generation_prompt == "<|turn>model\n"
    content = prepared(llama_cpp_templates, OFFICIAL,
                       [SYSTEM, USER, {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}],
                       add_generation_prompt=False, continue_final_message="content")
    assert content.generation_prompt == "<|turn>model\n<|channel>thought\nI'm thinking<channel|>Hello, "
    prefill_reasoning = {"role": "assistant", "content": "", "reasoning_content": "I'm"}
    reasoning = prepared(llama_cpp_templates, OFFICIAL, [SYSTEM, USER, prefill_reasoning],
                         add_generation_prompt=False, continue_final_message="reasoning")
    assert reasoning.generation_prompt == "<|turn>model\n<|channel>thought\nI'm"
    # after a tool result the model's turn is still open
    after_tool = prepared(llama_cpp_templates, OFFICIAL,
                          [SYSTEM, USER, call_message("", ""), tool_message("Sunny", "call0"), prefill_reasoning],
                          add_generation_prompt=False, continue_final_message="reasoning")
    assert after_tool.generation_prompt == "<|channel>thought\nI'm"
    for prep in (basic, content, reasoning, after_tool):
        assert prep.prompt.endswith(prep.generation_prompt)


def test_the_model_turn_is_opened_after_content_and_a_tool_call(llama_cpp_templates):
    """https://github.com/ggml-org/llama.cpp/pull/21760: the template closes the turn and opens no new one."""
    messages = [USER, call_message("Let me check.", "c0"), tool_message('{"r":"ok"}', "c0")]
    prep = prepared(llama_cpp_templates, OFFICIAL, messages, tools=[SPECIAL])
    assert prep.prompt.endswith("<turn|>\n<|turn>model\n")
    assert prep.generation_prompt == "<|turn>model\n"
    without = prepared(llama_cpp_templates, OFFICIAL, messages, tools=[SPECIAL], add_generation_prompt=False)
    assert not without.prompt.endswith("<|turn>model\n")


def test_convert_tool_responses_folds_the_results_and_the_answer_into_the_calling_message():
    calls = {"role": "assistant", "content": "dropped", "reasoning_content": "thinking", "tool_calls": [
        {"type": "function", "function": {"name": "get_time", "arguments": {}}, "id": "a"},
        {"type": "function", "function": {"name": "get_weather", "arguments": {}}, "id": "b"}]}
    results = [{"role": "tool", "content": '{"time": "12:00"}', "tool_call_id": "a"},
               {"role": "tool", "content": "sunny", "tool_call_id": "b"},
               {"role": "tool", "content": "NaN", "tool_call_id": "extra"}]
    answer = {"role": "assistant", "content": "Noon, and sunny."}
    assert convert_tool_responses([USER, calls, *results, answer, USER]) == [USER, {
        "role": "assistant", "tool_calls": calls["tool_calls"],
        "tool_responses": [{"name": "get_time", "response": {"time": "12:00"}},
                           {"name": "get_weather", "response": "sunny"},
                           {"name": "extra", "response": "NaN"}],  # named by its call id; NaN is no JSON
        "content": "Noon, and sunny.", "reasoning_content": "thinking"}, USER]
    # a following message that calls tools again is not the answer: it is folded in turn
    again = call_message("", "c")
    first, second = convert_tool_responses([calls, results[0], again])
    assert "content" not in first and first["tool_responses"] == [{"name": "get_time", "response": {"time": "12:00"}}]
    assert second == {"role": "assistant", "tool_calls": again["tool_calls"]}


def test_the_older_template_shows_the_tool_results(llama_cpp_templates):
    messages = [USER, call_message("Let me check.", "c0"), tool_message('{"r":"ok"}', "c0"),
                {"role": "assistant", "content": "It is ok."}, USER]
    prompt = prepared(llama_cpp_templates, OLDER, messages, tools=[SPECIAL]).prompt
    assert ("<|tool_call>call:special_function{arg1:1}<tool_call|>"
            '<|tool_response>response:special_function{r:<|"|>ok<|"|>}<tool_response|>It is ok.<turn|>') in prompt


def test_arguments_stream_as_they_are_written(llama_cpp_templates):
    prep = prepared(llama_cpp_templates, OFFICIAL, [USER], tools=[SET_CONFIG])
    assert prep.format == "peg-gemma4"
    reply = ('<|channel>thought\nok<channel|>Sure.<|tool_call>call:set_config'
             '{config:{theme:<|"|>dark<|"|>,sizes:[1,2],on:true,off:null}}<tool_call|>')
    seen = ""
    for i in range(1, len(reply) + 1):
        parsed = prep.parse(reply[:i], partial=i < len(reply))
        arguments = parsed.tool_calls[0].arguments if parsed.tool_calls else ""
        assert arguments.startswith(seen)  # what was handed out is never taken back
        seen = arguments
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("ok", "Sure.")
    assert json.loads(parsed.tool_calls[0].arguments) == {
        "config": {"theme": "dark", "sizes": [1, 2], "on": True, "off": None}}
    cut = prep.parse(reply[:reply.index("dark") + 2], partial=True)
    assert cut.tool_calls[0].arguments == '{"config":{"theme":"da'


@pytest.mark.parametrize("reply", ['<|tool_call>call:set_config{config:{a:<|"|>x"y\\<|"|>}}<tool_call|>'])
def test_strings_are_escaped_as_json(llama_cpp_templates, reply):
    parsed = prepared(llama_cpp_templates, OFFICIAL, [USER], tools=[SET_CONFIG]).parse(reply)
    assert json.loads(parsed.tool_calls[0].arguments) == {"config": {"a": 'x"y\\'}}
