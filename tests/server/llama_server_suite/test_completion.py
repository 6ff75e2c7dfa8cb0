# Ported from ggml-org/llama.cpp tools/server/tests/unit/test_completion.py at
# 0c1e57098bba43ac29e6e3b677cdceebdd22334f (vendored by llama-cpp-python 0.3.36); MIT License, Copyright (c) 2023-2026
# The ggml authors. Test names kept. Most of upstream's file drives llama-server's native /completion endpoint (its
# n_predict, completion_probabilities, slots, tokens as input), which QuantDesk does not serve: the OpenAI-route tests
# are ported, and those whose question the OpenAI route can ask too are asked there (named in each). What the tiny
# random-weight model writes is not checked. See README.md for what was left out and why.
from __future__ import annotations

import pytest
from openai import OpenAI

from tests.server.llama_server_suite.utils import ServerPreset, ServerProcess

server: ServerProcess


@pytest.fixture(autouse=True)
def create_server():
    global server
    server = ServerPreset.tinyllama2()


def test_completion_with_openai_library():
    global server
    server.start()
    client = OpenAI(api_key="dummy", base_url=f"http://{server.server_host}:{server.server_port}/v1")
    res = client.completions.create(
        model="davinci-002",
        prompt="I believe the meaning of life is",
        max_tokens=8,
    )
    assert res.choices[0].finish_reason == "length"
    assert res.choices[0].text is not None
    assert res.usage.completion_tokens == 8


def test_completion_stream_with_openai_library():
    global server
    server.start()
    client = OpenAI(api_key="dummy", base_url=f"http://{server.server_host}:{server.server_port}/v1")
    res = client.completions.create(
        model="davinci-002",
        prompt="I believe the meaning of life is",
        max_tokens=8,
        stream=True,
    )
    output_text = ''
    finish = None
    for data in res:
        choice = data.choices[0]
        if choice.finish_reason is None:
            assert choice.text is not None
            output_text += choice.text
        else:
            finish = choice.finish_reason
    assert output_text and finish == "length"


def test_completion_stream_vs_non_stream():
    """(upstream on /completion; here on /v1/completions, greedy so that both are the same reply)"""
    global server
    server.start()
    res_stream = server.make_stream_request("POST", "/v1/completions", data={
        "max_tokens": 8,
        "prompt": "I believe the meaning of life is",
        "temperature": 0.0,
        "stream": True,
    })
    res_non_stream = server.make_request("POST", "/v1/completions", data={
        "max_tokens": 8,
        "prompt": "I believe the meaning of life is",
        "temperature": 0.0,
    })
    content_stream = ""
    for data in res_stream:
        content_stream += data["choices"][0]["text"]
    assert content_stream == res_non_stream.body["choices"][0]["text"]


@pytest.mark.parametrize("n_slots", [1, 2])
def test_consistent_result_same_seed(n_slots: int):
    """(upstream on /completion; here on /v1/completions)"""
    global server
    server.n_slots = n_slots
    server.start()
    last_res = None
    for _ in range(4):
        res = server.make_request("POST", "/v1/completions", data={
            "prompt": "I believe the meaning of life is",
            "seed": 42,
            "temperature": 0.0,
            "max_tokens": 16,
            "cache_prompt": False,  # TODO: remove this once test_cache_vs_nocache_prompt is fixed
        })
        if last_res is not None:
            assert res.body["choices"][0]["text"] == last_res.body["choices"][0]["text"]
        last_res = res


@pytest.mark.parametrize("n_slots", [1, 2])
def test_different_result_different_seed(n_slots: int):
    """(upstream on /completion; here on /v1/completions)"""
    global server
    server.n_slots = n_slots
    server.start()
    last_res = None
    for seed in range(4):
        res = server.make_request("POST", "/v1/completions", data={
            "prompt": "I believe the meaning of life is",
            "seed": seed,
            "temperature": 1.0,
            "max_tokens": 16,
            "cache_prompt": False,  # TODO: remove this once test_cache_vs_nocache_prompt is fixed
        })
        if last_res is not None:
            assert res.body["choices"][0]["text"] != last_res.body["choices"][0]["text"]
        last_res = res


def test_nocache_long_input_prompt():
    """(upstream on /completion; here on /v1/completions: a prompt longer than the context is a 400)"""
    global server
    server.start()
    res = server.make_request("POST", "/v1/completions", data={
        "prompt": "I believe the meaning of life is" * 256,  # upstream's *32 is over its 256-token slots
        "seed": 42,
        "temperature": 1.0,
        "cache_prompt": False,
    })
    assert res.status_code == 400


def test_n_probs():
    """(upstream: /completion's n_probs and completion_probabilities; here OpenAI's logprobs on /v1/completions)"""
    global server
    server.start()
    res = server.make_request("POST", "/v1/completions", data={
        "prompt": "I believe the meaning of life is",
        "logprobs": 10,
        "temperature": 0.0,
        "max_tokens": 5,
    })
    assert res.status_code == 200
    logprobs = res.body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == len(logprobs["top_logprobs"]) == 5
    for token, logprob, top in zip(logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"],
                                   strict=True):
        assert isinstance(token, str)
        assert logprob <= 0.0
        assert len(top) == 10
        for prob in top.values():
            assert prob <= 0.0
    # llama-server's entries, with their bytes, beside OpenAI's lists
    for tok in logprobs["content"]:
        assert "token" in tok and isinstance(tok["token"], str)
        assert "logprob" in tok and tok["logprob"] <= 0.0
        assert "bytes" in tok and isinstance(tok["bytes"], list)
        assert len(tok["top_logprobs"]) == 10


def test_n_probs_stream():
    """(upstream: /completion streamed with n_probs; here OpenAI's logprobs on /v1/completions streamed)"""
    global server
    server.start()
    res = server.make_stream_request("POST", "/v1/completions", data={
        "prompt": "I believe the meaning of life is",
        "logprobs": 10,
        "temperature": 0.0,
        "max_tokens": 5,
        "stream": True,
    })
    n_tokens = 0
    for data in res:
        choice = data["choices"][0]
        if choice["finish_reason"] is None and choice["text"]:
            assert choice["logprobs"] is not None
            for tok in choice["logprobs"]["content"]:
                n_tokens += 1
                assert "token" in tok and isinstance(tok["token"], str)
                assert "logprob" in tok and tok["logprob"] <= 0.0
                assert "bytes" in tok and isinstance(tok["bytes"], list)
                assert len(tok["top_logprobs"]) == 10
                for prob in tok["top_logprobs"]:
                    assert "token" in prob and isinstance(prob["token"], str)
                    assert "logprob" in prob and prob["logprob"] <= 0.0
                    assert "bytes" in prob and isinstance(prob["bytes"], list)
    assert n_tokens == 5
