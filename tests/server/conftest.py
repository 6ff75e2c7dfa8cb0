"""A real engine host on the tiny model, and real servers over it on 127.0.0.1 (ephemeral ports)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from app.engine.client import EngineClient
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import LoadSettings

N_CTX = 512


def loaded_engine(model_path, n_ctx: int = N_CTX):
    """An engine host with ``model_path`` loaded, for a module-scoped fixture to yield from."""
    with EngineClient() as client:
        client.load(model_path, LoadSettings(n_ctx=n_ctx))
        yield client


_openai_clients: list = []


def openai_on(server, api_key: str = "unused"):
    """The official openai client on ``server`` (a ServerThread), closed after the test."""
    import openai

    _openai_clients.append(openai.OpenAI(base_url=f"{server.url}/v1", api_key=api_key, max_retries=0))
    return _openai_clients[-1]


@pytest.fixture(autouse=True)
def _close_openai_clients():
    """Each test's clients are closed with it: an open one's sockets would be collected in a later test."""
    yield
    while _openai_clients:
        _openai_clients.pop().close()


def openai_client(engine, **options):
    """A server over ``engine`` and the official openai client on it, with the served model's id; for a fixture to
    yield from."""
    import openai

    server = ServerThread(create_app(engine, **options)).start()
    try:
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
            yield client, model_id(engine.loaded.model_path)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def engine(tiny_models):
    """One engine host for a test module: servers come and go over it, as over the GUI's engine."""
    with EngineClient() as client:
        client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=N_CTX))
        yield client


@pytest.fixture
def model_name(engine) -> str:
    return model_id(engine.loaded.model_path)


@pytest.fixture
def serve(engine):
    """``serve(client=None, **create_app options)`` -> a started ServerThread over ``client`` (the module's
    engine by default); stopped after the test."""
    started: list[ServerThread] = []

    def start(client=None, **options) -> ServerThread:
        server = ServerThread(create_app(client or engine, **options)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    assert engine.alive, "a server must never take the engine host down with it"


@pytest.fixture
def server(serve) -> ServerThread:
    return serve()


def openai_queue(server: ServerThread):
    """The EngineQueue behind a running server (to see what the engine was asked to do)."""
    return server.app.state.openai.queue


async def wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait on a condition another thread or task makes true (polled: the server offers no event for it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


class GatedEngine:
    """The real engine behind a gate the test opens: generations wait at the gate, so requests can be held
    in the queue for as long as a test needs, without guessing how fast the engine is."""

    def __init__(self, engine: EngineClient) -> None:
        self._engine = engine
        self.gate = threading.Event()

    def __getattr__(self, name):
        return getattr(self._engine, name)  # loaded, alive, pid, cancel: the real engine's

    def generate(self, *args, **kwargs):
        if not self.gate.wait(120):
            raise AssertionError("the test never opened the gate")
        yield from self._engine.generate(*args, **kwargs)


@pytest.fixture
def gated(engine):
    gated = GatedEngine(engine)
    yield gated
    gated.gate.set()  # never leave a worker waiting
