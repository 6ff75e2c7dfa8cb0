"""The server's generations on the one engine: sent at once, delivered in order.

The engine host serves requests in the order they reach it, the app's chat included: that is the only
queue. A job is sent to it as soon as it is accepted (on one submitting thread, so arrival order is kept
without ever blocking the event loop), and the delivery reads the jobs' events, job after job, handing
them to the asyncio side through ``loop.call_soon_threadsafe``. A model loaded to decode several requests
together (``Loaded.details["parallel"]``: llama.cpp's continuous batching) has that many jobs delivered at
once, each on a thread of its own; the rest wait in line behind them. A job whose HTTP
client went away is cancelled by id, wherever it is: the host stops it between tokens, or skips it when
its turn comes, and the delivery moves on once the engine has said Done.

Qt-free and asyncio-light: nothing here imports a web framework.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from app.engine import states
from app.engine.client import EngineClientLike
from app.engine.turn import Sent, send
from app.errors import EngineCrashed, EngineError, QuantDeskError
from app.datatypes import Done, Prompt, SamplingSettings, Token

# Job ids are the engine requests' ids, and an engine host remembers a cancel for an id it has not seen yet (it may
# cross its request on the pipes). So they are unique in this process, not per queue: a server started again over
# the same host (the app's Server switch over the Chat's models) counting from q1 again met a cancel that the last
# one sent as its client left just after the reply, and its first request ended unrun ("the client went away while
# the request was queued").
_JOB_IDS = itertools.count(1)


class QueueFull(QuantDeskError):
    """More requests are waiting than the server accepts; the client should retry later."""


class RequestCancelled(QuantDeskError):
    """The client went away before its job reached the model."""


class ServerStopping(QuantDeskError):
    """The server is shutting down and runs no more jobs."""


@dataclass(frozen=True)
class Outcome:
    """How one job ended, kept for /health and for tests that check what a disconnect did."""

    job_id: str
    stop_reason: str  # the engine's (eos | length | stop | cancelled), or skipped | error
    generated_tokens: int
    prompt_tokens: int = 0
    cached_tokens: int = 0  # of them, those the engine's cache served (quantdesk ps says the hits)


class Job:
    """One generation request: the async side awaits ``next()``; any thread may ``cancel()``."""

    def __init__(self, job_id: str, messages: Prompt, sampling: SamplingSettings,
                 loop: asyncio.AbstractEventLoop, owner: EngineQueue, events_every_s: float | None = None) -> None:
        self.id = job_id
        self.messages = messages if isinstance(messages, str) else list(messages)
        self.sampling = sampling
        self.events_every_s = events_every_s  # the engine's window for this job's tokens (None: its own)
        self._loop = loop
        self._owner = owner
        self._events: asyncio.Queue[Token | Done | BaseException] = asyncio.Queue()
        self.stream: Iterator[Token | Done] | None = None  # the engine's events, once sent
        self.cancelled = threading.Event()
        self.running = False  # its events are being delivered
        self.generated_tokens = 0  # so far (written by the delivery thread)
        self.finished = False  # the async side has seen Done or an error

    # --- delivery side ---

    def push(self, item: Token | Done | BaseException) -> None:
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, item)
        except RuntimeError:
            pass  # the event loop is closed: the server stopped and nobody is listening

    # --- async side ---

    async def next(self) -> Token | Done:
        """The next event; raises the engine's error (EngineError, EngineCrashed, ServerStopping)."""
        item = await self._events.get()
        if isinstance(item, BaseException):
            self.finished = True
            raise item
        if isinstance(item, Done):
            self.finished = True
        return item

    def cancel(self) -> None:
        """The client went away (or the server stops): stop the job, wherever it is. Idempotent."""
        if self.finished or self.cancelled.is_set():
            return
        self.cancelled.set()
        self._owner.client.cancel(self.id)  # thread-safe, and only this job's: the chat shares the engine


class EngineQueue:
    """The server's generations on one engine client, delivered one job after another in arrival order."""

    def __init__(self, client: EngineClientLike, max_pending: int = 32, history: int = 256) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, not {max_pending}")
        self.client = client
        self.max_pending = max_pending
        self._sender = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-submit")
        # Sent jobs, each with its turn's requests (app/engine/turn.py: a saved state's restore, the reply, its save),
        # in the order the engine serves them; None ends the delivery.
        self._deliveries: queue.Queue[tuple[Job, Sent] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._pending = 0  # accepted and not finished
        self._running: dict[str, Job] = {}  # the jobs being delivered, oldest first
        self._delivering: list[threading.Thread] = []
        self._waiting: dict[str, Job] = {}  # behind the running one, in arrival order (dicts keep it)
        self._closing = False
        self._thread: threading.Thread | None = None
        self._outcomes: collections.deque[Outcome] = collections.deque(maxlen=history)
        self._finished = threading.Condition(self._lock)
        self.finished_count = 0

    def start(self) -> EngineQueue:
        if self._thread is None:
            self._thread = threading.Thread(target=self._deliver, name="engine-delivery", daemon=True)
            self._thread.start()
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._running)

    @property
    def running(self) -> Job | None:
        """The oldest job being delivered now (the engine may not have started it yet: see its generated_tokens)."""
        with self._lock:
            return next(iter(self._running.values()), None)

    def running_jobs(self) -> list[Job]:
        """Every job being delivered now, oldest first: up to ``parallel`` where the model batches."""
        with self._lock:
            return list(self._running.values())

    @property
    def parallel(self) -> int:
        """How many jobs the loaded model decodes together (1: one after another)."""
        loaded = self.client.loaded
        return max(1, int(loaded.details.get("parallel", 1))) if loaded is not None else 1

    def waiting(self) -> list[Job]:
        """The jobs behind the one being delivered, first in line first."""
        with self._lock:
            return list(self._waiting.values())

    def outcomes(self) -> list[Outcome]:
        with self._lock:
            return list(self._outcomes)

    def wait_finished(self, count: int, timeout: float) -> bool:
        """Block until ``count`` jobs have finished in total (for tests and the GUI); False on timeout."""
        with self._finished:
            return self._finished.wait_for(lambda: self.finished_count >= count, timeout)

    async def submit(self, messages: Prompt, sampling: SamplingSettings, events_every_s: float | None = None) -> Job:
        """Accept a generation and send it to the engine, which hands its tokens out every ``events_every_s``
        (None: the engine's own window). Raises QueueFull, ServerStopping, EngineCrashed."""
        if not self.client.alive and not self.client.revivable:  # a revivable one comes back for this request
            raise EngineCrashed("the engine is not running", "restart the server to load the model again")
        loop = asyncio.get_running_loop()
        with self._lock:
            self._admit()
            job = Job(f"q{next(_JOB_IDS)}", messages, sampling, loop, self, events_every_s)
            self._waiting[job.id] = job
        try:
            sent = loop.run_in_executor(self._sender, self._send, job)
        except RuntimeError:  # the submitting thread is gone: close() ran meanwhile
            self._finish(job, None)
            raise ServerStopping("the server is shutting down") from None
        try:
            await asyncio.shield(sent)  # a handler cancelled meanwhile must not unsend a job being sent
        except asyncio.CancelledError:
            job.cancel()  # sent all the same: the engine skips it, the delivery finishes it
            raise
        return job

    def _admit(self) -> None:
        """Count one more request against ``max_pending`` (the lock held). Raises ServerStopping, QueueFull."""
        if self._closing or self._thread is None:
            raise ServerStopping("the server is not running requests")
        if self._pending >= self.max_pending:
            raise QueueFull(f"{self._pending} requests are already waiting for the engine", "retry in a moment")
        self._pending += 1

    @contextlib.contextmanager
    def counted(self) -> Iterator[None]:
        """A request the engine serves in its turn outside these jobs (embeddings), counted against
        ``max_pending`` while it runs or waits. Raises ServerStopping, QueueFull."""
        with self._lock:
            self._admit()
        try:
            yield
        finally:
            with self._finished:
                self._pending -= 1
                self._finished.notify_all()

    def _send(self, job: Job) -> None:
        """On the submitting thread: one job at a time, so the engine gets them in arrival order. A conversation
        (messages, not a raw prompt) is sent as a turn (app/engine/turn.py): a restore of its saved state ahead of it,
        where one continues it, and a save of its state behind it, all three in the engine's queue in that order,
        their answers taken by the delivery."""
        keys = states.server_keys(job.messages) if not isinstance(job.messages, str) and job.messages else None
        try:
            sent = send(self.client, job.messages, job.sampling, keys, request_id=job.id,
                        events_every_s=job.events_every_s)
        except BaseException:
            self._finish(job, None)  # it never reached the engine
            raise
        job.stream = sent.stream
        self._deliveries.put((job, sent))

    def _finish(self, job: Job, outcome: Outcome | None) -> None:
        with self._finished:
            self._waiting.pop(job.id, None)
            self._running.pop(job.id, None)
            self._pending -= 1
            if outcome is not None:
                self._outcomes.append(outcome)
                self.finished_count += 1
            self._finished.notify_all()

    def _deliver(self) -> None:
        while True:
            sent = self._deliveries.get()
            if sent is None:
                for thread in self._delivering:
                    thread.join()
                return
            job = sent[0]
            parallel = self.parallel
            with self._finished:  # a free sequence: one of the jobs being delivered ends
                while len(self._running) >= parallel:
                    self._finished.wait()
                self._waiting.pop(job.id, None)
                self._running[job.id] = job
                job.running = True
            if parallel == 1:
                self._deliver_one(*sent)
                continue
            thread = threading.Thread(target=self._deliver_one, args=sent, name=f"engine-delivery-{job.id}",
                                      daemon=True)
            self._delivering = [t for t in self._delivering if t.is_alive()] + [thread]
            thread.start()

    def _deliver_one(self, job: Job, sent: Sent) -> None:
        try:
            sent.restored()
        except QuantDeskError:
            pass  # an engine that died: the job's stream says so
        self._finish(job, self._run(job, sent.stream))
        sent.close()

    def _run(self, job: Job, stream: Iterator[Token | Done]) -> Outcome:
        try:
            for event in stream:
                if not isinstance(event, Done):
                    job.generated_tokens += event.count
                    job.push(event)
                    continue
                stats = event.stats
                if stats.stop_reason == "cancelled" and stats.prompt_tokens == 0:  # the model never saw it
                    job.push(ServerStopping("the server is shutting down") if self._closing else
                             RequestCancelled("the client went away while the request was queued"))
                    return Outcome(job.id, "skipped", 0)
                job.push(event)
                return Outcome(job.id, stats.stop_reason, stats.generated_tokens, stats.prompt_tokens,
                               stats.cached_tokens)
        except (EngineError, EngineCrashed) as exc:
            job.push(exc)
        except Exception as exc:  # a bug must not kill the delivery and strand every later request
            job.push(EngineError(f"internal error: {type(exc).__name__}: {exc}", kind="internal"))
        return Outcome(job.id, "error", 0)

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, cancel every accepted one (the engine skips those not started) and end the
        delivery once the engine has answered them. Idempotent."""
        with self._lock:
            self._closing = True
            jobs = [*self._running.values(), *self._waiting.values()]
        for job in jobs:
            job.cancel()
        self._sender.shutdown(wait=True)
        if self._thread is not None:
            self._deliveries.put(None)
            self._thread.join(timeout)
