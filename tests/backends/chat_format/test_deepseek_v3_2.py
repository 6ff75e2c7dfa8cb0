"""DeepSeek V3.2 / V4 (backends/chat_format/families/deepseek_v3_2.py): what llama.cpp's test-chat checks of these
templates beside its reply cases (test_template_generation_prompt, test_deepseek_v4_tool_result_ordering, the V4
prompt checks), and the DSML replies read as llama.cpp reads them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import formats
from backends.chat_format.families.deepseek_v3_2 import sort_tool_results

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "Hey there!"}
PREFILL_CONTENT = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
PREFILL_REASONING = {"role": "assistant", "content": "", "reasoning_content": "I'm"}
GET_TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                   "required": ["city"]}}}
GET_WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}

V32 = "deepseek-ai-DeepSeek-V3.2.jinja"
V4 = "deepseek-ai-DeepSeek-V4.jinja"
V4_FLASH = "deepseek-ai-DeepSeek-V4-Flash-0731.jinja"


def prepared(templates: dict[str, str], name: str, messages: list[dict[str, Any]],
             **request: Any) -> formats.Prepared:
    return formats.apply(formats.Template.of(templates[name]), formats.Request(messages=messages, **request))


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}, "id": call_id}


@pytest.mark.parametrize("name", [V32, V4, V4_FLASH])
def test_generation_prompts_are_llama_cpps(llama_cpp_templates, name):
    basic = prepared(llama_cpp_templates, name, [SYSTEM, USER])
    assert basic.generation_prompt == "<｜Assistant｜><think>"
    assert basic.prompt.endswith(basic.generation_prompt)
    content = prepared(llama_cpp_templates, name, [SYSTEM, USER, PREFILL_CONTENT], add_generation_prompt=False,
                       continue_final_message="content")
    assert content.generation_prompt == "<｜Assistant｜><think>I'm thinking</think>Hello, "
    assert content.prompt.endswith(content.generation_prompt)
    reasoning = prepared(llama_cpp_templates, name, [SYSTEM, USER, PREFILL_REASONING], add_generation_prompt=False,
                         continue_final_message="reasoning")
    assert reasoning.generation_prompt == "<｜Assistant｜><think>I'm"
    assert reasoning.prompt.endswith(reasoning.generation_prompt)


@pytest.mark.parametrize("name", [V4, V4_FLASH])
def test_v4_continues_an_answer_without_thinking_after_a_bare_think_end(llama_cpp_templates, name):
    continued = prepared(llama_cpp_templates, name, [SYSTEM, USER, {"role": "assistant", "content": "Hello, "}],
                         add_generation_prompt=False, continue_final_message="content", enable_thinking=False)
    assert continued.generation_prompt == "<｜Assistant｜></think>Hello, "
    assert continued.prompt.endswith(continued.generation_prompt)


def test_v4_renders_the_response_format_after_the_tools(llama_cpp_templates):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    prompt = prepared(llama_cpp_templates, V4, [SYSTEM, USER], tools=[GET_TIME], json_schema=schema).prompt
    tools_at = prompt.find("## Tools")
    format_at = prompt.find("## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n")
    assert 0 <= tools_at < format_at
    assert '"answer": {"type": "string"}' in prompt


def test_sort_tool_results_puts_each_run_in_call_order():
    calls = {"role": "assistant", "content": "", "tool_calls": [call("get_time", {}, "call_1"),
                                                                 call("get_weather", {}, "call_2")]}
    weather = {"role": "tool", "content": "sunny", "tool_call_id": "call_2"}
    time = {"role": "tool", "content": "12:00", "tool_call_id": "call_1"}
    note = {"role": "user", "content": "and?"}
    assert sort_tool_results([USER, calls, weather, note, time]) == [USER, calls, time, note, weather]
    assert sort_tool_results([USER, calls, time, weather]) == [USER, calls, time, weather]
    # a result that answers no known call sorts first, as llama.cpp's stable sort puts it (order 0)
    stray = {"role": "tool", "content": "?", "tool_call_id": "nobody"}
    assert sort_tool_results([calls, weather, stray]) == [calls, stray, weather]
    assert sort_tool_results([calls, weather, time, stray]) == [calls, time, stray, weather]


def test_v4_renders_tool_results_in_call_order(llama_cpp_templates):
    calls = {"role": "assistant", "content": "", "tool_calls": [call("get_time", {"city": "Paris"}, "call_1"),
                                                                 call("get_weather", {"city": "Paris"}, "call_2")]}
    time = {"role": "tool", "content": "12:00", "tool_call_id": "call_1"}
    weather = {"role": "tool", "content": "sunny", "tool_call_id": "call_2"}
    in_order = "<tool_result>12:00</tool_result>\n\n<tool_result>sunny</tool_result>"
    for messages in ([USER, calls, weather, time], [USER, calls, time, weather]):
        assert in_order in prepared(llama_cpp_templates, V4, messages, add_generation_prompt=False).prompt
    # without call ids there is nothing to match: the order they came in stays
    anonymous = {**calls, "tool_calls": [{**c, "id": ""} for c in calls["tool_calls"]]}
    prompt = prepared(llama_cpp_templates, V4, [USER, anonymous, {**weather, "tool_call_id": ""},
                                                {**time, "tool_call_id": ""}], add_generation_prompt=False).prompt
    assert "<tool_result>sunny</tool_result>\n\n<tool_result>12:00</tool_result>" in prompt


@pytest.mark.parametrize("name, block", [(V32, "function_calls"), (V4, "tool_calls")])
def test_reads_dsml_calls_with_string_and_json_parameters(llama_cpp_templates, name, block):
    prep = prepared(llama_cpp_templates, name, [USER], tools=[GET_WEATHER])
    assert prep.thinking_end_tags == ("</think>", f"<｜DSML｜{block}>")
    assert prep.grammar_triggers == (("word", f"<｜DSML｜{block}>"),)
    reply = (f"I'm\nthinking</think>Let me see.\n\n<｜DSML｜{block}>\n<｜DSML｜invoke name=\"get_weather\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
             "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
             f"</｜DSML｜invoke>\n</｜DSML｜{block}>")
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("I'm\nthinking", "Let me see.")
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": 3})]


def test_thinking_that_runs_into_the_calls_is_reasoning(llama_cpp_templates):
    """The model may open its tool calls without closing its thinking (llama.cpp's reasoning_with_tc)."""
    prep = prepared(llama_cpp_templates, V32, [USER], tools=[GET_TIME])
    reply = ("I should check\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n"
             "</｜DSML｜invoke>\n</｜DSML｜function_calls>")
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("I should check", "")
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [("get_time", {"city": "Oslo"})]
