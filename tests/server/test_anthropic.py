"""Anthropic's Messages API through the official ``anthropic`` client (2.x takes sampling values only as extra_body): text streamed and not, a tool round trip
(tool_use, tool_result) on the tiny model with Qwen 2.5's tool-declaring template, errors in Anthropic's shape."""

from __future__ import annotations

import json

import anthropic
import httpx
import jsonschema
import pytest

from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine
from tests.server.test_tools import CALL_TOKENS

KEY = "qd-key-0123456789abcdef"
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}},
                            "required": ["city"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def prompt_of(usage: anthropic.types.Usage) -> int:
    """The prompt's tokens in Anthropic's usage: those the engine evaluated plus those it read from its KV cache."""
    return usage.input_tokens + (usage.cache_read_input_tokens or 0)


@pytest.fixture(scope="module")
def tool_engine(tiny_tool_model):
    yield from loaded_engine(tiny_tool_model, n_ctx=2048)


@pytest.fixture
def claude(tool_engine):
    """The anthropic client against a server that wants a key: the client sends it as x-api-key. Each engine event
    is an event of its own (many small deltas)."""
    server = ServerThread(create_app(tool_engine, api_key=KEY, stream_every_s=0)).start()
    with anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0, timeout=120) as client:
        yield client, model_id(tool_engine.loaded.model_path)
    server.stop()


def test_a_message_has_text_usage_and_a_stop_reason(claude):
    api, name = claude
    message = api.messages.create(model=name, max_tokens=12, system="You are terse.", messages=ASK,
                                  extra_body={"temperature": 0})
    assert message.type == "message" and message.role == "assistant" and message.model == name
    assert message.id.startswith("msg_") and message.content[0].type == "text" and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert prompt_of(message.usage) > 5 and 0 < message.usage.output_tokens <= 12
    assert message.usage.input_tokens >= 1  # at least one token is evaluated, whatever the KV cache held


def test_the_stream_says_the_same_as_the_whole_message(claude):
    api, name = claude
    whole = api.messages.create(model=name, max_tokens=12, messages=ASK, extra_body={"temperature": 0})
    with api.messages.stream(model=name, max_tokens=12, messages=ASK, extra_body={"temperature": 0}) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens


def test_a_stop_sequence_ends_the_message_and_is_named(claude):
    api, name = claude
    greedy = {"model": name, "max_tokens": 12, "messages": ASK, "extra_body": {"temperature": 0}}
    text = api.messages.create(**greedy).content[0].text
    stop = text[4:7]  # one the model is sure to write, beside one it never does
    assert len(stop) == 3, text
    message = api.messages.create(**greedy, stop_sequences=["never-said-stop", stop])
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == stop
    assert message.content[0].text == text[:text.index(stop)]
    with api.messages.stream(**greedy, stop_sequences=["never-said-stop", stop]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_a_tool_round_trip_streamed_and_not(claude):
    api, name = claude
    first = api.messages.create(model=name, max_tokens=CALL_TOKENS, messages=ASK, tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather"}, extra_body={"temperature": 0.7})
    assert first.stop_reason == "tool_use" and first.content
    for use in first.content:  # one call or more (the Hermes grammar takes several), each a tool_use block
        assert use.type == "tool_use" and use.name == "get_weather" and use.id
        jsonschema.validate(use.input, WEATHER["input_schema"])
    # one call, so that the reply ends after it: with several allowed, a tiny model at this temperature may write call
    # after call until max_tokens (the grammar lets it)
    with api.messages.stream(model=name, max_tokens=CALL_TOKENS, messages=ASK, tools=[WEATHER],
                             tool_choice={"type": "any", "disable_parallel_tool_use": True},
                             extra_body={"temperature": 0.7}) as stream:
        events = [e for e in stream if e.type.startswith("content_block")]
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "tool_use" and {b.type for b in streamed.content} == {"tool_use"}
    # each tool_use block opens with its id and name, its input comes as JSON pieces, then it closes before the next
    for index, use in enumerate(streamed.content):
        jsonschema.validate(use.input, WEATHER["input_schema"])
        start, *deltas, stop = [e for e in events if e.index == index]
        assert events.index(start) == events.index(stop) - len(deltas) - 1  # nothing in between
        assert start.type == "content_block_start" and start.content_block.id == use.id
        assert start.content_block.name == "get_weather" and start.content_block.input == {}
        assert deltas and all(d.type == "content_block_delta" and d.delta.type == "input_json_delta" for d in deltas)
        assert json.loads("".join(d.delta.partial_json for d in deltas)) == use.input
        assert stop.type == "content_block_stop"

    def answer(result: str) -> anthropic.types.Message:
        history = [*ASK, {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": result}
                                                for use in first.content]}]
        return api.messages.create(model=name, max_tokens=8, messages=history, tools=[WEATHER],
                                   extra_body={"temperature": 0})

    short, longer = answer("18 C"), answer("18 C, light rain from the west")
    assert short.stop_reason in ("end_turn", "max_tokens", "tool_use")
    # the calls reached the template (each a <tool_call> block with the name and arguments: more than 10 tokens; the
    # reply's own count is no measure, as the grammar let the model write whitespace the template does not keep)...
    assert prompt_of(short.usage) > prompt_of(first.usage) + 10 * len(first.content)
    # ...and so did each result
    assert prompt_of(longer.usage) > prompt_of(short.usage) + 5 * len(first.content)


@pytest.mark.parametrize(("extra", "words"), [
    ({"extra_body": {"temperature": 1.5}}, "temperature must be between 0 and 1"),
    ({"messages": [{"role": "system", "content": "x"}]}, 'role "user" or "assistant"'),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "'image' blocks"),
    ({"tools": [WEATHER], "tool_choice": {"type": "tool", "name": "get_time"}}, "not among the tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "any", "disable_parallel_tool_use": "yes"}},
     "disable_parallel_tool_use must be true or false"),
    ({"model": "claude-sonnet-4"}, "is not served here"),
])
def test_bad_requests_are_400s_in_anthropics_shape_and_the_engine_goes_on(claude, extra, words):
    api, name = claude
    with pytest.raises(anthropic.APIStatusError) as caught:
        api.messages.create(**{"model": name, "max_tokens": 4, "messages": ASK, **extra})
    assert caught.value.status_code in (400, 404)
    assert caught.value.body["type"] == "error" and words in caught.value.body["error"]["message"]
    assert api.messages.create(model=name, max_tokens=2, messages=ASK).content


def test_a_raw_request_without_max_tokens_is_told_so(claude):
    """The SDK itself insists on max_tokens; other clients get the sentence."""
    api, name = claude
    response = httpx.post(f"{api.base_url}/v1/messages", json={"model": name, "messages": ASK},
                          headers={"x-api-key": KEY})
    assert response.status_code == 400
    assert response.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "max_tokens is required (max_tokens)"}}


def test_a_wrong_key_is_refused(claude, tool_engine):
    api, name = claude
    with pytest.raises(anthropic.AuthenticationError):
        api.with_options(api_key="wrong-key-0123456789").messages.create(model=name, max_tokens=2, messages=ASK)


def billing_header(cch: str) -> str:
    """Claude Code's first system block, as it sends it (its cch changes on every request)."""
    return f"x-anthropic-billing-header: cc_version=2.1.177.01c; cc_entrypoint=cli; cch={cch};"


CODER_SYSTEM = "You are a careful coding agent. " * 20


@pytest.mark.parametrize("system", [
    lambda cch: [{"type": "text", "text": billing_header(cch)}, {"type": "text", "text": CODER_SYSTEM}],
    lambda cch: billing_header(cch) + "\n" + CODER_SYSTEM,
])
def test_claude_codes_per_request_billing_line_never_reaches_the_prompt(system):
    """Two turns whose billing lines differ are the same prompt: the line is left out of the system prompt (as a
    block of its own or as the first line of a string), the rest kept as it was; a header named inside a user's
    message is theirs and stays."""
    from app.server.anthropic import parse_messages

    def parsed(cch: str, text: str = "hi"):
        return parse_messages({"model": "m", "max_tokens": 8, "system": system(cch),
                               "messages": [{"role": "user", "content": text}]},
                              served_id="m", n_ctx=2048, takes_tools=False).messages

    assert parsed("36ee5") == parsed("0aaa9")
    assert parsed("36ee5")[0].content == CODER_SYSTEM
    said = f"what does {billing_header('1')} mean?"
    assert parsed("36ee5", said)[1].content == said
    only = parse_messages({"model": "m", "max_tokens": 8, "system": [{"type": "text", "text": billing_header("a")}],
                           "messages": [{"role": "user", "content": "hi"}]},
                          served_id="m", n_ctx=2048, takes_tools=False).messages
    assert [m.role for m in only] == ["user"]


def test_a_follow_up_with_a_new_billing_line_reads_the_conversation_from_the_kv_cache(claude):
    """Claude Code's second turn (its billing line's cch changed) is served from the engine's KV cache: all of the
    first turn's prompt is reused (``cache_read_input_tokens``), where with the line in the prompt only the tokens
    before its cch could be."""
    api, name = claude
    ask = [{"role": "user", "content": "List three prime numbers."}]
    system = [{"type": "text", "text": billing_header("36ee5")}, {"type": "text", "text": CODER_SYSTEM}]
    first = api.messages.create(model=name, max_tokens=8, system=system, messages=ask, extra_body={"temperature": 0})
    counted = api.messages.count_tokens(model=name, system=system, messages=ask).input_tokens
    assert prompt_of(first.usage) == counted > 100
    system[0] = {"type": "text", "text": billing_header("0aaa9")}
    follow = [*ask, {"role": "assistant", "content": first.content[0].text}, {"role": "user", "content": "Two more."}]
    second = api.messages.create(model=name, max_tokens=8, system=system, messages=follow,
                                 extra_body={"temperature": 0})
    assert (second.usage.cache_read_input_tokens or 0) >= counted - 1
    assert second.usage.input_tokens < prompt_of(second.usage) - counted + 2
