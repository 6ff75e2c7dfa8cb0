"""Errors nobody caught, in the desktop app. PySide6 hands an exception that escapes a slot or an event handler to
``sys.excepthook`` and carries on; a raw thread's goes to ``threading.excepthook``. By default both print a
traceback to a terminal the user usually does not have. ``CrashReporter`` logs it with its traceback
(app.logs) and shows one sentence in a ``CrashDialog`` with the log file's path and "Copy details".
"""

from __future__ import annotations

import platform
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import QObject, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (QApplication, QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPushButton, QStyle,
                               QVBoxLayout, QWidget)

from app import __version__, logs


class CrashDialog(QDialog):
    def __init__(self, error: BaseException, log_path: Path | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("QuantDesk: unexpected error"))
        self.setObjectName("crashDialog")
        self.details = details_text(error)
        icon = QLabel()
        icon.setPixmap(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical).pixmap(48, 48))
        self.message = QLabel(self.tr("Something went wrong that QuantDesk did not expect ({summary}). Your chats "
                                      "and models are kept; the last action may not have finished.")
                                      .format(summary=logs.summary(error)))
        self.message.setWordWrap(True)
        where = (self.tr("The details are in {log_path}").format(log_path=log_path) if log_path else
                 self.tr("The details could not be written to the log file; copy them from here."))
        self.where = QLabel(where)
        self.where.setWordWrap(True)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.copy_button = QPushButton(self.tr("Copy details"))
        self.copy_button.clicked.connect(self._on_copy)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        if log_path:
            self.folder_button = buttons.addButton(self.tr("Open log folder"), QDialogButtonBox.ButtonRole.ActionRole)
            self.folder_button.clicked.connect(self._on_open_folder)
        self._log_path = log_path
        buttons.rejected.connect(self.reject)
        text = QVBoxLayout()
        text.addWidget(self.message)
        text.addWidget(self.where)
        row = QHBoxLayout()
        row.addWidget(icon, 0)
        row.addLayout(text, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(buttons)
        self.setMinimumWidth(520)

    @Slot()
    def _on_copy(self) -> None:
        QGuiApplication.clipboard().setText(self.details)
        self.copy_button.setText(self.tr("Copied"))

    @Slot()
    def _on_open_folder(self) -> None:
        if self._log_path:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._log_path.parent)))


def details_text(error: BaseException) -> str:
    """What "Copy details" copies: versions, then the traceback."""
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return (f"QuantDesk {__version__}, Python {platform.python_version()}, PySide6 {pyside_version}, "
            f"{platform.platform()}\n\n{trace}")  # for a bug report: stays English


class CrashReporter(QObject):
    """Installed once when the app starts (app.ui.main.run); one dialog at a time, every error logged."""

    _thread_error = Signal(object, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.dialog: CrashDialog | None = None
        # sys.excepthook and threading.excepthook as they were before install(); empty while not installed
        self._previous: tuple[()] | tuple[Callable[[type[BaseException], BaseException, TracebackType | None], object],
                                          Callable[[threading.ExceptHookArgs], object]] = ()
        self._thread_error.connect(self._on_thread_error)  # queued to the GUI thread: dialogs live there

    def install(self) -> None:
        self._previous = (sys.excepthook, threading.excepthook)
        sys.excepthook = self._on_excepthook
        threading.excepthook = self._on_thread_excepthook

    def uninstall(self) -> None:
        if self._previous:
            sys.excepthook, threading.excepthook = self._previous
            self._previous = ()

    def report(self, error: BaseException, where: str) -> None:
        path = logs.record_unexpected(error, where)
        if self.dialog is not None and self.dialog.isVisible():
            return  # one at a time: a slot failing on every repaint must not stack dialogs; the log has them all
        self.dialog = CrashDialog(error, path, QApplication.activeWindow())
        self.dialog.open()

    def _on_excepthook(self, kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if isinstance(error, KeyboardInterrupt):  # Ctrl+C in the terminal that started the app
            QApplication.quit()
            return
        self.report(error.with_traceback(trace), self.tr("the desktop app"))

    def _on_thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None or isinstance(args.exc_value, SystemExit):
            return
        name = args.thread.name if args.thread else self.tr("a thread")
        self._thread_error.emit(args.exc_value, self.tr("thread {name}").format(name=name))

    @Slot(object, str)
    def _on_thread_error(self, error: BaseException, where: str) -> None:
        self.report(error, where)
