"""Blocking calls off the GUI thread, their results back on it as queued signals.

    call = BackgroundCall("hub-search")           # no Qt parent: the thread keeps it alive
    call.succeeded.connect(self._on_results)      # bound slots of GUI objects (never lambdas)
    call.failed.connect(self._on_failed)
    ticket = call.start(fn, *args)                # any callable; the newest ticket is ``call.latest``

Each result carries the ticket of the call that made it, so a page drops answers to questions it no
longer asks (``ticket != call.latest``). With ``serial=True`` calls run one after another on one thread,
in the order they were started (library changes must not overtake each other).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot

from app import logs
from app.errors import QuantDeskError
from app.ui.formatting import capitalized


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


class BackgroundCall(QuietAtQuit):
    succeeded = Signal(int, object)  # ticket, result
    failed = Signal(int, object)  # ticket, the exception (see sentence())

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.latest = 0
        self._tickets = itertools.count(1)

    def start(self, fn: Callable[..., Any], *args: Any) -> int:
        ticket = self.latest = next(self._tickets)
        threading.Thread(target=self._run, args=(ticket, fn, args), name=self.name, daemon=True).start()
        return ticket

    def _run(self, ticket: int, fn: Callable[..., Any], args: tuple) -> None:
        try:
            result = fn(*args)
        except Exception as exc:  # every failure reaches the page, which words it with sentence()
            if not isinstance(exc, (QuantDeskError, OSError)):  # a bug, not bad input: keep its traceback
                logs.record_unexpected(exc, f"the background call {self.name}")
            self.failed.emit(ticket, exc)
        else:
            self.succeeded.emit(ticket, result)


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
    if isinstance(error, DownloadError) and "Cannot reach" in error.message:  # app.hub.download._hub_error's words
        return True
    names = {cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"ConnectionError", "ConnectError", "ConnectTimeout", "OfflineModeIsEnabled"})
