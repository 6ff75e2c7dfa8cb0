"""The server over a model that decodes several requests together (issue 38): concurrent streaming clients stream at
the same time and each gets its reply, a client that disconnects frees its sequence while the others finish, and
/v1/models (``quantdesk ps``) says the sequences, the busy ones and the queue."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import httpx
import pytest

from app import paths
from app.datatypes import LoadSettings
from app.engine import states
from app.engine.client import EngineClient
from app.server.app import model_id
from tests.engine.test_batching import NEAR_TIE
from tests.server.conftest import openai_queue

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")


@pytest.fixture(scope="module")
def batching(tiny_models):
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=1024, parallel=3, threads=2))
        yield client


def _body(name: str, prompt: str, max_tokens: int) -> dict:
    return {"model": name, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "logprobs": True, "top_logprobs": 5}


def assert_same_reply(alone: list[dict], batched: list[dict], key: str, cut: bool = False) -> None:
    """The OpenAI logprobs entries of a reply batched are those alone, up to where batched took a token alone rated
    less than NEAR_TIE below its own choice (tests/engine/test_batching.py says why), or where a client that left cut
    it (``cut``)."""
    for k, (a, b) in enumerate(zip(alone, batched, strict=False)):
        if a["token"] != b["token"]:
            rated = {t["token"]: t["logprob"] for t in a["top_logprobs"]}
            assert b["token"] in rated, f"{key}: token {k} is {b['token']!r}, not among alone's likeliest"
            gap = a["logprob"] - rated[b["token"]]
            assert gap < NEAR_TIE, f"{key}: token {k} is {b['token']!r}, alone {a['token']!r} was ahead by {gap:.3f}"
            return
    assert len(batched) == len(alone) or (cut and len(batched) < len(alone)), key


class _Streams:
    def __init__(self) -> None:
        self.order = itertools.count()
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.text: dict[str, str] = {}
        self.entries: dict[str, list[dict]] = {}
        self.finish: dict[str, str | None] = {}

    def read(self, url: str, key: str, body: dict, stop_after: int | None = None,
             on_chunk: Callable[[], None] | None = None) -> None:
        text, chunks, entries = [], 0, self.entries.setdefault(key, [])
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as reply:
            assert reply.status_code == 200
            for line in reply.iter_lines():
                if not line.startswith("data: ") or "[DONE]" in line:
                    continue
                chunk = json.loads(line[6:])
                if not chunk.get("choices"):
                    continue
                tick = next(self.order)
                self.first.setdefault(key, tick)
                self.last[key] = tick
                choice = chunk["choices"][0]
                text.append(choice["delta"].get("content") or "")
                entries.extend((choice.get("logprobs") or {}).get("content") or [])
                self.finish[key] = choice.get("finish_reason") or self.finish.get(key)
                chunks += 1
                if on_chunk is not None:
                    on_chunk()
                if stop_after is not None and chunks >= stop_after:
                    break  # the client goes away mid-stream
        self.text[key] = "".join(text)


def _whole(url: str, name: str, prompt: str, max_tokens: int) -> list[dict]:
    """A reply whole: its tokens' logprobs entries."""
    body = {**_body(name, prompt, max_tokens), "stream": False}
    choice = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).json()["choices"][0]
    assert "".join(e["token"] for e in choice["logprobs"]["content"]) == choice["message"]["content"]
    return choice["logprobs"]["content"]


def test_concurrent_clients_stream_together_and_a_disconnect_frees_its_sequence(serve, batching):
    server = serve(batching, stream_every_s=0)
    name = model_id(batching.loaded.model_path)
    prompts = {"a": "Tell me about foxes.", "b": "Tell me about cats.", "c": "Tell me about owls."}
    alone = {key: _whole(server.url, name, prompt, 120) for key, prompt in prompts.items()}
    streams = _Streams()
    threads = [threading.Thread(target=streams.read, args=(server.url, key, _body(name, prompt, 120),
                                                            5 if key == "b" else None))
               for key, prompt in prompts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert_same_reply(alone["a"], streams.entries["a"], "a")
    assert_same_reply(alone["c"], streams.entries["c"], "c")
    assert_same_reply(alone["b"], streams.entries["b"], "b", cut=True)
    assert streams.finish["a"] == streams.finish["c"] == "length"
    assert streams.first["a"] < streams.last["c"] and streams.first["c"] < streams.last["a"], \
        "the streams came one after the other"
    engine_queue = openai_queue(server)
    assert engine_queue.wait_finished(3 + 3, timeout=60)
    outcomes = {o.stop_reason for o in engine_queue.outcomes()[-3:]}
    assert "cancelled" in outcomes  # b's generation was stopped when its client left, not run to its end
    assert_same_reply(alone["b"], _whole(server.url, name, prompts["b"], 120), "b again")  # its sequence serves on


def test_the_models_list_says_the_sequences_the_busy_ones_and_the_queue(serve, batching):
    server = serve(batching, stream_every_s=0)
    name = model_id(batching.loaded.model_path)
    card = next(c for c in httpx.get(f"{server.url}/v1/models").json()["data"] if c["id"] == name)
    assert card["meta"]["parallel"] == 3 and card["meta"]["busy_sequences"] == 0 and card["meta"]["queued"] == 0
    streams = _Streams()
    threads = [threading.Thread(target=streams.read, args=(server.url, str(i), _body(name, f"Story {i}", 250)))
               for i in range(4)]
    for thread in threads:
        thread.start()
    seen = []
    while any(thread.is_alive() for thread in threads):  # four asked of three sequences: one waits in the queue
        meta = next(c for c in httpx.get(f"{server.url}/v1/models").json()["data"] if c["id"] == name)["meta"]
        seen.append((meta["busy_sequences"], meta["queued"]))
        if seen[-1] == (3, 1):
            break
    for thread in threads:
        thread.join(120)
    assert (3, 1) in seen, seen
    assert all(streams.finish[str(i)] == "length" for i in range(4)), streams.finish  # 3 x 250 tokens fit 1024


def test_a_returning_conversation_is_served_from_its_cached_prefix_while_others_stream(serve, batching, monkeypatch):
    """A client's second turn goes to the sequence that holds its first (llama-server's slot similarity), though two
    other clients took sequences in between and still stream: its usage says the first turn's prompt and reply
    were not read again. Those clients' prompts share only the template's opening with it: they take other
    sequences rather than the one that holds a conversation. The saved states are off here (a state restored into
    another sequence would serve the prefix too, and hide a sequence taken from it)."""
    monkeypatch.setattr(states, "_default", states.StateCache(paths.cache_dir() / "states", limit_bytes=lambda: 0))
    server = serve(batching, stream_every_s=0)
    name = model_id(batching.loaded.model_path)
    first = [{"role": "user", "content": "Tell me about rivers and where they run."}]
    body = {"model": name, "messages": first, "max_tokens": 30, "temperature": 0}
    turn = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
    reply = turn["choices"][0]["message"]["content"]
    streams = _Streams()
    started = {key: threading.Event() for key in ("b", "c")}
    others = {"b": "Write a poem on the sea.", "c": "List some fruits."}

    def read(key: str) -> None:
        streams.read(server.url, key, {**_body(name, others[key], 400), "logprobs": False, "top_logprobs": None},
                     on_chunk=started[key].set)

    threads = [threading.Thread(target=read, args=(key,)) for key in others]
    for thread in threads:
        thread.start()
    for event in started.values():
        assert event.wait(60), "another client's stream did not start"
    second = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "And lakes?"}]
    again = httpx.post(f"{server.url}/v1/chat/completions", json={**body, "messages": second, "max_tokens": 5},
                       timeout=120).json()
    active = [thread.is_alive() for thread in threads]
    for thread in threads:
        thread.join(120)
    assert all(active), "the other clients' streams ended before the conversation came back"
    cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= turn["usage"]["prompt_tokens"], (cached, turn["usage"])
    assert cached < again["usage"]["prompt_tokens"]
    assert streams.finish["b"] == streams.finish["c"] == "length"


def _complete(url: str, name: str, prompt: str) -> dict:
    body = {"model": name, "prompt": prompt, "max_tokens": 16, "temperature": 0, "logprobs": 5}
    return httpx.post(f"{url}/v1/completions", json=body, timeout=120).json()


def test_a_client_whose_sequence_was_taken_is_served_from_its_saved_state(serve, tiny_models, monkeypatch):
    """--parallel 2 and three clients taking turns with raw prompts (/v1/completions: no conversation of the server's
    to name a saved state by): the third takes the first's sequence, whose state is saved first (the saved-state
    cache's evicted sequences); the first comes back, its usage says only its new words were read, and its reply is
    the one a fresh read of its whole prompt gives."""
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=1024, parallel=2, threads=2))
        server = serve(client, stream_every_s=0)
        name = model_id(client.loaded.model_path)
        prompts = {key: f"The {animal} walked by the river and told its story to the stones." * 6
                   for key, animal in (("a", "fox"), ("b", "owl"), ("c", "heron"))}
        first = {}
        for key in prompts:
            first[key] = _complete(server.url, name, prompts[key])
            prompts[key] += first[key]["choices"][0]["text"] + " And then"
        back = _complete(server.url, name, prompts["a"])
        cached = back["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert first["a"]["usage"]["prompt_tokens"] - 2 <= cached < back["usage"]["prompt_tokens"], back["usage"]

        for key in ("b", "c"):  # both sequences hold the others' prompts again
            _complete(server.url, name, prompts[key])
        monkeypatch.setattr(states, "_default", states.StateCache(paths.cache_dir() / "states", limit_bytes=lambda: 0))
        fresh = _complete(server.url, name, prompts["a"])  # states off: read whole
    assert fresh["usage"]["prompt_tokens_details"]["cached_tokens"] < 20
    assert_same_reply(fresh["choices"][0]["logprobs"]["content"], back["choices"][0]["logprobs"]["content"], "a")
