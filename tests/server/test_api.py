"""The API through the official ``openai`` client: models, chat (streamed and not), completions, errors."""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from app.server.app import STREAM_EVERY_S, model_id
from tests.server.conftest import N_CTX, openai_queue

HELLO = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there! How are you?"}]
GREEDY = {"temperature": 0.0, "max_tokens": 24}


@pytest.fixture
def oai(server) -> openai.OpenAI:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        yield client


def test_model_id_is_the_file_or_folder_name():
    assert model_id("/models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf") == "Qwen2.5-0.5B-Instruct-Q4_K_M"
    assert model_id("/models/mlx-4bit") == "mlx-4bit"


def test_models_lists_the_served_model_only(oai, engine, model_name):
    models = oai.models.list().data
    assert [m.id for m in models] == [model_name]
    # its template is its file's own, plain ChatML, which shows no tools: the generic format takes them
    assert models[0].meta == {"backend": "llama.cpp", "n_ctx": N_CTX, "loaded": True, "primary": True,
                              "memory_estimate_bytes": sum(engine.loaded.memory_bytes.values()),
                              "tool_format": "generic", "parallel": 1, "busy_sequences": 0, "queued": 0,
                              "cache": {"requests": 0, "hits": 0, "prompt_tokens": 0, "cached_tokens": 0},
                              "chat_template": {"name": "model", "title": "the model's own",
                                                "origin": "in the model file"}}
    assert oai.models.retrieve(model_name).id == model_name
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("another-model")


def test_chat_completion_has_text_usage_and_llama_cpp_timings(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=HELLO, **GREEDY)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and reply.id.startswith("chatcmpl-") and reply.model == model_name
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    usage = reply.usage
    assert 0 < usage.completion_tokens <= 24 and usage.prompt_tokens > 10
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    timings = reply.model_extra["timings"]
    assert timings["prompt_n"] == usage.prompt_tokens and timings["predicted_n"] == usage.completion_tokens
    assert timings["prompt_ms"] > 0 and timings["prompt_per_second"] > 0
    if usage.completion_tokens > 1:
        expected = (usage.completion_tokens - 1) / (timings["predicted_ms"] / 1000)
        assert timings["predicted_per_second"] == pytest.approx(expected)


def test_streamed_chat_matches_the_whole_reply_and_ends_with_usage(oai, model_name):
    whole = oai.chat.completions.create(model=model_name, messages=HELLO, **GREEDY)
    chunks = list(oai.chat.completions.create(model=model_name, messages=HELLO, stream=True,
                                              stream_options={"include_usage": True}, **GREEDY))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content  # greedy: the same tokens, whether streamed or not
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == whole.choices[0].finish_reason
    assert finals[0].model_extra["timings"]["predicted_n"] == whole.usage.completion_tokens
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_a_long_streamed_reply_comes_in_chunks_with_nothing_lost(serve, model_name):
    """Tokens go out in chunks at most every STREAM_EVERY_S (the engine host's window for the request), the first at
    once; with 0 every token has its own chunk. Text, finish reason and usage are the same either way. (The tiny model
    makes 400 tokens in well under a second here, so 40 ms chunks carry many of them each.)"""
    long = {"temperature": 0.0, "max_tokens": 400, "seed": 2}
    replies = {}
    for every in (STREAM_EVERY_S, 0):
        with openai.OpenAI(base_url=f"{serve(stream_every_s=every).url}/v1", api_key="unused", max_retries=0) as oai:
            whole = oai.chat.completions.create(model=model_name, messages=HELLO, **long)
            chunks = list(oai.chat.completions.create(model=model_name, messages=HELLO, stream=True,
                                                      stream_options={"include_usage": True}, **long))
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert "".join(pieces) == whole.choices[0].message.content
        assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason
        assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
        replies[every] = whole.usage.completion_tokens, len(pieces), whole.choices[0].message.content
    (tokens, chunked, text), (tokens_0, one_by_one, text_0) = replies[STREAM_EVERY_S], replies[0]
    assert (tokens, text) == (tokens_0, text_0)
    assert chunked < tokens / 4 and one_by_one > tokens / 2  # a few tokens print nothing (control tokens)


def test_max_tokens_ends_the_reply_with_finish_reason_length(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=HELLO, temperature=0.0, max_tokens=3)
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 3


# A raw completion: no chat template. (Greedy on the random tiny model, "Once upon a time" continues with
# control tokens only, which print as nothing; this prompt continues with printable text.)
RAW_PROMPT = "Local models run on"


def test_completions_streamed_and_not(oai, model_name):
    whole = oai.completions.create(model=model_name, prompt=RAW_PROMPT, temperature=0.0, max_tokens=16)
    assert whole.object == "text_completion" and whole.id.startswith("cmpl-")
    assert whole.choices[0].text and whole.choices[0].finish_reason in ("stop", "length")
    assert whole.model_extra["timings"]["predicted_n"] == whole.usage.completion_tokens > 0
    chunks = list(oai.completions.create(model=model_name, prompt=RAW_PROMPT, temperature=0.0,
                                         max_tokens=16, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_chat_and_completions_carry_the_llama_cpp_build_as_system_fingerprint(oai, engine, model_name):
    """As llama-server: "b<build>-<commit>" on whole responses and on every streamed chunk, the usage chunk too.
    The commit is the one the engine's own libggml-base reports (asked here in a child, as the engine host does)."""
    import subprocess
    import sys

    commit = subprocess.run(
        [sys.executable, "-c", "import ctypes, llama_cpp.llama_cpp as l; f = l._lib.ggml_commit; "
                               "f.restype = ctypes.c_char_p; print(f().decode())"],
        capture_output=True, text=True, check=True).stdout.strip().removesuffix("-dirty")
    build = engine.loaded.details["build"]
    assert re.fullmatch(r"b\d+-[0-9a-f]{6,}", build) and build.endswith(f"-{commit}")
    assert oai.chat.completions.create(model=model_name, messages=HELLO, **GREEDY).system_fingerprint == build
    chunks = list(oai.chat.completions.create(model=model_name, messages=HELLO, stream=True,
                                              stream_options={"include_usage": True}, **GREEDY))
    assert len(chunks) > 2 and {c.system_fingerprint for c in chunks} == {build}
    assert oai.completions.create(model=model_name, prompt=RAW_PROMPT, max_tokens=4).system_fingerprint == build
    chunks = list(oai.completions.create(model=model_name, prompt=RAW_PROMPT, max_tokens=4, stream=True))
    assert chunks and {c.system_fingerprint for c in chunks} == {build}


def test_the_model_may_be_left_out(server):
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": HELLO, "max_tokens": 2})
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1


def test_a_prompt_longer_than_the_context_is_a_400_and_the_engine_goes_on(oai, model_name, server):
    long = " ".join(["The quick brown fox jumps over the lazy dog."] * 200)
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model=model_name, messages=[{"role": "user", "content": long}], max_tokens=4)
    assert caught.value.code == "context_length_exceeded"
    assert "context" in caught.value.body["message"]
    assert oai.chat.completions.create(model=model_name, messages=HELLO, max_tokens=2).choices[0].message.content
    assert [o.stop_reason for o in openai_queue(server).outcomes()][0] == "error"


def test_unknown_routes_and_methods_answer_in_openai_error_shape(server):
    missing = httpx.get(f"{server.url}/v1/audio/speech")
    assert missing.status_code == 404 and set(missing.json()["error"]) == {"message", "type", "param", "code"}
    wrong = httpx.get(f"{server.url}/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


def test_health_reports_the_model_and_an_idle_queue(server, model_name):
    health = httpx.get(f"{server.url}/health").json()
    assert health | {"memory_estimate_bytes": 0} == {"status": "ok", "model": model_name, "busy": False, "pending": 0,
                                                     "loaded": [model_name], "memory_budget_bytes": None,
                                                     "memory_estimate_bytes": 0, "warnings": []}
    assert health["memory_estimate_bytes"] > 0
