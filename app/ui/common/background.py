"""Blocking work off the GUI thread, its results back on it as queued signals: the one way app/ui runs a job
in the background (a Hub search, a hardware probe, a bench, a server start).

    call = BackgroundCall("hub-search")           # no Qt parent: the thread keeps it alive
    call.succeeded.connect(self._on_results)      # bound slots of GUI objects (never lambdas)
    call.failed.connect(self._on_failed)
    ticket = call.start(fn, *args)                # any callable; the newest ticket is ``call.latest``

Each result carries the ticket of the call that made it, so a page drops answers to questions it no
longer asks (``ticket != call.latest``).

Work that reports progress or can be stopped is started with ``start_job(fn, *args)``: it runs
``fn(job, *args)``, where ``job.report(value)`` sends ``progressed(ticket, value)`` and ``job.cancelled`` is a
``threading.Event`` that ``call.cancel(ticket)`` sets (the work checks it at its own pace: a flag, never a
queued call to a busy thread).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot

from app import logs
from app.errors import QuantDeskError
from app.ui.common.formatting import capitalized


# QuietAtQuit objects alive when the app quits: freed by the main thread at interpreter exit, never by a worker.
_KEPT_UNTIL_EXIT: list[QObject] = []


class QuietAtQuit(QObject):
    """A QObject whose signals daemon worker threads emit, made safe for a worker that outlives the event loop.
    Two ways it crashed the process at exit (SIGSEGV, seen when the app quit right after its window showed,
    during hardware detection): a result emitted (posted to the GUI thread) while the application was being
    torn down, and the worker thread dropping the last reference to this object, so the QObject was deleted
    in the wrong thread while the main thread destroyed the window. From aboutToQuit on, its signals are
    blocked and it is kept until the interpreter exits."""

    def __init__(self) -> None:
        super().__init__()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self._on_about_to_quit)

    @Slot()
    def _on_about_to_quit(self) -> None:
        self.blockSignals(True)
        _KEPT_UNTIL_EXIT.append(self)

    def emit_from_worker(self, signal_name: str, *args: Any) -> None:
        """Emit one of this object's signals from a worker thread. A third way the exit caught workers out: at
        interpreter exit PySide6's own clean-up deletes every QObject while daemon workers may still be finishing
        (a hardware probe when the app quits at once), and the emit raised "Signal source has been deleted" with
        a traceback on the terminal. The result has nobody to go to then; any other error is raised."""
        try:
            getattr(self, signal_name).emit(*args)
        except RuntimeError:
            if shiboken6.isValid(self):
                raise


class Job:
    """What a job started with ``BackgroundCall.start_job`` is handed: where to report, whether to stop."""

    def __init__(self, call: BackgroundCall, ticket: int) -> None:
        self.ticket = ticket
        self.cancelled = threading.Event()
        self._call = call

    def report(self, value: Any) -> None:
        """Progress for the page (any thread): arrives as ``progressed(ticket, value)`` on the GUI thread."""
        self._call.emit_from_worker("progressed", self.ticket, value)


class BackgroundCall(QuietAtQuit):
    succeeded = Signal(int, object)  # ticket, result
    failed = Signal(int, object)  # ticket, the exception (see sentence())
    progressed = Signal(int, object)  # ticket, what a job reported

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.latest = 0
        self._tickets = itertools.count(1)
        self._jobs: dict[int, Job] = {}  # running jobs by ticket
        self._lock = threading.Lock()

    def start(self, fn: Callable[..., Any], *args: Any) -> int:
        """Run ``fn(*args)`` on a new thread."""
        ticket = self.latest = next(self._tickets)
        threading.Thread(target=self._run, args=(ticket, fn, args), name=self.name, daemon=True).start()
        return ticket

    def start_job(self, fn: Callable[..., Any], *args: Any) -> int:
        """Run ``fn(job, *args)`` on a new thread; the job reports progress and sees a cancel."""
        ticket = self.latest = next(self._tickets)
        job = Job(self, ticket)
        with self._lock:
            self._jobs[ticket] = job
        threading.Thread(target=self._run, args=(ticket, fn, (job, *args)), name=self.name, daemon=True).start()
        return ticket

    def cancel(self, ticket: int | None = None) -> bool:
        """Ask the job ``ticket`` (the newest when None) to stop; False when it is not running or was asked."""
        with self._lock:
            job = self._jobs.get(self.latest if ticket is None else ticket)
        if job is None or job.cancelled.is_set():
            return False
        job.cancelled.set()
        return True

    def _run(self, ticket: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            result = fn(*args)
        except Exception as exc:  # every failure reaches the page, which words it with sentence()
            self._forget(ticket)
            if not isinstance(exc, (QuantDeskError, OSError)):  # a bug, not bad input: keep its traceback
                logs.record_unexpected(exc, f"the background call {self.name}")
            self.emit_from_worker("failed", ticket, exc)
        else:
            self._forget(ticket)
            self.emit_from_worker("succeeded", ticket, result)

    def _forget(self, ticket: int) -> None:
        with self._lock:
            self._jobs.pop(ticket, None)


def sentence(error: BaseException) -> str:
    """An exception as a sentence for the user (never a traceback)."""
    if isinstance(error, QuantDeskError):
        return str(error)
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        text = f"{error.strerror or error}{where}"
        return capitalized(text) + "."
    text = str(error).strip() or type(error).__name__
    return f"Something went wrong: {text}" + ("" if text.endswith(".") else ".")


def is_offline_error(error: BaseException) -> bool:
    """Offline mode, or a network that cannot be reached."""
    from app.hub.errors import DownloadError, OfflineError

    if isinstance(error, (OfflineError, ConnectionError, TimeoutError)):
        return True
    if isinstance(error, DownloadError) and "Cannot reach" in error.message:  # app.hub.config.hub_error's words
        return True
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"ConnectionError", "ConnectError", "ConnectTimeout", "OfflineModeIsEnabled"})
