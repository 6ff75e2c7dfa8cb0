"""Thinking models through the official ``openai`` and ``anthropic`` clients, on the real engine: the tiny model with
Qwen3.5's real chat template, whose generation prompt opens ``<think>``. A random model never closes it itself, so a
thinking budget does (the engine writes ``</think>`` for it) and the answer follows: ``reasoning_content`` and
thinking blocks apart from the answer, streamed and not; none with thinking off; the thinking left in the text with
``reasoning_format: "none"``; a forced tool call after the thinking, in Qwen3.5's own XML syntax; earlier thinking
sent back to the template; the controls checked, each 400 naming its field."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine, openai_client

ASK = [{"role": "user", "content": "Why is the sky blue?"}]
BUDGET = 6
# Greedy, with a budget that closes the thinking early enough for an answer to follow.
THINK = {"temperature": 0.0, "max_tokens": 24, "extra_body": {"reasoning_budget_tokens": BUDGET}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def thinking_engine(tiny_thinking_model):
    yield from loaded_engine(tiny_thinking_model, n_ctx=2048)  # the tools in the system prompt take ~700 tokens


@pytest.fixture
def api(thinking_engine):
    """The openai client on a server that sends each engine event as it comes (many small deltas)."""
    yield from openai_client(thinking_engine, stream_every_s=0)


@pytest.fixture
def claude(thinking_engine):
    server = ServerThread(create_app(thinking_engine, stream_every_s=0)).start()
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as client:
        yield client, model_id(thinking_engine.loaded.model_path)
    server.stop()


def _reasoning(message) -> str | None:
    return (message.model_extra or {}).get("reasoning_content")


def _no_tags(*texts: str) -> None:
    assert not any("<think>" in t or "</think>" in t for t in texts), texts


# --- OpenAI ---


def test_the_thinking_comes_apart_as_reasoning_content(api):
    client, name = api
    reply = client.chat.completions.create(model=name, messages=ASK, **THINK)
    message = reply.choices[0].message
    thinking, answer = _reasoning(message), message.content
    assert thinking and thinking.strip() and answer and answer.strip()
    _no_tags(thinking, answer)
    # the budget's tokens and the closing tag the engine wrote were thinking; OpenAI's field counts them
    details = reply.usage.completion_tokens_details
    assert BUDGET <= details.reasoning_tokens < reply.usage.completion_tokens
    # llama-server's alias of the budget's name does the same
    alias = client.chat.completions.create(model=name, messages=ASK, temperature=0.0, max_tokens=24,
                                           extra_body={"thinking_budget_tokens": BUDGET})
    assert (_reasoning(alias.choices[0].message), alias.choices[0].message.content) == (thinking, answer)


def test_a_stream_sends_reasoning_content_deltas_then_content_deltas(api):
    client, name = api
    whole = client.chat.completions.create(model=name, messages=ASK, **THINK)
    chunks = list(client.chat.completions.create(model=name, messages=ASK, stream=True,
                                                 stream_options={"include_usage": True}, **THINK))
    deltas = [c.choices[0].delta for c in chunks[1:] if c.choices]  # after the opening role chunk
    kinds = ["reasoning" if _reasoning(d) else "content" if d.content else "end" for d in deltas]
    first_content = kinds.index("content")
    # thinking first, in several chunks, then the answer; every delta carries text (no empty ones)
    assert kinds[:first_content].count("reasoning") > 1 and set(kinds[:first_content]) == {"reasoning"}
    assert set(kinds[first_content:-1]) == {"content"} and kinds[-1] == "end"
    assert "".join(_reasoning(d) or "" for d in deltas) == _reasoning(whole.choices[0].message)
    assert "".join(d.content or "" for d in deltas) == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == \
        whole.usage.completion_tokens_details.reasoning_tokens


def test_the_openai_stream_helper_gathers_the_reasoning(api):
    """The client's own accumulator (``chat.completions.stream``) keeps llama-server's field."""
    client, name = api
    whole = client.chat.completions.create(model=name, messages=ASK, **THINK).choices[0].message
    stop = whole.content[3:6]  # the helper refuses a reply cut at max_tokens: end it on text it writes
    assert len(stop) == 3 and stop not in whole.content[:3]
    with client.chat.completions.stream(model=name, messages=ASK, stop=[stop], **THINK) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "stop"
    assert _reasoning(final.choices[0].message) == _reasoning(whole)
    assert final.choices[0].message.content == whole.content[:whole.content.index(stop)]


@pytest.mark.parametrize("off", [
    {"chat_template_kwargs": {"enable_thinking": False}},
    {"reasoning_effort": "none"},
    {"reasoning_budget_tokens": 0},
])
def test_without_thinking_there_is_no_reasoning_content(api, off):
    client, name = api
    reply = client.chat.completions.create(model=name, messages=ASK, temperature=0.0, max_tokens=12, extra_body=off)
    message = reply.choices[0].message
    assert message.content and "reasoning_content" not in message.model_extra
    _no_tags(message.content)
    assert reply.usage.completion_tokens_details is None
    chunks = list(client.chat.completions.create(model=name, messages=ASK, temperature=0.0, max_tokens=12,
                                                 extra_body=off, stream=True))
    assert not any(_reasoning(c.choices[0].delta) for c in chunks if c.choices)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == message.content


def test_reasoning_format_none_leaves_the_thinking_in_the_content(api):
    client, name = api
    apart = client.chat.completions.create(model=name, messages=ASK, **THINK).choices[0].message
    body = {**THINK["extra_body"], "reasoning_format": "none"}
    inline = client.chat.completions.create(model=name, messages=ASK, **{**THINK, "extra_body": body})
    message = inline.choices[0].message
    assert "reasoning_content" not in message.model_extra
    assert message.content.startswith("<think>\n") and "</think>" in message.content  # as llama-server's
    assert _reasoning(apart).strip() in message.content and message.content.endswith(apart.content)
    assert inline.usage.completion_tokens_details.reasoning_tokens >= BUDGET  # still thinking, only not read apart
    chunks = list(client.chat.completions.create(model=name, messages=ASK, stream=True,
                                                 **{**THINK, "extra_body": body}))
    assert not any(_reasoning(c.choices[0].delta) for c in chunks if c.choices)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == message.content


def test_the_budget_message_is_written_before_the_thinking_closes(api):
    client, name = api
    reply = client.chat.completions.create(model=name, messages=ASK, temperature=0.0, max_tokens=40,
                                           extra_body={"reasoning_budget_tokens": 3, "reasoning_budget_message": " ok"})
    message = reply.choices[0].message
    assert _reasoning(message).rstrip().endswith(" ok") and message.content


def _tool_turn(reasoning: dict[str, str]) -> list[dict]:
    """A tool loop's history: the assistant thought, called a tool, and the tool answered."""
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    return [*ASK, {"role": "assistant", "content": "", "tool_calls": [call], **reasoning},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]


def test_earlier_thinking_goes_back_to_the_template(api):
    """Qwen3.5's template shows the model the thinking of the turns since the last user message (a tool loop):
    llama-server's reasoning_content and vLLM's reasoning reach it; the prompt grows by it."""
    client, name = api
    thought = "The user wants the weather, so I call the weather tool for Oslo and read what it says."

    def prompt_tokens(reasoning: dict[str, str]) -> int:
        return client.chat.completions.create(model=name, messages=_tool_turn(reasoning), tools=[WEATHER],
                                              max_tokens=1).usage.prompt_tokens

    without = prompt_tokens({})
    assert prompt_tokens({"reasoning_content": thought}) > without + 10
    assert prompt_tokens({"reasoning": thought}) == prompt_tokens({"reasoning_content": thought})


@pytest.mark.parametrize(("extra", "param", "words"), [
    ({"reasoning_format": "hidden"}, "reasoning_format", "must be one of auto, deepseek"),
    ({"reasoning_format": 1}, "reasoning_format", "must be a string"),
    ({"chat_template_kwargs": "enable_thinking"}, "chat_template_kwargs", "must be an object"),
    ({"chat_template_kwargs": {"enable_thinking": "false"}}, "chat_template_kwargs.enable_thinking", "true or false"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort", "none, low, medium, high"),
    ({"reasoning_budget_tokens": -2}, "reasoning_budget_tokens", "between -1 and"),
    ({"reasoning_budget_tokens": "64"}, "reasoning_budget_tokens", "must be an integer"),
    ({"thinking_budget_tokens": 1.5}, "thinking_budget_tokens", "must be an integer"),
    ({"reasoning_budget_message": ["ok"]}, "reasoning_budget_message", "must be a string"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "true or false"),
    ({"messages": [*ASK, {"role": "assistant", "content": "x", "reasoning_content": 5}]},
     "messages[1].reasoning_content", "must be a string"),
    ({"messages": [*ASK, {"role": "assistant", "content": "x", "reasoning": {"text": "x"}}]},
     "messages[1].reasoning", "must be a string"),
])
def test_bad_thinking_controls_are_400s_that_name_the_field(api, extra, param, words):
    client, name = api
    body = {"messages": ASK, **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=name, messages=body.pop("messages"), max_tokens=2, extra_body=body)
    assert caught.value.body["param"] == param and words in caught.value.body["message"], caught.value.body


# A tool whose call the grammar can end by itself: a random model would write a string parameter's text for ever.
SWITCH = {"type": "function", "function": {"name": "set_light", "parameters": {
    "type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"], "additionalProperties": False}}}
# The tiny model's vocabulary spells the XML's tags a character or two a token: room for them.
FORCED = {"temperature": 0.0, "max_tokens": 200, "tools": [SWITCH], "tool_choice": "required",
          "parallel_tool_calls": False, "extra_body": {"reasoning_budget_tokens": BUDGET}}


def test_a_thinking_model_thinks_then_calls_a_tool_in_its_own_syntax(api):
    """The engine forces the call after the thinking, in Qwen3.5's XML (<function=…><parameter=…>), and reads both
    back: reasoning_content and tool_calls, streamed and not."""
    client, name = api
    choice = client.chat.completions.create(model=name, messages=ASK, **FORCED).choices[0]
    message = choice.message
    (call,) = message.tool_calls
    assert choice.finish_reason == "tool_calls"
    assert _reasoning(message).strip() and not message.content
    assert call.function.name == "set_light" and call.id.startswith("call_")
    assert set(json.loads(call.function.arguments)) == {"on"}
    chunks = list(client.chat.completions.create(model=name, messages=ASK, stream=True, **FORCED))
    deltas = [c.choices[0].delta for c in chunks[1:] if c.choices and (_reasoning(c.choices[0].delta)
                                                                       or c.choices[0].delta.tool_calls)]
    kinds = ["reasoning" if _reasoning(d) else "call" for d in deltas]
    # thinking first, then the call in one delta once its syntax is read to its end
    assert kinds == sorted(kinds, key=["reasoning", "call"].index) and kinds.count("call") == 1
    pieces = [tc for d in deltas for tc in d.tool_calls or ()]
    assert pieces[0].function.name == "set_light" and pieces[0].id.startswith("call_")
    assert "".join(_reasoning(d) or "" for d in deltas) == _reasoning(message)
    assert "".join(p.function.arguments for p in pieces) == call.function.arguments
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


# --- Anthropic ---

ENABLED = {"type": "enabled", "budget_tokens": BUDGET}


def test_a_message_has_a_thinking_block_before_the_text(claude, api):
    client, name = claude
    message = client.messages.create(model=name, max_tokens=24, messages=ASK, thinking=ENABLED,
                                     extra_body={"temperature": 0})
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking.strip() and thinking.signature == ""
    assert text.type == "text" and text.text.strip()
    _no_tags(thinking.thinking, text.text)
    # the same reply as the OpenAI endpoint's, told in blocks
    openai_reply = api[0].chat.completions.create(model=name, messages=ASK, **THINK).choices[0].message
    assert (thinking.thinking, text.text) == (_reasoning(openai_reply), openai_reply.content)


def test_a_streamed_message_opens_signs_and_closes_the_thinking_block_before_the_text(claude):
    client, name = claude
    whole = client.messages.create(model=name, max_tokens=24, messages=ASK, thinking=ENABLED,
                                   extra_body={"temperature": 0})
    with client.messages.stream(model=name, max_tokens=24, messages=ASK, thinking=ENABLED,
                                extra_body={"temperature": 0}) as stream:
        events = [e for e in stream if e.type.startswith("content_block")]
        final = stream.get_final_message()
    steps = [(e.type, e.index, e.content_block.type if e.type == "content_block_start" else
              e.delta.type if e.type == "content_block_delta" else "") for e in events]
    thinking_deltas = steps.count(("content_block_delta", 0, "thinking_delta"))
    text_deltas = steps.count(("content_block_delta", 1, "text_delta"))
    assert thinking_deltas > 1 and text_deltas > 1
    assert steps == [("content_block_start", 0, "thinking"), *[("content_block_delta", 0, "thinking_delta")]
                     * thinking_deltas, ("content_block_delta", 0, "signature_delta"), ("content_block_stop", 0, ""),
                     ("content_block_start", 1, "text"), *[("content_block_delta", 1, "text_delta")] * text_deltas,
                     ("content_block_stop", 1, "")]
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in whole.content]
    assert final.stop_reason == whole.stop_reason == "max_tokens"


def test_a_thinking_block_then_a_tool_use_block(claude):
    client, name = claude
    request = {"model": name, "max_tokens": 200, "messages": ASK, "thinking": ENABLED,
               "tools": [{"name": "set_light", "input_schema": SWITCH["function"]["parameters"]}],
               "tool_choice": {"type": "any", "disable_parallel_tool_use": True}, "extra_body": {"temperature": 0}}
    whole = client.messages.create(**request)
    thinking, use = whole.content
    assert thinking.type == "thinking" and thinking.thinking.strip() and thinking.signature == ""
    assert use.type == "tool_use" and use.name == "set_light" and set(use.input) == {"on"}
    assert whole.stop_reason == "tool_use"
    with client.messages.stream(**request) as stream:
        events = [e for e in stream if e.type.startswith("content_block")]
        final = stream.get_final_message()
    starts = [(e.index, e.content_block.type) for e in events if e.type == "content_block_start"]
    stops = [e.index for e in events if e.type == "content_block_stop"]
    assert starts == [(0, "thinking"), (1, "tool_use")] and stops == [0, 1]
    assert [e.delta.type for e in events if e.type == "content_block_delta" and e.index == 1] \
        == ["input_json_delta"] * (len(events) - events.index(next(e for e in events if e.index == 1)) - 2)
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[0].thinking == thinking.thinking and final.content[1].input == use.input
    assert final.stop_reason == "tool_use"


def test_thinking_disabled_sends_no_thinking_block(claude):
    client, name = claude
    for stream in (False, True):
        if stream:
            with client.messages.stream(model=name, max_tokens=12, messages=ASK, thinking={"type": "disabled"},
                                        extra_body={"temperature": 0}) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(model=name, max_tokens=12, messages=ASK,
                                             thinking={"type": "disabled"}, extra_body={"temperature": 0})
        assert [b.type for b in message.content] == ["text"] and message.content[0].text
        _no_tags(message.content[0].text)


def test_adaptive_thinking_thinks_as_long_as_the_model_wants(claude):
    """No budget: the tiny model never ends its thinking, so the whole reply is one thinking block."""
    client, name = claude
    message = client.messages.create(model=name, max_tokens=12, messages=ASK, thinking={"type": "adaptive"},
                                     extra_body={"temperature": 0})
    assert [b.type for b in message.content] == ["thinking"] and message.stop_reason == "max_tokens"


def test_thinking_blocks_in_the_history_go_back_to_the_template(claude):
    client, name = claude
    thought = "The user wants the weather, so I call the weather tool for Oslo and read what it says."
    tool = {"name": "get_weather", "input_schema": WEATHER["function"]["parameters"]}

    def input_tokens(blocks: list[dict]) -> int:
        history = [*ASK, {"role": "assistant", "content": [
            *blocks, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
        usage = client.messages.create(model=name, max_tokens=1, messages=history, tools=[tool]).usage
        return usage.input_tokens + usage.cache_read_input_tokens  # the whole prompt: evaluated and reused

    without = input_tokens([])
    assert input_tokens([{"type": "thinking", "thinking": thought, "signature": ""}]) > without + 10
    assert input_tokens([{"type": "redacted_thinking", "data": "opaque"}]) == without  # Anthropic's, unreadable


@pytest.mark.parametrize(("thinking", "words"), [
    ({"type": "enabled"}, "thinking.budget_tokens must be an integer"),
    ({"type": "enabled", "budget_tokens": 0}, "thinking.budget_tokens must be between 1 and"),
    ({"type": "enabled", "budget_tokens": 8}, "max_tokens (8) must be greater than thinking.budget_tokens (8)"),
    ({"type": "sometimes"}, 'thinking must be {"type": "enabled"'),
    ({"type": "enabled", "budget_tokens": 4, "display": "omitted"}, 'only display "summarized"'),
])
def test_bad_thinking_requests_are_400s_in_anthropics_shape(claude, thinking, words):
    client, name = claude
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model=name, max_tokens=8, messages=ASK, extra_body={"thinking": thinking})
    assert caught.value.body["type"] == "error" and words in caught.value.body["error"]["message"]
