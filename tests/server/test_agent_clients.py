"""What agent clients expect of the API, with the official ``anthropic`` and ``openai`` clients against the real server
on the tiny models: Anthropic's count_tokens, the input tokens in message_start, the OpenAI routes without /v1, and
the prompt's tokens reused from the KV cache (``cached_tokens``, ``cache_read_input_tokens``) on a conversation's
second turn; other model names (aliases, serve any model)."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from app.cli import build_parser
from app.commands.server import serve_app
from app.datatypes import LoadSettings
from app.server.app import create_app, model_id
from app.server.router import ServeSettings
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine
from tests.server.test_anthropic import ASK, WEATHER, prompt_of

SYSTEM = "You are terse."


@pytest.fixture(scope="module")
def tool_engine(tiny_tool_model):
    yield from loaded_engine(tiny_tool_model, n_ctx=2048)


@pytest.fixture
def served(tool_engine):
    server = ServerThread(create_app(tool_engine)).start()
    yield server, model_id(tool_engine.loaded.model_path)
    server.stop()
    assert tool_engine.alive


@pytest.fixture
def claude(served):
    server, name = served
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as client:
        yield client, name


def test_count_tokens_counts_what_a_message_reports_as_its_prompt(claude):
    api, name = claude
    for request in ({"messages": ASK}, {"messages": ASK, "system": SYSTEM},
                    {"messages": ASK, "tools": [WEATHER]},
                    {"messages": ASK, "tools": [WEATHER], "tool_choice": {"type": "any"}}):
        counted = api.messages.count_tokens(model=name, **request).input_tokens
        message = api.messages.create(model=name, max_tokens=2, **request)
        assert counted == prompt_of(message.usage) > 5, request
    # the tools' declarations are in the prompt the template renders
    assert api.messages.count_tokens(model=name, messages=ASK, tools=[WEATHER]).input_tokens \
        > api.messages.count_tokens(model=name, messages=ASK).input_tokens + 20


def test_count_tokens_refuses_in_anthropics_shape(claude, served):
    api, name = claude
    with pytest.raises(anthropic.NotFoundError) as caught:
        api.messages.count_tokens(model="claude-sonnet-4", messages=ASK)
    assert caught.value.body["type"] == "error" and "is not served here" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        api.messages.count_tokens(model=name, messages=[])
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    # a thinking budget is no limit on a count (there is no max_tokens to hold it under)
    server, _ = served
    reply = httpx.post(f"{server.url}/v1/messages/count_tokens", timeout=60,
                       json={"model": name, "messages": ASK, "thinking": {"type": "enabled", "budget_tokens": 4096}})
    assert reply.status_code == 200 and reply.json()["input_tokens"] > 5


def test_message_start_reports_the_input_tokens(claude):
    api, name = claude
    with api.messages.stream(model=name, max_tokens=4, system=SYSTEM, messages=ASK) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = events[0]
    assert start.type == "message_start" and prompt_of(start.message.usage) == prompt_of(final.usage) > 5
    assert start.message.usage.cache_read_input_tokens == final.usage.cache_read_input_tokens
    assert prompt_of(final.usage) == api.messages.count_tokens(model=name, system=SYSTEM, messages=ASK).input_tokens


def test_the_second_turn_of_a_conversation_reports_its_cached_prompt(claude, served):
    api, name = claude
    server, _ = served
    first_ask = [{"role": "user", "content": "Name three colours of the rainbow, please, one per line."}]
    first = api.messages.create(model=name, max_tokens=6, messages=first_ask, extra_body={"temperature": 0})
    history = [*first_ask, {"role": "assistant", "content": first.content[0].text},
               {"role": "user", "content": "And two more?"}]
    second = api.messages.create(model=name, max_tokens=6, messages=history, extra_body={"temperature": 0})
    assert prompt_of(first.usage) - 1 <= second.usage.cache_read_input_tokens < prompt_of(second.usage)
    assert second.usage.input_tokens >= 1
    # the same through OpenAI's chat completions: prompt_tokens_details.cached_tokens, prompt_tokens the whole prompt
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as oai:
        turn = [{"role": "user", "content": "Count from one to five, please."}]
        reply = oai.chat.completions.create(model=name, messages=turn, max_tokens=6, temperature=0)
        turn += [{"role": "assistant", "content": reply.choices[0].message.content},
                 {"role": "user", "content": "Now backwards."}]
        again = oai.chat.completions.create(model=name, messages=turn, max_tokens=6, temperature=0)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert reply.usage.prompt_tokens - 1 <= cached < again.usage.prompt_tokens


def test_the_openai_routes_answer_without_the_v1_prefix(served):
    server, name = served
    with openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as bare:
        assert [m.id for m in bare.models.list().data] == [name]
        assert bare.models.retrieve(name).id == name
        chat = bare.chat.completions.create(model=name, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
        assert chat.choices[0].message.content is not None and chat.usage.completion_tokens >= 1
        completion = bare.completions.create(model=name, prompt="Once upon a time", max_tokens=3)
        assert completion.usage.completion_tokens >= 1
        with pytest.raises(openai.BadRequestError) as caught:  # routed: the model makes no embeddings
            bare.embeddings.create(model=name, input="hello")
        assert "not an embedding model" in caught.value.message


def test_aliases_answer_as_the_primary_under_their_own_name(tool_engine):
    name = model_id(tool_engine.loaded.model_path)
    args = build_parser().parse_args(["serve", "--model", tool_engine.loaded.model_path, "--alias", "gpt-4.1"])
    server = ServerThread(serve_app(args, tool_engine, None, LoadSettings())).start()  # as quantdesk serve builds it
    try:
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as oai:
            cards = {m.id: m for m in oai.models.list().data}
            assert list(cards) == [name, "gpt-4.1"]
            assert cards[name].meta["aliases"] == ["gpt-4.1"] and cards["gpt-4.1"].meta["alias_of"] == name
            assert "serve_any_model" not in cards[name].meta
            reply = oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=2)
            assert reply.model == "gpt-4.1" and reply.usage.completion_tokens >= 1
            with pytest.raises(openai.NotFoundError):  # the switch is off: another name is still no model here
                oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}],
                                            max_tokens=2)
    finally:
        server.stop()


def test_serve_any_model_answers_every_name_with_the_primary_and_says_so(tool_engine):
    name = model_id(tool_engine.loaded.model_path)
    server = ServerThread(create_app(tool_engine, pool=ServeSettings(serve_any_model=True))).start()
    try:
        with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as claude:
            message = claude.messages.create(model="claude-fixed-name", max_tokens=2, messages=ASK)
            assert message.model == "claude-fixed-name" and message.usage.output_tokens >= 1
            assert claude.messages.count_tokens(model="claude-fixed-name", messages=ASK).input_tokens \
                == claude.messages.count_tokens(model=name, messages=ASK).input_tokens
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as oai:
            assert [(m.id, m.meta.get("serve_any_model")) for m in oai.models.list().data] == [(name, True)]
            assert oai.completions.create(model="gpt-4.1", prompt="Once", max_tokens=2).model == "gpt-4.1"
    finally:
        server.stop()
