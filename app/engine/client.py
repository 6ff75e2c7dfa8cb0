"""The parent side of an engine host: start it, load, stream, cancel, and turn its death into a sentence.

The client is blocking and may be shared by threads: the GUI's chat worker and the local server's queue
use one host, so one model sits in memory once. Requests (load, generate, score, unload) take turns,
first come first served; ``cancel(request_id)`` may be called from any thread and stops only that
request, running or still waiting. Nothing here imports an inference library; the host does that in
its own process.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from app.engine import protocol
from app.errors import BackendUnavailable, EngineCrashed, EngineError
from backends.base import (Done, ErrorEvent, GenerationStats, Loaded, LoadSettings, Progress, Prompt,
                           SamplingSettings, Scored, Token)

_EOF = object()
STDERR_LINES = 200

# Words engines print when an allocation fails: llama.cpp/ggml, CUDA, Metal, the C++ runtime, Python.
_OOM_MARKERS = ("out of memory", "failed to allocate", "bad_alloc", "memoryerror", "cudamalloc failed",
                "insufficient memory", "unable to allocate", "cannot allocate memory", "alloc_buffer: failed")


def host_command() -> list[str]:
    if getattr(sys, "frozen", False):  # a PyInstaller build: the app binary is the host too
        return [sys.executable, "--engine-host"]
    return [sys.executable, "-m", "app.engine.host"]


def describe_exit(returncode: int | None, stderr_tail: Sequence[str], phase: str) -> EngineCrashed:
    """The sentence for a dead engine: what killed it, in which phase, and what the log said."""
    text = "\n".join(stderr_tail).lower()
    oom = any(marker in text for marker in _OOM_MARKERS)
    last = next((line.strip() for line in reversed(stderr_tail) if line.strip()), "")
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if oom:
            message = f"the engine ran out of memory {phase}"
        elif name == "SIGKILL":
            message = f"the engine was killed (SIGKILL) {phase}"
            hint = "the system may have run out of memory; try a smaller quant or context"
            return EngineCrashed(message, hint, returncode=returncode, stderr_tail=tuple(stderr_tail), phase=phase)
        else:
            message = f"the engine crashed ({name}) {phase}"
    elif oom:
        message = f"the engine ran out of memory {phase}"
    else:
        message = f"the engine exited unexpectedly (code {returncode}) {phase}"
    hint = "try a smaller quant, a shorter context or fewer GPU layers" if oom else (f"last log line: {last}" if last else "")
    return EngineCrashed(message, hint, returncode=returncode, stderr_tail=tuple(stderr_tail), phase=phase)


class _Turns:
    """First come, first served use of the one host (a plain Lock wakes waiters in no particular order)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    @contextlib.contextmanager
    def turn(self, on_wait: Callable[[int], None] | None = None):
        """Hold the host; ``on_wait(requests ahead)`` is called first when others are ahead of this one."""
        with self._changed:
            ticket = self._next_ticket
            self._next_ticket += 1
            ahead = ticket - self._serving
        if ahead and on_wait is not None:
            on_wait(ahead)
        with self._changed:
            self._changed.wait_for(lambda: self._serving == ticket)
        try:
            yield
        finally:
            with self._changed:
                self._serving += 1
                self._changed.notify_all()


class EngineClient:
    """One engine host process. Use as a context manager, or call ``close()``."""

    _ids = itertools.count(1)

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env
        self._proc: subprocess.Popen | None = None
        self._events: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._write_lock = threading.Lock()
        self._current_id: str | None = None
        self._turns = _Turns()
        self._queued_ids: set[str] = set()  # generations waiting for their turn
        self._cancelled_ids: set[str] = set()  # ... and those of them cancelled before it came
        self._cancel_sent_for: str | None = None  # the running request a cancel was sent for
        self._ids_lock = threading.Lock()
        self._phase = "while starting"
        self._runtime_env: dict[str, str] = {}  # the llama.cpp runtime the host imports (app/runtimes)
        self.loaded: Loaded | None = None

    # --- process ---

    def start(self) -> EngineClient:
        """Start the host; a host that died is replaced by a fresh one (the model must be loaded again)."""
        if self.alive:
            return self
        if self._proc is not None:
            self.close()
            self.loaded = None
        env = dict(os.environ if self._env is None else self._env)
        env.update(self._runtime_env)
        root = str(Path(__file__).resolve().parents[2])  # the host imports app/ and backends/ from here
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(host_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=env, bufsize=0)
        self._events = queue.Queue()  # per process: a dead host's end-of-stream must not reach its successor
        self._events_reader = threading.Thread(target=self._read_events, args=(self._proc, self._events),
                                               daemon=True, name="engine-events")
        self._events_reader.start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True,
                                               name="engine-stderr")
        self._stderr_reader.start()
        self._phase = "while idle"
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)

    # Each reader closes its own pipe at the end of the stream; close() never does, so that no pipe is
    # closed under a reader still draining the host's last output.

    def _read_events(self, proc: subprocess.Popen, events: queue.Queue) -> None:
        with proc.stdout:
            for line in proc.stdout:
                try:
                    events.put(protocol.decode_event(line))
                except ValueError:
                    self._stderr.append(f"[quantdesk] unreadable engine event: {line[:200]!r}")
        events.put(_EOF)

    def _read_stderr(self, proc: subprocess.Popen) -> None:
        with proc.stderr:
            for raw in proc.stderr:
                self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _send(self, request: dict) -> None:
        if self._proc is None:
            self.start()
        try:
            with self._write_lock:
                self._proc.stdin.write(protocol.encode(request))
                self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed() from None

    def _crashed(self) -> EngineCrashed:
        returncode = self._proc.wait(timeout=10) if self._proc else None
        self._stderr_reader.join(timeout=2)  # let it drain the dying process's last lines
        return describe_exit(returncode, self.stderr_tail(), self._phase)

    def _next_event(self):
        event = self._events.get()
        if event is _EOF:
            self._events.put(_EOF)  # every later call sees the death too
            raise self._crashed()
        return event

    # --- requests ---

    def load(self, model_path: str | Path, settings: LoadSettings | None = None, *, backend: str | None = None,
             on_progress: Callable[[float], None] | None = None, runtime: str | None = None) -> Loaded:
        """Load a model (the host imports the backend now). Raises ModelFileError for a bad path before
        any engine work, BackendUnavailable, EngineError (the engine refused, and lives), EngineCrashed.
        llama.cpp loads run on the runtime app.runtimes chooses (``runtime`` names one for this load)."""
        from app.models.detect import detect_model
        from app.remote import connections
        from backends import registry

        options: dict = {}
        if connections.is_remote_ref(model_path):
            ref = connections.RemoteModelRef(str(model_path))
            options = {"endpoint": connections.Connections().endpoint_for(ref.path).to_dict()}
        else:
            ref = detect_model(model_path)
        name = backend or registry.backend_for_format(ref.format)
        status = registry.status(name)
        if not status.availability.available:
            raise BackendUnavailable(f"{name} cannot run here: {status.availability.reason}",
                                     status.availability.hint)
        if ref.format not in status.formats:
            raise BackendUnavailable(f"{name} does not run {ref.format} models",
                                     f"it runs {', '.join(status.formats)}")
        settings = settings or LoadSettings()
        choice = None
        if name == "llama.cpp":
            from app.runtimes import select

            choice = select.for_load(ref.path, runtime)
            if not choice.name:
                raise BackendUnavailable(choice.reason)
        with self._turns.turn():
            return self._load(ref, name, settings, on_progress, choice, options)

    def _load(self, ref, name: str, settings: LoadSettings, on_progress, choice=None, options: dict | None = None
              ) -> Loaded:
        runtime_env = choice.env if choice is not None else {}
        if (self.loaded is not None and self.loaded.backend != name) or \
                (self._proc is not None and runtime_env != self._runtime_env):
            self.close()  # one backend and one runtime per host process: another gets a fresh host
            self.loaded = None
        self._runtime_env = runtime_env
        self.start()
        self._phase = f"while loading {ref.display_name}"
        self._send({"op": "load", "backend": name, "model_path": str(ref.path),
                    "settings": protocol.settings_to_dict(settings), "backend_options": options})
        while True:
            event = self._next_event()
            if isinstance(event, Progress):
                if on_progress:
                    on_progress(event.fraction)
            elif isinstance(event, Loaded):
                if choice is not None:
                    event = dataclasses.replace(event, runtime=choice.name, runtime_reason=choice.reason)
                self.loaded = event
                self._phase = "while idle"
                return event
            elif isinstance(event, ErrorEvent):
                self._phase = "while idle"
                raise EngineError(event.message, event.hint, kind=event.kind)

    def generate(self, messages: Prompt, sampling: SamplingSettings | None = None, request_id: str | None = None,
                 on_wait: Callable[[int], None] | None = None) -> Iterator[Token | Done]:
        """Stream Token events, then one Done, once the requests before this one are through (``on_wait`` is
        told how many there are, if any). Closing the iterator early cancels the generation. Bad sampling
        settings raise here, before any wait."""
        sampling = sampling or SamplingSettings()
        try:
            sampling.validate()
        except ValueError as exc:
            raise EngineError(str(exc), kind="settings") from None
        request_id = request_id or f"r{next(self._ids)}"
        with self._ids_lock:  # from here on, cancel(request_id) is honoured, even before the first next()
            self._queued_ids.add(request_id)
        return self._generate_in_turn(messages, sampling, request_id, on_wait)

    def _generate_in_turn(self, messages: Prompt, sampling: SamplingSettings, request_id: str,
                          on_wait: Callable[[int], None] | None) -> Iterator[Token | Done]:
        try:
            # The turn ends before the Done is handed out: a consumer that stops reading at the Done
            # (as every loop over this stream does) must not keep the engine from the next request.
            with self._turns.turn(on_wait):
                with self._ids_lock:  # from queued to running in one step, so no cancel falls in between
                    self._queued_ids.discard(request_id)
                    cancelled = request_id in self._cancelled_ids
                    self._current_id = None if cancelled else request_id
                if cancelled:  # stopped while it waited: the engine never sees it
                    done = Done(request_id, "", GenerationStats(0, 0.0, 0.0, 0, 0.0, "cancelled", 0))
                else:
                    done = yield from self._generate(messages, sampling, request_id)
            yield done
        finally:
            with self._ids_lock:
                self._queued_ids.discard(request_id)
                self._cancelled_ids.discard(request_id)

    def _generate(self, messages: Prompt, sampling: SamplingSettings, request_id: str):
        """Yields the Tokens and returns the Done."""
        self._phase = "during generation"
        payload = {"prompt": messages} if isinstance(messages, str) else {"messages": [m.__dict__ for m in messages]}
        self._send({"op": "generate", "id": request_id, **payload,
                    "sampling": protocol.settings_to_dict(sampling)})
        finished = resent = False
        try:
            while True:
                event = self._next_event()
                if isinstance(event, Token) and event.request_id == request_id:
                    # The host drops a cancel that reaches it before it has started this request; once a
                    # token is here it has, so a cancel sent earlier goes again, once.
                    if not resent and self._cancel_sent_for == request_id:
                        self._send({"op": "cancel", "id": request_id})
                        resent = True
                    yield event
                elif isinstance(event, Done) and event.request_id == request_id:
                    finished = True
                    return event  # handed out by _generate_in_turn once this request's state is cleared
                elif isinstance(event, ErrorEvent):
                    finished = True
                    raise EngineError(event.message, event.hint, kind=event.kind)
        finally:
            self._current_id = self._cancel_sent_for = None
            if not finished and self.alive:
                self._drain(request_id)
            if self._phase == "during generation":
                self._phase = "while idle"

    def score(self, *, text: str | None = None, tokens: Sequence[int] | None = None, max_tokens: int | None = None,
              logprobs_path: str | Path = "", vocabulary_path: str | Path = "") -> Scored:
        """Score plain text or given token ids with the loaded model (the quant lab's quality pass).
        Raises EngineError with kind 'unavailable' where the backend exposes no logits."""
        if (text is None) == (tokens is None):
            raise ValueError("score takes text or tokens, not both")
        with self._turns.turn():
            return self._score(text, tokens, max_tokens, logprobs_path, vocabulary_path)

    def _score(self, text, tokens, max_tokens, logprobs_path, vocabulary_path) -> Scored:
        request_id = f"s{next(self._ids)}"
        phase, self._phase = self._phase, "while scoring"
        self._send({"op": "score", "id": request_id, "text": text, "tokens": list(tokens) if tokens is not None
                    else None, "max_tokens": max_tokens, "logprobs_path": str(logprobs_path or ""),
                    "vocabulary_path": str(vocabulary_path or "")})
        try:
            while True:
                event = self._next_event()
                if isinstance(event, Scored) and event.request_id == request_id:
                    return event
                if isinstance(event, ErrorEvent):
                    raise EngineError(event.message, event.hint, kind=event.kind)
        finally:
            self._phase = phase

    def _drain(self, request_id: str) -> None:
        """A consumer stopped early: cancel and swallow the rest of this request's events."""
        self._send({"op": "cancel", "id": request_id})
        while True:
            event = self._next_event()
            if isinstance(event, (Done, ErrorEvent)) and getattr(event, "request_id", request_id) == request_id:
                return

    def cancel(self, request_id: str | None = None) -> None:
        """Stop a generation (thread-safe): ``request_id``'s, or whichever runs when None. The stream then
        ends with a Done whose stop reason is 'cancelled' and which keeps the text so far; a request
        still waiting for its turn ends so at once, without reaching the engine."""
        with self._ids_lock:
            if request_id in self._queued_ids:
                self._cancelled_ids.add(request_id)
                return
            running = self._current_id
            if request_id is None:
                request_id = running
            if request_id is None or request_id != running:
                return
            self._cancel_sent_for = request_id
        if self.alive:
            try:
                self._send({"op": "cancel", "id": request_id})
            except EngineCrashed:
                pass  # the generating thread reports the death

    def unload(self) -> None:
        with self._turns.turn():
            if self.alive:
                self._send({"op": "unload"})
            self.loaded = None

    def close(self, timeout: float = 5.0) -> None:
        """Shut the host down; kill it if it does not go in time. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                with self._write_lock:
                    proc.stdin.write(protocol.encode({"op": "shutdown"}))
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            proc.stdin.close()
        except OSError:
            pass
        for reader in (self._events_reader, self._stderr_reader):  # the host is gone: they are at the end
            reader.join(timeout=2)

    def __enter__(self) -> EngineClient:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()
