"""The engine host: the child process that owns one model.

It imports exactly one backend (chosen by the first ``load``), keeps the model on this process's main
thread for its whole life (MLX requires it; llama.cpp contexts are not shareable), and answers one
request at a time. A reader thread takes requests from stdin so that ``cancel`` is seen while a
generation runs: it only sets a flag that the generation loop checks between tokens.

stdout is the event channel. Native libraries print to fd 1 too, so the channel is moved to a
private duplicate of fd 1 and fd 1 is pointed at stderr before any backend is imported.

Run as ``python -m app.engine.host`` (or, frozen, ``quantdesk --engine-host``).
"""

from __future__ import annotations

import faulthandler
import json
import os
import queue
import sys
import threading
import traceback
from typing import Any, BinaryIO

from app.engine import protocol
from backends.base import Backend, ErrorEvent, GenerationError, LoadSettings, Message, Progress, SamplingSettings


class Host:
    def __init__(self, channel: BinaryIO) -> None:
        self._channel = channel
        self._requests: queue.Queue[dict[str, Any]] = queue.Queue()
        self._cancelled = threading.Event()
        self._current_id: str | None = None
        self._backend: Backend | None = None

    # --- I/O ---

    def send(self, event: Any) -> None:
        self._channel.write(protocol.encode(event))
        self._channel.flush()

    def read_requests(self, stream: BinaryIO) -> None:
        """Reader thread: cancel acts at once, everything else queues for the model thread."""
        for line in stream:
            try:
                request = json.loads(line)
            except ValueError:
                self._requests.put({"op": "_bad", "line": line[:200].decode("utf-8", "replace")})
                continue
            if request.get("op") == "cancel":
                if request.get("id") in (self._current_id, "*"):
                    self._cancelled.set()
                continue
            self._requests.put(request)
        self._requests.put({"op": "shutdown"})  # the parent is gone: stdin closed

    # --- the model thread ---

    def serve(self) -> None:
        while True:
            request = self._requests.get()
            op = request.get("op")
            if op == "shutdown":
                self._unload()
                return
            try:
                handler = getattr(self, f"_op_{op}", None)
                if handler is None:
                    raise GenerationError("request", f"unknown request {op!r}")
                handler(request)
            except GenerationError as exc:
                self.send(ErrorEvent(exc.kind, exc.message, exc.hint, request.get("id", "")))
            except MemoryError:
                self.send(ErrorEvent("memory", "the engine ran out of memory", "try a smaller quant or context",
                                     request.get("id", "")))
            except Exception as exc:  # a bug or an engine failure the process survived: report, carry on
                traceback.print_exc()
                self.send(ErrorEvent("internal", f"{type(exc).__name__}: {exc}", "", request.get("id", "")))

    def _op__bad(self, request: dict[str, Any]) -> None:
        raise GenerationError("request", f"unreadable request: {request['line']!r}")

    def _op_load(self, request: dict[str, Any]) -> None:
        from backends import registry

        self._unload()
        settings = protocol.settings_from_dict(LoadSettings, request.get("settings", {}))
        try:
            settings.validate()
        except ValueError as exc:
            raise GenerationError("settings", str(exc)) from None
        cls = registry.backend_class(request["backend"])
        availability = cls.probe()
        if not availability.available:
            raise GenerationError("unavailable", f"{cls.name} cannot run here: {availability.reason}",
                                  availability.hint)
        self.send(Progress(0.0))
        # Backend-specific construction options, e.g. the remote backend's endpoint (its key travels over this
        # private pipe, never through argv or the environment, which other processes can read).
        backend = cls(**(request.get("backend_options") or {}))
        loaded = backend.load(request["model_path"], settings, on_progress=lambda f: self.send(Progress(f)))
        self._backend = backend
        self.send(loaded)

    def _op_generate(self, request: dict[str, Any]) -> None:
        if self._backend is None:
            raise GenerationError("state", "no model is loaded")
        sampling = protocol.settings_from_dict(SamplingSettings, request.get("sampling", {}))
        try:
            sampling.validate()
        except ValueError as exc:
            raise GenerationError("settings", str(exc)) from None
        # A "prompt" string goes to the model as it is; "messages" go through its chat template.
        messages = request["prompt"] if isinstance(request.get("prompt"), str) else \
            [Message(m["role"], m["content"]) for m in request["messages"]]
        self._current_id = request["id"]
        self._cancelled.clear()
        try:
            for event in self._backend.generate(request["id"], messages, sampling, self._cancelled):
                self.send(event)
        finally:
            self._current_id = None

    def _op_score(self, request: dict[str, Any]) -> None:
        """The quant lab's scoring pass (Backend.score); bulky results go to the files the parent named."""
        if self._backend is None:
            raise GenerationError("state", "no model is loaded")
        self.send(self._backend.score(
            request["id"], text=request.get("text"), tokens=request.get("tokens"),
            max_tokens=request.get("max_tokens"), logprobs_path=request.get("logprobs_path", ""),
            vocabulary_path=request.get("vocabulary_path", "")))

    def _op_unload(self, request: dict[str, Any]) -> None:
        self._unload()

    def _unload(self) -> None:
        if self._backend is not None:
            backend, self._backend = self._backend, None
            backend.unload()


def main() -> int:
    faulthandler.enable()  # a native crash prints the Python stack to stderr before the process dies
    from app.runtimes.catalog import RUNTIME_PATH_VAR

    runtime = os.environ.get(RUNTIME_PATH_VAR)
    if runtime:  # the llama.cpp runtime chosen for this host (app/runtimes): its llama_cpp wins imports
        sys.path.insert(0, runtime)
    channel = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints and native stdout now land in the log, not in the event channel
    sys.stdout = sys.stderr
    host = Host(channel)
    threading.Thread(target=host.read_requests, args=(sys.stdin.buffer,), daemon=True,
                     name="engine-requests").start()
    host.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
