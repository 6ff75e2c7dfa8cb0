"""Tool calling through the official ``openai`` client, on the tiny model with Qwen 2.5's tool-declaring
template: a forced call (grammar) in the model's own <tool_call> syntax, read back as tool_calls, streamed and
not; the round trip with the tool's result; refusals in words."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.server.conftest import loaded_engine, openai_client

WEATHER_ARGS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                                 "unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                      "parameters": WEATHER_ARGS}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now.",
                                      "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def tool_engine(tiny_tool_model):
    yield from loaded_engine(tiny_tool_model, n_ctx=2048)  # the tools in the system prompt take ~700 tokens


@pytest.fixture
def tool_api(tool_engine):
    yield from openai_client(tool_engine)


def test_the_model_reports_its_tool_syntax(tool_engine, tool_api):
    assert tool_engine.loaded.details["tool_format"] == "hermes"
    api, name = tool_api
    assert api.models.retrieve(name).meta["tool_format"] == "hermes"


def test_a_forced_call_comes_back_as_tool_calls(tool_api):
    api, name = tool_api
    for seed in range(5):
        reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice=FORCE_WEATHER,
                                            seed=seed, max_tokens=200)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message
        (call,) = choice.message.tool_calls
        assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER_ARGS)
        assert not choice.message.content


def test_required_picks_one_of_the_tools_and_streams_it_as_a_tool_call_delta(tool_api):
    api, name = tool_api
    chunks = list(api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice="required",
                                              seed=1, max_tokens=200, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not "".join(d.content or "" for d in deltas)  # the call's text never leaks as content
    calls = [tc for d in deltas for tc in d.tool_calls or ()]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].id.startswith("call_")
    assert calls[0].function.name in ("get_weather", "get_time")
    assert isinstance(json.loads(calls[0].function.arguments), dict)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_a_round_trip_sends_the_result_back_and_gets_an_answer(tool_api):
    api, name = tool_api
    first = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice=FORCE_WEATHER, seed=2,
                                        max_tokens=200)
    call = first.choices[0].message.tool_calls[0]
    history = [*ASK, first.choices[0].message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 18})}]
    for stream in (False, True):
        if stream:
            chunks = list(api.chat.completions.create(model=name, messages=history, tools=TOOLS, seed=2,
                                                      max_tokens=16, stream=True,
                                                      stream_options={"include_usage": True}))
            usage = chunks[-1].usage
        else:
            second = api.chat.completions.create(model=name, messages=history, tools=TOOLS, seed=2, max_tokens=16)
            usage = second.usage
            assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
        # The call and its result reached the template: the prompt grew by them.
        assert usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens


def test_auto_lets_the_model_answer_in_text(tool_api):
    api, name = tool_api
    reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, seed=0, max_tokens=12)
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.choices[0].message.content and not reply.choices[0].message.tool_calls


def test_a_model_without_tool_support_refuses_tools_in_words(oai_plain, model_name):
    with pytest.raises(openai.BadRequestError) as caught:
        oai_plain.chat.completions.create(model=model_name, messages=ASK, tools=TOOLS, max_tokens=4)
    assert "chat template has no tool support" in caught.value.body["message"]
    assert caught.value.body["param"] == "tools"


@pytest.fixture
def oai_plain(server):
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        yield client


@pytest.mark.parametrize(("extra", "param", "words"), [
    ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools[0].function.name", "64 letters"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0]", "each tool must be"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_stock"}}}, "tool_choice",
     "not among the tools"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "tool_choice must be"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice",
     "cannot both shape the reply"),
    ({"tools": TOOLS, "messages": [*ASK, {"role": "tool", "content": "18"}]}, "messages[1].tool_call_id",
     "needs the tool_call_id"),
    ({"tools": TOOLS, "messages": [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{not json"}}]}]},
     "messages[1].tool_calls[0].function.arguments", "JSON object"),
])
def test_bad_tool_requests_are_400s_that_name_the_parameter(tool_api, extra, param, words):
    api, name = tool_api
    with pytest.raises(openai.BadRequestError) as caught:
        api.chat.completions.create(model=name, **{"messages": ASK, "max_tokens": 4, **extra})
    assert caught.value.body["param"] == param and words in caught.value.body["message"]
    assert api.chat.completions.create(model=name, messages=ASK, max_tokens=2).choices[0].message.content
