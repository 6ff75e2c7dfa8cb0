"""A Qt facade over the blocking EngineClient (app/engine/client.py).

The client's calls block (load takes seconds, generate is an iterator that lasts the whole reply),
so they run on one worker QThread; results come back as signals on the GUI thread. A model that decodes several
replies together (``Loaded.details["parallel"]`` > 1: llama.cpp loaded with ``LoadSettings.parallel``, the model
bar's "Decode together") has each of the chat's replies on a thread of its own, so several chats answer at once;
any other engine answers them one after another on the worker, as before. Each reply has its request id
(``generate`` returns it): its tokens, cut, passages, wait, Done and error come back as ``replied(request_id,
event)``, and ``stop(request_id)`` stops that one alone. Tokens are not sent one signal each: the reply's thread
appends them to the reply's own locked buffer and posts a single notification while none is pending, and the GUI
drains the buffers at most every ``COALESCE_MS``. A fast model therefore costs the GUI one small update per frame
per reply, whatever its token rate, and each update carries only the new text.

The client is made once by the app and handed to the bridge, which owns it from then on (a crashed
host is replaced by the client itself on the next request), and to the local server, which shares it
(``client``): one model in memory, one queue in the engine host. Stop never goes through the worker's
(busy) event loop: ``stop(request_id)`` calls ``client.cancel(request_id)``, which is thread-safe, straight from
the GUI thread, naming the chat's own request so that it never stops a server request nor another chat's; the
engine host honours it whether the request is running, waiting, or not even there yet.

The app's client is its one ``ModelPool`` (app/engine/pool.py), handed as ``EngineBridge.over(make_pool)``: the
pool, and what it imports, is made on first use (a load, the local server), not before the window shows. Several
models loaded, one host each, the active one answering. Then a load names its estimate and whether to go past the
memory budget ("Load anyway"), a refusal arrives as ``refused`` (with the budget in words), and every model the pool
unloads (for room, idle, ejected) as ``model_unloaded`` with the sentence why. Eject runs on a thread of its own, so
it never waits for a reply.

A chat with documents attached (issue 28) names them with its request: the worker retrieves the question's passages
before the reply (app/documents/retrieve.py: the store's text search and, where a collection is embedded, the
question embedded through the same pool), fits them into what the prompt leaves of the context, puts them in the last
user message (``augment``) and says what it found (``retrieved``) before the reply's tokens.
"""

from __future__ import annotations

from types import ModuleType

import dataclasses
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QObject, QThread, QTimer, Signal, Slot

from app.errors import EngineCrashed, EngineError, QuantDeskError
from app.datatypes import ContextCut, Done, LoadSettings, Loaded, Message, SamplingSettings, Token

if TYPE_CHECKING:
    from app.documents.retrieve import Retrieval
    from app.documents.store import DocumentStore
    from app.engine.client import EngineClientLike
    from app.engine.pool import BudgetRefused, ModelPool
    from app.engine.states import StateKeys

COALESCE_MS = 30
# A chat's overflow policy, its last cut and the indices of its pinned messages (app/engine/overflow.py ``fit``)
Overflow = tuple[str, ContextCut | None, frozenset[int]]
# A chat's documents: the store and the names of the collections attached to it (app/documents)
Documents = tuple["DocumentStore", tuple[str, ...]]


@dataclass(frozen=True)
class TokenChunk:
    """What arrived since the last update of a reply, with its figures so far; times are the engine's, in ms since
    the request arrived there. A thinking model's thinking comes before its answer, so a chunk that has both holds
    the end of the one and the start of the other. The thinking's figures are the engine's so far (each Token carries
    them: backends/base.Meter measures them, token by token), the same the Done's stats end with."""

    text: str  # new answer text
    reasoning: str  # new thinking text
    count: int  # tokens so far
    first_ms: float  # the first token
    last_ms: float  # the latest token
    reasoning_tokens: int = 0  # thinking tokens so far
    reasoning_ms: float = 0.0  # from the first thinking token to the latest
    first_answer_ms: float | None = None  # the answer's first token; None while there is none


@dataclass(frozen=True)
class Waiting:
    """A reply waits behind this many requests (the local server's, which share the engine); tokens follow."""

    ahead: int



class TokenBuffer:
    """Tokens from the worker thread, waiting for the GUI. Thread-safe. The thinking's figures are taken from the
    tokens as the engine measured them, never counted here again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._reasoning_parts: list[str] = []
        self._notified = False
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._parts.clear()
            self._reasoning_parts.clear()
            self._notified = False
            self.total_tokens = 0
            self.first_t_ms: float | None = None
            self.last_t_ms = 0.0
            self._thinking: tuple[int, float, float] = (0, 0.0, 0.0)  # the latest token's figures of the thinking

    def push(self, token: Token) -> bool:
        """Add a token; True when the GUI must be notified (no notification is pending)."""
        with self._lock:
            if token.text:
                self._parts.append(token.text)
            if token.reasoning:
                self._reasoning_parts.append(token.reasoning)
            self._thinking = (token.reasoning_tokens, token.reasoning_ms, token.first_answer_ms)
            self.total_tokens += token.count
            if token.count and self.first_t_ms is None:
                self.first_t_ms = token.t_ms
            self.last_t_ms = token.t_ms
            if self._notified:
                return False
            self._notified = True
            return True

    def drain(self) -> TokenChunk:
        """The new text and thinking with the figures so far, and re-arm notification."""
        with self._lock:
            text, reasoning = "".join(self._parts), "".join(self._reasoning_parts)
            self._parts.clear()
            self._reasoning_parts.clear()
            self._notified = False
            first = self.first_t_ms if self.first_t_ms is not None else self.last_t_ms
            thought, thought_ms, first_answer_ms = self._thinking
            return TokenChunk(text, reasoning, self.total_tokens, first, self.last_t_ms, thought, thought_ms,
                              first_answer_ms or None)


def _pool_module() -> ModuleType:
    """app.engine.pool, imported once a client exists (the window shows before it: app/ui/main.py)."""
    from app.engine import pool

    return pool


class _Worker(QObject):
    """Lives on the worker thread; its slots block for as long as the client does. A batching model's replies run
    ``generate`` on threads of their own (EngineBridge.generate); each signal names its reply's request id ("": a
    load)."""

    loaded = Signal(object)  # Loaded
    load_progress = Signal(float)
    done = Signal(str, object)  # Done
    failed = Signal(str, object)  # EngineError (the engine lives on)
    crashed = Signal(str, object)  # EngineCrashed (the engine is gone)
    refused = Signal(object)  # BudgetRefused (nothing was loaded)
    tokens_pending = Signal()  # a reply's buffer has new tokens (EngineBridge drains them all)
    cut = Signal(str, object)  # ContextCut: what the overflow policy left out of this reply's prompt
    retrieved = Signal(str, object)  # app.documents.retrieve.Retrieval: the chat's documents' passages it was given
    waiting = Signal(str, int)  # requests ahead of the chat's (the local server's)

    def __init__(self, bridge: EngineBridge) -> None:
        super().__init__()
        # Its client, made on the first request (EngineBridge.client). Not held: a cycle between the two would leave
        # the bridge to the garbage collector, which may run on any thread, and its timer cannot be deleted there.
        self._bridge_ref = weakref.ref(bridge)

    @property
    def _bridge(self) -> EngineBridge:
        bridge = self._bridge_ref()
        assert bridge is not None, "the bridge ends its worker before it goes"
        return bridge

    @property
    def _client(self) -> EngineClientLike:
        return self._bridge.client

    def _report(self, exc: QuantDeskError, request_id: str = "") -> None:
        if isinstance(exc, EngineCrashed):
            pool = self._bridge.pool
            if pool is not None:
                pool.forget_dead()  # the other models stay loaded
            elif not self._bridge.replying(besides=request_id):
                self._close_client()  # tidy up the dead host; the next request starts a fresh one
            self.crashed.emit(request_id, exc)
        elif self._bridge.pool is not None and isinstance(exc, _pool_module().BudgetRefused):
            self.refused.emit(exc)
        else:
            self.failed.emit(request_id, exc if isinstance(exc, EngineError) else EngineError(exc.message, exc.hint))

    @Slot(str, object, object)
    def load(self, model_path: str, settings: LoadSettings, pool_options: dict[str, Any]) -> None:
        try:
            client = self._client  # made by the first load (the app's pool): then it is known to be a pool
            options = pool_options if self._bridge.pool is not None else {}
            self.loaded.emit(client.load(model_path, settings, on_progress=self.load_progress.emit, **options))
        except QuantDeskError as exc:
            self._report(exc)

    @Slot(object, object, str, object, object, object)
    def generate(self, messages: list[Message], sampling: SamplingSettings, request_id: str,
                 keys: StateKeys | None = None,
                 overflow: Overflow | None = None, documents: Documents | None = None) -> None:
        """The reply, as a turn (app/engine/turn.py): the overflow policy and the documents' passages on the
        engine, then, with ``keys``, the conversation's saved state restored ahead of it where one matches (a chat
        reopened, switched back to, the app restarted: app/engine/states.py) and its state saved behind it."""
        from app.engine.turn import Passages, Turn

        try:
            client = self._client
            loaded = client.loaded
            policy, previous, pinned = overflow if overflow is not None and loaded is not None else \
                ("stop", None, frozenset[int]())
            passages: Passages | None = None
            if documents is not None and documents[1] and loaded is not None:
                n_ctx, chosen_documents = loaded.n_ctx, documents

                def step(sent: list[Message], chosen: SamplingSettings) -> tuple[list[Message], Retrieval]:
                    return self._retrieve(chosen_documents, sent, chosen, n_ctx)
                passages = step
            turn = Turn(messages, sampling, policy, previous, pinned, keys, passages)
            prepared = turn.prepare(client, loaded.n_ctx if loaded is not None else 0)
            if prepared.cut is not None:
                self.cut.emit(request_id, prepared.cut)
            if prepared.found is not None:
                self.retrieved.emit(request_id, prepared.found)
            # restore → generate → save reach the engine together, not between another reply's three (the host
            # saves the state of the generation sent last before a save)
            with self._bridge.sending:
                sent = turn.send(client, prepared, request_id=request_id,
                                 on_wait=lambda ahead: self.waiting.emit(request_id, ahead))
            buffer = self._bridge.buffer(request_id)
            for event in sent.events():
                if isinstance(event, Token):
                    if buffer.push(event):
                        self.tokens_pending.emit()
                elif isinstance(event, Done):
                    self.done.emit(request_id, event)
        except QuantDeskError as exc:
            self._report(exc, request_id)

    def _retrieve(self, documents: Documents, messages: list[Message], sampling: SamplingSettings,
                  n_ctx: int) -> tuple[list[Message], Retrieval]:
        """The question's turn with the chat's documents (app/documents/retrieve.py ``with_documents``: the prompt as
        it will be sent counted by the engine, the passages fitted into what it and the reply leave), the question
        embedded and the passages reranked through the app's pool (``question_engines``; a single engine, as in some
        tests: their words only). A collection that is gone or a store that cannot be read is a note: the reply
        goes on without passages."""
        from app.documents.passages import DocumentsError
        from app.documents.retrieve import Retrieval, question_engines, with_documents

        store, names = documents
        try:
            # A collection removed on the Documents page since it was attached: the others are still searched.
            found = [c for c in store.collections() if c.name in names]
            there = {c.name for c in found}
            notes = tuple(f"the collection {n} is no longer there (removed on the Documents page)"
                          for n in names if n not in there)
            names = tuple(n for n in names if n in there)
            if not names:
                return list(messages), Retrieval(notes=notes)
            pool = self._bridge.pool
            embedder, reranker = question_engines(pool, found) if pool is not None else (None, None)
            sent, retrieval = with_documents(self._client, store, names, messages, sampling, n_ctx,
                                             embedder=embedder, reranker=reranker)
        except DocumentsError as exc:
            return list(messages), Retrieval(notes=(exc.message,))
        return sent, dataclasses.replace(retrieval, notes=(*notes, *retrieval.notes)) if notes else retrieval

    @Slot()
    def close(self) -> None:
        self._close_client()

    def _close_client(self) -> None:
        client = self._bridge.made_client
        if client is None:  # never used: nothing to close
            return
        try:
            client.close()
        except QuantDeskError:
            pass  # it is already dead; closing is only tidying up


class EngineBridge(QObject):
    """GUI-thread object: call ``load``/``generate``/``stop``; listen to the signals. ``tokens``, ``done``, ``failed``,
    ``crashed``, ``cut``, ``retrieved`` and ``waiting`` say what any request came to (a load's failure too);
    ``replied`` says the same of one reply, with its request id (the Chat routes it to the reply's conversation)."""

    busy_changed = Signal(bool)
    loaded = Signal(object)  # app.datatypes.Loaded
    load_progress = Signal(float)  # 0..1 while a model loads, as the engine reports it
    tokens = Signal(object)  # TokenChunk: coalesced new answer text and thinking, with the reply's figures so far
    done = Signal(object)  # app.datatypes.Done; every token before it has been delivered by `tokens`
    failed = Signal(object)  # app.errors.EngineError: the request failed, the engine is still there
    crashed = Signal(object)  # app.errors.EngineCrashed: the engine died; the next request starts a new one
    refused = Signal(object)  # app.engine.pool.BudgetRefused: the model does not fit beside the busy ones
    model_unloaded = Signal(str, str)  # path, the sentence why (room for another, idle, ejected)
    models_changed = Signal()  # the pool loaded or unloaded a model (the Chat's or the local server's request)
    # The chat's request waits behind this many of the local server's (they share the engine); tokens follow.
    waiting = Signal(int)
    cut = Signal(object)  # app.datatypes.ContextCut: what the overflow policy left out; before the reply's tokens
    # app.documents.retrieve.Retrieval: the passages of the chat's documents the reply is given; before its tokens
    retrieved = Signal(object)
    # A reply's request id and what came of it, in the engine's order: a ContextCut, a Retrieval, Waiting, TokenChunks,
    # then one Done, EngineError or EngineCrashed (emitted just before the signal of its own kind above).
    replied = Signal(str, object)
    load_failed = Signal(object)  # a load's EngineError or EngineCrashed (just before ``failed`` or ``crashed``)

    _request_load = Signal(str, object, object)
    # messages, sampling, id, states, overflow, documents
    _request_generate = Signal(object, object, str, object, object, object)
    _request_close = Signal()

    def __init__(self, client: EngineClientLike | None = None, parent: QObject | None = None, *,
                 make_pool: Callable[[], ModelPool] | None = None) -> None:
        """``client``: one engine (tests, benchmarks); or ``make_pool``, which makes the app's one model pool on first
        use (``over``)."""
        super().__init__(parent)
        if (client is None) == (make_pool is None):
            raise TypeError("EngineBridge takes a client or make_pool, one of them")
        self._client_lock = threading.Lock()  # the worker thread and the GUI thread may both ask first
        self._client: EngineClientLike | None = client
        self._pool: ModelPool | None = None
        self._make_pool = make_pool
        self.sending = threading.Lock()  # a reply's restore, generation and save are sent together (_Worker)
        self._request_ids = itertools.count(1)
        # The chat's generations, from asked for until they end, each with its tokens on their way to the GUI.
        self._buffers: dict[str, TokenBuffer] = {}
        self._buffers_lock = threading.Lock()
        self._threads: list[threading.Thread] = []  # the batching model's replies' threads
        self._loading = False
        self._busy = False
        self._last_flush = 0.0
        self._thread = QThread()
        self._thread.setObjectName("engine-bridge")
        self._worker = _Worker(self)
        self._worker.moveToThread(self._thread)
        self._thread.finished.connect(self._worker.deleteLater)
        # Worker -> GUI: bound slots of this GUI-thread object, so Qt queues them onto the GUI thread (from the
        # worker and from the replies' own threads alike).
        worker = self._worker
        for signal, slot in ((worker.loaded, self._on_loaded), (worker.load_progress, self._on_load_progress),
                             (worker.done, self._on_done), (worker.failed, self._on_failed),
                             (worker.crashed, self._on_crashed), (worker.refused, self._on_refused),
                             (worker.tokens_pending, self._on_tokens_pending), (worker.waiting, self._on_waiting),
                             (worker.cut, self._on_cut), (worker.retrieved, self._on_retrieved)):
            signal.connect(slot)
        # GUI -> worker: queued onto the worker thread.
        self._request_load.connect(self._worker.load)
        self._request_generate.connect(self._worker.generate)
        self._request_close.connect(self._worker.close)
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.timeout.connect(self._flush_tokens)
        self._thread.start()

    def _adopt(self, pool: ModelPool) -> None:
        self._client = self._pool = pool
        pool.on_unload = self.model_unloaded.emit  # from any thread: queued to the GUI's slots
        pool.on_change = self.models_changed.emit
        pool.start()

    @property
    def client(self) -> EngineClientLike:
        """The engine client, shared with the local server (app/ui/server/server_page.py); the pool is made here on
        first use."""
        with self._client_lock:
            if self._client is None:
                assert self._make_pool is not None
                self._adopt(self._make_pool())
            assert self._client is not None
            return self._client

    @property
    def made_client(self) -> EngineClientLike | None:
        """The client if it exists (None: nothing has used the app's pool yet); never makes one."""
        return self._client

    @property
    def pool(self) -> ModelPool | None:
        """The app's model pool once made; None for a single engine, or before the pool is first used (no model is
        loaded then either)."""
        return self._pool

    @classmethod
    def over(cls, make_pool: Callable[[], ModelPool], parent: QObject | None = None) -> EngineBridge:
        """The app's bridge: over its one model pool (several models loaded, Eject, the budget's refusals), made by
        ``make_pool`` on first use."""
        return cls(parent=parent, make_pool=make_pool)

    @property
    def busy(self) -> bool:
        """A load or a reply is under way."""
        return self._busy

    @property
    def loading(self) -> bool:
        return self._loading

    def _set_busy(self) -> None:
        busy = self._loading or bool(self._buffers)
        if busy != self._busy:
            self._busy = busy
            self.busy_changed.emit(busy)

    @property
    def parallel(self) -> int:
        """How many replies the loaded model decodes together (1: one after another; as the server's queue reads
        it, app/server/engine_queue.py)."""
        client = self._client
        loaded = client.loaded if client is not None else None
        return max(1, int(loaded.details.get("parallel", 1))) if loaded is not None else 1

    def replying(self, besides: str = "") -> bool:
        """Whether a reply of the chat's other than ``besides`` is under way (any thread)."""
        with self._buffers_lock:
            return any(request_id != besides for request_id in self._buffers)

    def buffer(self, request_id: str) -> TokenBuffer:
        """The reply's tokens on their way to the GUI (a thread-safe buffer of its own)."""
        with self._buffers_lock:
            return self._buffers.setdefault(request_id, TokenBuffer())

    @property
    def engine_pid(self) -> int | None:
        """The engine host's process id, when one runs (for the memory figures and for tests)."""
        client = self._client
        return client.pid if client is not None else None

    def load(self, model_path: str, settings: LoadSettings, *, estimate_bytes: int | None = None,
             force: bool = False) -> None:
        """Load (or, with a pool, switch to) a model; ``estimate_bytes`` and ``force`` count with a pool only."""
        self._loading = True
        self._set_busy()
        self._request_load.emit(model_path, settings, {"estimate_bytes": estimate_bytes or 0, "force": force})

    def eject(self, model_path: str) -> None:
        """Unload one of the pool's models now, on a thread of its own; ``model_unloaded`` follows."""
        if self.pool is not None:
            threading.Thread(target=self.pool.unload, args=(model_path,), name="engine-eject", daemon=True).start()

    def generate(self, messages: Sequence[Message], sampling: SamplingSettings, states: StateKeys | None = None,
                 overflow: Overflow | None = None, documents: Documents | None = None) -> str:
        """A reply to ``messages``; returns its request id (``replied`` names it, ``stop`` takes it). ``states``: the
        conversation's saved states to resume from and save to; ``overflow``: the chat's overflow policy, its last
        cut and the indices of its pinned messages (app/engine/overflow.py): the worker chooses what of ``messages``
        the model reads, and says a cut through ``cut`` before the reply's tokens; ``documents``: the store and the
        chat's collections, whose passages for the last user message the worker adds to it, said through
        ``retrieved`` before the reply's tokens. On a model that decodes several together it runs on a thread of its
        own, beside the others; else on the worker, after them."""
        request_id = f"chat-{next(self._request_ids)}"
        self.buffer(request_id)
        self._set_busy()
        args = (list(messages), sampling, request_id, states, overflow, documents)
        if self.parallel > 1:
            thread = threading.Thread(target=self._reply_thread, args=args, name=f"engine-bridge-{request_id}",
                                      daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()
        else:
            self._request_generate.emit(*args)
        return request_id

    def _reply_thread(self, *args: Any) -> None:
        """A reply on a thread of its own. One that outlived ``shutdown``'s wait (an engine that stopped answering)
        finds the worker deleted as it says what came of it: nobody is left to hear it then."""
        worker = self._worker
        try:
            worker.generate(*args)
        except RuntimeError:
            if shiboken6.isValid(worker):
                raise

    def stop(self, request_id: str | None = None) -> None:
        """Ask the engine to stop this reply (None: every reply of the chat's); each ends with a Done whose stop
        reason is 'cancelled'. Safe at any moment: the engine honours it even if the request has not reached it
        yet; the other replies go on."""
        with self._buffers_lock:
            ids = list(self._buffers) if request_id is None else [request_id]
        for each in ids:
            self.client.cancel(each)

    def shutdown(self, timeout_ms: int = 10_000) -> None:
        """Stop, close the client and end the worker thread. Idempotent."""
        if not self._thread.isRunning():
            return
        self.stop()
        deadline = time.monotonic() + timeout_ms / 1000
        for thread in self._threads:  # the replies' threads end with their stopped replies, before the worker goes
            thread.join(max(0.0, deadline - time.monotonic()))
        self._request_close.emit()
        self._thread.quit()
        if self._thread.wait(timeout_ms):
            # A worker still in a slot when quit() came leaves its loop without the close queued behind it (Qt
            # delivers events posted during a pass on the next pass, which quit() ends), and the engine hosts
            # would outlive the window: the thread has ended, so close them here (closing twice is harmless).
            self._worker.close()

    @Slot()
    def _on_tokens_pending(self) -> None:
        wait_ms = COALESCE_MS - (time.monotonic() - self._last_flush) * 1000
        if wait_ms <= 0:
            self._flush_tokens()
        elif not self._flush_timer.isActive():
            self._flush_timer.start(int(wait_ms) + 1)

    @Slot()
    def _flush_tokens(self) -> None:
        """Every reply's new tokens, one update each."""
        self._flush_timer.stop()
        self._last_flush = time.monotonic()
        with self._buffers_lock:
            request_ids = list(self._buffers)
        for request_id in request_ids:
            self._flush(request_id)

    def _flush(self, request_id: str) -> None:
        with self._buffers_lock:
            buffer = self._buffers.get(request_id)
        chunk = buffer.drain() if buffer is not None else None
        if chunk is not None and (chunk.text or chunk.reasoning or chunk.count):
            self.replied.emit(request_id, chunk)
            self.tokens.emit(chunk)

    def _end(self, request_id: str) -> bool:
        """The reply's last tokens delivered and the reply forgotten; False for a load's (no reply)."""
        if not request_id:
            return False
        self._flush(request_id)
        with self._buffers_lock:
            self._buffers.pop(request_id, None)
        self._set_busy()
        return True

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        self.load_progress.emit(fraction)

    @Slot(str, int)
    def _on_waiting(self, request_id: str, ahead: int) -> None:
        """``ahead`` requests were sent before the reply's and are not through: on a model that decodes several
        together, it waits only for those past the sequences beside its own."""
        if (ahead := ahead - (self.parallel - 1)) > 0:
            self.replied.emit(request_id, Waiting(ahead))
            self.waiting.emit(ahead)

    @Slot(str, object)
    def _on_cut(self, request_id: str, cut: ContextCut) -> None:
        self.replied.emit(request_id, cut)
        self.cut.emit(cut)

    @Slot(str, object)
    def _on_retrieved(self, request_id: str, retrieval: Retrieval) -> None:
        self.replied.emit(request_id, retrieval)
        self.retrieved.emit(retrieval)

    @Slot(object)
    def _on_loaded(self, info: Loaded) -> None:
        self._loading = False
        self._set_busy()
        self.loaded.emit(info)

    @Slot(str, object)
    def _on_done(self, request_id: str, done: Done) -> None:
        self._end(request_id)
        self.replied.emit(request_id, done)
        self.done.emit(done)

    def _ended_with(self, request_id: str, error: EngineError | EngineCrashed) -> None:
        """A reply's or a load's error, said where it belongs."""
        if self._end(request_id):
            self.replied.emit(request_id, error)
        else:
            self._loading = False
            self._set_busy()
            self.load_failed.emit(error)

    @Slot(str, object)
    def _on_failed(self, request_id: str, error: EngineError) -> None:
        self._ended_with(request_id, error)
        self.failed.emit(error)

    @Slot(object)
    def _on_refused(self, error: BudgetRefused) -> None:
        self._loading = False
        self._set_busy()
        self.refused.emit(error)

    @Slot(str, object)
    def _on_crashed(self, request_id: str, error: EngineCrashed) -> None:
        self._ended_with(request_id, error)
        self.crashed.emit(error)
