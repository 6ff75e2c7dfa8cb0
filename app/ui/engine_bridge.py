"""A Qt facade over the blocking EngineClient (app/engine/client.py).

The client's calls block (load takes seconds, generate is an iterator that lasts the whole reply),
so they run on one worker QThread; results come back as signals on the GUI thread. Tokens are not
sent one signal each: the worker appends them to a locked buffer and posts a single notification
while none is pending, and the GUI drains the buffer at most every ``COALESCE_MS``. A fast model
therefore costs the GUI one small update per frame, whatever its token rate, and each update carries
only the new text.

Stop never goes through the worker's (busy) event loop: ``stop()`` calls ``client.cancel(request_id)``,
which is thread-safe, straight from the GUI thread. It names the chat's own request because the local
server shares this engine (``shared_engine()``): a Stop in the chat never stops a server request.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from app.errors import EngineCrashed, EngineError, QuantDeskError
from backends.base import Done, LoadSettings, Loaded, Message, SamplingSettings, Token

COALESCE_MS = 30


class EngineClientLike(Protocol):
    """What the bridge needs from app.engine.client.EngineClient."""

    def start(self) -> None: ...
    def load(self, model_path: str, settings: LoadSettings, *,
             on_progress: Callable[[float], None] | None = None) -> Loaded: ...
    def generate(self, messages: Sequence[Message], sampling: SamplingSettings, request_id: str | None = None,
                 on_wait: Callable[[int], None] | None = None) -> Iterable[Token | Done]: ...
    def cancel(self, request_id: str | None = None) -> None: ...
    def close(self) -> None: ...


def default_client_factory() -> EngineClientLike:
    # Imported here so the GUI starts without the engine package, which lands separately.
    from app.engine.client import EngineClient

    return EngineClient()


class TokenBuffer:
    """Tokens from the worker thread, waiting for the GUI. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._notified = False
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._parts.clear()
            self._notified = False
            self.total_tokens = 0
            self.first_t_ms: float | None = None
            self.last_t_ms = 0.0

    def push(self, token: Token) -> bool:
        """Add a token; True when the GUI must be notified (no notification is pending)."""
        with self._lock:
            if token.text:
                self._parts.append(token.text)
            self.total_tokens += token.count
            if token.count and self.first_t_ms is None:
                self.first_t_ms = token.t_ms
            self.last_t_ms = token.t_ms
            if self._notified:
                return False
            self._notified = True
            return True

    def drain(self) -> tuple[str, int, float, float]:
        """(new text, tokens so far, t of the first token, t of the latest) and re-arm notification."""
        with self._lock:
            text = "".join(self._parts)
            self._parts.clear()
            self._notified = False
            first = self.first_t_ms if self.first_t_ms is not None else self.last_t_ms
            return text, self.total_tokens, first, self.last_t_ms


class _Worker(QObject):
    """Lives on the worker thread; owns the client. Its slots block for as long as the client does."""

    loaded = Signal(object)  # Loaded
    load_progress = Signal(float)
    done = Signal(object)  # Done
    failed = Signal(object)  # EngineError (the engine lives on)
    crashed = Signal(object)  # EngineCrashed (the engine is gone)
    tokens_pending = Signal()
    waiting = Signal(int)  # requests ahead of the chat's (the local server's)

    def __init__(self, client_factory: Callable[[], EngineClientLike], buffer: TokenBuffer) -> None:
        super().__init__()
        self._client_factory = client_factory
        self._buffer = buffer
        self._client_lock = threading.Lock()
        self._client: EngineClientLike | None = None
        self._request_id: str | None = None  # the chat's generation: asked for, queued or running
        self._stop_requested: str | None = None  # ... and stopped, maybe before the engine heard of it

    @property
    def client(self) -> EngineClientLike | None:
        with self._client_lock:
            return self._client

    def expect(self, request_id: str) -> None:
        """Called from the GUI thread as it asks for a generation, so a Stop right after is not lost."""
        with self._client_lock:
            self._request_id, self._stop_requested = request_id, None

    def cancel(self) -> None:
        """Called from the GUI thread: stop the chat's own generation, if one is under way."""
        with self._client_lock:
            client, request_id = self._client, self._request_id
            self._stop_requested = request_id
        if client is not None and request_id is not None:
            client.cancel(request_id)

    def _ensure_client(self) -> EngineClientLike:
        with self._client_lock:
            client = self._client
        if client is None:
            client = self._client_factory()
            client.start()
            with self._client_lock:
                self._client = client
        return client

    def _drop_client(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except QuantDeskError:
                pass  # it is already dead; closing is only tidying up

    def _report(self, exc: QuantDeskError) -> None:
        if isinstance(exc, EngineCrashed):
            self._drop_client()
            self.crashed.emit(exc)
        else:
            self.failed.emit(exc if isinstance(exc, EngineError) else EngineError(exc.message, exc.hint))

    @Slot(str, object)
    def load(self, model_path: str, settings: LoadSettings) -> None:
        try:
            self.loaded.emit(self._ensure_client().load(model_path, settings, on_progress=self.load_progress.emit))
        except QuantDeskError as exc:
            self._report(exc)

    @Slot(object, object, str)
    def generate(self, messages: list[Message], sampling: SamplingSettings, request_id: str) -> None:
        try:
            client = self._ensure_client()
            events: Iterator[Token | Done] = iter(client.generate(messages, sampling, request_id=request_id,
                                                                  on_wait=self.waiting.emit))
            with self._client_lock:  # a Stop that came before the client knew the request
                stopped = self._stop_requested == request_id
            if stopped:
                client.cancel(request_id)
            for event in events:
                if isinstance(event, Token):
                    if self._buffer.push(event):
                        self.tokens_pending.emit()
                elif isinstance(event, Done):
                    self.done.emit(event)
        except QuantDeskError as exc:
            self._report(exc)
        finally:
            with self._client_lock:
                if self._request_id == request_id:
                    self._request_id = self._stop_requested = None

    @Slot()
    def close(self) -> None:
        self._drop_client()


class SharedEngine:
    """The bridge's engine as the local server (app/server) sees it: the same host process as the chat,
    whichever one is current (a crash replaces it on the next chat request). Requests from both take
    turns in the EngineClient; cancel names the request, so neither side stops the other's."""

    def __init__(self, worker: _Worker) -> None:
        self._worker = worker

    def _client(self) -> EngineClientLike:
        client = self._worker.client
        if client is None:
            raise EngineCrashed("no engine is running", "load a model in Chat")
        return client

    @property
    def loaded(self) -> Loaded | None:
        client = self._worker.client
        return getattr(client, "loaded", None) if client is not None else None

    @property
    def alive(self) -> bool:
        client = self._worker.client
        return client is not None and bool(getattr(client, "alive", True))

    @property
    def pid(self) -> int | None:
        return getattr(self._worker.client, "pid", None)

    def generate(self, messages, sampling: SamplingSettings, request_id: str | None = None):
        return self._client().generate(messages, sampling, request_id=request_id)

    def cancel(self, request_id: str | None = None) -> None:
        client = self._worker.client
        if client is not None and request_id is not None:
            client.cancel(request_id)


class EngineBridge(QObject):
    """GUI-thread object: call ``load``/``generate``/``stop``; listen to the signals."""

    busy_changed = Signal(bool)
    loaded = Signal(object)  # backends.base.Loaded
    load_progress = Signal(float)  # 0..1 while a model loads, as the engine reports it
    # Coalesced new text, tokens so far in this reply, engine time of the first and latest token (ms).
    tokens = Signal(str, int, float, float)
    done = Signal(object)  # backends.base.Done; every token before it has been delivered by `tokens`
    failed = Signal(object)  # app.errors.EngineError: the request failed, the engine is still there
    crashed = Signal(object)  # app.errors.EngineCrashed: the engine died; the next request starts a new one
    # The chat's request waits behind this many of the local server's (they share the engine); tokens follow.
    waiting = Signal(int)

    _request_load = Signal(str, object)
    _request_generate = Signal(object, object, str)
    _request_close = Signal()

    def __init__(self, client_factory: Callable[[], EngineClientLike] = default_client_factory,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._buffer = TokenBuffer()
        self._request_ids = itertools.count(1)
        self._busy = False
        self._last_flush = 0.0
        self._thread = QThread()
        self._thread.setObjectName("engine-bridge")
        self._worker = _Worker(client_factory, self._buffer)
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)
        # Worker -> GUI: bound slots of this GUI-thread object, so Qt queues them onto the GUI thread.
        self._worker.loaded.connect(self._on_loaded)
        self._worker.load_progress.connect(self._on_load_progress)
        self._worker.done.connect(self._on_done)
        self._worker.failed.connect(self._on_failed)
        self._worker.crashed.connect(self._on_crashed)
        self._worker.tokens_pending.connect(self._on_tokens_pending)
        self._worker.waiting.connect(self.waiting)
        # GUI -> worker: queued onto the worker thread.
        self._request_load.connect(self._worker.load)
        self._request_generate.connect(self._worker.generate)
        self._request_close.connect(self._worker.close)
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.timeout.connect(self._flush_tokens)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._busy

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    @property
    def engine_pid(self) -> int | None:
        """The engine host's process id, when one runs (for the memory figures and for tests)."""
        return getattr(self._worker.client, "pid", None)

    def shared_engine(self) -> SharedEngine:
        """This engine for the local server, so a model is in memory once (see SharedEngine)."""
        return SharedEngine(self._worker)

    def load(self, model_path: str, settings: LoadSettings) -> None:
        self._set_busy(True)
        self._request_load.emit(model_path, settings)

    def generate(self, messages: Sequence[Message], sampling: SamplingSettings) -> None:
        self._buffer.reset()
        self._last_flush = 0.0
        self._set_busy(True)
        request_id = f"chat-{next(self._request_ids)}"
        self._worker.expect(request_id)
        self._request_generate.emit(list(messages), sampling, request_id)

    def stop(self) -> None:
        """Ask the engine to stop this reply; it ends with a Done whose stop reason is 'cancelled'."""
        self._worker.cancel()

    def shutdown(self, timeout_ms: int = 10_000) -> None:
        """Stop, close the client and end the worker thread. Idempotent."""
        if not self._thread.isRunning():
            return
        self._worker.cancel()
        self._request_close.emit()
        self._thread.quit()
        self._thread.wait(timeout_ms)

    @Slot()
    def _on_tokens_pending(self) -> None:
        wait_ms = COALESCE_MS - (time.monotonic() - self._last_flush) * 1000
        if wait_ms <= 0:
            self._flush_tokens()
        elif not self._flush_timer.isActive():
            self._flush_timer.start(int(wait_ms) + 1)

    @Slot()
    def _flush_tokens(self) -> None:
        self._flush_timer.stop()
        self._last_flush = time.monotonic()
        text, count, first_ms, last_ms = self._buffer.drain()
        if text or count:
            self.tokens.emit(text, count, first_ms, last_ms)

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        self.load_progress.emit(fraction)

    @Slot(object)
    def _on_loaded(self, info: Loaded) -> None:
        self._set_busy(False)
        self.loaded.emit(info)

    @Slot(object)
    def _on_done(self, done: Done) -> None:
        self._flush_tokens()
        self._set_busy(False)
        self.done.emit(done)

    @Slot(object)
    def _on_failed(self, error: EngineError) -> None:
        self._flush_tokens()
        self._set_busy(False)
        self.failed.emit(error)

    @Slot(object)
    def _on_crashed(self, error: EngineCrashed) -> None:
        self._flush_tokens()
        self._set_busy(False)
        self.crashed.emit(error)
