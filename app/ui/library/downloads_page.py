"""The Downloads page: one row per job (progress, bytes, speed, time left; pause, resume, cancel, retry), errors
in words, and for a finished job where the model is and "Chat with it". Jobs paused by a previous run of the
app (the download manager keeps their partial files and job.json) are listed at start and resume from there.

Progress comes from the manager's worker thread on every chunk; rows are repainted from one timer at most
every REPAINT_INTERVAL_MS, with the newest state of each changed job, so a fast download cannot flood the GUI.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QApplication, QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QScrollArea,
                               QVBoxLayout, QWidget)

from app.hub.download import Progress, Settings
from app.hub.download_queue import DownloadManager, DownloadTask
from app.hub.plan import DownloadRequest, Plan
from app.ui.common.background import sentence
from app.ui.common.formatting import human_bytes, number
from app.ui.common.icons import decorate
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, page_margins, page_scroll, page_title

REPAINT_INTERVAL_MS = 100  # at most ~10 repaints a second per row
# The button that takes the keyboard focus when a row gets it, or when the one that had it goes: what comes next.
FOCUS_ORDER = ("chat", "resume", "retry", "pause", "cancel", "folder")
STATE_WORDS = {"queued": QT_TRANSLATE_NOOP("downloads_page", "Waiting"),
               "resolving": QT_TRANSLATE_NOOP("downloads_page", "Looking up the files"),
               "downloading": QT_TRANSLATE_NOOP("downloads_page", "Downloading"),
               "retrying": QT_TRANSLATE_NOOP("downloads_page", "Retrying"),
               "verifying": QT_TRANSLATE_NOOP("downloads_page", "Checking"),
               "installing": QT_TRANSLATE_NOOP("downloads_page", "Installing"),
               "done": QT_TRANSLATE_NOOP("downloads_page", "Finished"),
               "paused": QT_TRANSLATE_NOOP("downloads_page", "Paused"),
               "failed": QT_TRANSLATE_NOOP("downloads_page", "Failed"),
               "cancelled": QT_TRANSLATE_NOOP("downloads_page", "Cancelled")}  # shown through translate()


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return QCoreApplication.translate("downloads_page", "{seconds} s left").format(seconds=number(seconds))
    if seconds < 3600:
        return QCoreApplication.translate("downloads_page", "{minutes} min left").format(minutes=number(seconds / 60))
    return QCoreApplication.translate("downloads_page", "{hours} h left").format(hours=number(seconds / 3600, 1))


class _ProgressRelay(QObject):
    """The manager's callback (any thread) → the GUI thread, coalesced: only the newest task state per job is
    kept, and one ``pending`` signal stands for any number of updates until the page takes them."""

    pending = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._changed: dict[int, DownloadTask] = {}
        self._signalled = False

    def push(self, task: DownloadTask) -> None:
        with self._lock:
            self._changed[id(task)] = task
            if self._signalled:
                return
            self._signalled = True
        self.pending.emit()

    def take(self) -> list[DownloadTask]:
        with self._lock:
            changed, self._changed, self._signalled = list(self._changed.values()), {}, False
        return changed


class DownloadRow(QFrame):
    """One job. ``task`` may be replaced (resume of a job restored from disk, retry of a cancelled one)."""

    def __init__(self, task: DownloadTask, label: str, page: DownloadsPage) -> None:
        super().__init__()
        self.setObjectName("downloadRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.task = task
        self.page = page
        self.repaints = 0
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.title = QLabel(label)
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setStyleSheet("font-weight: 600")
        self.state_label = QLabel()
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)
        top.addWidget(self.title, 1)
        top.addWidget(self.state_label)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setAccessibleName(self.tr("Progress of {label}").format(label=label))
        self.detail = QLabel()
        self.detail.setObjectName("caption")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QHBoxLayout()
        self.buttons: dict[str, QPushButton] = {}
        for key, text in (("pause", self.tr("Pause")), ("resume", self.tr("Resume")), ("cancel", self.tr("Cancel")),
                          ("retry", self.tr("Retry")), ("folder", self.tr("Open folder")),
                          ("chat", self.tr("Chat with it"))):
            button = QPushButton(text)
            decorate(button, key)
            button.setAccessibleName(self.tr("{text} {label}").format(text=text, label=label))
            button.setProperty("action", key)
            button.clicked.connect(self._on_button)
            buttons.addWidget(button)
            self.buttons[key] = button
        buttons.addStretch(1)
        layout.addLayout(top)
        layout.addWidget(self.bar)
        layout.addWidget(self.detail)
        layout.addLayout(buttons)
        self.update_from(task)

    @Slot()
    def _on_button(self) -> None:
        self.page.act(self, self.sender().property("action"))

    def update_from(self, task: DownloadTask) -> None:
        self.task = task
        self.repaints += 1
        progress: Progress | None = task.progress
        state = task.state
        shown = progress.state if state == "running" and progress else state
        self.state_label.setText(QCoreApplication.translate("downloads_page", STATE_WORDS.get(shown, shown)))
        done, total = (progress.done, progress.total) if progress else (0, 0)
        if state == "done":
            self.bar.setValue(1000)
        elif total:
            self.bar.setValue(int(1000 * done / total))
        self.detail.setText(self._detail(task, progress, done, total))
        active = state in ("queued", "running")
        visible = {"pause": active, "cancel": active or state == "paused", "resume": state == "paused",
                   "retry": state in ("failed", "cancelled"), "folder": state == "done", "chat": state == "done"}
        had_focus = _holds_focus(self)
        for key, button in self.buttons.items():
            button.setVisible(visible[key])
        if had_focus and not _holds_focus(self):
            self.focus_action()  # its button went (Pause, once finished): the focus stays on this job

    def focus_action(self) -> None:
        """The keyboard focus to this job's likeliest next action ("Chat with it" once finished)."""
        button = next((self.buttons[key] for key in FOCUS_ORDER if not self.buttons[key].isHidden()), None)
        if button is not None:
            button.setFocus(Qt.FocusReason.OtherFocusReason)

    @staticmethod
    def _detail(task: DownloadTask, progress: Progress | None, done: int, total: int) -> str:
        state = task.state
        if state == "done" and task.result is not None:
            return QCoreApplication.translate("downloads_page", "Saved to {path}").format(path=task.result.path)
        if state == "failed":
            return sentence(task.error) if task.error else QCoreApplication.translate("downloads_page",
                                                                                      "The download failed.")
        if state == "cancelled":
            return QCoreApplication.translate("downloads_page", "Cancelled; the partial files were deleted.")
        amount = QCoreApplication.translate("downloads_page", "{done} of {total}").format(
            done=human_bytes(done), total=human_bytes(total)) if total else ""
        if state == "paused":
            return (QCoreApplication.translate("downloads_page", "{amount} kept. ").format(amount=amount) if amount
                    else "") + QCoreApplication.translate("downloads_page", "Resume continues where it stopped.")
        if progress is None:
            if state != "queued":
                return ""
            return QCoreApplication.translate("downloads_page", "Waiting for the download before it to finish.")
        parts = [amount]
        if progress.state == "downloading" and progress.speed > 0:
            parts += [f"{human_bytes(progress.speed)}/s", eta_text(progress.eta)]
        if progress.message and progress.state in ("retrying", "verifying"):
            parts.append(progress.message)
        return " · ".join(p for p in parts if p)


class DownloadsPage(QWidget):
    chat_requested = Signal(str)  # the path of a finished model
    installed = Signal(str)  # a job finished: the path of the model now in the library (Library refreshes)
    go_to = Signal(str)  # a page's name: the empty state's button

    def __init__(self, settings: Settings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Downloads"))
        self._relay = _ProgressRelay()
        self._relay.pending.connect(self._on_pending)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REPAINT_INTERVAL_MS)
        self._timer.timeout.connect(self._flush)
        self.manager = DownloadManager(self._relay.push, settings)
        self.rows: dict[str, DownloadRow] = {}  # by DownloadRequest.key(): one row per job
        self._announced: set[int] = set()  # finished tasks whose ``installed`` was sent
        self._build()
        self.restore_partials()

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        page_margins(outer)
        outer.addWidget(page_title(self.tr("Downloads")))
        self.empty_label = EmptyState(self.tr("Nothing is downloading"),
                                      self.tr("Pick a model on the Discover page and choose Download: its progress, "
                                              "speed and time left show here."),
                                      self.tr("Find a model"), "Discover")
        self.empty_label.button.clicked.connect(lambda: self.go_to.emit("Discover"))
        outer.addWidget(self.empty_label)
        scroll = page_scroll(QScrollArea())
        holder = QWidget()
        self._rows_layout = QVBoxLayout(holder)
        self._rows_layout.setContentsMargins(0, 0, 0, 0)
        self._rows_layout.addStretch(1)
        scroll.setWidget(holder)
        outer.addWidget(scroll, 1)

    # --- jobs ----------------------------------------------------------------------------------

    def enqueue(self, request: DownloadRequest, label: str = "") -> DownloadRow:
        """Queue a download (or show the row of the same job when it is already queued or running)."""
        row = self.rows.get(request.key())
        if row is not None and row.task.state in ("queued", "running"):
            return row
        task = self.manager.enqueue(request)
        if row is None:
            return self._add_row(task, label or _label(request))
        row.update_from(task)
        return row

    def restore_partials(self) -> None:
        """Jobs a previous run left paused or interrupted (their job.json pins the commit), as paused rows."""
        from app.hub.download import partial_downloads

        for partial in partial_downloads():
            try:
                job = json.loads((Path(partial["staging"]) / "job.json").read_text(encoding="utf-8"))
                request = Plan.from_json(job).request
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if request.key() in self.rows:
                continue
            task = DownloadTask(id=0, request=request, state="paused",
                                progress=Progress("paused", request.repo_id, done=partial["have"],
                                                  total=partial["total"]))
            self._add_row(task, _label(request))

    def _add_row(self, task: DownloadTask, label: str) -> DownloadRow:
        row = DownloadRow(task, label, self)
        self.rows[task.request.key()] = row
        self._rows_layout.insertWidget(self._rows_layout.count() - 1, row)
        self.empty_label.hide()
        return row

    def act(self, row: DownloadRow, action: str) -> None:
        task = row.task
        if action == "pause":
            self.manager.pause(task)
        elif action == "cancel":
            self.manager.cancel(task)
            if not self._managed(task):  # restored from disk: the manager only deleted its files
                task.state = "cancelled"
                row.update_from(task)
        elif action == "resume":
            if self._managed(task):
                self.manager.resume(task)
            else:
                row.update_from(self.manager.enqueue(task.request))
        elif action == "retry":
            if task.state == "failed" and self._managed(task):
                self.manager.resume(task)
            else:
                row.update_from(self.manager.enqueue(task.request))
        elif action == "folder" and task.result is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(task.result.folder)))
        elif action == "chat" and task.result is not None:
            self.chat_requested.emit(str(task.result.path))

    def _managed(self, task: DownloadTask) -> bool:
        return any(t is task for t in self.manager.tasks)

    @Slot()
    def _on_pending(self) -> None:
        if not self._timer.isActive():
            self._timer.start()

    @Slot()
    def _flush(self) -> None:
        for task in self._relay.take():
            row = self.rows.get(task.request.key())
            if row is not None and row.task is task:  # not a job this row has since replaced
                row.update_from(task)
                if task.state == "done" and task.result is not None and id(task) not in self._announced:
                    self._announced.add(id(task))
                    self.installed.emit(str(task.result.path))

    def shutdown(self) -> None:
        """Pause what runs: the partial files stay and the next start lists them to resume."""
        self.manager.shutdown()


def _label(request: DownloadRequest) -> str:
    what = request.quant or (", ".join(request.files) if request.files else "")
    if request.revision not in ("main", ""):
        what = what or request.revision
    return f"{request.repo_id} · {what}" if what else request.repo_id


def _holds_focus(widget: QWidget) -> bool:
    """The keyboard focus is on ``widget`` or inside it."""
    focused = QApplication.focusWidget()
    return focused is not None and widget.isAncestorOf(focused)
