"""app.ui.common.background: work off the GUI thread, results, progress and cancel back as queued signals."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject, QThread, Slot

from app.ui.common.background import BackgroundCall, Job


class Page(QObject):
    """Stands for a page: its slots run on the GUI thread."""

    def __init__(self) -> None:
        super().__init__()
        self.progress: list[tuple[int, object, bool]] = []
        self.results: list[tuple[int, object]] = []
        self.errors: list[tuple[int, Exception]] = []

    @Slot(int, object)
    def on_progress(self, ticket: int, value: object) -> None:
        self.progress.append((ticket, value, QThread.currentThread() is self.thread()))

    @Slot(int, object)
    def on_result(self, ticket: int, value: object) -> None:
        self.results.append((ticket, value))

    @Slot(int, object)
    def on_error(self, ticket: int, error: Exception) -> None:
        self.errors.append((ticket, error))


@pytest.fixture
def wired():
    call, page = BackgroundCall("test-job"), Page()
    call.progressed.connect(page.on_progress)
    call.succeeded.connect(page.on_result)
    call.failed.connect(page.on_error)
    return call, page


def counting(job: Job, until: int, release: threading.Event) -> int:
    for step in range(until):
        job.report(step)
        if step == 1:
            release.wait(10)
        if job.cancelled.is_set():
            raise InterruptedError(f"stopped after step {step}")
    return until


def test_a_job_reports_progress_on_the_gui_thread_and_its_result(qtbot, wired):
    call, page = wired
    release = threading.Event()
    release.set()
    with qtbot.waitSignal(call.succeeded, timeout=10_000):
        ticket = call.start_job(counting, 3, release)
    qtbot.waitUntil(lambda: len(page.progress) == 3)
    assert page.progress == [(ticket, 0, True), (ticket, 1, True), (ticket, 2, True)]
    assert page.results == [(ticket, 3)] and page.errors == []


def test_cancel_is_a_flag_the_job_sees_and_only_the_running_job_is_cancelled(qtbot, wired):
    call, page = wired
    release = threading.Event()
    ticket = call.start_job(counting, 100, release)
    qtbot.waitUntil(lambda: len(page.progress) == 2)
    assert call.cancel(ticket) and not call.cancel(ticket)  # asked once
    with qtbot.waitSignal(call.failed, timeout=10_000):
        release.set()
    (failed_ticket, error), = page.errors
    assert failed_ticket == ticket and "stopped after step 1" in str(error)
    assert not call.cancel(ticket)  # finished: nothing to cancel
    assert page.results == []


def test_a_plain_call_gets_its_ticket_and_the_newest_is_latest(qtbot, wired):
    call, page = wired
    with qtbot.waitSignal(call.succeeded, timeout=10_000):
        first = call.start(sum, [1, 2])
    with qtbot.waitSignal(call.failed, timeout=10_000):
        second = call.start(int, "not a number")
    assert (call.latest, page.results, page.errors[0][0]) == (second, [(first, 3)], second)
    assert isinstance(page.errors[0][1], ValueError)


def test_a_worker_finishing_after_its_object_was_deleted_says_nothing(qtbot):
    """At interpreter exit PySide6 deletes every QObject while a daemon worker may still be finishing (the
    hardware probe when the app quits at once): its result then goes nowhere, without a traceback."""
    import shiboken6

    call = BackgroundCall("late")
    finished = threading.Event()
    results: list[BaseException | None] = []

    def late_result() -> str:
        finished.wait(30)
        return "too late"

    original_emit = call.emit_from_worker

    def watched(*args):
        try:
            original_emit(*args)
            results.append(None)
        except BaseException as exc:  # noqa: BLE001 - what the worker thread would have printed
            results.append(exc)

    call.emit_from_worker = watched  # type: ignore[method-assign]
    call.start(late_result)
    shiboken6.delete(call)
    finished.set()
    qtbot.waitUntil(lambda: bool(results), timeout=30_000)
    assert results == [None]
