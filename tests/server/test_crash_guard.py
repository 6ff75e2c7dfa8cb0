"""The crash guard behind the local server: requests waiting on an engine that dies of a native crash are answered
once the revived engine answers, never a bare 503; an engine that crashed while idle comes back for the next request."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.datatypes import LoadSettings
from app.engine import guard
from app.engine.client import EngineClient
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import openai_on

pytestmark = [pytest.mark.real_model]
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def _ask(client, model: str) -> str:
    reply = client.chat.completions.create(model=model, messages=QUESTION, temperature=0, max_tokens=24)
    return reply.choices[0].message.content


@pytest.fixture
def crashing_engine(monkeypatch, smollm2_gguf):
    """SmolLM2 in an engine host that aborts at its first decode after the load (QUANTDESK_TEST_CRASH=reply)."""
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", "reply")
    with EngineClient() as client:
        client.load(smollm2_gguf, LoadSettings(n_ctx=1024))
        yield client


def test_requests_waiting_on_a_crashed_engine_are_all_answered(crashing_engine):
    server = ServerThread(create_app(crashing_engine)).start()
    try:
        client = openai_on(server)
        model = model_id(crashing_engine.loaded.model_path)
        dead = crashing_engine.pid
        gone = threading.Event()  # while it is revived the engine must look revivable, or a request gets a 503
        watching = True

        def watch() -> None:
            while watching:
                if not crashing_engine.alive and not crashing_engine.revivable:
                    gone.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(4) as pool:  # four clients at once: the first request kills the engine
                answers = list(pool.map(lambda _: _ask(client, model), range(4)))
        finally:
            watching = False
            watcher.join()
        assert all("Paris" in a for a in answers) and len(set(answers)) == 1
        assert not gone.is_set()
        assert crashing_engine.pid != dead and crashing_engine.alive
        assert "without llama.cpp's extra buffer types" in crashing_engine.loaded.notice
        assert [e.rung for e in guard.learned()] == [guard.NO_EXTRA_BUFFER_TYPES]
        assert _ask(client, model) == answers[0]  # and the next request is served by the same revived engine
    finally:
        server.stop()


def test_an_engine_that_crashed_while_idle_comes_back_for_the_next_request(smollm2_gguf, tmp_path):
    with EngineClient() as engine:
        engine.load(smollm2_gguf, LoadSettings(n_ctx=1024))
        server = ServerThread(create_app(engine)).start()
        try:
            client = openai_on(server)
            model = model_id(engine.loaded.model_path)
            before = _ask(client, model)
            # A save of our own runs after the reply's saved state, on its sequence (a count would not wait: it is
            # answered beside the generations, app/engine/host.py): once it is answered the engine is idle.
            engine.save_state(tmp_path / "barrier.state")
            os.kill(engine.pid, signal.SIGSEGV)  # as a crash in a native thread between requests would
            assert _wait_dead(engine), (engine.pid, engine.alive, engine.stderr_tail()[-8:])
            assert engine.revivable
            assert _ask(client, model) == before  # a 200 from the revived engine, not "the engine is not running"
            assert engine.alive and "crashed (SIGSEGV)" in engine.loaded.notice
        finally:
            server.stop()


def _wait_dead(engine: EngineClient, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while engine.alive and time.monotonic() < deadline:
        time.sleep(0.05)  # polled: a process's death sends no event this side can wait on
    return not engine.alive
