"""``quantdesk serve`` and the app's server (the Server page's start over the app's one ModelPool) asked the same
things over real HTTP get the same answers: load on demand, evict for the count and for the budget, refuse with the
same sentence and status, idle unload; and Eject (``POST /models/unload``, ``quantdesk ps`` / ``eject``) stops a
model answering first and refuses the primary. Real engine hosts on the tiny model's quants (issue 29)."""

from __future__ import annotations

import contextlib
import io
import threading
import time

import httpx
import pytest

from app.cli import build_parser, main
from app.commands.server import serve_app
from app.engine.pool import ModelPool, PoolLimits
from app.datatypes import DEFAULT_PARALLEL
from app.server.router import ModelRouter, ServeSettings
from app.server.thread import ServerThread
from app.settings import context_length
from app.ui.server.server_page import ServeRequest, _start_server
from app.datatypes import LoadSettings
from tests.server.conftest import N_CTX
from tests.server.test_pool import library  # noqa: F401 - the fixture: three models in a fresh library

pytest.importorskip("llama_cpp")

IDLE_TTL_S = 600.0
# What both servers load a library model with: serve's and the Server page's defaults (their plans count each sequence).
SERVED = LoadSettings(n_ctx=context_length(None), parallel=DEFAULT_PARALLEL)
CHAT = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def sizes(engine, library) -> dict[str, int]:  # noqa: F811
    """The fit check's estimates as both servers plan them (the library's at the default context, the primary's
    at its own)."""
    router = ModelRouter(engine, ServeSettings(load_on_demand=True, load=SERVED))
    found = {name: router.plan(path).estimate_bytes for name, path in library.items()}
    found["primary"] = router.primary_estimate()
    router.close()
    assert found["tiny-llama-Q4_K_M"] == found["tiny-llama-Q4_K_M-copy"] < found["tiny-llama-F16"]
    return found


@contextlib.contextmanager
def both_servers(engine, tiny_models, sizes, *, budget: int, max_loaded: int):
    """(quantdesk serve's server, the app's server), each with its own primary host of the same model."""
    gib = repr(budget / (1 << 30))  # exact: a float times a power of two
    args = build_parser().parse_args(["serve", "--model", str(tiny_models.gguf_q8_0), "--load-on-demand",
                                      "--memory-budget", gib, "--max-loaded", str(max_loaded),
                                      "--idle-ttl", str(IDLE_TTL_S)])
    cli = ServerThread(serve_app(args, engine, None, SERVED)).start()
    pool = ModelPool(PoolLimits(max_loaded=max_loaded))  # Settings → Loaded models: the count
    pool.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=N_CTX), estimate_bytes=sizes["primary"])
    running = _start_server(pool, ServeRequest("127.0.0.1", 0, None, False, (), load_on_demand=True,
                                               memory_budget_gib=float(gib), idle_ttl_s=IDLE_TTL_S))
    try:
        yield cli, running.server
    finally:
        cli.stop()
        running.server.stop()
        pool.close()


def ask(server: ServerThread, model: str) -> tuple[int, str]:
    answer = httpx.post(f"{server.url}/v1/chat/completions", timeout=120,
                        json={"model": model, "messages": CHAT, "max_tokens": 2})
    body = answer.json()
    return answer.status_code, body["model"] if answer.status_code == 200 else body["error"]["message"]


def loaded(server: ServerThread) -> list[str]:
    return httpx.get(f"{server.url}/health", timeout=60).json()["loaded"]


def router_of(server: ServerThread) -> ModelRouter:
    return server.app.state.openai.pool


def test_quantdesk_serve_and_the_apps_server_load_evict_refuse_and_unload_the_same(engine, tiny_models, sizes):
    p, q4, f16 = sizes["primary"], sizes["tiny-llama-Q4_K_M"], sizes["tiny-llama-F16"]
    said: dict[str, list] = {}
    # Room for the primary and one Q4 quant, not for F16 (a little larger); no count limit in the way.
    with both_servers(engine, tiny_models, sizes, budget=p + q4 + 1000, max_loaded=4) as servers:
        for name, server in zip(("serve", "app"), servers, strict=True):
            said[name] = steps = []
            for model in ("tiny-llama-Q4_K_M", "tiny-llama-Q4_K_M-copy", "tiny-llama-F16", "tiny-llama-Q4_K_M"):
                steps.append((model, ask(server, model), loaded(server)))
            future = time.monotonic() + IDLE_TTL_S + 1
            steps.append(("idle", router_of(server).models.unload_idle(now=future), loaded(server)))
    assert said["serve"] == said["app"]
    (_, first, after_first), (_, copy, after_copy), (_, big, after_big), _, (_, idle, after_idle) = said["serve"]
    assert first == (200, "tiny-llama-Q4_K_M") and after_first == ["tiny-llama-Q8_0", "tiny-llama-Q4_K_M"]
    assert copy == (200, "tiny-llama-Q4_K_M-copy") and after_copy == ["tiny-llama-Q8_0", "tiny-llama-Q4_K_M-copy"]
    status, sentence = big
    assert status == 507 and sentence.startswith("tiny-llama-F16.gguf needs about")
    assert "held by tiny-llama-Q8_0.gguf" in sentence and "--force" in sentence and "swap" in sentence
    assert after_big == ["tiny-llama-Q8_0"]  # the idle copy went first, and still there was no room
    assert len(idle) == 1 and idle[0].endswith("tiny-llama-Q4_K_M.gguf") and after_idle == ["tiny-llama-Q8_0"]

    # The count: the primary and one more.
    with both_servers(engine, tiny_models, sizes, budget=64 << 30, max_loaded=2) as servers:
        for name, server in zip(("serve", "app"), servers, strict=True):
            said[name] = [(ask(server, model), loaded(server)) for model in ("tiny-llama-Q4_K_M", "tiny-llama-F16")]
    assert said["serve"] == said["app"] == [((200, "tiny-llama-Q4_K_M"), ["tiny-llama-Q8_0", "tiny-llama-Q4_K_M"]),
                                            ((200, "tiny-llama-F16"), ["tiny-llama-Q8_0", "tiny-llama-F16"])]
    assert f16 > q4


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_eject_over_http_and_its_cli_twin_stop_a_model_answering_and_refuse_the_primary(serve, library):  # noqa: F811
    server = serve(pool=ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX),
                                      memory_budget_bytes=64 << 30))
    assert ask(server, "tiny-llama-Q4_K_M")[0] == 200 and ask(server, "tiny-llama-F16")[0] == 200
    code, out, _ = cli("ps", "--server", server.url)
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == [
        "tiny-llama-Q8_0", "tiny-llama-F16", "tiny-llama-Q4_K_M"]
    assert out.splitlines()[0].endswith("primary")

    # A reply being written on F16 is stopped first, and ends as stopped; then its host closes.
    streaming, ended = threading.Event(), []

    def long_reply() -> None:
        body = {"model": "tiny-llama-F16", "messages": CHAT, "max_tokens": 400, "stream": True}
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=120) as answer:
            for line in answer.iter_lines():
                streaming.set()
                if '"finish_reason":"stop"' in line.replace(" ", ""):
                    ended.append(line)

    writer = threading.Thread(target=long_reply)
    writer.start()
    assert streaming.wait(60)
    f16 = next(o for o in router_of(server).loaded_engines() if o.served == "tiny-llama-F16")
    answer = httpx.post(f"{server.url}/models/unload", json={"model": "tiny-llama-F16"}, timeout=60)
    writer.join(60)
    assert answer.status_code == 200 and answer.json()["success"] is True
    assert ended and not f16.client.alive and not writer.is_alive()

    code, _, err = cli("eject", "tiny-llama-Q4_K_M", "--server", server.url)
    assert code == 0 and "tiny-llama-Q4_K_M unloaded" in err
    assert loaded(server) == ["tiny-llama-Q8_0"]

    refused = httpx.post(f"{server.url}/v1/models/unload", json={"model": "tiny-llama-Q8_0"}, timeout=60)
    assert refused.status_code == 409 and "started with (--model)" in refused.json()["error"]["message"]
    code, _, err = cli("eject", "tiny-llama-Q8_0", "--server", server.url)
    assert code != 0 and "stays loaded" in err
    missing = httpx.post(f"{server.url}/models/unload", json={"model": "tiny-llama-F16"}, timeout=60)
    assert missing.status_code == 404 and "is not loaded here" in missing.json()["error"]["message"]
