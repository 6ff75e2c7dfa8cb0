"""The app's model pool (app/engine/pool.py) with real engine hosts: two quants of the tiny model, each in a host of
its own; switching between loaded ones starts none; the memory budget and the count unload the least recently used
idle model with a sentence, or refuse in words; idle models unload after the TTL; a dead host is forgotten alone."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from app.engine.pool import BudgetRefused, ModelPool, PoolLimits
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token

pytest.importorskip("llama_cpp")

HELLO = [Message("user", "Hello there!")]
SETTINGS = LoadSettings(n_ctx=512, gpu_layers=0)
MiB = 1 << 20


def reply(pool: ModelPool) -> str:
    events = list(pool.generate(HELLO, SamplingSettings(max_tokens=6, seed=1)))
    assert isinstance(events[-1], Done)
    return events[-1].text


class Unloads:
    """What the pool says it unloaded, and an event per unload to wait on (no sleeping)."""

    def __init__(self, pool: ModelPool) -> None:
        self.said: list[tuple[str, str]] = []
        self.event = threading.Event()
        pool.on_unload = self._on_unload

    def _on_unload(self, path: str, sentence: str) -> None:
        self.said.append((path, sentence))
        self.event.set()


@pytest.fixture
def two_models(tiny_models):
    return str(tiny_models.gguf_q8_0), str(tiny_models.gguf_q4_k_m)


def test_two_models_each_in_its_own_host_and_switching_back_starts_none(two_models):
    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    try:
        assert pool.load(a, SETTINGS, estimate_bytes=100 * MiB).model_path == a
        pid_a = pool.pid
        reply(pool)
        assert pool.load(b, SETTINGS, estimate_bytes=100 * MiB).model_path == b
        assert pool.pid != pid_a and pool.host_starts == 2
        reply(pool)
        assert pool.load(a, SETTINGS).model_path == a  # loaded already: made active, no new host
        assert pool.pid == pid_a and pool.host_starts == 2
        assert reply(pool) is not None
        assert [m.path for m in pool.models()] == [a, b]  # the most recently used first
        pool.load(a, LoadSettings(n_ctx=256, gpu_layers=0))  # other settings: a fresh host for it
        assert pool.host_starts == 3 and pool.loaded.n_ctx == 256 and len(pool.models()) == 2
    finally:
        pool.close()
    assert pool.models() == [] and pool.loaded is None


def test_the_budget_unloads_the_least_recently_used_idle_model_and_says_so(two_models, tiny_models):
    a, b = two_models
    c = str(tiny_models.gguf_f16)
    pool = ModelPool(PoolLimits(budget_bytes=250 * MiB, max_loaded=4))
    unloads = Unloads(pool)
    try:
        pool.load(a, SETTINGS, estimate_bytes=100 * MiB)
        pool.load(b, SETTINGS, estimate_bytes=100 * MiB)
        pool.load(a, SETTINGS)  # a is used again: b is now the least recently used
        pool.load(c, SETTINGS, estimate_bytes=100 * MiB)
        assert {m.path for m in pool.models()} == {a, c}
        [(path, sentence)] = unloads.said
        assert path == b
        assert sentence == ("tiny-llama-Q4_K_M.gguf unloaded to make room for tiny-llama-F16.gguf: it was the least "
                            "recently used idle model, and the memory budget of 0.24 GiB had no room for both.")
    finally:
        pool.close()


def test_the_count_limit_unloads_too(two_models):
    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=1))
    unloads = Unloads(pool)
    try:
        pool.load(a, SETTINGS)
        pool.load(b, SETTINGS)
        assert [m.path for m in pool.models()] == [b] and pool.host_starts == 2
        assert "the limit of 1 loaded model had no room for both" in unloads.said[0][1]
        held = pool.hold_loaded(b)  # b answers a request: nothing can unload
        with pytest.raises(BudgetRefused) as refused:
            pool.load(a, SETTINGS, force=True)  # not even “Load anyway” goes past the count
        pool.release(held)
        assert str(refused.value) == ("tiny-llama-Q8_0.gguf cannot load now: at most 1 model may be loaded at once "
                                      "(Settings), and each loaded model is answering a request. Try again when one "
                                      "is done.")
        assert not refused.value.forceable and refused.value.retry and pool.host_starts == 2
    finally:
        pool.close()


def test_a_model_answering_is_never_unloaded_for_room_the_refusal_says_why_and_load_anyway_goes_past(two_models):
    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=150 * MiB, max_loaded=4))
    unloads = Unloads(pool)
    try:
        pool.load(a, SETTINGS, estimate_bytes=100 * MiB)
        stream = pool.generate(HELLO, SamplingSettings(max_tokens=400, seed=1))
        assert isinstance(next(stream), Token)  # a reply is being written: a is busy
        with pytest.raises(BudgetRefused) as refused:
            pool.load(b, SETTINGS, estimate_bytes=100 * MiB)
        assert str(refused.value).startswith(
            "tiny-llama-Q4_K_M.gguf needs about 0.10 GiB (estimate), the memory budget is 0.15 GiB with 0.10 GiB of "
            "it held by tiny-llama-Q8_0.gguf (0.10 GiB). “Load anyway” loads it anyway: ")
        assert refused.value.check.over_bytes == 50 * MiB and refused.value.forceable and refused.value.retry
        assert unloads.said == [] and pool.loaded.model_path == a and pool.host_starts == 1
        pool.load(b, SETTINGS, estimate_bytes=100 * MiB, force=True)
        assert {m.path for m in pool.models()} == {a, b} and unloads.said == []
        pool.cancel()  # no request id: whichever runs on the active model (b's host runs none)
        stream.close()
    finally:
        pool.close()


def test_idle_models_unload_after_the_ttl(two_models):
    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=2, idle_ttl_s=0.3)).start()
    unloads = Unloads(pool)
    try:
        pool.load(a, SETTINGS)
        pid = pool.pid
        assert unloads.event.wait(60)
        assert unloads.said[0][0] == a and "unloaded after 0.3 s without a request" in unloads.said[0][1]
        assert pool.models() == [] and pool.loaded is None
        assert not _running(pid)
    finally:
        pool.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_dead_host_is_forgotten_and_the_other_model_stays(two_models):
    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    try:
        pool.load(a, SETTINGS)
        pid_a = pool.pid
        pool.load(b, SETTINGS)
        os.kill(pid_a, signal.SIGKILL)
        _wait_dead(pool, a)
        assert pool.forget_dead() == [a]
        assert [m.path for m in pool.models()] == [b] and reply(pool)
    finally:
        pool.close()


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_dead(pool: ModelPool, path: str) -> None:
    import psutil

    model = pool.get(path)
    try:
        psutil.Process(model.client.pid).wait(30)
    except psutil.NoSuchProcess:
        pass
    assert not model.client.alive


def test_a_generation_is_sent_at_once_and_holds_its_model_until_its_stream_ends(two_models):
    a, _ = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40))
    try:
        pool.load(a, SETTINGS)
        first = pool.generate(HELLO, SamplingSettings(max_tokens=4, seed=1), request_id="one")
        waits: list[int] = []
        second = pool.generate(HELLO, SamplingSettings(max_tokens=4, seed=1), request_id="two",
                               on_wait=waits.append)
        assert waits == [1]  # sent before the first was read, as EngineClient.generate does: it waits behind it
        assert pool.active.users == 2 and pool.active.idle_for(0) is None
        assert isinstance(list(first)[-1], Done)
        assert pool.active.users == 1
        second.close()  # closed early: the model is let go all the same
        assert pool.active.users == 0
    finally:
        pool.close()


def test_the_local_server_over_the_pool_answers_from_the_active_model_streamed_and_not(two_models):
    """In the app the server's primary engine is the Chat's pool: its queue asks the pool for each request's token
    window (events_every_s). The pool once lacked the argument and every request to the Chat's model was a 500."""
    import openai

    from app.server.app import create_app, model_id
    from app.server.thread import ServerThread

    first, second = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40))
    try:
        pool.load(first, SETTINGS)
        pool.load(second, SETTINGS)  # the active one: the server's primary
        server = ServerThread(create_app(pool, stream_every_s=0.040)).start()
        try:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
                ask = dict(model=model_id(second), messages=[{"role": "user", "content": "Hello there!"}],
                           max_tokens=40, temperature=0)
                whole = client.chat.completions.create(**ask)
                chunks = [c.choices[0].delta.content or "" for c in client.chat.completions.create(**ask, stream=True)
                          if c.choices]
        finally:
            server.stop()
    finally:
        pool.close()
    assert whole.model == model_id(second) and whole.usage.completion_tokens > 1
    assert "".join(chunks) == whole.choices[0].message.content
    assert len([c for c in chunks if c]) < whole.usage.completion_tokens  # 40 ms chunks, not one per token


def test_the_pool_never_probes_the_machine_itself(monkeypatch):
    """Free memory comes from whoever makes the pool (one machine probe per process, issue 29)."""
    import app.hardware

    monkeypatch.setattr(app.hardware, "detect", lambda *a, **k: pytest.fail("the pool probed the machine"))
    assert ModelPool().budget_bytes() is None
    assert ModelPool(free_memory=lambda: 300 * MiB).budget_bytes() == 300 * MiB
    assert ModelPool(PoolLimits(budget_bytes=MiB), free_memory=lambda: pytest.fail("asked")).budget_bytes() == MiB


def test_an_adopted_model_is_pinned_and_stays_its_makers(two_models):
    """quantdesk serve's --model: adopted by the pool as its active model, never unloaded by it (idle, room, Eject)
    and not closed with it."""
    from app.engine.client import EngineClient
    from app.errors import QuantDeskError

    a, b = two_models
    pool = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=2, idle_ttl_s=60))
    with EngineClient() as primary:
        primary.load(a, SETTINGS)
        try:
            pool.adopt(primary, 100 * MiB)
            held = pool.acquire(b, SETTINGS, estimate_bytes=100 * MiB)  # a request's load beside it
            pool.release(held)
            assert pool.loaded.model_path == a and [m.path for m in pool.models()] == [b, a]
            assert pool.unload_idle(now=time.monotonic() + 61) == [b]  # the pinned one stays
            with pytest.raises(QuantDeskError) as refused:
                pool.unload(a)
            assert "stays loaded" in str(refused.value)
            pool.acquire(b, SETTINGS)  # the count (2) is full with a and b; a is never the one to go
            with pytest.raises(BudgetRefused):
                pool.acquire(str(two_models[0]).replace("Q8_0", "F16"), SETTINGS)
        finally:
            pool.close()
        assert primary.alive and primary.loaded.model_path == a
