"""Every loaded model of a process, one engine host each, within one memory budget (issues 19 and 29): the Chat's,
the local server's on-demand loads and remote models (at 0 bytes), and ``quantdesk serve``'s ``--model`` (pinned).

``ModelPool`` is an ``EngineClientLike`` whose calls go to its *active* model: the Chat's bridge and the local server
(app/server/router.py, which routes each request to one of the pool's models and queues it) use it as they used one
``EngineClient``. ``load(path, settings)`` makes ``path`` the active model: at once when it is
loaded already with those settings (no new host), else in an engine host of its own, beside the others, while the
budget and ``max_loaded`` allow. When they do not, idle models unload first, least recently used first, each with a
sentence saying which and why (``on_unload``); when even that cannot make room, ``BudgetRefused`` carries the estimate
and the budget in words (``app.models.budget``) and ``force`` ("Load anyway") goes past it. Models idle for
``idle_ttl_s`` unload too (``unload_idle``; ``start()`` runs it on a thread). A model answering a request is never
unloaded for room or idleness; ``unload(path)`` (Eject) is the user's word and closes it whatever it does. A
*pinned* model (``adopt(..., pin=True)``: the model ``quantdesk serve`` was started with) is never unloaded by the
pool, nor ejected; a request's load (``acquire``) never unloads the active model either, nor does the idle unload
while the local server serves it (``keep_active``).

The default budget is what ``free_memory`` (a callable its maker hands in: the machine probe is not the pool's) says
is free when first needed, plus what the pool holds then.

Loads and unloads happen one at a time (``_changing``); the model table is read from any thread under ``_lock``.
Qt-free; the blocking calls run on the caller's thread (the bridge's worker).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from app.engine.client import EngineClient, EngineClientLike
from app.engine.protocol import Asks
from app.errors import QuantDeskError
from app.models.budget import BudgetCheck, gib
from app.datatypes import (Done, Embedded, LoadSettings, Loaded, Prompt, Reranked, SamplingSettings, StateRestored,
                           StateSaved, Token)

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger(__name__)

FORCE_WORDS = "“Load anyway”"
EJECT_WAIT_S = 10.0  # how long an Eject waits for the replies it stopped to end before it closes the host


@dataclass(frozen=True)
class PoolLimits:
    budget_bytes: int | None = None  # None: what the fit check finds free when first needed, plus what is held then
    max_loaded: int | None = 2  # None: no count limit (quantdesk serve without --max-loaded)
    idle_ttl_s: float | None = None  # None: idle models stay loaded


def limits_from(settings: Settings) -> PoolLimits:
    """The limits an ``app.settings.Settings`` sets."""
    budget = settings.memory_budget_gib
    return PoolLimits(budget_bytes=None if budget is None else int(budget * (1 << 30)),
                      max_loaded=settings.max_loaded_models,
                      idle_ttl_s=settings.idle_unload_minutes * 60.0 if settings.idle_unload_minutes else None)


class BudgetRefused(QuantDeskError):
    """A model does not fit the memory budget beside the models that cannot be unloaded now. ``retry``: it would
    fit once the models answering now are done (they could then unload), so asking again later may succeed;
    ``forceable``: “Load anyway” would load it (past the budget; never past the count of loaded models)."""

    def __init__(self, check: BudgetCheck, message: str, *, retry: bool, forceable: bool) -> None:
        super().__init__(message)
        self.check = check
        self.retry = retry
        self.forceable = forceable


@dataclass
class PooledModel:
    path: str  # its key in the pool: the path it was loaded (or adopted) with
    client: EngineClientLike
    settings: LoadSettings
    loaded_as: Loaded
    estimate_bytes: int
    last_used: float
    users: int = 0  # requests answering now
    pinned: bool = False  # never unloaded by the pool (quantdesk serve's --model)
    owned: bool = True  # the pool closes its host (an adopted client is its maker's)

    @property
    def loaded(self) -> Loaded:
        """What its host holds now: an adopted client's owner may load another model into it (the Server page's
        tests over one EngineClient), a pool's own host keeps the model it was loaded with."""
        return self.client.loaded or self.loaded_as

    @property
    def name(self) -> str:
        return Path(self.path).name

    def idle_for(self, now: float) -> float | None:
        return None if self.users else now - self.last_used


class ModelPool:
    def __init__(self, limits: PoolLimits | None = None, *, make_client: Callable[[], EngineClientLike] = EngineClient,
                 free_memory: Callable[[], int | None] | None = None) -> None:
        """``free_memory``: what the fit check counts as free now (its maker's probe, e.g.
        ``app.machine.free_memory_bytes``); None: no default budget, only the one ``limits`` set."""
        self.limits = limits or PoolLimits()
        self._make_client = make_client
        self._free_memory = free_memory or (lambda: None)
        self._budget: int | None = None  # the default budget, worked out once
        self._models: dict[str, PooledModel] = {}
        self._active: str | None = None
        self._requests: dict[str, PooledModel] = {}  # request id -> the model answering it (for cancel)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified as a request ends
        self._changing = threading.Lock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self.on_unload: Callable[[str, str], None] | None = None  # (path, the sentence why); any thread
        self.on_change: Callable[[], None] | None = None  # a model loaded or unloaded, whoever asked; any thread
        self.host_starts = 0  # engine hosts started for loads (tests count them)
        # Set while the local server serves the active model as its primary: the idle unload leaves it too.
        self.keep_active = False

    # --- what is loaded ---

    def models(self) -> list[PooledModel]:
        """The loaded models, the most recently used first."""
        with self._lock:
            found = [m for m in self._models.values() if m.client.alive]
        return sorted(found, key=lambda m: -m.last_used)

    def get(self, path: str) -> PooledModel | None:
        with self._lock:
            return self._models.get(str(path))

    @property
    def active(self) -> PooledModel | None:
        with self._lock:
            return self._models.get(self._active) if self._active else None

    def active_pinned(self) -> bool:
        """The active model is pinned: the pool was made around it (quantdesk serve's --model, a test's engine)."""
        model = self.active
        return model is not None and model.pinned

    def check(self, path: str, estimate_bytes: int | None = None) -> BudgetCheck | None:
        """``path`` (loaded, or about to load with ``estimate_bytes``) against the budget and the other loaded models;
        None when the budget is unknown."""
        return self._check(path, estimate_bytes) if self.budget_bytes() is not None else None

    def _check(self, path: str, estimate_bytes: int | None) -> BudgetCheck:
        """The one place a pool's BudgetCheck is built (an unknown budget counts as 0: only the count then refuses)."""
        with self._lock:
            others = [m for m in self._models.values() if m.client.alive and m.path != path]
            model = self._models.get(path)
        estimate = estimate_bytes if estimate_bytes is not None else model.estimate_bytes if model else 0
        return BudgetCheck(Path(path).name, estimate, self.budget_bytes() or 0,
                           tuple((m.name, m.estimate_bytes) for m in others))

    def set_limits(self, limits: PoolLimits) -> None:
        """New limits from the Settings page; they hold from the next load (and the next idle check) on."""
        with self._lock:
            if limits.budget_bytes != self.limits.budget_bytes:
                self._budget = None
            self.limits = limits

    def budget_bytes(self) -> int | None:
        if self.limits.budget_bytes is not None:
            return self.limits.budget_bytes
        if self._budget is None:
            free = self._free_memory()
            if free is not None:
                with self._lock:
                    held = sum(m.estimate_bytes for m in self._models.values())
                self._budget = free + held
        return self._budget

    def budget_words(self) -> str:
        budget = self.budget_bytes()
        if budget is None:
            return "memory budget unknown (the fit check cannot tell what is free): set --memory-budget"
        if self.limits.budget_bytes is not None:
            return f"memory budget {gib(budget)} (as set)"
        return f"memory budget {gib(budget)}: what the fit check found free, plus what was loaded then"

    # --- EngineClientLike: the active model ---

    @property
    def loaded(self) -> Loaded | None:
        model = self.active
        return model.loaded if model is not None and model.client.alive else None

    @property
    def alive(self) -> bool:
        model = self.active
        return model is not None and model.client.alive

    @property
    def revivable(self) -> bool:
        model = self.active
        return model is not None and model.client.revivable

    @property
    def pid(self) -> int | None:
        model = self.active
        return model.client.pid if model is not None else None

    def start(self) -> ModelPool:
        """Start the idle check (a daemon thread); hosts start with their loads."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="model-pool-idle", daemon=True)
            self._reaper.start()
        return self

    def load(self, model_path: str | Path, settings: LoadSettings | None = None, *,
             on_progress: Callable[[float], None] | None = None, estimate_bytes: int = 0, force: bool = False,
             **options: Any) -> Loaded:
        """Make ``model_path`` the active model, loading it in a host of its own when it is not loaded with
        ``settings``. Raises BudgetRefused (nothing unloaded is loaded back), or what EngineClient.load raises."""
        model = self._ensure(str(model_path), settings or LoadSettings(), estimate_bytes, force, activate=True,
                             on_progress=on_progress, **options)
        return model.loaded

    def acquire(self, model_path: str, settings: LoadSettings, *, estimate_bytes: int = 0,
                force: bool = False) -> PooledModel:
        """For a request of the local server: the model loaded (as it is, whatever its settings) or loaded now
        with ``settings``, held until ``release``; the active model stays the Chat's."""
        return self._ensure(model_path, settings, estimate_bytes, force, activate=False, hold=True)

    def hold_loaded(self, model_path: str) -> PooledModel | None:
        """A loaded model, held until ``release`` (None when it is not loaded)."""
        with self._lock:
            model = self._models.get(model_path)
            if model is None or not model.client.alive:
                return None
            model.users += 1
            model.last_used = time.monotonic()
            return model

    def release(self, model: PooledModel) -> None:
        self._release(model, None)

    def adopt(self, client: EngineClientLike, estimate_bytes: int = 0, *, pin: bool = True,
              owned: bool = False) -> PooledModel:
        """Take a client that has its model loaded already as the active model (``quantdesk serve``'s --model, or
        a test's engine): pinned, it is never unloaded by the pool; not owned, ``close()`` leaves its host to its
        maker."""
        loaded = client.loaded
        if loaded is None:
            raise ValueError("the engine client has no model loaded")
        model = PooledModel(loaded.model_path, client, LoadSettings(n_ctx=loaded.n_ctx), loaded, estimate_bytes,
                            time.monotonic(), pinned=pin, owned=owned)
        with self._changing, self._lock:
            self._models[model.path] = model
            self._active = model.path
        return model

    def _ensure(self, path: str, settings: LoadSettings, estimate_bytes: int, force: bool, *, activate: bool,
                hold: bool = False, **load_options: Any) -> PooledModel:
        with self._changing:
            with self._lock:
                model = self._models.get(path)
                if model is not None and model.client.alive and (model.settings == settings or hold):
                    model.last_used = time.monotonic()
                    model.users += hold
                    if activate:
                        self._active = path
                    return model
            if model is not None:  # other settings (Reload), or its host died: a fresh host, after the room check
                self._drop(model, "")
            self._make_room(path, estimate_bytes, force, keep_active=not activate)
            client = self._make_client()
            self.host_starts += 1
            try:
                loaded = client.load(path, settings, **load_options)
            except BaseException:
                client.close()
                raise
            model = PooledModel(path, client, settings, loaded, estimate_bytes, time.monotonic(), users=int(hold))
            with self._lock:
                self._models[path] = model
                if activate:
                    self._active = path
            log.info("loaded %s (estimate %s)", Path(path).name, gib(estimate_bytes))
            self._changed()
            return model

    def generate(self, messages: Prompt, sampling: SamplingSettings | None = None, request_id: str | None = None,
                 on_wait: Callable[[int], None] | None = None, events_every_s: float | None = None
                 ) -> Iterator[Token | Done]:
        """As EngineClient.generate, on the active model: sent now (so the local server's queue keeps arrival
        order), and the model is held until the stream ends or is closed."""
        model = self._hold(request_id)
        try:
            stream = model.client.generate(messages, sampling, request_id=request_id, on_wait=on_wait,
                                           events_every_s=events_every_s)
        except BaseException:
            self._release(model, request_id)
            raise
        return _HeldStream(stream, lambda: self._release(model, request_id))

    def call(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs) -> A:
        """As EngineClient.call, on the active model: a request of the protocol's table, e.g.
        ``pool.call(RerankRequest, query, texts)``."""
        return self._on_active(lambda client: client.call(kind, *args, **kwargs))

    def send(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs
             ) -> Callable[[], A]:
        """As EngineClient.send, on the active model, held until its answer is taken."""
        return self._sent_to_active(lambda client: client.send(kind, *args, **kwargs))

    def embed(self, texts: Sequence[str]) -> Embedded:
        return self._on_active(lambda client: client.embed(texts))

    def rerank(self, query: str, texts: Sequence[str]) -> Reranked:
        return self._on_active(lambda client: client.rerank(query, texts))

    def count_tokens(self, messages: Prompt, sampling: SamplingSettings | None = None) -> int:
        return self._on_active(lambda client: client.count_tokens(messages, sampling))

    def save_state(self, path: str | Path) -> StateSaved:
        """As EngineClient.save_state, on the active model (app/engine/states.py)."""
        return self.send_save_state(path)()

    def send_save_state(self, path: str | Path) -> Callable[[], StateSaved]:
        """As EngineClient.send_save_state, on the active model, held until its answer is taken."""
        return self._sent_to_active(lambda client: client.send_save_state(path))

    def restore_state(self, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings | None = None) -> StateRestored:
        """As EngineClient.restore_state, on the active model."""
        return self.send_restore_state(paths, messages, sampling)()

    def send_restore_state(self, paths: Sequence[str], messages: Prompt, sampling: SamplingSettings | None = None,
                           evict_to: Sequence[str] = ()) -> Callable[[], StateRestored]:
        return self._sent_to_active(lambda client: client.send_restore_state(paths, messages, sampling, evict_to))

    def _on_active(self, ask: Callable[[EngineClientLike], Answer]) -> Answer:
        """``ask`` of the active model's client, the model held meanwhile."""
        model = self._hold(None)
        try:
            return ask(model.client)
        finally:
            self._release(model, None)

    def _sent_to_active(self, send: Callable[[EngineClientLike], Callable[[], Answer]]) -> Callable[[], Answer]:
        """``send`` to the active model's client now, the model held until its answer is taken."""
        model = self._hold(None)
        try:
            answer = send(model.client)
        except BaseException:
            self._release(model, None)
            raise
        return _answered_then(answer, lambda: self._release(model, None))

    def cancel(self, request_id: str | None = None) -> None:
        with self._lock:
            model = self._requests.get(request_id) if request_id else None
            model = model or self._models.get(self._active or "")
        if model is not None:
            model.client.cancel(request_id)

    def close(self) -> None:
        """Close every host. Idempotent."""
        self._stop.set()
        with self._changing:
            with self._lock:
                models, self._models, self._active = list(self._models.values()), {}, None
        for model in models:
            if model.owned:
                model.client.close()
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join(10)

    # --- unloading ---

    def unload(self, path: str, why: str = "ejected") -> bool:
        """Eject one model: what it is answering is stopped first (a reply ends as stopped by the user and is
        kept), then its host closes."""
        with self._changing:
            model = self.get(path)
            if model is None:
                return False
            if model.pinned:
                raise QuantDeskError(f"{model.name} stays loaded: it is the model the server was started with "
                                     "(--model)", "stop the server to unload it")
            if model.users:
                model.client.cancel(None)
                with self._idle:
                    self._idle.wait_for(lambda: model.users == 0, timeout=EJECT_WAIT_S)
            self._drop(model, f"{model.name} unloaded: {why}.")
            return True

    def forget_dead(self) -> list[str]:
        """Drop the models whose host died (the caller words the crash); the others stay loaded."""
        with self._lock:
            dead = [m for m in self._models.values() if not m.client.alive]
        for model in dead:
            self._drop(model, "")
        return [m.path for m in dead]

    def unload_idle(self, now: float | None = None) -> list[str]:
        """Unload the models idle for idle_ttl_s or longer; skipped while a load or unload is under way."""
        ttl = self.limits.idle_ttl_s
        if ttl is None or not self._changing.acquire(blocking=False):
            return []
        try:
            now = time.monotonic() if now is None else now
            with self._lock:
                kept = self._active if self.keep_active else None
                due = [m for m in self._models.values()
                       if not m.pinned and m.path != kept and (t := m.idle_for(now)) is not None and t >= ttl]
            dropped = [m for m in due if self._drop(m, f"{m.name} unloaded after {_minutes(ttl)} without a request, "
                                                       f"to free its {gib(m.estimate_bytes)}.", idle_only=True)]
            return [m.path for m in dropped]
        finally:
            self._changing.release()

    def _make_room(self, path: str, estimate: int, force: bool, *, keep_active: bool = False) -> None:
        """Under ``_changing``: unload idle models, least recently used first, until one more model fits the
        count and the budget; then refuse in words, or go on past the budget with ``force``. Pinned models stay,
        and so does the active one for a request's load (``keep_active``)."""
        budget = self.budget_bytes()
        limit = self.limits.max_loaded
        name = Path(path).name
        while True:
            now = time.monotonic()
            with self._lock:
                others = [m for m in self._models.values() if m.client.alive]
                kept = [m for m in others if m.pinned or (keep_active and m.path == self._active)]
            check = self._check(path, estimate)
            too_many = limit is not None and len(others) >= max(1, limit)
            over = budget is not None and not check.fits
            if not too_many and (not over or force):
                return
            idle = [(t, m) for m in others if m not in kept and (t := m.idle_for(now)) is not None]
            if not idle:
                break
            _, oldest = max(idle, key=lambda pair: pair[0])
            why = (f"the limit of {limit} loaded model{'s' if limit != 1 else ''}"
                   if too_many else f"the memory budget of {gib(budget or 0)}")
            self._drop(oldest, f"{oldest.name} unloaded to make room for {name}: it was the least recently used "
                               f"idle model, and {why} had no room for both.", idle_only=True)
        if too_many:
            raise BudgetRefused(check, f"{name} cannot load now: at most {limit} model{'s' if limit != 1 else ''} "
                                       "may be loaded at once (Settings), and each loaded model is answering a "
                                       "request. Try again when one is done.", retry=True, forceable=False)
        # It fits once the busy ones are done and unload (the pinned and kept ones never do).
        return_later = budget is not None and estimate + sum(m.estimate_bytes for m in kept) <= budget
        raise BudgetRefused(check, check.refusal(FORCE_WORDS), retry=return_later, forceable=True)

    def _drop(self, model: PooledModel, sentence: str, *, idle_only: bool = False) -> bool:
        """Out of the table first (a request for it now waits for ``_changing`` and loads it again), then its host
        closes. ``idle_only``: not if a request took it meanwhile."""
        with self._lock:
            if idle_only and model.users:
                return False
            if self._models.get(model.path) is model:
                del self._models[model.path]
            if self._active == model.path:
                self._active = None
        if model.owned:
            model.client.close()
        if sentence:
            log.info("%s", sentence)
            if self.on_unload is not None:
                self.on_unload(model.path, sentence)
        self._changed()
        return True

    def _changed(self) -> None:
        if self.on_change is not None and not self._stop.is_set():
            self.on_change()

    def _hold(self, request_id: str | None) -> PooledModel:
        from app.errors import EngineError

        with self._lock:
            model = self._models.get(self._active or "")
            if model is None:
                raise EngineError("no model is loaded", "load a model first", kind="load")
            model.users += 1
            model.last_used = time.monotonic()
            if request_id:
                self._requests[request_id] = model
            return model

    def _release(self, model: PooledModel, request_id: str | None) -> None:
        with self._lock:
            model.users -= 1
            model.last_used = time.monotonic()
            if request_id:
                self._requests.pop(request_id, None)
            self._idle.notify_all()

    def _reap(self) -> None:
        while not self._stop.wait(_check_every(self.limits.idle_ttl_s)):
            self.unload_idle()


class _HeldStream:
    """A generation's events; ``on_end`` runs once, when they end, fail or are closed."""

    def __init__(self, stream: Iterator[Token | Done], on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end: Callable[[], None] | None = on_end

    def __iter__(self) -> _HeldStream:
        return self

    def __next__(self) -> Token | Done:
        try:
            return next(self._stream)
        except BaseException:  # StopIteration included: the stream is over either way
            self._end()
            raise

    def close(self) -> None:
        try:
            getattr(self._stream, "close", lambda: None)()
        finally:
            self._end()

    def _end(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()


Answer = TypeVar("Answer")
A = TypeVar("A")  # the event that answers a request of the protocol's table
P = ParamSpec("P")


def _answered_then(answer: Callable[[], Answer], release: Callable[[], None]) -> Callable[[], Answer]:
    """``answer``, then ``release`` (once, however it ends)."""

    def wait() -> Answer:
        try:
            return answer()
        finally:
            release()

    return wait


def _check_every(ttl: float | None) -> float:
    return 5.0 if ttl is None else max(0.05, min(ttl / 4, 5.0))


def _minutes(seconds: float) -> str:
    if seconds >= 60:
        minutes = round(seconds / 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} s"

