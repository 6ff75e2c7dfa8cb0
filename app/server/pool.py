"""Every engine the server answers through, one engine host and ``EngineQueue`` each: the primary model, library
models loaded on demand, and the remote connections' models (the gateway).

- The **primary** is the model the server was started with (``quantdesk serve --model``) or the Chat's model on the
  Server page. The pool never loads, unloads or closes it; in the app the Chat may swap it at any time.
- A **library model** (``app/hub/library``) is loaded in a host of its own by the first request naming it, only when
  on-demand loads are allowed (``--load-on-demand``, off by default). Its fit-check estimate counts against one
  memory budget (``app/models/budget.py``; by default what the fit check finds free when the server starts, plus
  the primary's estimate). When it does not fit, idle models unload first, least recently used first; then, unless
  the server loads anyway (``--force``), the request is answered 503 (busy models hold the memory: retry) or 507 (it
  cannot fit) with the estimate, the budget and what is loaded.
- A **remote model** (``remote:CONNECTION/MODEL``, with ``serve_remotes``) runs in a host of its own too and costs
  no memory here.

Models other than the primary unload after ``idle_ttl_s`` without a request. A request leases its engine until its
answer is over, so nothing unloads under it. Loads and unloads happen one at a time: two first requests for one
model load it once, and a request for a model being unloaded waits and loads it again. A dead host is replaced on
the next request; ``close()`` closes every host the pool started.

In the app the primary is the Chat's ``ModelPool`` (app/engine/pool.py), and the server shares it: every model
loaded in the Chat is served by its id, and a library model a request loads goes into that pool, under the Chat's
memory budget, count and idle unload (the Settings page's), shown in the Chat's "N loaded" menu. The server then
only leases those models (a request's lease keeps it from unloading) and keeps an EngineQueue for each.

Qt-free; the blocking calls run on worker threads (``asyncio.to_thread``) from the server's event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.engine.client import EngineClient, EngineClientLike
from app.engine.pool import BudgetRefused, ModelPool, PooledModel
from app.errors import QuantDeskError
from app.models.budget import BudgetCheck, fit_refusal, fit_warning, free_memory_bytes, gib, too_large
from app.remote.connections import is_remote_ref
from app.server.engine_queue import EngineQueue
from app.server.gateway import LIST_TTL_S, RemoteModels
from app.server.params import ApiError
from app.datatypes import LoadSettings, Loaded

log = logging.getLogger(__name__)

DEFAULT_IDLE_TTL_S = 600.0
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
class PoolSettings:
    load_on_demand: bool = False
    memory_budget_bytes: int | None = None  # None: free memory per the fit check at start + the primary's estimate
    idle_ttl_s: float = DEFAULT_IDLE_TTL_S
    force: bool = False  # load past the budget (and past the fit check), with the risk logged in words
    serve_remotes: bool = False
    load: LoadSettings = field(default_factory=LoadSettings)  # context and threads of on-demand loads
    profile_path: str | None = None  # plan for the machine saved in this file (quantdesk hw --json), not this one


@dataclass(frozen=True)
class Plan:
    """How a library model would load here: its settings and estimate, from the fit check."""

    path: str
    settings: LoadSettings
    estimate_bytes: int
    fit: Any = None  # app.models.recommend.FitResult, None when the header could not be read


class _Engine:
    """One model the pool serves: its client and queue, and what the budget and the idle timer need."""

    def __init__(self, served: str, kind: str, client: EngineClientLike, engine_queue: EngineQueue,
                 estimate_bytes: int) -> None:
        self.served = served
        self.kind = kind  # library | remote
        self.client = client
        self.queue = engine_queue
        self.estimate_bytes = estimate_bytes
        self.users = 0  # leases not yet released
        self.last_used = time.monotonic()

    @property
    def usable(self) -> bool:
        return self.client.alive and self.client.loaded is not None

    def idle_for(self, now: float) -> float | None:
        """Seconds without a request, or None while it answers one."""
        return None if self.users or self.queue.pending else now - self.last_used

    def close(self) -> None:
        self.queue.close()
        self.client.close()


class Lease:
    """An engine lent to one request until ``release()`` (idempotent): it is not unloaded meanwhile."""

    def __init__(self, pool: EnginePool, engine_queue: EngineQueue, loaded: Loaded, served: str,
                 engine: _Engine | None, shared: PooledModel | None = None) -> None:
        self.queue, self.loaded, self.served = engine_queue, loaded, served
        self._pool, self._engine, self._shared = pool, engine, shared
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._pool._release(self._engine)
            if self._shared is not None and self._pool.shared is not None:
                self._pool.shared.release(self._shared)


class EnginePool:
    def __init__(self, primary: EngineClientLike, primary_queue: EngineQueue, settings: PoolSettings | None = None,
                 *, max_pending: int = 32, make_client: Callable[[], EngineClientLike] = EngineClient,
                 remotes: RemoteModels | None = None, library: Callable[[], list[tuple[str, str]]] | None = None,
                 profile=None) -> None:
        self.settings = settings or PoolSettings()
        self.primary, self.primary_queue = primary, primary_queue
        self.shared = primary if isinstance(primary, ModelPool) else None  # the Chat's pool, in the app
        self._shared_queues: dict[str, tuple[EngineClientLike, EngineQueue]] = {}  # path -> its client, queue
        self.remotes = remotes if remotes is not None or not self.settings.serve_remotes else \
            RemoteModels()
        self._max_pending = max_pending
        self._make_client = make_client
        self._library_source = library or _library_models
        self._library: list[tuple[str, str]] = []  # (served id, path)
        self._library_at = -LIST_TTL_S
        self._profile = profile
        self._budget: int | None = self.settings.memory_budget_bytes
        self._primary_estimate: tuple[str, int] | None = None  # (model path, bytes)
        self._plans: dict[str, Plan] = {}  # library path -> its plan with the server's settings
        self._engines: dict[str, _Engine] = {}
        self._lock = threading.Lock()  # the engines dict and the leases; held briefly
        self._loading = threading.Lock()  # one load or unload at a time; held for as long as it takes
        self._closed = False
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self.warnings: list[str] = []  # loads past the budget, in words (also logged)
        self.loads = 0  # engine hosts this pool has started a load in (tests count them)

    # --- life ---

    def start(self) -> EnginePool:
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="engine-pool-idle", daemon=True)
            self._reaper.start()
        return self

    def close(self) -> None:
        """Close every engine host the pool started (the primary is its owner's). Idempotent."""
        self._stop.set()
        with self._loading:  # a load under way finishes first, so its host is closed too
            with self._lock:
                self._closed = True
                engines, self._engines = list(self._engines.values()), {}
                queues, self._shared_queues = [q for _, q in self._shared_queues.values()], {}
        for engine in engines:
            engine.close()
        for engine_queue in queues:  # the Chat's models stay loaded: only the server's queues on them go
            engine_queue.close()
        if self._reaper is not None:
            self._reaper.join(10)

    # --- what is served ---

    def primary_id(self) -> str | None:
        loaded = self.primary.loaded
        return model_id(loaded.model_path) if loaded is not None else None

    def loaded_engines(self) -> list[_Engine]:
        with self._lock:
            return [e for e in self._engines.values() if e.usable]

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

    def budget_bytes(self) -> int | None:
        """The memory budget: as set, or what the fit check finds free now plus the primary's estimate (worked
        out once, on first need)."""
        if self._budget is None:
            free = free_memory_bytes(self.profile())
            if free is not None:
                self._budget = free + self.primary_estimate()
        return self._budget

    def budget_words(self) -> str:
        budget = self.budget_bytes()
        if budget is None:
            return "memory budget unknown (the fit check cannot tell what is free): set --memory-budget"
        if self.settings.memory_budget_bytes is not None:
            return f"memory budget {gib(budget)} (as set)"
        return (f"memory budget {gib(budget)}: what the fit check finds free now, plus the primary model's "
                f"{gib(self.primary_estimate())}")

    def profile(self):
        if self._profile is None:
            from app import machine
            from app.hardware import load_profile

            path = self.settings.profile_path
            self._profile = load_profile(path) if path else machine.profile()
        return self._profile

    def primary_estimate(self) -> int:
        loaded = self.primary.loaded
        if loaded is None or is_remote_ref(loaded.model_path) or loaded.backend == "remote":
            return 0
        if self._primary_estimate is None or self._primary_estimate[0] != loaded.model_path:
            estimate = sum(loaded.memory_bytes.values())  # what the engine says it holds
            if not self.settings.load_on_demand:  # no budget to count against: no fit check needed
                return estimate
            try:
                plan = self.plan(loaded.model_path, LoadSettings(n_ctx=loaded.n_ctx))
                estimate = plan.estimate_bytes or estimate
            except ApiError:
                pass  # an unreadable header: what the engine says it holds
            self._primary_estimate = (loaded.model_path, estimate)
        return self._primary_estimate[1]

    def plan(self, path: str, base: LoadSettings | None = None) -> Plan:
        """Load settings and estimate for a library model, from its header and the fit check (as the Chat's model
        bar fills them in): the most GPU layers that fit, the server's context (or the model's, if shorter). With the
        server's settings, kept until the library is listed again: /v1/models plans every library model."""
        if base is not None:
            return self._make_plan(path, base)
        plan = self._plans.get(path)
        if plan is None:
            plan = self._plans[path] = self._make_plan(path, self.settings.load)
        return plan

    def _make_plan(self, path: str, base: LoadSettings) -> Plan:
        from app.models.metadata import read_model
        from app.models.recommend import fit_model, load_cpu_moe

        try:
            meta = read_model(path)
        except QuantDeskError as exc:
            raise ApiError(500, f"the library model {Path(path).name!r} cannot be read: {exc}", type="server_error",
                           code="model_unreadable") from None
        n_ctx = min(base.n_ctx, meta.context_length) if meta.context_length else base.n_ctx
        fit = fit_model(meta, self.profile(), n_ctx, "auto", base.kv_cache_type)
        settings = LoadSettings(n_ctx=n_ctx, threads=base.threads, kv_cache_type=base.kv_cache_type)
        est = fit.estimate
        if est is not None and meta.format == "gguf":
            settings.gpu_layers = -1 if est.gpu_layers >= est.n_layers else est.gpu_layers
            settings.cpu_moe = load_cpu_moe(est, meta)
        return Plan(path, settings, fit.memory_bytes or meta.weights_bytes or 0, fit)

    # --- leasing ---

    def acquire(self, wanted: object) -> Lease:
        """The engine for a request's ``model``, loading it when allowed. Blocking. ApiError: 404 for a model not
        served (or not allowed to load), 503 / 507 when it does not fit, 502 for a remote that cannot be used."""
        primary = self.primary_id()
        if not isinstance(wanted, str) or not wanted or wanted == primary:
            return self._primary_lease()
        lease = self._lease_loaded(wanted) or self._lease_shared(wanted)
        if lease is not None:
            return lease
        if is_remote_ref(wanted) and self.remotes is not None:
            return self._load(wanted, "remote", lambda: self._remote_plan(wanted))
        path = dict(self.library_models()).get(wanted)
        if path is None:
            if self.settings.load_on_demand:
                raise ApiError(404, f"the model {wanted[:200]!r} is not served here: it is neither loaded nor in "
                                    "the library (quantdesk ls)", param="model", code="model_not_found")
            return self._primary_lease()  # the request's check of ``model`` answers 404 in words
        if not self.settings.load_on_demand:
            raise ApiError(404, f"the model {wanted[:200]!r} is in the library but not loaded, and this server "
                                f"does not load models on request; start it with {ON_DEMAND_FLAG} to allow it",
                           param="model", code="model_not_loaded")
        if self.shared is not None:
            return self._load_shared(wanted, path)
        return self._load(wanted, "library", lambda: self.plan(path))

    # --- the Chat's pool, shared in the app ---

    def shared_models(self) -> list[PooledModel]:
        """The Chat's loaded models other than its active one (that is the primary)."""
        if self.shared is None:
            return []
        active = self.shared.active
        return [m for m in self.shared.models() if active is None or m.path != active.path]

    def _lease_shared(self, served: str) -> Lease | None:
        if self.shared is None:
            return None
        path = next((m.path for m in self.shared.models() if model_id(m.path) == served), None)
        model = self.shared.hold_loaded(path) if path is not None else None
        return self._shared_lease(served, model) if model is not None else None

    def _shared_lease(self, served: str, model: PooledModel) -> Lease:
        with self._lock:
            if self._closed:
                self.shared.release(model)
                raise ApiError(503, "the server is stopping", type="server_error", code="server_stopping")
            client, engine_queue = self._shared_queues.get(model.path, (None, None))
            stale = engine_queue if client is not model.client else None
            if stale is not None or engine_queue is None:  # loaded again since: a queue on its new host
                engine_queue = EngineQueue(model.client, max_pending=self._max_pending).start()
                self._shared_queues[model.path] = (model.client, engine_queue)
        if stale is not None:
            stale.close()
        return Lease(self, engine_queue, model.loaded, served, None, shared=model)

    def _load_shared(self, served: str, path: str) -> Lease:
        """A library model loaded into the Chat's pool (its budget, its least-recently-used unloads, its words
        in the Chat), held for this request."""
        plan = self.plan(path)
        if plan.fit is not None and too_large(plan.fit):
            if not self.settings.force:
                raise ApiError(507, fit_refusal(served, plan.fit.reason, FORCE_FLAG), type="server_error",
                               code="insufficient_memory")
            self._warn(fit_warning(served, plan.fit.reason))
        self.loads += 1
        try:
            model = self.shared.acquire(path, plan.settings, estimate_bytes=plan.estimate_bytes,
                                        force=self.settings.force)
        except BudgetRefused as exc:
            if exc.retry:
                raise ApiError(503, f"{exc.check.situation()}, and those models are answering requests now; retry "
                                    "when they are done", type="server_error", code="models_busy",
                               headers={"Retry-After": "5"}) from None
            raise ApiError(507, exc.check.refusal(FORCE_FLAG), type="server_error",
                           code="insufficient_memory") from None
        except QuantDeskError as exc:
            raise ApiError(503, f"the model {served[:200]!r} could not be loaded: {exc}", type="server_error",
                           code="model_load_failed") from None
        if self.settings.force and plan.estimate_bytes:
            check = self._check_shared(served, plan)
            if check is not None and not check.fits:
                self._warn(check.warning())
        return self._shared_lease(served, model)

    def _check_shared(self, served: str, plan: Plan) -> BudgetCheck | None:
        budget = self.shared.budget_bytes()
        if budget is None:
            return None
        held = tuple((model_id(m.path), m.estimate_bytes) for m in self.shared.models() if m.path != plan.path)
        return BudgetCheck(served, plan.estimate_bytes, budget, held)

    def _primary_lease(self) -> Lease:
        loaded = self.primary.loaded
        if loaded is None:
            raise ApiError(503, "no model is loaded in the engine", type="server_error", code="model_not_loaded")
        return Lease(self, self.primary_queue, loaded, model_id(loaded.model_path), None)

    def _lease_loaded(self, served: str) -> Lease | None:
        with self._lock:
            if self._closed:
                raise ApiError(503, "the server is stopping", type="server_error", code="server_stopping")
            engine = self._engines.get(served)
            if engine is None or not engine.usable:
                return None
            engine.users += 1
            engine.last_used = time.monotonic()
            return Lease(self, engine.queue, engine.client.loaded, served, engine)

    def _release(self, engine: _Engine | None) -> None:
        if engine is not None:
            with self._lock:
                engine.users -= 1
                engine.last_used = time.monotonic()

    def _remote_plan(self, ref: str) -> Plan:
        from app.remote import connections

        assert self.remotes is not None
        if not any(m.ref == ref for m in self.remotes.models()):
            try:
                name, _ = connections.parse_ref(ref)
            except ValueError:
                name = ""
            if name in self.remotes.problems:
                raise ApiError(502, f"the remote connection {name!r} cannot be used now: {self.remotes.problems[name]}",
                               type="server_error", code="remote_unavailable")
            raise ApiError(404, f"the model {ref[:200]!r} is not served here: no remote connection lists it",
                           param="model", code="model_not_found")
        return Plan(ref, LoadSettings(), 0)

    def _load(self, served: str, kind: str, make_plan: Callable[[], Plan]) -> Lease:
        with self._loading:
            lease = self._lease_loaded(served)  # loaded meanwhile by a request that came first
            if lease is not None:
                return lease
            with self._lock:
                dead = self._engines.pop(served, None)
            if dead is not None:  # its host died: replace it
                log.warning("the engine of %s is gone; loading it again", served)
                dead.close()
            plan = make_plan()
            if kind == "library":
                self._make_room(served, plan)
            client = self._make_client()
            self.loads += 1
            try:
                loaded = client.load(plan.path, plan.settings)
            except QuantDeskError as exc:
                client.close()
                if kind == "remote":
                    raise ApiError(502, f"the remote model {served[:200]!r} cannot be used: {exc}",
                                   type="server_error", code="remote_unavailable") from None
                raise ApiError(503, f"the model {served[:200]!r} could not be loaded: {exc}", type="server_error",
                               code="model_load_failed") from None
            engine = _Engine(served, kind, client, EngineQueue(client, max_pending=self._max_pending).start(),
                             plan.estimate_bytes)
            with self._lock:
                if self._closed:  # close() waits for the load; this cannot happen, but never leak a host
                    engine.close()
                    raise ApiError(503, "the server is stopping", type="server_error", code="server_stopping")
                self._engines[served] = engine
                engine.users += 1
            log.info("loaded %s (%s, estimate %s)", served, kind, gib(plan.estimate_bytes))
            return Lease(self, engine.queue, loaded, served, engine)

    def _make_room(self, served: str, plan: Plan) -> None:
        """Under the load lock: unload idle models, least recently used first, until ``plan`` fits the budget;
        then refuse in words, or go on past the budget with ``force`` (said in words, in the log)."""
        if plan.fit is not None and too_large(plan.fit):
            if not self.settings.force:
                raise ApiError(507, fit_refusal(served, plan.fit.reason, FORCE_FLAG), type="server_error",
                               code="insufficient_memory")
            self._warn(fit_warning(served, plan.fit.reason))
        budget = self.budget_bytes()
        if budget is None:
            return  # nothing to count against; the fit check above is all there is
        while True:
            check = self._check(served, plan, budget)
            if check.fits:
                return
            now = time.monotonic()
            with self._lock:
                idle = [(e.idle_for(now), e) for e in self._engines.values() if e.kind == "library"]
            idle_ones = [(t, e) for t, e in idle if t is not None]
            if not idle_ones:
                break
            _, oldest = max(idle_ones, key=lambda pair: pair[0])
            self._unload(oldest, "to make room for " + served)
        if self.settings.force:
            self._warn(check.warning())
            return
        busy = sum(e.estimate_bytes for e in self.loaded_engines() if e.kind == "library")
        if check.estimate_bytes + check.held_bytes - busy <= budget:
            raise ApiError(503, f"{check.situation()}, and those models are answering requests now; retry when "
                                "they are done", type="server_error", code="models_busy", headers={"Retry-After": "5"})
        raise ApiError(507, check.refusal(FORCE_FLAG), type="server_error", code="insufficient_memory")

    def _check(self, served: str, plan: Plan, budget: int) -> BudgetCheck:
        held: list[tuple[str, int]] = []
        primary = self.primary_id()
        if primary is not None and self.primary_estimate():
            held.append((primary, self.primary_estimate()))
        held += [(e.served, e.estimate_bytes) for e in self.loaded_engines() if e.kind == "library"]
        return BudgetCheck(served, plan.estimate_bytes, budget, tuple(held))

    def _warn(self, sentence: str) -> None:
        log.warning("%s", sentence)
        self.warnings.append(sentence)

    def _unload(self, engine: _Engine, why: str) -> None:
        """Under the load lock: out of the dict first (a request for it now waits for the lock and loads it
        again), then its host is closed."""
        with self._lock:
            if self._engines.get(engine.served) is engine:
                del self._engines[engine.served]
        log.info("unloading %s %s", engine.served, why)
        engine.close()

    # --- idle unload ---

    def _reap(self) -> None:
        interval = max(0.05, min(self.settings.idle_ttl_s / 4, 5.0))
        while not self._stop.wait(interval):
            self.unload_idle()

    def unload_idle(self) -> list[str]:
        """Unload every model (but the primary) idle for idle_ttl_s or longer; returns their ids."""
        unloaded = []
        with self._loading:
            now = time.monotonic()
            with self._lock:
                due = [e for e in self._engines.values()
                       if (t := e.idle_for(now)) is not None and t >= self.settings.idle_ttl_s]
            for engine in due:
                self._unload(engine, f"after {self.settings.idle_ttl_s:g} s idle")
                unloaded.append(engine.served)
        return unloaded

    # --- listing ---

    def cards(self, created: int) -> list[dict[str, Any]]:
        """/v1/models: the loaded models first (the primary, then the others), then the library models a request
        may load (when on-demand loads are allowed), then the remote models not started yet."""
        cards: list[dict[str, Any]] = []
        loaded = self.primary.loaded
        if loaded is not None:
            cards.append(_card(model_id(loaded.model_path), created, loaded.backend, loaded.n_ctx, loaded=True,
                               primary=True, estimate=self.primary_estimate(), details=loaded.details))
        engines = self.loaded_engines()
        for engine in engines:
            info = engine.client.loaded
            if info is None:
                continue
            owner = engine.served.split("/", 1)[0].removeprefix("remote:") if engine.kind == "remote" else "quantdesk"
            cards.append(_card(engine.served, created, info.backend, info.n_ctx, loaded=True,
                               estimate=engine.estimate_bytes, owned_by=owner, details=info.details))
        for model in self.shared_models():
            cards.append(_card(model_id(model.path), created, model.loaded.backend, model.loaded.n_ctx, loaded=True,
                               estimate=model.estimate_bytes, details=model.loaded.details))
        served = {c["id"] for c in cards}
        if self.settings.load_on_demand:
            for name, path in self.library_models():
                if name in served:
                    continue
                try:
                    plan = self.plan(path)
                except ApiError:
                    continue
                if plan.fit is not None and not plan.fit.fits and not (self.settings.force and too_large(plan.fit)):
                    continue  # it cannot load here (too large, or no engine for it)
                budget = self.shared.budget_bytes() if self.shared is not None else self.budget_bytes()
                if budget is not None and plan.estimate_bytes > budget and not self.settings.force:
                    continue
                cards.append(_card(name, created, plan.fit.format if plan.fit else "", plan.settings.n_ctx,
                                   loaded=False, estimate=plan.estimate_bytes))
        if self.remotes is not None:
            for model in self.remotes.models():
                if model.ref not in served:
                    cards.append(_card(model.ref, created, "remote", model.n_ctx, loaded=False,
                                       owned_by=model.connection))
        return cards

    def health(self) -> dict[str, Any]:
        engines, shared = self.loaded_engines(), self.shared_models()
        budget = self.shared.budget_bytes() if self.shared is not None else self.budget_bytes()
        return {"loaded": ([self.primary_id()] if self.primary_id() else []) + [e.served for e in engines] +
                          [model_id(m.path) for m in shared],
                "memory_budget_bytes": budget if self.settings.load_on_demand else None,
                "memory_estimate_bytes": self.primary_estimate() + sum(e.estimate_bytes for e in engines) +
                                         sum(m.estimate_bytes for m in shared),
                "warnings": list(self.warnings)}


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
    if details.get("embedding"):
        meta.update(embedding=True, embedding_length=details["embedding_length"])
    return {"id": served, "object": "model", "created": created, "owned_by": owned_by, "meta": meta}


def _library_models() -> list[tuple[str, str]]:
    """The library's models as (served id, path), the first of each id (two copies of one file share a name)."""
    from app.hub.library import Library

    found: dict[str, str] = {}
    for entry in Library().entries():
        found.setdefault(model_id(entry.path), entry.path)
    return list(found.items())
