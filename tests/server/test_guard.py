"""Each safety promise of the local server, attacked over real sockets on 127.0.0.1."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from app.cli import main
from app.server.guard import check_bind, is_loopback, UnsafeBind
from app.server.params import MAX_BODY_BYTES
from tests.server.conftest import N_CTX, openai_queue

CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
KEY = "k3y-for-tests-0123456789"
ACAO = "access-control-allow-origin"


def _port(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


# --- Host header (DNS rebinding) ---


def test_a_foreign_host_header_is_refused_on_every_endpoint(server):
    for host in ("evil.example", f"evil.example:{_port(server)}", f"127.0.0.1:{_port(server) + 1}",
                 f"localhost.evil.example:{_port(server)}", ""):
        models = httpx.get(f"{server.url}/v1/models", headers={"Host": host})
        chat = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"Host": host})
        for reply in (models, chat):
            assert reply.status_code == 403, host
            assert reply.json()["error"]["code"] == "host_not_allowed"
            assert ACAO not in reply.headers
    assert openai_queue(server).finished_count == 0


def test_the_loopback_names_of_the_bound_port_are_accepted(server):
    for name in ("127.0.0.1", "localhost", "LOCALHOST", "[::1]"):
        reply = httpx.get(f"{server.url}/v1/models", headers={"Host": f"{name}:{_port(server)}"})
        assert reply.status_code == 200, name


def test_an_operator_listed_host_name_is_accepted(serve):
    server = serve(allowed_hosts=["mybox.local"])
    assert httpx.get(f"{server.url}/v1/models", headers={"Host": f"mybox.local:{_port(server)}"}).status_code == 200
    assert httpx.get(f"{server.url}/v1/models", headers={"Host": f"other.local:{_port(server)}"}).status_code == 403


# --- Origin and CORS ---


def test_a_foreign_origin_is_refused_without_cors_headers(server):
    for origin in ("http://evil.example", "null", f"http://localhost:{_port(server)}.evil.example",
                   f"https://127.0.0.1:{_port(server)}"):
        reply = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"Origin": origin})
        assert reply.status_code == 403, origin
        assert reply.json()["error"]["code"] == "origin_not_allowed"
        assert ACAO not in reply.headers
    # A form post needs no preflight: the Origin check alone must stop it, before JSON is even parsed.
    form = httpx.post(f"{server.url}/v1/chat/completions", content=json.dumps(CHAT),
                      headers={"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert form.status_code == 403
    assert openai_queue(server).finished_count == 0


def test_a_cross_origin_preflight_gets_no_cors_headers(server):
    reply = httpx.options(f"{server.url}/v1/chat/completions",
                          headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
                                   "Access-Control-Request-Headers": "authorization, content-type"})
    assert reply.status_code == 403
    assert not [h for h in reply.headers if h.startswith("access-control-")]


def test_a_browser_request_without_origin_but_marked_cross_site_is_refused(server):
    reply = httpx.get(f"{server.url}/v1/models", headers={"Sec-Fetch-Site": "cross-site"})
    assert reply.status_code == 403


def test_same_origin_passes_without_cors_headers(server):
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"Origin": server.url})
    assert reply.status_code == 200 and ACAO not in reply.headers


def test_a_listed_origin_gets_its_preflight_and_cors_headers(serve):
    server = serve(allowed_origins=["http://localhost:3000"])
    preflight = httpx.options(f"{server.url}/v1/chat/completions",
                              headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 204
    assert preflight.headers[ACAO] == "http://localhost:3000"  # that origin, never "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"Origin": "http://localhost:3000"})
    assert reply.status_code == 200 and reply.headers[ACAO] == "http://localhost:3000"
    assert reply.headers["vary"] == "Origin"
    other = httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers={"Origin": "http://localhost:3001"})
    assert other.status_code == 403 and ACAO not in other.headers


# --- API key ---


@pytest.mark.parametrize("auth", [None, "Bearer wrong", f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", KEY,
                                  f"Basic {KEY}", "Bearer"])
def test_a_missing_or_wrong_key_is_refused(serve, auth):
    server = serve(api_key=KEY)
    headers = {"Authorization": auth} if auth is not None else {}
    for reply in (httpx.get(f"{server.url}/v1/models", headers=headers),
                  httpx.post(f"{server.url}/v1/chat/completions", json=CHAT, headers=headers)):
        assert reply.status_code == 401
        assert reply.json()["error"]["code"] == "invalid_api_key"
    assert openai_queue(server).finished_count == 0


def test_the_right_key_works_through_the_openai_client(serve, model_name):
    server = serve(api_key=KEY)
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0) as good:
        assert good.chat.completions.create(model=model_name, **CHAT).choices[0].message.content is not None
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-the-key", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_a_listed_origin_preflight_passes_without_the_key_but_its_request_needs_it(serve):
    server = serve(api_key=KEY, allowed_origins=["http://localhost:3000"])
    origin = {"Origin": "http://localhost:3000"}
    assert httpx.options(f"{server.url}/v1/models", headers=origin).status_code == 204  # browsers send no auth here
    assert httpx.get(f"{server.url}/v1/models", headers=origin).status_code == 401
    assert httpx.get(f"{server.url}/v1/models", headers={**origin, "Authorization": f"Bearer {KEY}"}).status_code == 200


# --- where it listens ---


@pytest.mark.parametrize("host", ["127.0.0.1", "127.5.6.7", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_switch(host):
    assert is_loopback(host)
    check_bind(host, allow_lan=False, api_key=None)


@pytest.mark.parametrize("host, allow_lan, key, words", [
    ("0.0.0.0", False, KEY, "--allow-lan"),
    ("192.168.1.20", False, None, "--allow-lan"),
    ("::", False, KEY, "--allow-lan"),
    ("mybox.local", False, KEY, "--allow-lan"),
    ("0.0.0.0", True, None, "without an API key"),
    ("0.0.0.0", True, "", "without an API key"),
    ("0.0.0.0", True, "short", "too short"),
])
def test_the_lan_needs_the_switch_and_a_strong_key(host, allow_lan, key, words):
    with pytest.raises(UnsafeBind) as caught:
        check_bind(host, allow_lan=allow_lan, api_key=key)
    assert words in str(caught.value)


def test_the_lan_with_the_switch_and_a_key_is_allowed():
    check_bind("0.0.0.0", allow_lan=True, api_key=KEY)  # the policy only: tests never listen beyond loopback


@pytest.mark.parametrize("argv, words", [
    (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0"),
    (["--host", "0.0.0.0", "--allow-lan"], "without an API key"),
])
def test_serve_refuses_to_start_on_the_lan_with_a_sentence(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("QUANTDESK_API_KEY", raising=False)
    missing_model = tmp_path / "never-loaded.gguf"  # refused before the model is even looked at
    assert main(["serve", "--model", str(missing_model), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quantdesk: ") and words in err and "Traceback" not in err


# --- parameters ---


BAD_BODIES = [
    ({"temperature": -1}, "temperature"),
    ({"temperature": 1e9}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": True}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"top_k": 2**40}, "top_k"),
    ({"min_p": -0.1}, "min_p"),
    ({"repeat_penalty": -1}, "repeat_penalty"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": N_CTX + 1}, "max_tokens"),
    ({"max_tokens": 10**12}, "max_tokens"),
    ({"max_completion_tokens": 10**9}, "max_tokens"),
    ({"seed": -2}, "seed"),
    ({"seed": 2**70}, "seed"),
    ({"stop": ["x"] * 17}, "stop"),
    ({"stop": [""]}, "stop"),
    ({"stop": "x" * 1000}, "stop"),
    ({"stop": 5}, "stop"),
    ({"n": 0}, "n"),
    ({"n": 9}, "n"),  # MAX_CHOICES: generated one after the other
    ({"logprobs": "yes"}, "logprobs"),
    ({"top_logprobs": 3}, "top_logprobs"),  # only with logprobs: true, as OpenAI and llama-server
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"presence_penalty": 1.0}, "presence_penalty"),
    ({"tools": {"type": "function", "function": {"name": "f"}}}, "tools"),  # a tool, not a list of them
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"stream": "yes"}, "stream"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"messages": []}, "messages"),
    ({"messages": "Hi"}, "messages"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content[0]"),  # the tiny model here has no projector (tests/server/test_vision.py has one)
    ({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "x"}]}]}, "messages[0].content[0]"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content"),
]


@pytest.mark.parametrize("change, param", BAD_BODIES, ids=[p for _, p in BAD_BODIES])
def test_bad_parameters_are_400_before_the_engine(server, change, param):
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={**CHAT, **change})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param
    assert openai_queue(server).finished_count == 0


@pytest.mark.parametrize("raw, content_type, status", [
    (b'{"messages": [{"role": "user", "content": "Hi"}], "temperature": NaN}', "application/json", 400),
    (b'{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": Infinity}', "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b"{not json", "application/json", 400),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", 400),
    (json.dumps(CHAT).encode(), "text/plain", 415),
    (json.dumps(CHAT).encode(), "application/x-www-form-urlencoded", 415),
    (b'{"prompt": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}', "application/json", 413),
])
def test_malformed_bodies_are_refused(server, raw, content_type, status):
    reply = httpx.post(f"{server.url}/v1/chat/completions", content=raw, headers={"Content-Type": content_type})
    assert reply.status_code == status
    assert set(reply.json()["error"]) == {"message", "type", "param", "code"}


def test_completions_check_their_own_parameters(server):
    for change in ({"prompt": ["a", "b"]}, {"prompt": [1, 2, 3]}, {"echo": True}, {"best_of": 3},
                   {"suffix": "end"}, {"max_tokens": -1}):
        reply = httpx.post(f"{server.url}/v1/completions", json={"prompt": "Hi", "max_tokens": 2, **change})
        assert reply.status_code == 400, change
    assert openai_queue(server).finished_count == 0


# --- no model from a request ---


@pytest.mark.parametrize("model", ["/etc/passwd", "../../models/other.gguf", "~/.cache/huggingface/x.gguf",
                                   "hf://TheBloke/Llama-2-7B-GGUF", "https://evil.example/model.gguf",
                                   "TheBloke/Llama-2-7B-GGUF", "gpt-4o"])
def test_a_request_cannot_choose_or_load_another_model(server, engine, model, tiny_models):
    loaded_before = engine.loaded
    for path in ("/v1/chat/completions", "/v1/completions"):
        body = {**CHAT, "prompt": "Hi", "model": model}
        reply = httpx.post(f"{server.url}{path}", json=body)
        assert reply.status_code == 404
        assert reply.json()["error"]["code"] == "model_not_found" and reply.json()["error"]["param"] == "model"
    assert httpx.get(f"{server.url}/v1/models/{model}").status_code == 404
    assert engine.loaded is loaded_before and openai_queue(server).finished_count == 0
