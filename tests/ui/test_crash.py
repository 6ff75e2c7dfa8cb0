"""An error nobody caught, in the desktop app: a dialog with one sentence, the log file's path and "Copy details";
the traceback in the log, never on a terminal. The buggy command is a button in the real main window whose slot
raises, dispatched by Qt as any click is."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton

from app import logs
from app.ui.crash import CrashReporter

# pytest-qt turns exceptions in Qt handlers into test failures through its own hook; here ours must see them.
pytestmark = pytest.mark.qt_no_exception_capture


class BuggyCommand(QPushButton):
    def __init__(self) -> None:
        super().__init__("Do the buggy thing")
        self.clicked.connect(self._on_clicked)

    def _on_clicked(self) -> None:
        {}["a key that is not there"]


@pytest.fixture
def reporter(qtbot):
    reporter = CrashReporter()
    reporter.install()
    yield reporter
    reporter.uninstall()
    if reporter.dialog is not None:
        reporter.dialog.close()


def _click_the_buggy_command(qtbot, window, reporter):
    button = BuggyCommand()
    window.statusBar().addPermanentWidget(button)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible())
    return button


def test_a_slot_that_raises_shows_a_sentence_and_keeps_the_traceback_in_the_log(qtbot, make_window, reporter,
                                                                                tmp_path):
    window = make_window()
    _click_the_buggy_command(qtbot, window, reporter)
    dialog = reporter.dialog
    assert dialog.message.text() == ("Something went wrong that QuantDesk did not expect (KeyError: 'a key that is "
                                     "not there'). Your chats and models are kept; the last action may not have "
                                     "finished.")
    assert dialog.where.text() == f"The details are in {logs.log_file()}"
    log = logs.log_file().read_text()
    assert "unexpected error in the desktop app" in log and "in _on_clicked" in log
    qtbot.mouseClick(dialog.copy_button, Qt.MouseButton.LeftButton)
    copied = QApplication.clipboard().text()
    assert copied.startswith("QuantDesk ") and "Traceback (most recent call last)" in copied
    assert "KeyError: 'a key that is not there'" in copied
    assert dialog.copy_button.text() == "Copied"
    # To look at it: QUANTDESK_SHOTS=folder saves it there.
    shot = Path(os.environ.get("QUANTDESK_SHOTS") or tmp_path) / "crash-dialog.png"
    assert dialog.grab().save(str(shot))
    assert window.isVisible()  # the app carries on


def test_a_second_error_while_the_dialog_is_open_is_logged_not_stacked(qtbot, make_window, reporter):
    button = _click_the_buggy_command(qtbot, make_window(), reporter)
    first = reporter.dialog
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: logs.log_file().read_text().count("unexpected error in the desktop app") == 2)
    assert reporter.dialog is first


def test_an_error_in_a_thread_reaches_the_dialog(qtbot, reporter):
    def work() -> None:
        raise ValueError("no good")

    thread = threading.Thread(target=work, name="worker")
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: reporter.dialog is not None and reporter.dialog.isVisible())
    assert "(ValueError: no good)" in reporter.dialog.message.text()
    assert "unexpected error in thread worker" in logs.log_file().read_text()


def test_a_background_call_that_fails_unexpectedly_leaves_its_traceback_in_the_log(qtbot):
    from app.errors import QuantDeskError
    from app.ui.common.background import BackgroundCall, sentence

    def broken() -> None:
        raise ZeroDivisionError("a bug in the worker")

    def refused() -> None:
        raise QuantDeskError("Bad input, said in words.")

    call = BackgroundCall("test-call")
    with qtbot.waitSignal(call.failed, timeout=10_000) as failed:
        call.start(broken)
    assert sentence(failed.args[1]) == "Something went wrong: a bug in the worker."
    log = logs.log_file().read_text()
    assert "unexpected error in the background call test-call" in log and "in broken" in log
    with qtbot.waitSignal(call.failed, timeout=10_000):
        call.start(refused)
    assert "Bad input" not in logs.log_file().read_text()  # expected errors are sentences only
