"""What the server answers through: each request's ``model`` routed to one of the pool's models (app/engine/pool.py,
the one ``ModelPool`` of the process), a queue per model, and a lease while a request is answered.

- The **primary** is the pool's active model: the one ``quantdesk serve --model`` loaded (pinned: never unloaded),
  or the Chat's in the app (the Chat may swap it at any time; a request's load never unloads it).
- A **library model** (``app/hub/library``) is loaded by the first request naming it, only when on-demand loads are
  allowed (``--load-on-demand``, off by default), with the settings and estimate of the one load planner
  (``plan``: app/models/planner.py, as the Chat's model bar plans its loads). The
  pool makes room (least recently used idle models unload) or refuses (``BudgetRefused``), here answered 503 (busy
  models hold the memory: retry) or 507 (it cannot fit) with the estimate, the budget and what is loaded; with
  ``force`` it loads past the budget and the risk is said in words (``warnings``).
- A **remote model** (``remote:CONNECTION/MODEL``, with ``serve_remotes``) is loaded into the pool too, at 0 bytes.
- **Other names** for the primary (``aliases``: ``--alias gpt-4.1``), and with ``serve_any_model``
  (``--serve-any-model``, off by default) any name that is no model here: clients with a fixed model name are answered
  by the primary under the name they gave; ``/v1/models`` lists the aliases and says the switch.

Eviction, the idle unload, the budget and its refusal are the pool's, so ``quantdesk serve`` and the app's server
evict and refuse the same way; the server's settings set the pool's limits while it serves (``ServeSettings``). A
request leases its model (``PooledModel.users``) until its answer is over, so nothing unloads under it; a request for
a model being unloaded waits for the pool and loads it again; a dead host is replaced on the next request.
``unload(served)`` is Eject (``POST /models/unload``): a model answering is stopped first; the primary is refused.

Qt-free; the blocking calls run on worker threads (``asyncio.to_thread``) from the server's event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.client import EngineClient, EngineClientLike
from app.engine.pool import BudgetRefused, ModelPool, PooledModel, PoolLimits
from app.errors import QuantDeskError
from app.models.budget import fit_refusal, fit_warning, free_memory_bytes, too_large
from app.models.planner import LoadPlan, values_words
from app.remote.connections import is_remote_ref
from app.server.engine_queue import EngineQueue
from app.server.gateway import LIST_TTL_S, RemoteModels
from app.server.params import ApiError
from app.datatypes import LoadSettings, Loaded

if TYPE_CHECKING:
    from app.hardware.profile import HardwareProfile

log = logging.getLogger(__name__)

DEFAULT_IDLE_TTL_S = 600.0
# Requests a llama.cpp model decodes together by default (quantdesk serve --parallel, the Server page's field): see
# app/commands/server.py's copy for why 4.
ON_DEMAND_FLAG = "--load-on-demand (the Server page: “Load library models on demand”)"
FORCE_FLAG = "--force (the Server page: “Load anyway, past the memory budget”)"


def model_id(model_path: str) -> str:
    """The id clients send as ``model``: the file or folder name, without .gguf; a remote model keeps the id its own
    server gives it (``remote:box/Qwen/Qwen3-8B`` is served as ``Qwen/Qwen3-8B``)."""
    from app.remote.connections import parse_ref

    if is_remote_ref(model_path):
        return parse_ref(model_path)[1]
    name = Path(model_path).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name


@dataclass(frozen=True)
class ServeSettings:
    load_on_demand: bool = False
    memory_budget_bytes: int | None = None  # None: the pool's (by default what is free, plus what is loaded)
    idle_ttl_s: float = DEFAULT_IDLE_TTL_S
    max_loaded: int | None = None  # None: the pool's (quantdesk serve: no count limit)
    force: bool = False  # load past the budget (and past the fit check), with the risk logged in words
    serve_remotes: bool = False
    load: LoadSettings = field(default_factory=LoadSettings)  # context and threads of on-demand loads
    profile_path: str | None = None  # plan for the machine saved in this file (quantdesk hw --json), not this one
    # Other names the primary model answers to, for clients with a fixed model name (gpt-4.1, claude-…); with
    # serve_any_model, every name that is no model here does (llama-server serves its one model whatever is asked).
    aliases: tuple[str, ...] = ()
    serve_any_model: bool = False

    def limits(self, pool: PoolLimits) -> PoolLimits:
        """The pool's limits while this server serves: its own where it sets them, else the pool's."""
        return PoolLimits(
            budget_bytes=pool.budget_bytes if self.memory_budget_bytes is None else self.memory_budget_bytes,
            max_loaded=pool.max_loaded if self.max_loaded is None else self.max_loaded,
            idle_ttl_s=self.idle_ttl_s)


@dataclass(frozen=True)
class Served:
    """A loaded model other than the primary, by the id it is served as."""

    served: str
    model: PooledModel

    @property
    def client(self) -> EngineClientLike:
        return self.model.client

    @property
    def estimate_bytes(self) -> int:
        return self.model.estimate_bytes

    @property
    def users(self) -> int:
        """Requests it answers now (their leases)."""
        return self.model.users


class Lease:
    """A model lent to one request until ``release()`` (idempotent): it is not unloaded meanwhile."""

    def __init__(self, router: ModelRouter, engine_queue: EngineQueue, loaded: Loaded, served: str,
                 model: PooledModel | None) -> None:
        self.queue, self.loaded, self.served = engine_queue, loaded, served
        self._router, self._model = router, model
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            if self._model is not None:
                self._router.models.release(self._model)


class ModelRouter:
    def __init__(self, engine: ModelPool | EngineClientLike, settings: ServeSettings | None = None, *,
                 max_pending: int = 32,
                 make_client: Callable[[], EngineClientLike] = EngineClient, remotes: RemoteModels | None = None,
                 library: Callable[[], list[tuple[str, str]]] | None = None,
                 profile: HardwareProfile | None = None) -> None:
        """``engine``: the app's ModelPool, or one client with its model loaded (``quantdesk serve``, tests), which
        becomes a pool's pinned primary (its host stays its maker's). ``profile``: the machine the fit check plans
        for (a HardwareProfile; by default the saved one of ``profile_path``, or this machine probed once)."""
        self.settings = settings or ServeSettings()
        self._profile = profile
        self._plans: dict[str, LoadPlan] = {}  # library path -> its plan with the server's settings
        self.models = _pool_of(engine, make_client, lambda: free_memory_bytes(self.profile()))
        self._limits_before = self._limits_set = self.models.limits
        if self.settings.load_on_demand or self.models.active_pinned():
            self._limits_set = self.settings.limits(self.models.limits)
            self.models.set_limits(self._limits_set)
        if self.settings.load_on_demand and self.models.active_pinned():
            self._count_primary()
        self.models.keep_active = True  # the primary: in the app the Chat's model, never unloaded while served
        self._starts_before = self.models.host_starts
        self.primary_queue = EngineQueue(self.models, max_pending=max_pending)  # the active model's; started by the app
        self.remotes = remotes if remotes is not None or not self.settings.serve_remotes else RemoteModels()
        self._max_pending = max_pending
        self._library_source = library or _library_models
        self._library: list[tuple[str, str]] = []  # (served id, path)
        self._library_at = -LIST_TTL_S
        self._queues: dict[str, tuple[EngineClientLike, EngineQueue]] = {}  # path -> its client, queue
        self._lock = threading.Lock()  # the queues and the closed flag
        self._closed = False
        self.warnings: list[str] = []  # loads past the budget, in words (also logged)

    # --- life ---

    def start(self) -> ModelRouter:
        self.models.start()  # the pool's idle check
        return self

    def close(self) -> None:
        """Close the server's queues; the pool's models stay with their owner (a pinned primary's pool closes its
        own hosts). Idempotent."""
        with self._lock:
            self._closed = True
            queues, self._queues = [q for _, q in self._queues.values()], {}
        for engine_queue in queues:
            engine_queue.close()
        if self.models.active_pinned():  # the pool is the server's own (quantdesk serve, tests)
            self.models.close()
        else:  # the app's: its limits go back to the Chat's (unless Settings set new ones meanwhile)
            self.models.keep_active = False
            if self.models.limits == self._limits_set:
                self.models.set_limits(self._limits_before)

    @property
    def loads(self) -> int:
        """Engine hosts started for this server's requests (tests count them)."""
        return self.models.host_starts - self._starts_before

    # --- what is served ---

    def primary(self) -> PooledModel | None:
        return self.models.active

    def primary_loaded(self) -> Loaded | None:
        """What the primary's client says it holds: still set after its host died (a request then learns it as
        engine_crashed), None once its owner closed it."""
        model = self.models.active
        return model.client.loaded if model is not None else None

    def primary_id(self) -> str | None:
        loaded = self.primary_loaded()
        return model_id(loaded.model_path) if loaded is not None else None

    def primary_figures(self) -> dict[str, Any]:
        """The active model's sequences, queue and prompt cache now (``sequence_figures``): the Server page's."""
        return sequence_figures(self.primary_queue)

    def loaded_engines(self) -> list[Served]:
        """The loaded models other than the primary, most recently used first."""
        primary = self.primary()
        return [Served(_served_id(m.loaded.model_path), m) for m in self.models.models() if m is not primary]

    def library_models(self) -> list[tuple[str, str]]:
        """(served id, path) of the library models a request may load (listed at most every LIST_TTL_S)."""
        with self._lock:
            if time.monotonic() - self._library_at < LIST_TTL_S:
                return list(self._library)
        try:
            found = self._library_source()
        except QuantDeskError as exc:
            log.warning("the library cannot be read: %s", exc)
            found = []
        with self._lock:
            self._library, self._library_at = found, time.monotonic()
            self._plans = {}  # a file may have changed too
        return list(found)

    def library_changed(self) -> None:
        """The library has a new model (a pull): list it again on the next request instead of after LIST_TTL_S."""
        with self._lock:
            self._library_at = -LIST_TTL_S

    def profile(self) -> HardwareProfile:
        if self._profile is None:
            from app import machine
            from app.hardware import load_profile

            path = self.settings.profile_path
            self._profile = load_profile(path) if path else machine.profile()
        return self._profile

    def primary_estimate(self) -> int:
        model = self.primary()
        return model.estimate_bytes if model is not None else 0

    def _count_primary(self) -> None:
        """A pinned primary counts in the budget by the fit check's estimate, as a load on demand would."""
        model = self.models.active
        assert model is not None
        if is_remote_ref(model.path) or model.loaded.backend == "remote":
            return
        try:
            plan = self.plan(model.path, LoadSettings(n_ctx=model.loaded.n_ctx))
        except ApiError:
            return  # an unreadable header: what the engine says it holds
        model.estimate_bytes = plan.estimate_bytes or model.estimate_bytes

    def plan(self, path: str, base: LoadSettings | None = None) -> LoadPlan:
        """Load settings and estimate for a library model, from the one load planner (app/models/planner.py), as the
        Chat's model bar has them: the model's preset, its projector, the pinned runtime, the most GPU layers that
        fit, a q8_0 KV cache or a shorter context where the server's context does not fit. With the server's
        settings, kept until the library is listed again: /v1/models plans every library model. ``base``: the
        primary's estimate as it is loaded (its context and KV cache type held, no preset, no projector looked
        for). ApiError 500 for a header that cannot be read."""
        if base is not None:
            return self._make_plan(path, base, held=("n_ctx", "kv_cache_type"), primary=True)
        plan = self._plans.get(path)
        if plan is None:
            plan = self._plans[path] = self._make_plan(path, self.settings.load)
        return plan

    def _make_plan(self, path: str, base: LoadSettings, *, held: tuple[str, ...] = (), primary: bool = False
                   ) -> LoadPlan:
        from app.hub import presets
        from app.models.planner import PresetSetAside, plan_load

        wanted = LoadSettings(n_ctx=base.n_ctx, threads=base.threads, kv_cache_type=base.kv_cache_type,
                              parallel=base.parallel)  # serve --parallel, the Server page's field
        plan = plan_load(path, self.profile(), wanted, given=held, preset=None if primary else presets.for_model(path),
                         find_projector=not primary)
        if plan.problem:
            raise ApiError(500, f"the library model {Path(path).name!r} cannot be read: {plan.problem}",
                           type="server_error", code="model_unreadable")
        for note in plan.notes:
            if isinstance(note, PresetSetAside):
                log.warning("the preset of %s (%s) does not fit this machine (%s); it loads with the fit check's "
                            "settings", Path(path).name, values_words(note.values), note.reason)
            else:
                log.info("%s: %s", Path(path).name, note.words())
        return plan

    # --- leasing ---

    def acquire(self, wanted: object) -> Lease:
        """The model for a request's ``model``, loading it when allowed. Blocking. ApiError: 404 for a model not
        served (or not allowed to load), 503 / 507 when it does not fit, 502 for a remote that cannot be used."""
        if not isinstance(wanted, str) or not wanted or wanted == self.primary_id():
            return self._primary_lease()
        if wanted in self.settings.aliases:
            return self._primary_lease(wanted)
        lease = self._lease_loaded(wanted)
        if lease is not None:
            return lease
        if is_remote_ref(wanted) and self.remotes is not None:
            self._check_remote(wanted)
            return self._load(wanted, LoadPlan(wanted, LoadSettings()), remote=True)
        path = dict(self.library_models()).get(wanted)
        if path is None:
            if self.settings.serve_any_model and not is_remote_ref(wanted):
                return self._primary_lease(wanted)  # answered by the primary, under the name the client gave
            if self.settings.load_on_demand:
                raise ApiError(404, f"the model {wanted[:200]!r} is not served here: it is neither loaded nor in "
                                    "the library (quantdesk ls)", param="model", code="model_not_found")
            return self._primary_lease()  # the request's check of ``model`` answers 404 in words
        if not self.settings.load_on_demand:
            raise ApiError(404, f"the model {wanted[:200]!r} is in the library but not loaded, and this server "
                                f"does not load models on request; start it with {ON_DEMAND_FLAG} to allow it",
                           param="model", code="model_not_loaded")
        plan = self.plan(path)
        if not plan.fits and plan.fit is not None:
            if not self.settings.force:
                raise ApiError(507, fit_refusal(wanted, plan.fit.reason, FORCE_FLAG), type="server_error",
                               code="insufficient_memory")
            self._warn(fit_warning(wanted, plan.fit.reason))
        return self._load(wanted, plan)

    def _primary_lease(self, served: str | None = None) -> Lease:
        """The primary model, answering as ``served`` (an alias, or any name with serve_any_model) or its own id."""
        loaded = self.primary_loaded()
        if loaded is None:
            raise ApiError(503, "no model is loaded in the engine", type="server_error", code="model_not_loaded")
        return Lease(self, self.primary_queue, loaded, served or model_id(loaded.model_path), None)

    def _lease_loaded(self, served: str) -> Lease | None:
        path = next((m.path for m in self.models.models() if _served_id(m.loaded.model_path) == served), None)
        model = self.models.hold_loaded(path) if path is not None else None
        return self._lease(served, model) if model is not None else None

    def _load(self, served: str, plan: LoadPlan, *, remote: bool = False) -> Lease:
        """Into the pool (its budget, its least-recently-used unloads), held for this request."""
        try:
            model = self.models.acquire(plan.path, plan.settings, estimate_bytes=plan.estimate_bytes,
                                        force=self.settings.force)
        except BudgetRefused as exc:
            raise refusal_error(exc) from None
        except QuantDeskError as exc:
            if remote:
                raise ApiError(502, f"the remote model {served[:200]!r} cannot be used: {exc}",
                               type="server_error", code="remote_unavailable") from None
            raise ApiError(503, f"the model {served[:200]!r} could not be loaded: {exc}", type="server_error",
                           code="model_load_failed") from None
        if self.settings.force and plan.estimate_bytes:
            check = self.models.check(plan.path)
            if check is not None and not check.fits:
                self._warn(check.warning())
        return self._lease(served, model)

    def _lease(self, served: str, model: PooledModel) -> Lease:
        with self._lock:
            if self._closed:
                self.models.release(model)
                raise ApiError(503, "the server is stopping", type="server_error", code="server_stopping")
            client, engine_queue = self._queues.get(model.path, (None, None))
            stale = engine_queue if client is not model.client else None
            if stale is not None or engine_queue is None:  # loaded again since: a queue on its new host
                engine_queue = EngineQueue(model.client, max_pending=self._max_pending).start()
                self._queues[model.path] = (model.client, engine_queue)
            gone = [p for p in self._queues if p != model.path and self.models.get(p) is None]
            left = [self._queues.pop(p)[1] for p in gone]  # unloaded since (idle, room, Eject): their queues go
        for old in ([stale] if stale is not None else []) + left:
            old.close()
        return Lease(self, engine_queue, model.loaded, served, model)

    def _check_remote(self, ref: str) -> None:
        from app.remote import connections

        assert self.remotes is not None
        if any(m.ref == ref for m in self.remotes.models()):
            return
        try:
            name, _ = connections.parse_ref(ref)
        except ValueError:
            name = ""
        if name in self.remotes.problems:
            raise ApiError(502, f"the remote connection {name!r} cannot be used now: {self.remotes.problems[name]}",
                           type="server_error", code="remote_unavailable")
        raise ApiError(404, f"the model {ref[:200]!r} is not served here: no remote connection lists it",
                       param="model", code="model_not_found")

    def _warn(self, sentence: str) -> None:
        log.warning("%s", sentence)
        self.warnings.append(sentence)

    # --- Eject ---

    def unload(self, served: str) -> str:
        """Eject a loaded model by its served id (a reply it is writing is stopped first, and ends as stopped); the
        primary is refused. Returns the sentence of what was done. ApiError 404 / 409."""
        if served == self.primary_id():
            primary = self.primary()
            why = ("the model the server was started with (--model); stop the server to unload it"
                   if primary is not None and primary.pinned else
                   "the model loaded in Chat; eject it there (the model bar's menu)")
            raise ApiError(409, f"{served[:200]} stays loaded: it is {why}", param="model", code="model_pinned")
        path = next((m.path for m in self.models.models() if _served_id(m.loaded.model_path) == served), None)
        if path is None or not self.models.unload(path, "ejected through the server"):
            raise ApiError(404, f"the model {served[:200]!r} is not loaded here", param="model",
                           code="model_not_loaded")
        return f"{served} unloaded"

    # --- listing ---

    def cards(self, created: int) -> list[dict[str, Any]]:
        """/v1/models: the loaded models first (the primary, then the others), then the library models a request
        may load (when on-demand loads are allowed), then the remote models not started yet."""
        cards: list[dict[str, Any]] = []
        primary, loaded = self.primary(), self.primary_loaded()
        if primary is not None and loaded is not None:
            card = _card(model_id(loaded.model_path), created, loaded.backend, loaded.n_ctx, loaded=True,
                         primary=True, estimate=primary.estimate_bytes, details=loaded.details)
            card["meta"].update(sequence_figures(self.primary_queue))
            if self.settings.aliases:
                card["meta"]["aliases"] = list(self.settings.aliases)
            if self.settings.serve_any_model:
                card["meta"]["serve_any_model"] = True  # a request naming any model not served here gets this one
            cards.append(card)
            for alias in self.settings.aliases:  # listed too: clients with a fixed name look for it here
                cards.append({**card, "id": alias, "meta": {**card["meta"], "alias_of": card["id"]}})
        for other in self.loaded_engines():
            owner = other.served.split("/", 1)[0].removeprefix("remote:") if is_remote_ref(other.served) \
                else "quantdesk"
            cards.append(_loaded_card(other.served, created, other.model, owned_by=owner))
            with self._lock:
                found = self._queues.get(other.model.path)
            cards[-1]["meta"].update(sequence_figures(found[1] if found is not None else None))
        served = {c["id"] for c in cards}
        if self.settings.load_on_demand:
            budget = self.models.budget_bytes()
            for name, path in self.library_models():
                if name in served:
                    continue
                try:
                    plan = self.plan(path)
                except ApiError:
                    continue
                if plan.fit is not None and not plan.fit.fits and not (self.settings.force and too_large(plan.fit)):
                    continue  # it cannot load here (too large, or no engine for it)
                if budget is not None and plan.estimate_bytes > budget and not self.settings.force:
                    continue
                cards.append(_card(name, created, plan.fit.format if plan.fit else "", plan.settings.n_ctx,
                                   loaded=False, estimate=plan.estimate_bytes))
        if self.remotes is not None:
            for remote in self.remotes.models():
                if remote.ref not in served:
                    cards.append(_card(remote.ref, created, "remote", remote.n_ctx, loaded=False,
                                       owned_by=remote.connection))
        return cards

    def health(self) -> dict[str, Any]:
        primary_id, others = self.primary_id(), self.loaded_engines()
        return {"loaded": ([primary_id] if primary_id else []) + [o.served for o in others],
                "memory_budget_bytes": self.models.budget_bytes() if self.settings.load_on_demand else None,
                "memory_estimate_bytes": self.primary_estimate() + sum(o.estimate_bytes for o in others),
                "warnings": list(self.warnings)}


def refusal_error(refused: BudgetRefused) -> ApiError:
    """The pool's refusal as the server answers it: 503 with Retry-After when the models answering now hold the
    room (or the count), else 507 with the estimate, the budget and what is loaded, and how to load it anyway."""
    if refused.retry:
        message = (f"{refused.check.situation()}, and those models are answering requests now; retry when they are "
                   "done" if refused.forceable else str(refused))
        return ApiError(503, message, type="server_error", code="models_busy", headers={"Retry-After": "5"})
    return ApiError(507, refused.check.refusal(FORCE_FLAG), type="server_error", code="insufficient_memory")


def _pool_of(engine: ModelPool | EngineClientLike, make_client: Callable[[], EngineClientLike],
             free_memory: Callable[[], int | None]) -> ModelPool:
    """The app hands the server its ModelPool; ``quantdesk serve`` and tests one client with its model loaded,
    adopted here as the pinned primary of a pool of the server's own."""
    if isinstance(engine, ModelPool):
        return engine
    pool = ModelPool(PoolLimits(max_loaded=None), make_client=make_client, free_memory=free_memory)
    loaded = engine.loaded
    local = loaded is not None and not is_remote_ref(loaded.model_path) and loaded.backend != "remote"
    pool.adopt(engine, sum(loaded.memory_bytes.values()) if local and loaded else 0)  # what the engine says it holds
    return pool


def _served_id(path: str) -> str:
    """A loaded model's id: as ``model_id``, but a remote model other than the primary keeps its full reference, as
    requests name it."""
    return path if is_remote_ref(path) else model_id(path)


def _card(served: str, created: int, backend: str, n_ctx: int | None, *, loaded: bool, estimate: int = 0,
          primary: bool = False, owned_by: str = "quantdesk", details: dict[str, Any] | None = None
          ) -> dict[str, Any]:
    """A /v1/models card; ``details``: a loaded model's (Loaded.details), for what it can do."""
    meta: dict[str, Any] = {"backend": backend, "n_ctx": n_ctx, "loaded": loaded}
    if backend != "remote":
        meta["memory_estimate_bytes"] = estimate
    if primary:
        meta["primary"] = True
    details = details or {}
    if "vision" in details:
        meta["vision"] = True  # takes image_url parts
    if details.get("tool_format"):
        meta["tool_format"] = details["tool_format"]  # takes tools, written in this syntax
    if details.get("parallel_note"):
        meta["parallel_note"] = details["parallel_note"]  # why it answers one request at a time (quantdesk ps)
    if details.get("chat_template_origin"):  # which template it is served with, and where that came from
        meta["chat_template"] = {"name": details["chat_template"], "title": details.get("chat_template_title"),
                                 "origin": details["chat_template_origin"]}
    if details.get("embedding"):
        meta.update(embedding=True, embedding_length=details["embedding_length"])
    return {"id": served, "object": "model", "created": created, "owned_by": owned_by, "meta": meta}


def sequence_figures(engine_queue: EngineQueue | None) -> dict[str, Any]:
    """How many requests a loaded model decodes together, how many run now and how many wait, and of the last requests
    it answered, those whose prompt the engine's cache served in part: its card's (``quantdesk ps``) and the Server
    page's."""
    answered = [o for o in engine_queue.outcomes() if o.prompt_tokens] if engine_queue is not None else []
    return {"parallel": engine_queue.parallel if engine_queue is not None else 1,
            "busy_sequences": len(engine_queue.running_jobs()) if engine_queue is not None else 0,
            "queued": len(engine_queue.waiting()) if engine_queue is not None else 0,
            "cache": {"requests": len(answered), "hits": sum(o.cached_tokens > 0 for o in answered),
                      "prompt_tokens": sum(o.prompt_tokens for o in answered),
                      "cached_tokens": sum(o.cached_tokens for o in answered)}}


def _loaded_card(served: str, created: int, model: PooledModel, **options: Any) -> dict[str, Any]:
    info = model.loaded
    return _card(served, created, info.backend, info.n_ctx, loaded=True, estimate=model.estimate_bytes,
                 details=info.details, **options)


def _library_models() -> list[tuple[str, str]]:
    """The library's models as (served id, path), the first of each id (two copies of one file share a name)."""
    from app.hub.library import Library

    found: dict[str, str] = {}
    for entry in Library().entries():
        found.setdefault(model_id(entry.path), entry.path)
    return list(found.items())
