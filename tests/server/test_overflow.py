"""The overflow policy through the server, with the official openai client on a real engine: a 256-token context,
a client that keeps its whole conversation and sends it each time, 20 turns past the limit."""

from __future__ import annotations

import httpx
import openai
import pytest

from app.server.app import model_id
from tests.server.conftest import loaded_engine, openai_on

N_CTX = 256
REPLY = 24
SYSTEM = {"role": "system", "content": "You are terse."}


MODEL = "tiny-llama-Q8_0"


@pytest.fixture(scope="module")
def small_engine(tiny_models):
    assert model_id(tiny_models.gguf_q8_0) == MODEL
    yield from loaded_engine(tiny_models.gguf_q8_0, N_CTX)


def _question(i: int) -> dict:
    return {"role": "user", "content": f"Question number {i}: what comes after {i} apples and {i + 1} pears?"}


def _chat(oai, history, **extra):
    raw = oai.chat.completions.with_raw_response.create(model=MODEL, messages=history, max_tokens=REPLY, seed=1,
                                                        **extra)
    return raw.headers, raw.parse()


@pytest.mark.parametrize(("policy", "how"), [("drop-oldest", "body"), ("truncate-middle", "header"),
                                             ("compact", "body"), ("drop-oldest", "server")])
def test_each_policy_answers_twenty_turns_past_the_limit_and_says_what_it_left_out(serve, small_engine, policy,
                                                                                    how):
    server = serve(small_engine, overflow=policy if how == "server" else "stop")
    oai = openai_on(server)
    extra = {"extra_body": {"quantdesk": {"overflow": policy}}} if how == "body" else \
        {"extra_headers": {"X-QuantDesk-Overflow": policy}} if how == "header" else {}
    history = [SYSTEM]
    past, i, dropped = 0, 0, 0
    while past < 20:
        i += 1
        history.append(_question(i))
        headers, reply = _chat(oai, history, **extra)
        text = reply.choices[0].message.content
        assert text and reply.usage.completion_tokens > 0  # it keeps answering
        field = reply.model_extra["quantdesk"]
        assert headers["x-quantdesk-overflow"] == field["overflow"] == policy
        assert int(headers["x-quantdesk-context-dropped"]) == field["context_dropped"]
        if field["context_dropped"]:
            past += 1
            assert field["context_dropped"] >= dropped  # the client sends the same history: the cut only grows
            dropped = field["context_dropped"]
            assert field["dropped_from"] == (3 if policy == "truncate-middle" else 1)
            assert field["prompt_tokens"] == reply.usage.prompt_tokens <= N_CTX - REPLY
            words = "compacted into a note by the model" if policy == "compact" else "not sent to the model"
            assert field["mark"] == f"{dropped} earlier messages {words} (context full)"
            assert bool(field.get("note")) == (policy == "compact")  # the model's own note, not empty
        else:
            assert set(field) == {"overflow", "context_dropped"}
        history.append({"role": "assistant", "content": text})
    assert i > 20


def test_a_stream_reports_the_cut_in_its_headers_and_first_chunk(serve, small_engine):
    server = serve(small_engine, overflow="compact")
    history = [SYSTEM]
    for i in range(1, 9):
        history += [_question(i), {"role": "assistant", "content": f"Fine, {i}."}]
    history.append(_question(9))
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", timeout=120,
                      json={"messages": history, "max_tokens": REPLY, "stream": True}) as response:
        assert response.status_code == 200
        dropped = int(response.headers["X-QuantDesk-Context-Dropped"])
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    import json

    first = json.loads(lines[0][6:])
    assert dropped > 0 and first["quantdesk"]["context_dropped"] == dropped and first["quantdesk"]["note"]
    assert "quantdesk" not in json.loads(lines[1][6:])


def test_without_a_policy_a_conversation_that_does_not_fit_is_a_400_in_words(serve, small_engine):
    oai = openai_on(serve(small_engine))
    history = [SYSTEM]
    for i in range(1, 9):
        history += [_question(i), {"role": "assistant", "content": f"Fine, {i}."}]
    history.append(_question(9))
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model=MODEL, messages=history, max_tokens=REPLY)
    assert caught.value.code == "context_length_exceeded" and caught.value.status_code == 400
    message = caught.value.body["message"]
    assert message.startswith("the request exceeds the available context size: the conversation is ")
    assert "choose an overflow policy" in message and "drop-oldest" in message
    # a bad policy is a 400 naming the choices, in the body and in the header alike
    for extra in ({"extra_body": {"quantdesk": {"overflow": "forget"}}},
                  {"extra_headers": {"X-QuantDesk-Overflow": "forget"}}):
        with pytest.raises(openai.BadRequestError) as caught:
            oai.chat.completions.create(model=MODEL, messages=history, max_tokens=REPLY, **extra)
        assert "the overflow policy must be one of stop, drop-oldest, truncate-middle, compact" in \
            caught.value.body["message"]
    # with a policy the same conversation is answered, the note in the system prompt the model read
    headers, reply = _chat(oai, history, extra_body={"quantdesk": {"overflow": "compact"}})
    assert reply.choices[0].message.content and int(headers["x-quantdesk-context-dropped"]) >= 2
    assert reply.model_extra["quantdesk"]["note"]
    # and a newest message that cannot fit whatever is left out is a 400 that says so
    history[-1] = {"role": "user", "content": " ".join(f"word{i}" for i in range(120))}
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model=MODEL, messages=history, max_tokens=REPLY,
                                    extra_body={"quantdesk": {"overflow": "drop-oldest"}})
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.body["message"].startswith("the request exceeds the available context size: the newest "
                                                   "message does not fit the context: with the system prompt it is ")


def test_the_messages_api_takes_the_policy_and_reports_it_alike(serve, small_engine):
    import anthropic

    server = serve(small_engine)
    history = []
    for i in range(1, 9):
        history += [{"role": "user", "content": _question(i)["content"]},
                    {"role": "assistant", "content": f"Fine, {i}."}]
    history.append({"role": "user", "content": _question(9)["content"]})
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:  # no policy: Anthropic's error shape, in words
            client.messages.create(model=MODEL, system="You are terse.", messages=history, max_tokens=REPLY)
        assert "exceeds the available context size" in caught.value.body["error"]["message"]
        raw = client.messages.with_raw_response.create(
            model=MODEL, system="You are terse.", messages=history, max_tokens=REPLY,
            extra_body={"quantdesk": {"overflow": "drop-oldest"}})
        reply = raw.parse()
        dropped = int(raw.headers["x-quantdesk-context-dropped"])
        assert dropped >= 2 and raw.headers["x-quantdesk-overflow"] == "drop-oldest"
        assert reply.content[0].text and reply.model_extra["quantdesk"]["context_dropped"] == dropped
        assert reply.usage.input_tokens + (reply.usage.cache_read_input_tokens or 0) <= N_CTX - REPLY
