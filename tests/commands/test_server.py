"""``quantdesk serve`` as a user runs it, and a server whose engine dies under it."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import openai
import pytest

from app.engine.client import EngineClient
from app.datatypes import LoadSettings
from app.server import running
from tests.server.conftest import openai_queue

ROOT = Path(__file__).resolve().parents[2]
KEY = "serve-cli-key-0123456789"


def _lines(stream, sink: queue.Queue) -> None:
    for line in stream:
        sink.put(line.rstrip("\n"))
    sink.put(None)


def _serve(model, *extra: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, queue.Queue]:
    """``quantdesk serve --model MODEL --port 0 --ctx 512 EXTRA...`` with its key; its stderr lines in a queue."""
    env = {**os.environ, "QUANTDESK_API_KEY": KEY, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--model", str(model), "--port", "0", "--ctx",
                             "512", *extra], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    return proc, lines


@contextlib.contextmanager
def _serving(model, *extra: str):
    """``_serve`` as a context: serve is killed if a test left it running, and its pipe closed."""
    proc, lines = _serve(model, *extra)
    try:
        yield proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def _listening(lines: queue.Queue) -> tuple[str, list[str]]:
    """Read serve's stderr up to "serving on URL": the URL and every line before it."""
    seen = []
    while (line := lines.get(timeout=240)) is not None:
        seen.append(line)
        if match := re.search(r"serving on (http://127\.0\.0\.1:\d+)/v1", line):
            return match.group(1), seen
    pytest.fail(f"serve ended before listening: {seen}")


def _ctrl_c(proc: subprocess.Popen, lines: queue.Queue) -> list[str]:
    """Stop serve as a user does; it must exit cleanly. Its last lines, once the reader is done with the pipe."""
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    rest = []
    while (line := lines.get(timeout=30)) is not None:
        rest.append(line)
    return rest


def test_serve_listens_on_loopback_requires_its_key_and_stops_on_ctrl_c(tiny_models):
    with _serving(tiny_models.gguf_q8_0) as (proc, lines):
        url, seen = _listening(lines)
        assert seen[-1].endswith("(an API key is required); Ctrl-C stops")
        assert any("model id 'tiny-llama-Q8_0'" in line for line in seen)
        assert any(line.startswith("4 requests decode together (the default; --parallel N), each may use the whole "
                                   "context of 512 tokens") for line in seen), seen

        assert httpx.get(f"{url}/v1/models").status_code == 401
        # where it listens is said for `quantdesk launch` (app/server/running.py), the key only as wanted
        assert [(r.url, r.pid, r.api_key_required, r.source) for r in running.running()] == [(url, proc.pid, True,
                                                                                             "serve")]
        with openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120) as client:
            reply = client.chat.completions.create(model="tiny-llama-Q8_0", max_tokens=4,
                                                   messages=[{"role": "user", "content": "Hi"}])
            assert reply.usage.completion_tokens >= 1 or reply.choices[0].finish_reason == "stop"

        rest = _ctrl_c(proc, lines)
        assert "server stopped" in rest and not [line for line in rest if "Traceback" in line]
        assert running.running() == [] and not list(running.records_dir().iterdir())


def test_a_dead_engine_becomes_503_and_the_server_lives_on(serve, tiny_models):
    with EngineClient() as doomed:
        doomed.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
        server = serve(doomed)
        url = f"{server.url}/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        assert httpx.post(url, json=body).status_code == 200
        os.kill(doomed.pid, signal.SIGKILL)  # dead or dying: either way the next request must learn it
        reply = httpx.post(url, json=body)
        assert reply.status_code == 503
        assert reply.json()["error"]["code"] == "engine_crashed" and "engine" in reply.json()["error"]["message"]
        health = httpx.get(f"{server.url}/health")
        assert health.status_code == 503 and health.json()["status"] == "engine_down"
        assert httpx.get(f"{server.url}/v1/models").status_code == 200  # the server itself still answers
        server.stop()


def test_a_stream_whose_engine_dies_ends_with_an_error_event(serve, tiny_models):
    with EngineClient() as doomed:
        doomed.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
        server = serve(doomed, stream_every_s=0)  # every token its own chunk: the engine dies mid-stream
        body = {"messages": [{"role": "system", "content": "You are terse."},
                             {"role": "user", "content": "Hello there! How are you?"}],
                "seed": 2, "max_tokens": 400, "stream": True}
        events = []
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=120) as reply:
            assert reply.status_code == 200
            for line in reply.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
                    if len(events) == 3:
                        os.kill(doomed.pid, signal.SIGKILL)
        assert '"engine_crashed"' in events[-1] and events[-1].startswith('{"error"')
        assert "[DONE]" not in events
        engine_queue = openai_queue(server)
        assert engine_queue.wait_finished(1, timeout=60)
        assert engine_queue.outcomes()[-1].stop_reason == "error"
        server.stop()


def test_serve_keeps_moe_experts_in_ram_when_asked(tiny_moe):
    with _serving(tiny_moe.gguf_q8_0, "--cpu-moe", "all") as (proc, lines):
        seen = []
        while (line := lines.get(timeout=240)) is not None and "serving on" not in line:
            seen.append(line)
        assert line is not None, seen
        assert any("experts of 4 layers in RAM" in s and "model id" in s for s in seen), seen
        _ctrl_c(proc, lines)


def test_serve_loads_library_models_on_request_within_its_budget(tiny_models, tmp_path, monkeypatch):
    from app.hub.library import Library

    models = tmp_path / "models"
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(models))
    Library().import_path(tiny_models.gguf_f16, copy=False)
    with _serving(tiny_models.gguf_q8_0, "--load-on-demand", "--memory-budget", "64", "--idle-ttl", "30") as (proc, lines):
        url, seen = _listening(lines)
        assert "library models load on request (memory budget 64.0 GiB (as set); idle ones unload after 30 s)" \
            in seen
        with openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120) as client:
            reply = client.chat.completions.create(model="tiny-llama-F16", max_tokens=3,
                                                   messages=[{"role": "user", "content": "Hi"}])
            assert reply.model == "tiny-llama-F16"
            loaded = {m.id: m.meta["loaded"] for m in client.models.list().data}
        assert loaded == {"tiny-llama-Q8_0": True, "tiny-llama-F16": True}
        _ctrl_c(proc, lines)


def test_serve_refuses_flags_out_of_range_before_loading(tiny_models):
    for flags, words in ((("--memory-budget", "0"), "--memory-budget must be more than 0 GiB"),
                         (("--idle-ttl", "-1"), "--idle-ttl must be more than 0 seconds"),
                         (("--stream-every-ms", "-5"), "--stream-every-ms must be from 0 to 1000"),
                         (("--parallel", "0"), "--parallel must be from 1 to 64")):
        proc, lines = _serve(tiny_models.gguf_q8_0, *flags)
        assert proc.wait(timeout=60) != 0
        said = []
        while (line := lines.get(timeout=30)) is not None:
            said.append(line)
        proc.stderr.close()
        assert any(words in line for line in said), said


def test_serve_checks_its_model_against_the_machine_as_chat_does(tiny_models, tmp_path):
    from app.hardware.profile import CpuInfo, HardwareProfile

    small = tmp_path / "small.json"
    small.write_text(HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=16 << 20,
                                     ram_available_bytes=16 << 20).to_json())
    with _serving(tiny_models.gguf_q8_0, "--hardware", str(small)) as (proc, lines):
        assert proc.wait(timeout=60) != 0
        said = " ".join(iter(lambda: lines.get(timeout=30), None))
    assert "tiny-llama-Q8_0.gguf does not fit this machine" in said and "--force loads it anyway" in said
    with _serving(tiny_models.gguf_q8_0, "--hardware", str(small), "--force") as (proc, lines):
        url, seen = _listening(lines)
        assert any(line.startswith("Loading tiny-llama-Q8_0.gguf anyway, though it does not fit") for line in seen)
        assert httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {KEY}"}).json()["status"] == "ok"
        _ctrl_c(proc, lines)


def test_serve_defaults_are_the_servers_own():
    """app/commands/server.py keeps copies so that `quantdesk --help` need not import the server."""
    from app.commands import server as command
    from app.server.app import STREAM_EVERY_S
    from app.server.router import DEFAULT_IDLE_TTL_S

    assert (command.STREAM_EVERY_S, command.DEFAULT_IDLE_TTL_S) == (STREAM_EVERY_S, DEFAULT_IDLE_TTL_S)


def test_serve_drafts_for_its_model_and_reports_the_guesses(tiny_draft_pair):
    with _serving(tiny_draft_pair.target, "--draft", str(tiny_draft_pair.draft), "--draft-tokens", "4",
                  "--threads", "2") as (proc, lines):
        url, seen = _listening(lines)
        assert any(f"draft {tiny_draft_pair.draft.name}, 4 tokens a check" in line for line in seen), seen
        body = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 30, "temperature": 0}
        reply = httpx.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                           timeout=120).json()
        timings = reply["timings"]
        assert timings["draft_n"] > 0 and 0 <= timings["draft_n_accepted"] <= timings["draft_n"]
        _ctrl_c(proc, lines)


def test_serve_decodes_parallel_requests_together_and_ps_says_how_many_run_and_wait(tiny_models):
    with _serving(tiny_models.gguf_q8_0, "--parallel", "2", "--threads", "2") as (proc, lines):
        url, seen = _listening(lines)
        assert any(line.startswith("2 requests decode together, each may use the whole context of 512 tokens")
                   for line in seen), seen
        ps = subprocess.run([sys.executable, "-m", "app", "ps", "--server", url, "--api-key", KEY], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        assert ps.returncode == 0 and ps.stdout.startswith("tiny-llama-Q8_0\t")
        assert "\t0/2 busy, 0 queued\t" in ps.stdout, ps.stdout
        assert "cache hits" not in ps.stdout  # no request answered yet
        body = {"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 5, "temperature": 0}
        for _ in range(2):  # the same prompt twice: the second is read from the cache
            httpx.post(f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                       timeout=120).raise_for_status()
        # without --server: the running servers' records say where it listens
        ps = subprocess.run([sys.executable, "-m", "app", "ps", "--api-key", KEY], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        assert ps.returncode == 0 and ps.stdout.startswith("tiny-llama-Q8_0\t"), (ps.stdout, ps.stderr)
        assert "\tcache hits 1/2 requests (" in ps.stdout, ps.stdout
        _ctrl_c(proc, lines)


def test_ps_says_why_a_model_asked_for_several_answers_one_at_a_time():
    """`quantdesk ps` words: an MLX model decoding together says its busy sequences like llama.cpp's; one that runs
    alone though more were asked (a draft) says the engine's reason; ExLlama says it queues."""
    from app.commands.server import _ps_line

    def card(backend, parallel, **more):
        return {"id": "m", "meta": {"backend": backend, "n_ctx": 512, "parallel": parallel, "busy_sequences": 1,
                                    "queued": 2, **more}}

    assert _ps_line(card("mlx", 4)) == "m\tmlx\tcontext 512\t1/4 busy, 2 queued"
    note = "one reply at a time: speculative decoding verifies one sequence's guesses"
    assert _ps_line(card("mlx", 1, parallel_note=note)) == (
        f"m\tmlx\tcontext 512\t1/1 busy, 2 queued ({note}, the rest wait in order)")
    assert _ps_line(card("exllamav2", 1)).endswith("(exllamav2: one request at a time, the rest wait in order)")
    assert _ps_line(card("llama.cpp", 1)) == "m\tllama.cpp\tcontext 512\t1/1 busy, 2 queued"


def test_serve_says_how_an_mlx_model_answers_parallel_requests(tiny_models, tiny_draft_pair):
    """An MLX model decodes --parallel requests together (mlx-lm's BatchGenerator), said on start and by ps; with a
    draft model it answers one at a time and says why, on start and in ps."""
    def ps_line(url: str) -> str:
        ps = subprocess.run([sys.executable, "-m", "app", "ps", "--server", url, "--api-key", KEY], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
        assert ps.returncode == 0, ps.stderr
        return ps.stdout

    with _serving(tiny_models.mlx_f16, "--parallel", "2") as (proc, lines):
        url, seen = _listening(lines)
        assert any(line.startswith("2 requests decode together, each may use the whole context of 512 tokens in a "
                                   "cache of its own") for line in seen), seen
        assert "\tmlx\t" in ps_line(url) and "\t0/2 busy, 0 queued" in ps_line(url)
        _ctrl_c(proc, lines)
    with _serving(tiny_draft_pair.mlx_target, "--parallel", "2", "--draft", str(tiny_draft_pair.mlx_draft)) as (
            proc, lines):
        url, seen = _listening(lines)
        why = "one reply at a time: speculative decoding verifies one sequence's guesses"
        assert any(line.startswith(f"{why}; more wait in the queue") for line in seen), seen
        assert f"\t0/1 busy, 0 queued ({why}, the rest wait in order)" in ps_line(url)
        _ctrl_c(proc, lines)
