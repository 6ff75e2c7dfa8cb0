"""The engine host on its own: a real host process, spoken to over its pipes line by line, as the client does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine import protocol
from app.engine.protocol import CancelRequest, GenerateRequest, LoadRequest, ShutdownRequest
from app.datatypes import Done, ErrorEvent, LoadSettings, Loaded, Message, SamplingSettings, Token

ROOT = Path(__file__).resolve().parents[2]
HELLO = [Message("system", "You are terse."), Message("user", "Hello there! How are you?")]
LONG = SamplingSettings(max_tokens=100_000, seed=1)  # ends only when cancelled (or the context is full)


class HostProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "app.engine.host"], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})

    def send(self, request) -> None:
        self.proc.stdin.write(protocol.encode(request))
        self.proc.stdin.flush()

    def event(self):
        line = self.proc.stdout.readline()
        assert line, "the host ended its event stream"
        return protocol.decode_event(line)

    def until(self, final: type, request_id: str | None = None) -> list:
        """Events up to the first ``final`` one (of ``request_id``, if given)."""
        events = []
        while True:
            events.append(self.event())
            if isinstance(events[-1], final) and request_id in (None, getattr(events[-1], "request_id", None)):
                return events


@pytest.fixture
def host(tiny_models):
    host = HostProcess()
    try:
        hello = host.event()
        assert isinstance(hello, protocol.Hello) and hello.protocol == protocol.PROTOCOL_VERSION
        assert hello.pid == host.proc.pid
        host.send(LoadRequest("l1", "llama.cpp", str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=2048)))
        assert isinstance(host.until(Loaded)[-1], Loaded)
        yield host
        host.send(ShutdownRequest())
        assert host.proc.wait(30) == 0
    finally:
        if host.proc.poll() is None:
            host.proc.kill()
        host.proc.wait()
        host.proc.stdin.close()
        host.proc.stdout.close()


def test_cancels_for_requests_the_host_has_not_started_are_remembered_and_honoured(host):
    # "early" is cancelled before the host has even read its request; "queued" waits behind "running".
    host.send(CancelRequest("early"))
    host.send(GenerateRequest("running", HELLO, LONG))
    host.send(GenerateRequest("queued", HELLO, LONG))
    host.send(GenerateRequest("early", HELLO, LONG))
    first = host.event()
    assert isinstance(first, Token) and first.request_id == "running"
    host.send(CancelRequest("queued"))  # still waiting: the host must not start it later
    host.send(CancelRequest("running"))
    events = host.until(Done, "early")
    done = {e.request_id: e for e in events if isinstance(e, Done)}
    assert [e.request_id for e in events if isinstance(e, Done)] == ["running", "queued", "early"]
    assert done["running"].stats.stop_reason == "cancelled" and done["running"].stats.generated_tokens > 0
    for skipped in ("queued", "early"):  # the model never saw them
        assert done[skipped].stats.stop_reason == "cancelled"
        assert done[skipped].stats.prompt_tokens == 0 and done[skipped].stats.generated_tokens == 0
        assert not [e for e in events if isinstance(e, Token) and e.request_id == skipped]
    # Served in order, and each request ended by exactly one final event: the next one runs in full.
    host.send(GenerateRequest("after", HELLO, SamplingSettings(max_tokens=5)))
    assert host.until(Done, "after")[-1].stats.generated_tokens == 5


def test_an_unreadable_or_unknown_request_is_answered_with_an_error_and_the_host_lives(host):
    host.proc.stdin.write(b"not json\n" + json.dumps({"op": "dance", "id": "x"}).encode() + b"\n")
    host.proc.stdin.flush()
    for expected in ("unreadable request b'not json", "unknown request b'{\"op\": \"dance\""):
        error = host.event()
        assert isinstance(error, ErrorEvent) and error.kind == "request" and expected in error.message
    host.send(GenerateRequest("ok", "Once upon a time", SamplingSettings(max_tokens=3)))
    assert host.until(Done)[-1].stats.generated_tokens == 3
