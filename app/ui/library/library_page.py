"""The Library page: the models on this computer (app.hub.library) with format, quant, size, architecture
and source; load, delete with confirmation, open folder, import a file or folder (copy or use in place),
watch a folder, and the disk usage. Every library call (scans, hashing copies, deletes) runs in a worker.

Downloaded models show what the last update check (app.hub.updates) found: "update available: chat template
changed" and the like, each changed file in the details; the page runs the daily check once after its first
listing, "Check for updates" asks now, and "Update" queues the download of the changed files in Downloads."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QBrush, QColor, QDesktopServices, QFont, QPalette
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QFileDialog, QHBoxLayout, QHeaderView, QLabel,
                               QMessageBox, QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.hub import updates
from app.hub.library import Library, LibraryEntry
from app.hub.updates import UpdateStatus
from app.ui.common.background import BackgroundCall, sentence
from app.ui.common.formatting import human_bytes, short_date_time
from app.ui.common.icons import decorate
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, page_margins, page_title

# Shown through LibraryPage.tr; also the columns' keys.
COLUMNS = (QT_TRANSLATE_NOOP("LibraryPage", "Model"), QT_TRANSLATE_NOOP("LibraryPage", "Format"),
           QT_TRANSLATE_NOOP("LibraryPage", "Quant"), QT_TRANSLATE_NOOP("LibraryPage", "Size"),
           QT_TRANSLATE_NOOP("LibraryPage", "Architecture"), QT_TRANSLATE_NOOP("LibraryPage", "Source"),
           QT_TRANSLATE_NOOP("LibraryPage", "Updates"))
UPDATE_COLUMN, SOURCE_COLUMN = COLUMNS.index("Updates"), COLUMNS.index("Source")
SOURCE_WIDTH = 260
UPDATE_COLOUR = "#b25e00"  # amber: readable on the light and the dark theme
SOURCES = {"download": QT_TRANSLATE_NOOP("library_page", "Downloaded"),
           "import": QT_TRANSLATE_NOOP("library_page", "Imported (copy)"),
           "reference": QT_TRANSLATE_NOOP("library_page", "Used in place"),
           "hf-cache": QT_TRANSLATE_NOOP("library_page", "Hugging Face cache"),
           "folder": QT_TRANSLATE_NOOP("library_page", "Watched folder")}  # shown through translate()


@dataclass
class Listing:
    entries: list[LibraryEntry]
    usage: dict[str, Any]  # Library.disk_usage()
    message: str = ""
    updates: dict[str, UpdateStatus] | None = None  # by entry id: what the last update check found
    # by entry id: the pooling a GGUF declares ("rank" a reranker, mean / cls / last an embedding model), read off the
    # GUI thread with the listing
    poolings: dict[str, str] | None = None


def _listing(root: Path | None, message: str = "", refresh: bool = True) -> Listing:
    library = Library(root)
    entries = library.entries(refresh=refresh)
    known = updates.known_updates(library, entries) if updates.enabled() else {}
    poolings = {entry.id: entry.pooling for entry in entries}
    return Listing(entries, library.disk_usage(), message, known, poolings)


def check_for_updates(root: Path | None, force: bool) -> updates.CheckReport | None:
    """``force``: ask now (raises when offline or switched off); else the daily check, None when not due."""
    library = Library(root)
    return updates.check_updates(library, force=True) if force else updates.check_if_due(library)


def check_message(report: updates.CheckReport) -> str:
    available = report.available
    if report.failures:
        return QCoreApplication.translate("library_page", "Could not check for updates: ") + "; ".join(report.failures)
    if not report.asked:
        return ""
    if not available:
        return QCoreApplication.translate("library_page", "Every downloaded model is up to date.")
    names = ", ".join(s.entry_id for s in available)
    if len(available) == 1:
        return QCoreApplication.translate("library_page", "1 update available: {names}.").format(names=names)
    return QCoreApplication.translate("library_page", "{count} updates available: {names}.").format(
        count=len(available), names=names)


def list_models(root: Path | None) -> Listing:
    return _listing(root)


def import_models(root: Path | None, path: str, copy: bool) -> Listing:
    added = Library(root).import_path(path, copy=copy)
    names = ", ".join(e.name for e in added)
    verb = QCoreApplication.translate("library_page", "Imported") if copy else QCoreApplication.translate(
        "library_page", "Added (used in place)")
    return _listing(root, f"{verb}: {names}.")


def watch_folder(root: Path | None, folder: str) -> Listing:
    found = Library(root).add_folder(folder)
    found_text = QCoreApplication.translate("library_page", "Watching {folder}: 1 model found.") if len(found) == 1 \
        else QCoreApplication.translate("library_page", "Watching {folder}: {count} models found.")
    return _listing(root, found_text.format(folder=folder, count=len(found)))


def remove_model(root: Path | None, entry_id: str) -> Listing:
    entry, freed = Library(root).remove(entry_id)
    if freed:
        message = QCoreApplication.translate("library_page",
                                             "Deleted {name}; {freed} freed.").format(name=entry.name,
                                                                                      freed=human_bytes(freed))
    else:
        message = QCoreApplication.translate("library_page", "Removed {name} from the library; its files were left "
                                                             "where they are.").format(name=entry.name)
    return _listing(root, message, refresh=False)  # a rescan would list a referenced model again at once


def file_count(count: int) -> str:
    if count == 1:
        return QCoreApplication.translate("library_page", "1 file")
    return QCoreApplication.translate("library_page", "{count} files").format(count=count)


def source_text(entry: LibraryEntry) -> str:
    text = QCoreApplication.translate("library_page", SOURCES.get(entry.source, entry.source))
    if entry.source in ("reference", "folder"):
        text += f" · {model_folder(entry)}"
    if entry.repo_id:
        text += f" · {entry.repo_id}"
        if entry.commit_hash:
            text += f" @ {entry.commit_hash[:7]}"
    return text


def model_folder(entry: LibraryEntry) -> Path:
    path = Path(entry.path)
    return path.parent if entry.format == "gguf" or path.is_file() else path


def delete_question(entry: LibraryEntry) -> tuple[str, bool]:
    """What deleting this entry will and will not delete, and whether it frees disk space."""
    size = human_bytes(entry.size)
    files = file_count(len(entry.files))
    folder = model_folder(entry)
    if entry.owned:
        return (QCoreApplication.translate("library_page", "Delete {name}? Its {files} ({size}) in {folder} will be "
                                                           "deleted, freeing {size}. This cannot be undone.")
                                                           .format(name=entry.name, files=files, size=size,
                                                                   folder=folder), True)
    if entry.source == "hf-cache":
        return (QCoreApplication.translate("library_page", "{name} is in the Hugging Face cache ({folder}), shared "
                                                           "with other tools. QuantDesk will not delete those "
                                                           "{files} ({size}); it only stops listing the model until "
                                                           "the next scan finds it again. To free the space, delete "
                                                           "it from the cache with `hf cache delete`.")
                                                           .format(name=entry.name, folder=folder, files=files,
                                                                   size=size), False)
    if entry.source == "folder":
        where = QCoreApplication.translate("library_page", "a watched folder")
        again = QCoreApplication.translate("library_page", " It will be listed again while the folder is watched.")
    else:
        where, again = QCoreApplication.translate("library_page", "its own folder"), ""
    return (QCoreApplication.translate("library_page", "{name} is used in place from {where} ({folder}). Removing it "
                                                       "from the library deletes no files: its {files} ({size}) stay "
                                                       "where they are.{again}").format(name=entry.name, where=where,
                                                                                        folder=folder, files=files,
                                                                                        size=size, again=again), False)


class LibraryPage(QWidget):
    load_requested = Signal(str)  # a model path for the Chat page
    update_requested = Signal(object, str)  # DownloadRequest, a label for the Downloads row
    changed = Signal()  # a listing arrived (tests wait on it)
    go_to = Signal(str)  # a page's name: the empty state's button
    checked = Signal()  # an update check ended (tests wait on it)

    def __init__(self, root: Path | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Library"))
        self.root = root  # None: app.settings.models_dir() at each call (follows Settings)
        self.entries: list[LibraryEntry] = []
        self.usage: dict[str, Any] = {}
        self.updates: dict[str, UpdateStatus] = {}
        self.busy = False
        self.checking = False
        self._daily_check_done = False
        self._call = BackgroundCall("library")
        self._call.succeeded.connect(self._on_listing)
        self._call.failed.connect(self._on_failed)
        self._checks = BackgroundCall("update-check")
        self._checks.succeeded.connect(self._on_checked)
        self._checks.failed.connect(self._on_check_failed)
        self._build()
        self._update_buttons()

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        page_margins(layout)
        top = QHBoxLayout()
        title = page_title(self.tr("Library"))
        top.addWidget(title)
        top.addStretch(1)
        self.import_file_button = self._button(self.tr("Import file…"), self.tr("Import a GGUF model file"),
                                               self._on_import_file)
        self.import_folder_button = self._button(self.tr("Import folder…"), self.tr("Import a model folder"),
                                                 self._on_import_folder)
        self.watch_button = self._button(self.tr("Watch folder…"),
                                         self.tr("Add a folder whose models are used in place"),
                                         self._on_watch_folder)
        self.refresh_button = self._button(self.tr("Refresh"), self.tr("Scan the library again"), self.refresh)
        self.check_button = self._button(self.tr("Check for updates"), self.tr(
                "Ask the Hub now whether downloaded models changed"),
                                         self._on_check_now)
        for button in (self.import_file_button, self.import_folder_button, self.watch_button, self.refresh_button):
            top.addWidget(button)
        layout.addLayout(top)
        usage_row = QHBoxLayout()
        self.usage_label = QLabel(self.tr("Reading the library…"))
        self.usage_label.setObjectName("caption")
        self.usage_label.setAccessibleName(self.tr("Disk usage"))
        self.usage_label.setWordWrap(True)
        usage_row.addWidget(self.usage_label, 1)
        usage_row.addWidget(self.check_button)
        layout.addLayout(usage_row)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setAccessibleName(self.tr("Models"))
        self.table.setHorizontalHeaderLabels([self.tr(column) for column in COLUMNS])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        # The source is long and in its tooltip: capped, so the model's name keeps its room beside the update column.
        header.setSectionResizeMode(SOURCE_COLUMN, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(SOURCE_COLUMN, SOURCE_WIDTH)
        corner = self.table.findChild(QAbstractButton)
        if corner is not None:
            corner.setAccessibleName(self.tr("Select all models"))
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        self.table.itemDoubleClicked.connect(self._on_load)
        layout.addWidget(self.table, 1)
        self.empty_state = EmptyState(self.tr("No models yet"),
                                      self.tr("Find one that fits this machine on the Discover page, or import a GGUF "
                                              "file or a model folder you already have."),
                                      self.tr("Find a model"), "Discover")
        self.empty_state.button.clicked.connect(lambda: self.go_to.emit("Discover"))
        self.empty_state.hide()
        layout.addWidget(self.empty_state, 1)
        self.details = QLabel("")
        self.details.setWordWrap(True)
        self.details.setAccessibleName(self.tr("Model details"))
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.details)
        row = QHBoxLayout()
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setAccessibleName(self.tr("Library status"))
        row.addWidget(self.status, 1)
        self.open_button = self._button(self.tr("Open folder"), self.tr("Show the model's files"), self._on_open_folder)
        self.delete_button = self._button(self.tr("Delete…"), self.tr("Delete the model"), self._on_delete)
        self.update_button = self._button(self.tr("Update"), self.tr("Download the model's changed files"),
                                          self._on_update)
        self.load_button = self._button(self.tr("Load in chat"), self.tr("Load the model and chat with it"),
                                        self._on_load)
        self.load_button.setDefault(True)
        for action, name in ((self.open_button, "folder"), (self.delete_button, "delete"),
                             (self.update_button, "update"), (self.load_button, "load")):
            decorate(action, name)
        for button in (self.open_button, self.delete_button, self.update_button, self.load_button):
            row.addWidget(button)
        layout.addLayout(row)

    def _button(self, text: str, name: str, slot: Callable[..., object]) -> QPushButton:
        button = QPushButton(text)
        button.setAccessibleName(name)
        button.clicked.connect(slot)
        return button

    # --- operations (each in the worker, each ends in a listing) -------------------------------------

    def _start(self, status: str, fn: Callable[..., Listing], *args: Any) -> None:
        self.busy = True
        self.status.setText(status)
        self._update_buttons()
        self._call.start(fn, self.root, *args)

    @Slot()
    def refresh(self) -> None:
        self._start(self.tr("Scanning…"), list_models)

    def import_path(self, path: str, copy: bool) -> None:
        self._start((self.tr("Copying {name}…") if copy else self.tr("Adding {name}…")).format(name=Path(path).name),
                    import_models, path, copy)

    def watch(self, folder: str) -> None:
        self._start(self.tr("Scanning {folder}…").format(folder=folder), watch_folder, folder)

    def delete(self, entry: LibraryEntry) -> None:
        self._start(self.tr("Deleting {name}…").format(name=entry.name), remove_model, entry.id)

    @Slot(int, object)
    def _on_listing(self, ticket: int, listing: Listing) -> None:
        self.busy = False
        self.show_listing(listing)
        self.status.setText(listing.message)
        self._update_buttons()
        self.changed.emit()
        if not self._daily_check_done:  # once per run of the app; the check itself keeps to once a day
            self._daily_check_done = True
            self.check_updates(force=False)

    # --- update checks ---------------------------------------------------------------------------

    def check_updates(self, force: bool = True) -> None:
        """``force``: ask the Hub now; else the daily check (which asks only when due, online and switched on)."""
        self.checking = True
        if force:
            self.status.setText(self.tr("Checking for updates…"))
        self._update_buttons()
        self._checks.start(check_for_updates, self.root, force)

    @Slot()
    def _on_check_now(self) -> None:
        self.check_updates(force=True)

    @Slot(int, object)
    def _on_checked(self, ticket: int, report: updates.CheckReport | None) -> None:
        self.checking = False
        if report is not None:
            self.updates = {**self.updates, **report.statuses}
            self._show_updates()
            message = check_message(report)
            if message:
                self.status.setText(message)
        self._update_buttons()
        self.checked.emit()

    @Slot(int, object)
    def _on_check_failed(self, ticket: int, error: Exception) -> None:
        self.checking = False
        self.status.setText(sentence(error))
        self._update_buttons()
        self.checked.emit()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        """A theme switch: the update column again, so "up to date" takes the new palette's muted colour."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and getattr(self, "entries", None):
            self._show_updates()

    def _show_updates(self) -> None:
        bold = QFont()
        bold.setBold(True)
        for row, entry in enumerate(self.entries):
            status = self.updates.get(entry.id)
            item = QTableWidgetItem(status.headline if status else "")
            if status is not None:
                item.setToolTip("\n".join(status.details()) or status.headline)
                if status.available:
                    item.setForeground(QBrush(QColor(UPDATE_COLOUR)))
                    item.setFont(bold)
                else:
                    item.setForeground(self.palette().brush(QPalette.ColorRole.PlaceholderText))
            self.table.setItem(row, UPDATE_COLUMN, item)
        self._on_selection_changed()

    @Slot(int, object)
    def _on_failed(self, ticket: int, error: Exception) -> None:
        self.busy = False
        self.status.setText(sentence(error))
        self._update_buttons()
        self.changed.emit()

    def show_listing(self, listing: Listing) -> None:
        keep = self.selected.id if self.selected else None
        self.entries, self.usage, self.updates = listing.entries, listing.usage, listing.updates or {}
        self.table.setRowCount(len(self.entries))
        poolings = listing.poolings or {}
        for row, entry in enumerate(self.entries):
            pooling = poolings.get(entry.id, "")
            what = (self.tr("reranker") if pooling == "rank" else self.tr("embeddings") if pooling else "")
            architecture = " · ".join(part for part in (entry.architecture or "—", what) if part)
            cells = (entry.name, entry.format.upper(), entry.quant or "—", human_bytes(entry.size), architecture,
                     source_text(entry))
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(entry.path if column == 0 else text)
                if column == 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, column, item)
            if entry.id == keep:
                self.table.selectRow(row)
        self._show_updates()
        usage = listing.usage
        count = len(self.entries)
        self.usage_label.setText(
            self.tr("%n model(s) · {owned} in the models folder {folder}", "", count)
            .format(owned=human_bytes(usage["owned_bytes"]), folder=usage["models_dir"])
            + (self.tr(", {size} used in place").format(size=human_bytes(usage["referenced_bytes"]))
               if usage["referenced_bytes"] else "")
            + self.tr(" · {free} free of {total} on that disk").format(free=human_bytes(usage["free_bytes"]),
                                                                        total=human_bytes(usage["total_bytes"])))
        self.table.setVisible(bool(self.entries))
        self.empty_state.setVisible(not self.entries)
        if not self.entries:
            self.details.setText(self.tr("No models yet. Download one from Discover, or import a GGUF file or a "
                                         "model folder you already have."))
        self._on_selection_changed()

    # --- selection and actions ---------------------------------------------------------------------

    @property
    def selected(self) -> LibraryEntry | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        return self.entries[rows[0].row()] if rows and rows[0].row() < len(self.entries) else None

    def select(self, entry_id: str) -> None:
        for row, entry in enumerate(self.entries):
            if entry.id == entry_id:
                self.table.selectRow(row)

    @Slot()
    def _on_selection_changed(self) -> None:
        entry = self.selected
        if entry is not None:
            parts = [f"<b>{html.escape(entry.name)}</b> — {html.escape(entry.path)}"]
            if entry.repo_id:
                parts.append(self.tr("from {repo_id}").format(repo_id=html.escape(entry.repo_id))
                             + (self.tr(" at commit {commit_hash}").format(commit_hash=html.escape(entry.commit_hash))
                                if entry.commit_hash else ""))
            parts.append(file_count(len(entry.files)))
            text = " · ".join(parts)
            status = self.updates.get(entry.id)
            if status is not None:
                when = short_date_time(status.checked_at)
                headline = html.escape(self.tr("{headline} (checked {when})").format(headline=status.headline,
                                                                                     when=when))
                lines = [f"<b style='color:{UPDATE_COLOUR}'>{headline}</b>" if status.available else headline]
                lines += [html.escape(line) for line in status.details()]
                text += "<br>" + "<br>".join(lines)
            self.details.setText(text)
        elif self.entries:
            self.details.setText(self.tr("Select a model to load, open or delete it."))
        self._update_buttons()

    def _update_buttons(self) -> None:
        chosen = self.selected is not None and not self.busy
        for button in (self.open_button, self.delete_button, self.load_button):
            button.setEnabled(chosen)
        status = self.updates.get(self.selected.id) if self.selected is not None else None
        self.update_button.setEnabled(chosen and status is not None and status.available)
        for button in (self.import_file_button, self.import_folder_button, self.watch_button, self.refresh_button):
            button.setEnabled(not self.busy)
        self.check_button.setEnabled(not self.checking)

    @Slot()
    def _on_update(self) -> None:
        entry = self.selected
        status = self.updates.get(entry.id) if entry is not None else None
        if entry is None or status is None or not status.available:
            return
        self.update_requested.emit(updates.update_request(entry, status),
                                   self.tr("Update of {name} · {reasons}").format(name=entry.name,
                                                                                  reasons=", ".join(status.reasons)))
        self.status.setText(self.tr("Updating {name} in Downloads; it stays usable until the new files are in.")
                            .format(name=entry.name))

    @Slot()
    def _on_load(self, *_: object) -> None:
        if self.selected is not None:
            self.load_requested.emit(self.selected.path)

    @Slot()
    def _on_open_folder(self) -> None:
        if self.selected is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(model_folder(self.selected))))

    @Slot()
    def _on_delete(self) -> None:
        entry = self.selected
        if entry is None:
            return
        text, frees = delete_question(entry)
        confirm = QMessageBox(QMessageBox.Icon.Warning, self.tr("Delete model") if frees else self.tr("Remove model"),
                              text,
                              parent=self)
        confirm.setObjectName("confirmDelete")
        action = confirm.addButton(self.tr("Delete") if frees else self.tr("Remove from library"),
                                   QMessageBox.ButtonRole.DestructiveRole)
        confirm.setDefaultButton(confirm.addButton(QMessageBox.StandardButton.Cancel))
        confirm.exec()
        if confirm.clickedButton() is action:
            self.delete(entry)

    @Slot()
    def _on_import_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Import a model file"), "", self.tr("GGUF models (*.gguf)"))
        if path:
            self._ask_copy(path)

    @Slot()
    def _on_import_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, self.tr("Import a model folder"))
        if path:
            self._ask_copy(path)

    def _ask_copy(self, path: str) -> None:
        box = QMessageBox(QMessageBox.Icon.Question, self.tr("Import"),
                          self.tr("Copy {name} into the models folder, or use it where it is? A copy keeps working "
                                  "when the original is moved or its drive is unplugged; using it in place takes no "
                                  "extra disk space.").format(name=Path(path).name), parent=self)
        copy = box.addButton(self.tr("Copy into the library"), QMessageBox.ButtonRole.AcceptRole)
        in_place = box.addButton(self.tr("Use in place"), QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        if box.clickedButton() in (copy, in_place):
            self.import_path(path, copy=box.clickedButton() is copy)

    @Slot()
    def _on_watch_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, self.tr("Watch a folder of models"))
        if folder:
            self.watch(folder)
