"""The engine host: the child process that owns one model.

It imports exactly one backend (chosen by the first ``load``), keeps the model on this process's main
thread for its whole life (MLX requires it; llama.cpp contexts are not shareable), and serves requests
one at a time, in the order they arrive: this queue is the only one between the app's users of the
engine (the chat and the local server). A reader thread takes requests from stdin so that ``cancel`` is
seen while a generation runs: it sets that generation's flag, which the loop checks between tokens, or
remembers the id of one that has not started, which then ends as cancelled without running.

A backend that batches (``Backend.parallel`` > 1: llama.cpp or MLX loaded with ``LoadSettings.parallel``) runs up to
that many generations at once, each on a thread of its own, their tokens decoded together; a generation beyond
them waits for one to end (one at a time, a generation runs on the model thread: a thread of its own cost a third
of the speed, docs/facts.md). Around them, in their order: a saved-state restore waits for a free
sequence, a save runs once the generation sent before it has ended (its sequence's state); counting tokens
runs at once; anything else (a load, an unload, scoring, embeddings) waits until no generation runs.

stdout is the event channel. Native libraries print to fd 1 too, so the channel is moved to a
private duplicate of fd 1 and fd 1 is pointed at stderr before any backend is imported.

Run as ``python -m app.engine.host`` (or, frozen, ``quantdesk --engine-host``).
"""

from __future__ import annotations

import collections
import faulthandler
import logging
import os
import queue
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

from app.engine import protocol
from app.engine.protocol import (CancelRequest, CountRequest, GenerateRequest, LoadRequest, Request,
                                 RestoreStateRequest, SaveStateRequest, ScoreRequest, ShutdownRequest, UnloadRequest)
from app.datatypes import Done, ErrorEvent, GenerationStats, Progress
from backends.base import Backend, GenerationError

# Cancelled ids of generations not started yet; a cancel may also name one that already ended (the
# parent cannot always know), so only the latest are kept.
REMEMBERED_CANCELS = 1024


class _Unreadable:
    """A line that is not a request: answered with an error in its turn."""

    id = ""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Host:
    def __init__(self, channel: BinaryIO) -> None:
        self._channel = channel
        self._requests: queue.Queue[Request | _Unreadable] = queue.Queue()
        self._lock = threading.Lock()  # the running ids, their flags and the remembered cancels change together
        self._ended = threading.Condition(self._lock)  # a generation's thread ended
        self._running: dict[str, threading.Event] = {}  # the running requests' cancel flags
        self._cancelled_ids: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._workers: dict[str, list[Request]] = {}  # a generation's thread -> the saves to run after it
        self._last_generation = ""  # the id of the last generation received: a save that follows it is its
        self._send_lock = threading.Lock()  # generation threads write events too
        self._backend: Backend | None = None
        # The requests of the protocol's table that the host serves itself (protocol.TABLE: no ``serve``); the others
        # are served by the Backend call their row names.
        self.own: dict[type[Any], Callable[[Any], None]] = {LoadRequest: self._load, GenerateRequest: self._generate,
                                                             ScoreRequest: self._score, UnloadRequest: self._unload_for}

    # --- I/O ---

    def send(self, event: Any) -> None:
        data = protocol.encode(event)
        with self._send_lock:
            self._channel.write(data)
            self._channel.flush()

    def read_requests(self, stream: BinaryIO) -> None:
        """Reader thread: cancel acts at once, everything else queues for the model thread."""
        for line in stream:
            try:
                request = protocol.decode_request(line)
            except ValueError as exc:
                self._requests.put(_Unreadable(str(exc)))
                continue
            if isinstance(request, CancelRequest):
                self.cancel(request.id)
            else:
                self._requests.put(request)
        self._requests.put(ShutdownRequest())  # the parent is gone: stdin closed

    def cancel(self, request_id: str) -> None:
        """Stop the running generation ``request_id`` (or every one, for "*"); otherwise remember the id,
        so that the generation ends as cancelled when its turn comes, without running."""
        with self._lock:
            if request_id == "*":
                for flag in self._running.values():
                    flag.set()
            elif request_id in self._running:
                self._running[request_id].set()
            else:
                self._cancelled_ids[request_id] = None
                while len(self._cancelled_ids) > REMEMBERED_CANCELS:
                    self._cancelled_ids.popitem(last=False)

    # --- the model thread ---

    def serve(self) -> None:
        while True:
            request = self._requests.get()
            if isinstance(request, ShutdownRequest):
                self._wait_workers(0)
                self._unload()
                return
            backend = self._backend
            if self._workers or (backend is not None and backend.parallel > 1):
                self._schedule(request)
            else:
                self._answer(request)

    def _schedule(self, request: Request | _Unreadable) -> None:
        """With a batching backend: a generation on a thread of its own, the rest in their turn around them (see
        the module's words)."""
        backend = self._backend
        parallel = backend.parallel if backend is not None else 1
        if isinstance(request, GenerateRequest) and backend is not None:
            self._wait_workers(parallel - 1)
            with self._lock:
                self._workers[request.id] = []
                self._last_generation = request.id
            threading.Thread(target=self._work, args=(request,), daemon=True,
                             name=f"engine-generate-{request.id}").start()
            return
        if isinstance(request, SaveStateRequest):
            with self._lock:
                after = self._workers.get(self._last_generation)
                if after is not None:  # its generation still runs: the save follows it on its thread
                    after.append(request)
                    return
            if backend is not None:
                backend.use_sequence_of(self._last_generation)
        elif isinstance(request, RestoreStateRequest):
            self._wait_workers(parallel - 1)  # a free sequence to restore into
        elif not isinstance(request, CountRequest):
            self._wait_workers(0)
        self._answer(request)

    def _wait_workers(self, at_most: int) -> None:
        with self._ended:
            self._ended.wait_for(lambda: len(self._workers) <= max(at_most, 0))

    def _work(self, request: GenerateRequest) -> None:
        """A generation's thread: the generation, then the saves of its state that came after it."""
        self._answer(request)
        while True:
            with self._lock:
                saves = self._workers[request.id]
                if not saves:
                    del self._workers[request.id]
                    self._ended.notify_all()
                    return
                save = saves.pop(0)
            if self._backend is not None:
                self._backend.use_sequence_of(request.id)
            self._answer(save)

    def _answer(self, request: Request | _Unreadable) -> None:
        """Run one request, its failure answered as an ErrorEvent of its id."""
        request_id = "" if isinstance(request, ShutdownRequest) else request.id
        try:
            self._handle(request)
        except GenerationError as exc:
            self.send(ErrorEvent(exc.kind, exc.message, exc.hint, request_id))
        except MemoryError:
            self.send(ErrorEvent("memory", "the engine ran out of memory", "try a smaller quant or context",
                                 request_id))
        except Exception as exc:  # a bug or an engine failure the process survived: report, carry on
            traceback.print_exc()
            self.send(ErrorEvent("internal", f"{type(exc).__name__}: {exc}", "", request_id))

    def _handle(self, request: Request | _Unreadable) -> None:
        """One request, as the protocol's table says: a plain one by the Backend call its row names, the answer sent;
        the rest by the host itself (``own``)."""
        if isinstance(request, _Unreadable):
            raise GenerationError("request", request.reason)
        if isinstance(request, protocol.UNANSWERED):  # answered before the model thread's queue: never here
            raise GenerationError("request", f"a {request.op} request reached the model thread")
        row = protocol.row_of(request)
        if row.serve is None:
            self.own[row.request](request)
            return
        answer = row.serve(self._loaded(), request)
        if not isinstance(answer, row.answer):
            raise TypeError(f"a {request.op} request was answered with {type(answer).__name__}, "
                            f"not {row.answer.__name__}")
        self.send(answer)

    def _loaded(self) -> Backend:
        if self._backend is None:
            raise GenerationError("state", "no model is loaded")
        return self._backend

    def _unload_for(self, request: UnloadRequest) -> None:
        self._unload()
        self.send(protocol.Unloaded(request.id))

    def _load(self, request: LoadRequest) -> None:
        from backends import registry

        self._unload()
        settings = request.settings
        try:
            settings.validate()
        except ValueError as exc:
            raise GenerationError("settings", str(exc)) from None
        cls = registry.backend_class(request.backend)
        availability = cls.probe()
        if not availability.available:
            raise GenerationError("unavailable", f"{cls.name} cannot run here: {availability.reason}",
                                  availability.hint)
        if settings.mmproj and not cls.takes_projector:
            raise GenerationError("projector", f"{cls.name} does not load a vision projector ({settings.mmproj})",
                                  "vision projectors (mmproj GGUF files) run with llama.cpp")
        self.send(Progress(0.0))
        backend = cls(  # backend-specific options, e.g. the remote endpoint (see LoadRequest.backend_options)
            **(request.backend_options or {}))
        loaded = backend.load(request.model_path, settings, on_progress=lambda f: self.send(Progress(f)))
        self._backend = backend
        self.send(loaded)

    def _generate(self, request: GenerateRequest) -> None:
        if self._backend is None:
            raise GenerationError("state", "no model is loaded")
        try:
            request.sampling.validate()
        except ValueError as exc:
            raise GenerationError("settings", str(exc)) from None
        if not isinstance(request.prompt, str) and any(m.images for m in request.prompt) \
                and not self._backend.sees_images():
            raise GenerationError("vision", "this model does not see images: it was loaded without a vision projector",
                                  "remove the image, or load a vision model with its mmproj file")
        cancelled = self._begin(request.id)
        if cancelled is None:  # stopped while it waited: the model never sees it
            self.send(Done(request.id, "", GenerationStats(0, 0.0, 0.0, 0, 0.0, "cancelled", 0)))
            return
        try:
            for event in self._backend.generate(request.id, request.prompt, request.sampling, cancelled,
                                                 request.events_every_s):
                self.send(event)
        finally:
            self._end(request.id)

    def _begin(self, request_id: str) -> threading.Event | None:
        """Make ``request_id`` a running request that a cancel stops: its flag; None if it was cancelled while it
        waited."""
        with self._lock:
            if request_id in self._cancelled_ids:
                del self._cancelled_ids[request_id]
                return None
            flag = self._running[request_id] = threading.Event()
            return flag

    def _end(self, request_id: str) -> None:
        with self._lock:
            self._running.pop(request_id, None)

    def _score(self, request: ScoreRequest) -> None:
        """The quant lab's scoring pass (Backend.score); bulky results go to the files the parent named. A windowed
        pass reports its progress and stops between windows when cancelled."""
        if self._backend is None:
            raise GenerationError("state", "no model is loaded")
        cancelled = self._begin(request.id)
        if cancelled is None:
            raise GenerationError("cancelled", "scoring was stopped")
        try:
            if request.windows is None:
                self.send(self._backend.score(request.id, text=request.text, tokens=request.tokens,
                                              max_tokens=request.max_tokens))
            else:
                from backends import scoring  # numpy: imported by the host that scores, not by every host

                self.send(scoring.score(self._backend, request.id, request.windows, text=request.text,
                                        cancelled=cancelled.is_set,
                                        on_progress=lambda fraction: self.send(Progress(fraction))))
        finally:
            self._end(request.id)

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
    host.send(protocol.Hello(protocol.PROTOCOL_VERSION, os.getpid()))
    threading.Thread(target=host.read_requests, args=(sys.stdin.buffer,), daemon=True,
                     name="engine-requests").start()
    host.serve()
    # Out at once: after a shutdown request the reader thread may still be blocked reading stdin, and
    # interpreter finalization aborts the process when a daemon thread holds stdin's buffer lock ("could
    # not acquire lock ... at interpreter shutdown"). The model is unloaded and every event written (the
    # channel is unbuffered) by now; what logging holds is flushed here.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
