"""Tool-call syntaxes: detected from real chat templates, read back from real models' replies, forced by grammar.

The replies are what the models write, as their makers document them (Qwen's function-calling guide, Meta's
Llama 3.1 prompt format, Mistral's function calling docs, a gpt-oss harmony transcript): the tiny random test
model never calls a tool on its own, so the "auto" path is checked on these."""

from __future__ import annotations

import json

import pytest

from backends.chat_format import tool_calls
from backends.chat_format.tool_calls import ToolChoiceError, forced_call, parse, template_format
from tests.fixtures.models import CHAT_TEMPLATE, QWEN2_5_TOOLS_TEMPLATE

QWEN_TWO_CALLS = (  # Qwen2.5-7B-Instruct, two calls in one turn
    '<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA"}}\n'
    '</tool_call>\n<tool_call>\n{"name": "get_temperature_date", "arguments": {"location": "San Francisco, CA, '
    'USA", "date": "2024-10-01"}}\n</tool_call>')
HERMES_WITH_TEXT = ("Let me look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{\"city\": \"Paris\"}}\n</tool_call>")
LLAMA3 = '{"name": "get_current_conditions", "parameters": {"location": "San Francisco", "unit": "Fahrenheit"}}'
LLAMA3_PYTHON_TAG = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}'
MISTRAL_V3 = ('[TOOL_CALLS][{"name": "get_current_weather", "arguments": {"location": "Paris, France", '
              '"format": "celsius"}}]')
MISTRAL_V11 = '[TOOL_CALLS]get_current_weather[ARGS]{"location": "Paris, France", "format": "celsius"}'
HARMONY = ('<|channel|>analysis<|message|>User wants weather for "new york city". We can call the get_weather '
           'function.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json'
           '<|message|>{"city":"New York City"}')
HARMONY_ANSWER = ("<|channel|>analysis<|message|>They greet.<|end|><|start|>assistant<|channel|>final<|message|>"
                  "Hello!")


def _calls(reply):
    return [(c.name, json.loads(c.arguments)) for c in reply.tool_calls]


def test_templates_name_their_syntax():
    assert template_format(QWEN2_5_TOOLS_TEMPLATE) == "hermes"
    assert template_format(CHAT_TEMPLATE) == ""  # ChatML without tools: no tool support
    assert template_format("{% for t in tools %}[TOOL_CALLS]{% endfor %}") == "mistral"
    assert template_format("{{ tools }}<|python_tag|>") == "llama3"
    assert template_format("{{ tools }}<|channel|>") == "harmony"
    assert template_format("{{ tools | tojson }}") == "generic"
    assert template_format("{% if x %}<tool_call>{% endif %}") == ""  # mentions the syntax, never reads tools


@pytest.mark.parametrize(("text", "fmt", "content", "calls"), [
    (QWEN_TWO_CALLS, "hermes", "", [("get_current_temperature", {"location": "San Francisco, CA, USA"}),
                                    ("get_temperature_date", {"location": "San Francisco, CA, USA",
                                                              "date": "2024-10-01"})]),
    (HERMES_WITH_TEXT, "hermes", "Let me look that up.", [("get_weather", {"city": "Paris"})]),
    (LLAMA3, "llama3", "", [("get_current_conditions", {"location": "San Francisco", "unit": "Fahrenheit"})]),
    (LLAMA3_PYTHON_TAG, "llama3", "", [("get_weather", {"city": "Oslo"})]),
    (MISTRAL_V3, "mistral", "", [("get_current_weather", {"location": "Paris, France", "format": "celsius"})]),
    (MISTRAL_V11, "mistral", "", [("get_current_weather", {"location": "Paris, France", "format": "celsius"})]),
    (HARMONY, "harmony", "", [("get_weather", {"city": "New York City"})]),
    (HARMONY_ANSWER, "harmony", "Hello!", []),
    (QWEN_TWO_CALLS, "generic", "", [("get_current_temperature", {"location": "San Francisco, CA, USA"}),
                                     ("get_temperature_date", {"location": "San Francisco, CA, USA",
                                                               "date": "2024-10-01"})]),
    (LLAMA3, "generic", "", [("get_current_conditions", {"location": "San Francisco", "unit": "Fahrenheit"})]),
])
def test_recorded_replies_are_read_as_calls(text, fmt, content, calls):
    reply = parse(text, fmt)
    assert reply.content == content and _calls(reply) == calls
    assert all(c.id for c in reply.tool_calls) and len({c.id for c in reply.tool_calls}) == len(calls)


@pytest.mark.parametrize(("text", "fmt"), [
    ("Paris is sunny today.", "hermes"),
    ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "hermes"),  # cut off at max_tokens
    ("{\"city\": \"Paris\"}", "llama3"),  # JSON, but not a call
    ("I think {braces} are fine.", "llama3"),
    ("[TOOL_CALLS]not json", "mistral"),
])
def test_text_that_is_not_a_whole_call_stays_text(text, fmt):
    assert parse(text, fmt) == tool_calls.Reply(text)


def test_mistral_call_ids_are_nine_letters_or_digits():
    """Mistral's templates raise on any other id when the call comes back in the conversation."""
    call_id = parse(MISTRAL_V3, "mistral").tool_calls[0].id
    assert len(call_id) == 9 and call_id.isalnum()


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time"}}


def test_a_forced_call_is_the_formats_own_syntax_around_a_schema():
    schema, before, after = forced_call("hermes", [WEATHER, TIME], "get_weather")
    assert (before, after) == ("<tool_call>\n", "\n</tool_call>")
    assert schema["properties"]["name"] == {"const": "get_weather"}
    assert schema["properties"]["arguments"] == WEATHER["function"]["parameters"]
    schema, before, after = forced_call("llama3", [WEATHER, TIME], None)
    assert (before, after) == ("", "") and len(schema["anyOf"]) == 2
    assert schema["anyOf"][1]["properties"]["parameters"] == {"type": "object"}  # no parameters: any object
    assert forced_call("mistral", [WEATHER], None)[1:] == ("[TOOL_CALLS][", "]")
    schema, before, _ = forced_call("harmony", [WEATHER], "get_weather")
    assert before.endswith("to=functions.get_weather <|constrain|>json<|message|>")
    with pytest.raises(ToolChoiceError, match="one named function"):
        forced_call("harmony", [WEATHER, TIME], None)
