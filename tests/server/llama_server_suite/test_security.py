# Ported from ggml-org/llama.cpp tools/server/tests/unit/test_security.py at
# 0c1e57098bba43ac29e6e3b677cdceebdd22334f (vendored by llama-cpp-python 0.3.36); MIT License, Copyright (c) 2023-2026
# The ggml authors. Test names kept. Differences on purpose, said where they show: llama-server's bare /completions is
# its native endpoint (a "content" field), QuantDesk's is OpenAI's; a wrong key is OpenAI's 401 (invalid_request_error,
# invalid_api_key), llama-server answers authentication_error; CORS is closed unless --allow-origin names the page's
# origin (app/server/guard.py). See README.md for what was left out and why.
from __future__ import annotations

import pytest
from openai import OpenAI

from tests.server.llama_server_suite.utils import ServerPreset, ServerProcess

server: ServerProcess

TEST_API_KEY = "sk-this-is-the-secret-key"


@pytest.fixture(autouse=True)
def create_server():
    global server
    server = ServerPreset.tinyllama2()
    server.api_key = TEST_API_KEY


@pytest.mark.parametrize("api_key", [None, "invalid-key"])
def test_incorrect_api_key(api_key: str):
    global server
    server.start()
    res = server.make_request("POST", "/completions", data={
        "prompt": "I believe the meaning of life is",
    }, headers={
        "Authorization": f"Bearer {api_key}" if api_key else None,
    })
    assert res.status_code == 401
    assert "error" in res.body
    assert res.body["error"]["code"] == "invalid_api_key"  # upstream: type authentication_error


def test_correct_api_key():
    global server
    server.start()
    res = server.make_request("POST", "/completions", data={
        "prompt": "I believe the meaning of life is",
        "max_tokens": 8,
    }, headers={
        "Authorization": f"Bearer {TEST_API_KEY}",
    })
    assert res.status_code == 200
    assert "error" not in res.body
    assert "choices" in res.body  # upstream: "content", its native endpoint's


def test_correct_api_key_anthropic_header():
    global server
    server.start()
    res = server.make_request("POST", "/completions", data={
        "prompt": "I believe the meaning of life is",
        "max_tokens": 8,
    }, headers={
        "X-Api-Key": TEST_API_KEY,
    })
    assert res.status_code == 200
    assert "error" not in res.body
    assert "choices" in res.body  # upstream: "content", its native endpoint's


def test_openai_library_correct_api_key():
    global server
    server.start()
    client = OpenAI(api_key=TEST_API_KEY, base_url=f"http://{server.server_host}:{server.server_port}")
    res = client.chat.completions.create(
        model="gpt-3.5-turbo",
        messages=[
            {"role": "system", "content": "You are a chatbot."},
            {"role": "user", "content": "What is the meaning of life?"},
        ],
        max_tokens=16,  # (upstream's server stops at its --n-predict 64; QuantDesk's at the context)
    )
    assert len(res.choices) == 1


@pytest.mark.parametrize("origin,cors_header,cors_header_value", [
    ("http://localhost:3000", "Access-Control-Allow-Origin", "http://localhost:3000"),
    ("http://web.mydomain.fr", "Access-Control-Allow-Origin", "http://web.mydomain.fr"),
    ("http://web.mydomain.fr", "Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
])
def test_cors_options(origin: str, cors_header: str, cors_header_value: str):
    """(upstream: any origin passes, with Allow-Credentials and Allow-Headers "*"; here only the origins the server was
    started with, named headers and no credentials: a browser page reaches a local model only when allowed)"""
    global server
    server.cors_origins = "http://localhost:3000,http://web.mydomain.fr"
    server.start()
    res = server.make_request("OPTIONS", "/completions", headers={
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization",
    })
    assert res.status_code in (200, 204)
    assert cors_header in res.headers
    assert res.headers[cors_header] == cors_header_value


@pytest.mark.parametrize("origin", [
    "http://web.mydomain.fr",
    "http://evil.com",
    "http://notlocalhost",
    "http://localhost.evil.com",
])
def test_cors_origins_localhost_rejects(origin: str):
    global server
    server.cors_origins = "http://localhost:8080"
    server.start()
    res = server.make_request("OPTIONS", "/completions", headers={
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Authorization",
    })
    # upstream: 200 without the header; here the preflight is refused outright (403), which no browser passes either
    assert res.status_code in (200, 403)
    assert "access-control-allow-origin" not in {k.lower() for k in res.headers}
