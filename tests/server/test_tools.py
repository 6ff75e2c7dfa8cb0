"""Tool calling through the official ``openai`` client, on the tiny model with Qwen 2.5's tool-declaring
template: a forced call (the engine's grammar) in the model's own <tool_call> syntax, read back by the engine as
tool_calls, streamed as OpenAI's deltas and not; a named call; the round trip with the tool's result; refusals in
words."""

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
# The grammar lets a call's JSON hold some whitespace between tokens, as llama.cpp's does (a newline and up to 20
# spaces or tabs): the random tiny model takes much of it, so a call needs room.
CALL_TOKENS = 600


@pytest.fixture(scope="module")
def tool_engine(tiny_tool_model):
    yield from loaded_engine(tiny_tool_model, n_ctx=2048)  # the tools in the system prompt take ~700 tokens


@pytest.fixture
def tool_api(tool_engine):
    yield from openai_client(tool_engine, stream_every_s=0)  # each engine event a chunk of its own


def test_the_model_reports_its_tool_syntax(tool_engine, tool_api):
    # Qwen 2.5's template has no family module of its own: llama.cpp's differential autoparser reads it
    assert tool_engine.loaded.details["tool_format"] == "auto"
    api, name = tool_api
    assert api.models.retrieve(name).meta["tool_format"] == "auto"


def test_a_forced_call_comes_back_as_tool_calls(tool_api):
    """A named call: each call the reply makes is that function's, with arguments of its schema. (The random model
    goes on calling after the first: the Hermes syntax's grammar takes one or more <tool_call> blocks, whatever
    parallel_tool_calls says, as llama.cpp's autoparser builds it.)"""
    api, name = tool_api
    for seed in range(5):
        reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice=FORCE_WEATHER,
                                            seed=seed, max_tokens=CALL_TOKENS)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message
        calls = choice.message.tool_calls
        for call in calls:
            assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
            jsonschema.validate(json.loads(call.function.arguments), WEATHER_ARGS)
        assert calls and len({call.id for call in calls}) == len(calls)
        assert not choice.message.content


@pytest.mark.parametrize("choice", ["required", FORCE_WEATHER])
def test_a_forced_call_streams_as_tool_call_deltas(tool_api, choice):
    """A call goes out whole, once its syntax is read to its end: one delta with its index, id, type, name and all
    its arguments (a stream never shows a call the whole reply lacks, e.g. one that max_tokens then cuts)."""
    api, name = tool_api
    request = {"model": name, "messages": ASK, "tools": TOOLS, "tool_choice": choice, "seed": 1,
               "max_tokens": CALL_TOKENS}
    whole = api.chat.completions.create(**request).choices[0].message.tool_calls
    chunks = list(api.chat.completions.create(**request, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert not "".join(d.content or "" for d in deltas)  # the call's text never leaks as content
    pieces = [tc for d in deltas for tc in d.tool_calls or ()]
    indices = [p.index for p in pieces]
    assert indices == sorted(indices) and set(indices) == set(range(len(whole)))  # one call after the other
    for index, call in enumerate(whole):
        delta, = [p for p in pieces if p.index == index]
        assert delta.id.startswith("call_") and delta.type == "function" and delta.function.name == call.function.name
        assert delta.function.arguments == call.function.arguments  # the same seed: the same calls
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_a_named_call_streams_through_the_openai_stream_helper(tool_api):
    """The client's own accumulator (``chat.completions.stream``) puts the deltas together into the calls."""
    api, name = tool_api
    request = {"model": name, "messages": ASK, "tools": TOOLS, "tool_choice": FORCE_WEATHER, "seed": 3,
               "max_tokens": CALL_TOKENS}
    whole = api.chat.completions.create(**request).choices[0].message.tool_calls
    with api.chat.completions.stream(**request) as stream:
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    assert [(c.id.startswith("call_"), c.function.name, c.function.arguments) for c in choice.message.tool_calls] \
        == [(True, c.function.name, c.function.arguments) for c in whole]
    for call in choice.message.tool_calls:
        jsonschema.validate(json.loads(call.function.arguments), WEATHER_ARGS)


def _first_whole_call(has_call, limit: int = CALL_TOKENS) -> int:
    """The least max_tokens whose reply holds a call (a greedy reply is the same reply cut shorter: whether it holds
    one only grows with max_tokens)."""
    low, high = 1, limit
    assert has_call(high)
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if has_call(middle) else (middle + 1, high)
    return low


def test_a_call_cut_by_max_tokens_is_no_call_in_any_api_streamed_or_not(tool_api):
    """The issue's case on the real engine through the server: a forced call cut by max_tokens anywhere before its
    JSON closes (the grammar holds the tiny model to the call from its first token) comes back as no call, whole or
    streamed, from chat completions, Anthropic's Messages and Responses: finish_reason "length", no tool_calls,
    no tool_use block, no function_call item, and no markup as the answer; so does one cut by a stop word. One
    token more and the call is whole."""
    api, name = tool_api
    ask = {"model": name, "messages": ASK, "tools": TOOLS, "tool_choice": FORCE_WEATHER, "temperature": 0}

    def chat(max_tokens: int, **extra):
        return api.chat.completions.create(**ask, max_tokens=max_tokens, **extra)

    whole = chat(CALL_TOKENS).choices[0].message.tool_calls
    first = _first_whole_call(lambda k: bool(chat(k).choices[0].message.tool_calls))
    assert first > 8, "the call takes more than a few tokens"
    for k in sorted({1, 2, first // 3, first // 2, first - 2, first - 1}):
        choice = chat(k).choices[0]
        assert choice.finish_reason == "length" and not choice.message.tool_calls, (k, choice.message)
        assert not choice.message.content, (k, choice.message.content)  # the call's text is not the answer
        chunks = list(chat(k, stream=True))
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        assert not [d for d in deltas if d.tool_calls] and not "".join(d.content or "" for d in deltas), k
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    # a stop word inside the call's JSON cuts it as well: finish_reason "stop", no call, no markup
    for stream in (False, True):
        if stream:
            chunks = list(chat(CALL_TOKENS, stop=['"city"'], stream=True))
            assert not [c for c in chunks if c.choices and (c.choices[0].delta.tool_calls or c.choices[0].delta.content)]
            assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
        else:
            choice = chat(CALL_TOKENS, stop=['"city"']).choices[0]
            assert choice.finish_reason == "stop" and not choice.message.tool_calls and not choice.message.content
    # one token more: the call, whole, the same as the reply that was not cut; streamed as one delta
    done = chat(first).choices[0]
    assert [(c.function.name, c.function.arguments) for c in done.message.tool_calls] == \
        [(whole[0].function.name, whole[0].function.arguments)]
    streamed = [tc for c in chat(first, stream=True) if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert [(d.function.name, d.function.arguments) for d in streamed] == \
        [(whole[0].function.name, whole[0].function.arguments)]

    import anthropic

    cut = first - 1
    with anthropic.Anthropic(base_url=str(api.base_url).removesuffix("/v1/"), api_key="unused", max_retries=0,
                             timeout=120) as claude:
        request = {"model": name, "max_tokens": cut, "messages": ASK, "extra_body": {"temperature": 0},
                   "tools": [{"name": t["function"]["name"], "description": t["function"]["description"],
                              "input_schema": t["function"]["parameters"]} for t in TOOLS],
                   "tool_choice": {"type": "tool", "name": "get_weather"}}
        message = claude.messages.create(**request)
        assert message.stop_reason == "max_tokens" and all(b.type == "text" and not b.text for b in message.content)
        with claude.messages.stream(**request) as stream:
            starts = [e.content_block.type for e in stream if e.type == "content_block_start"]
            final = stream.get_final_message()
        assert "tool_use" not in starts and final.stop_reason == "max_tokens"
        assert all(b.type == "text" and not b.text for b in final.content)
    request = {"model": name, "input": ASK, "max_output_tokens": cut, "temperature": 0,
               "tools": [{"type": "function", **t["function"]} for t in TOOLS],
               "tool_choice": {"type": "function", "name": "get_weather"}}
    response = api.responses.create(**request)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert not [item for item in response.output if item.type == "function_call"] and not response.output_text
    events = list(api.responses.create(**request, stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"
    assert not [e for e in events if "function_call" in e.type or "function_call" in str(getattr(e, "item", ""))]
    assert not [item for item in events[-1].response.output if item.type == "function_call"]


def test_tool_choice_none_gives_no_call(tool_api):
    api, name = tool_api
    reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice="none", seed=0,
                                        max_tokens=12)
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.choices[0].message.content and not reply.choices[0].message.tool_calls


def test_a_round_trip_sends_the_result_back_and_gets_an_answer(tool_api):
    api, name = tool_api
    first = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice=FORCE_WEATHER, seed=2,
                                        max_tokens=CALL_TOKENS)
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


@pytest.fixture(scope="module")
def plain_engine(tiny_models):
    yield from loaded_engine(tiny_models.gguf_q8_0, n_ctx=4096)  # the tools as JSON in the system prompt


@pytest.fixture
def plain_api(plain_engine):
    yield from openai_client(plain_engine)


def test_a_model_whose_template_shows_no_tools_gets_llama_cpp_s_generic_format(plain_api):
    """The tiny model's template is plain ChatML: the tools reach it in llama.cpp's generic JSON format, and a
    required call is held to it by grammar: one call (no parallel calls: {"tool_call": ...}) of a tool without
    arguments, which the random model cannot wander off in."""
    api, name = plain_api
    assert api.models.retrieve(name).meta["tool_format"] == "generic"
    for seed in range(3):
        reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS[1:], tool_choice="required",
                                            parallel_tool_calls=False, seed=seed, max_tokens=CALL_TOKENS)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message.content
        call, = choice.message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == ("get_time", {})


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


@pytest.fixture(scope="module")
def smollm2_engine(smollm2_gguf):
    yield from loaded_engine(smollm2_gguf, n_ctx=4096)


@pytest.mark.real_model
def test_smollm2_whose_template_shows_no_tools_calls_them_in_the_generic_format(smollm2_engine):
    """SmolLM2-135M-Instruct's template has no tool support: llama-server's answer is its generic JSON format, and
    so is QuantDesk's, through the official client: a required call, its arguments valid JSON of the tool's schema."""
    for api, name in openai_client(smollm2_engine):
        card = api.models.retrieve(name)
        assert card.meta["tool_format"] == "generic"
        assert card.meta["chat_template"]["origin"] == "in the model file"
        reply = api.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice="required",
                                            temperature=0, max_tokens=200)
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls", choice.message.content
        for call in choice.message.tool_calls:
            function = next(t["function"] for t in TOOLS if t["function"]["name"] == call.function.name)
            jsonschema.validate(json.loads(call.function.arguments), function["parameters"])
        assert choice.message.tool_calls[0].function.name == "get_weather"
