"""One engine, many HTTP requests: a FIFO of jobs served by one worker thread.

The EngineClient is blocking and serves one generation at a time, so a single worker thread owns its
``generate`` iteration and takes jobs in arrival order (fair: first come, first served). Each job hands its
events to the asyncio side through ``loop.call_soon_threadsafe``. A job whose HTTP client went away is
cancelled: still queued, it is skipped without touching the engine; running, ``client.cancel()`` stops it
between tokens and the worker moves on to the next job once the engine has said Done.

Qt-free and asyncio-light: nothing here imports a web framework.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import queue
import threading
from dataclasses import dataclass

from app.errors import EngineCrashed, EngineError, QuantDeskError
from backends.base import Done, Prompt, SamplingSettings, Token

_STOP = object()


class QueueFull(QuantDeskError):
    """More requests are waiting than the server accepts; the client should retry later."""


class RequestCancelled(QuantDeskError):
    """The client went away before its job reached the engine."""


class ServerStopping(QuantDeskError):
    """The server is shutting down and runs no more jobs."""


@dataclass(frozen=True)
class Outcome:
    """How one job ended, kept for /health and for tests that check what a disconnect did."""

    job_id: str
    stop_reason: str  # the engine's (eos | length | stop | cancelled), or skipped | error
    generated_tokens: int


class Job:
    """One generation request: the async side awaits ``next()``; any thread may ``cancel()``."""

    def __init__(self, job_id: str, messages: Prompt, sampling: SamplingSettings,
                 loop: asyncio.AbstractEventLoop, owner: EngineQueue) -> None:
        self.id = job_id
        self.messages = messages if isinstance(messages, str) else list(messages)
        self.sampling = sampling
        self._loop = loop
        self._owner = owner
        self._events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.running = False
        self.finished = False  # the async side has seen Done or an error

    # --- worker side ---

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
        """The client went away (or the server stops): skip the job, or stop its generation. Idempotent."""
        if self.finished or self.cancelled.is_set():
            return
        self.cancelled.set()
        self._owner._cancel_running(self)


class EngineQueue:
    """Runs generations on one EngineClient, one at a time, in arrival order."""

    def __init__(self, client, max_pending: int = 32, history: int = 256) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, not {max_pending}")
        self.client = client
        self.max_pending = max_pending
        self._jobs: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._pending = 0  # queued + running
        self._running: Job | None = None
        self._waiting: dict[str, Job] = {}  # queued, in arrival order (dicts keep insertion order)
        self._closing = False
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._outcomes: collections.deque[Outcome] = collections.deque(maxlen=history)
        self._finished = threading.Condition(self._lock)
        self.finished_count = 0

    def start(self) -> EngineQueue:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="engine-queue", daemon=True)
            self._thread.start()
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running is not None

    def waiting(self) -> list[Job]:
        """The queued jobs, first in line first."""
        with self._lock:
            return list(self._waiting.values())

    def outcomes(self) -> list[Outcome]:
        with self._lock:
            return list(self._outcomes)

    def wait_finished(self, count: int, timeout: float) -> bool:
        """Block until ``count`` jobs have finished in total (for tests and the GUI); False on timeout."""
        with self._finished:
            return self._finished.wait_for(lambda: self.finished_count >= count, timeout)

    def submit(self, messages: Prompt, sampling: SamplingSettings) -> Job:
        """Queue a generation (call from the event loop). Raises QueueFull, ServerStopping, EngineCrashed."""
        if not self.client.alive:
            raise EngineCrashed("the engine is not running", "restart the server to load the model again")
        with self._lock:
            if self._closing or self._thread is None:
                raise ServerStopping("the server is not running requests")
            if self._pending >= self.max_pending:
                raise QueueFull(f"{self._pending} requests are already waiting for the engine",
                                "retry in a moment")
            self._pending += 1
            job = Job(f"q{next(self._ids)}", messages, sampling, asyncio.get_running_loop(), self)
            self._waiting[job.id] = job
        self._jobs.put(job)
        return job

    def _cancel_running(self, job: Job) -> None:
        with self._lock:
            running = self._running is job
        if running:
            # thread-safe, and only this job's: the engine may be shared with the app's chat
            self.client.cancel(job.id)  # the worker also re-checks after each event (see _run)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            outcome = Outcome(job.id, "skipped", 0)
            try:
                with self._lock:
                    del self._waiting[job.id]
                    stop = self._closing
                    if not stop and not job.cancelled.is_set():
                        self._running = job
                        job.running = True
                if stop:
                    job.push(ServerStopping("the server is shutting down"))
                elif not job.running:  # its handler still awaits an answer: end it, or it waits forever
                    job.push(RequestCancelled("the client went away while the request was queued"))
                elif job.running:
                    outcome = self._run(job)
            finally:
                with self._finished:
                    self._running = None
                    self._pending -= 1
                    self._outcomes.append(outcome)
                    self.finished_count += 1
                    self._finished.notify_all()

    def _run(self, job: Job) -> Outcome:
        cancel_sent = False
        try:
            for event in self.client.generate(job.messages, job.sampling, request_id=job.id):
                job.push(event)
                if isinstance(event, Done):
                    return Outcome(job.id, event.stats.stop_reason, event.stats.generated_tokens)
                # A cancel that arrived before the engine knew this request's id was not delivered.
                if job.cancelled.is_set() and not cancel_sent:
                    self.client.cancel(job.id)
                    cancel_sent = True
        except (EngineError, EngineCrashed) as exc:
            job.push(exc)
        except Exception as exc:  # a bug must not kill the worker and strand every later request
            job.push(EngineError(f"internal error: {type(exc).__name__}: {exc}", kind="internal"))
        return Outcome(job.id, "error", 0)

    def close(self, timeout: float = 10.0) -> None:
        """Refuse new jobs, fail the queued ones, stop the running one and end the worker. Idempotent."""
        with self._lock:
            self._closing = True
            running = self._running
        if running is not None:
            running.cancel()
        if self._thread is not None:
            self._jobs.put(_STOP)
            self._thread.join(timeout)
