"""Remote engines against real OpenAI-compatible servers started here: QuantDesk's own server and llama-cpp-python's
(``llama_cpp.server``), each reached through a real engine host exactly as the Chat reaches a local model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from app.engine.client import EngineClient
from app.errors import EngineError
from app.remote.connections import Connection, Connections, model_ref
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import Done, LoadSettings, Message, SamplingSettings

pytestmark = pytest.mark.engine  # a remote model runs in an engine host too
GREEDY = SamplingSettings(temperature=0.0, max_tokens=24, seed=1)
CHAT = [Message("system", "You are terse."), Message("user", "Name three colours.")]


def reply(client: EngineClient, messages=CHAT, sampling=GREEDY) -> Done:
    return next(e for e in client.generate(messages, sampling) if isinstance(e, Done))


@pytest.fixture(scope="module")
def local_engine(tiny_models):
    with EngineClient() as client:
        client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
        yield client


@pytest.fixture
def quantdesk_server(local_engine):
    server = ServerThread(create_app(local_engine, api_key="qd-key-0123456789abcdef")).start()
    Connections().save(Connection("qd", f"{server.url}/v1"), api_key="qd-key-0123456789abcdef")
    yield model_ref("qd", model_id(local_engine.loaded.model_path))
    server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_cpp_server_process(tiny_models, tmp_path_factory, *options: str):
    """llama-cpp-python's own OpenAI-compatible server in its own process on the tiny model; yields its /v1 URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "log.txt"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(tiny_models.gguf_q8_0),
                                 "--model_alias", "tiny", "--n_ctx", "512", "--host", "127.0.0.1",
                                 "--port", str(port), *options], stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)  # a process starting up: nothing to wait on but its port
        else:
            proc.kill()
            pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
        yield url
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def llama_cpp_server(tiny_models, tmp_path_factory):
    yield from llama_cpp_server_process(tiny_models, tmp_path_factory)


def test_a_model_behind_quantdesks_server_answers_as_it_does_locally(local_engine, quantdesk_server):
    expected = reply(local_engine)
    with EngineClient() as client:
        loaded = client.load(quantdesk_server)
        assert loaded.backend == "remote" and loaded.n_ctx == 512  # the server said its context
        assert loaded.details["server_kind"] == "quantdesk" and loaded.details["connection"] == "qd"
        done = reply(client)
    assert done.text == expected.text  # greedy: the remote path changes nothing in the text
    assert done.stats.generated_tokens == expected.stats.generated_tokens
    assert done.stats.prompt_tokens == expected.stats.prompt_tokens
    assert done.stats.server["predicted_n"] == expected.stats.generated_tokens  # the server's own timings
    assert done.stats.decode_tps > 0 and done.stats.ttft_ms > 0


def test_a_raw_prompt_through_quantdesks_completions(local_engine, quantdesk_server):
    expected = next(e for e in local_engine.generate("Once upon a time", GREEDY) if isinstance(e, Done))
    with EngineClient() as client:
        client.load(quantdesk_server)
        done = next(e for e in client.generate("Once upon a time", GREEDY) if isinstance(e, Done))
    assert done.text == expected.text


def test_stop_ends_a_remote_reply_within_200_ms_and_the_engine_serves_again(local_engine, quantdesk_server):
    long = SamplingSettings(max_tokens=2000, seed=3)
    with EngineClient() as client:
        client.load(quantdesk_server)
        stream = client.generate(CHAT, long, request_id="chat-1")
        next(stream)  # the first token is here
        t_cancel = time.monotonic()
        client.cancel("chat-1")
        done = next(e for e in stream if isinstance(e, Done))
        assert time.monotonic() - t_cancel < 0.2
        assert done.stats.stop_reason == "cancelled" and done.stats.generated_tokens < 400
        assert reply(client).stats.stop_reason in ("eos", "length")


def test_a_json_schema_travels_to_the_remote_server_as_response_format(local_engine, quantdesk_server):
    """The remote server holds the reply to the schema (QuantDesk's, here, with its grammar): the same text as
    the local engine held to it."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    sampling = SamplingSettings(temperature=0.0, max_tokens=40, json_schema=schema)
    expected = reply(local_engine, sampling=sampling)
    with EngineClient() as client:
        client.load(quantdesk_server)
        done = reply(client, sampling=sampling)
    assert done.text == expected.text and isinstance(json.loads(done.text)["ok"], bool)


def test_a_wrong_key_is_refused_in_words(quantdesk_server):
    Connections().save(Connection("qd", Connections().get("qd").base_url), api_key="not-the-key-at-all")
    with EngineClient() as client, pytest.raises(EngineError) as caught:
        client.load(quantdesk_server)
    assert caught.value.kind == "auth" and "qd refused the API key (401" in caught.value.message


def test_llama_cpp_pythons_server_is_a_remote_engine(llama_cpp_server, local_engine):
    Connections().save(Connection("lcp", llama_cpp_server))
    with EngineClient() as client:
        loaded = client.load(model_ref("lcp", "tiny"))
        assert loaded.details["server_kind"] == "llama.cpp"
        done = reply(client)
        assert done.text and done.stats.generated_tokens > 0 and done.stats.decode_tps > 0
        raw = next(e for e in client.generate("Once upon a time", GREEDY) if isinstance(e, Done))
        assert raw.text


def test_quantdesks_server_fronts_a_remote_model_and_no_key_crosses(faulty_server):
    """The local server over a remote engine: the remote's key goes only to the remote, the local client's key only
    to the local server, and the answers carry neither."""
    import openai

    faulty_server.api_key = "remote-key-aaaaaaaaaaaa"
    Connections().save(Connection("stub", faulty_server.url), api_key="remote-key-aaaaaaaaaaaa")
    with EngineClient() as client:
        client.load(model_ref("stub", "stub-model"))
        server = ServerThread(create_app(client, api_key="local-key-bbbbbbbbbbbbbbbb")).start()
        local = openai.OpenAI(base_url=f"{server.url}/v1", api_key="local-key-bbbbbbbbbbbbbbbb")
        try:
            served = [m.id for m in local.models.list().data]
            assert served == ["stub-model"]  # the id the remote server gives it
            stream = local.chat.completions.create(model=served[0], stream=True,
                                                   messages=[{"role": "user", "content": "hi"}])
            text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            whole = local.chat.completions.with_raw_response.create(
                model=served[0], messages=[{"role": "user", "content": "hi"}])
        finally:
            local.close()
            server.stop()
    assert text == "Hello from the remote server."
    assert [h["authorization"] for h in faulty_server.headers] == ["Bearer remote-key-aaaaaaaaaaaa"] * 2
    answer = whole.http_response.text + str(dict(whole.http_response.headers))
    assert "remote-key" not in answer and "local-key" not in answer


def test_a_remote_thinking_models_reasoning_is_thinking_here(tiny_thinking_model):
    """QuantDesk's server sends a thinking model's reasoning_content (as llama-server does); a remote engine on it
    hands it out as thinking, apart from the answer, and the thinking controls travel in the request."""
    with EngineClient() as thinker:
        thinker.load(tiny_thinking_model, LoadSettings(n_ctx=1024))
        server = ServerThread(create_app(thinker, api_key="qd-key-0123456789abcdef")).start()
        try:
            Connections().save(Connection("qd", f"{server.url}/v1"), api_key="qd-key-0123456789abcdef")
            with EngineClient() as client:
                client.load(model_ref("qd", model_id(thinker.loaded.model_path)), LoadSettings())
                events = list(client.generate(CHAT, SamplingSettings(temperature=0.0, max_tokens=40,
                                                                     reasoning_budget=8)))
                done = events[-1]
                assert isinstance(done, Done)
                local = reply(thinker, CHAT, SamplingSettings(temperature=0.0, max_tokens=40, reasoning_budget=8))
                assert done.reasoning.strip() == local.reasoning.strip() and done.reasoning
                assert done.text.strip() == local.text.strip()
                assert "".join(e.reasoning for e in events if not isinstance(e, Done)).strip() == done.reasoning.strip()
                assert done.stats.reasoning_tokens > 0
                off = reply(client, CHAT, SamplingSettings(temperature=0.0, max_tokens=20, enable_thinking=False))
                assert off.reasoning == ""  # chat_template_kwargs.enable_thinking reached the server's template
        finally:
            server.stop()


def test_logprobs_pass_through_a_remote_server(local_engine, quantdesk_server):
    """Asked of the remote server and passed on as it gives them: the same figures as the model answers here."""
    asked = SamplingSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=6, logprobs=2)
    here = [x for e in local_engine.generate(CHAT, asked) for x in getattr(e, "logprobs", ())]
    with EngineClient() as client:
        client.load(quantdesk_server, LoadSettings())
        events = list(client.generate(CHAT, asked))
        there = [x for e in events for x in getattr(e, "logprobs", ())]
        raw = [x for e in client.generate("Once upon a time", asked) for x in getattr(e, "logprobs", ())]
    assert [(x.token, round(x.logprob, 4)) for x in there] == [(x.token, round(x.logprob, 4)) for x in here]
    assert all(len(x.top) == 2 and x.bytes for x in there) and "".join(x.token for x in there) == events[-1].text
    assert len(raw) == 6 and all(len(x.top) == 2 for x in raw)  # /completions' shape read too


def test_llama_cpp_pythons_logprobs_pass_through(llama_cpp_server, local_engine):
    Connections().save(Connection("lcp", llama_cpp_server))
    with EngineClient() as client:
        client.load(model_ref("lcp", "tiny"))
        events = list(client.generate(CHAT, SamplingSettings(temperature=0.0, max_tokens=4, logprobs=1)))
    entries = [x for e in events for x in getattr(e, "logprobs", ())]
    assert entries and all(x.logprob <= 0 for x in entries)
    assert "".join(x.token for x in entries) == events[-1].text


def test_a_remote_server_without_logprobs_is_refused_in_words(faulty_server):
    """A server that streams its text without log-probabilities when asked: the request fails at its first text, in
    words (the local server's 400 before its stream), and the engine serves again."""
    Connections().save(Connection("stub", faulty_server.url))
    with EngineClient() as client:
        client.load(model_ref("stub", "stub-model"))
        with pytest.raises(EngineError) as caught:
            reply(client, sampling=SamplingSettings(max_tokens=4, logprobs=0))
        assert caught.value.kind == "request" and "gives no log-probabilities" in str(caught.value)
        assert reply(client).text == "Hello from the remote server."
