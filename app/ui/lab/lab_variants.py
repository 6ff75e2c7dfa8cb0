"""The Quant lab's variant picker: the models to compare, ticked in one list — the library's (listed in a worker),
files and folders added by hand, models on a remote server, and Hub files fetched when the bench runs.

The page (app/ui/lab/lab_page.py) keeps the reference among the ticked variants (``changed``), says what the listing
found (``listed``, ``list_failed``) and opens the uploaders' dialog (``uploaders_requested``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QGroupBox, QHBoxLayout, QListWidget, QListWidgetItem, QVBoxLayout

from app.lab.uploaders import Candidate
from app.remote.connections import is_remote_ref
from app.ui.common.background import BackgroundCall
from app.ui.common.formatting import human_bytes, number
from app.ui.common.widgets import button, elide_middle

PATH_ROLE = Qt.ItemDataRole.UserRole
HUB_ROLE = Qt.ItemDataRole.UserRole + 1  # a Hub file (app.lab.uploaders.Candidate) fetched when the bench runs
HUB_PREFIX = "hub:"  # a Hub file's PATH_ROLE: "hub:owner/repo/file.gguf", its origin


class VariantPicker(QGroupBox):
    changed = Signal()  # a variant added, ticked or unticked
    added = Signal()  # a variant joined the list
    listed = Signal(int)  # the library was listed: how many models it holds
    list_failed = Signal(object)  # the library could not be listed: the error
    uploaders_requested = Signal()  # “From uploaders…”

    def __init__(self) -> None:
        super().__init__(self.tr("Variants"))
        self._library_call = BackgroundCall("lab-library")
        self._library_call.succeeded.connect(self._on_library_listed)
        self._library_call.failed.connect(self._on_library_failed)
        layout = QVBoxLayout(self)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Variants to compare"))
        self.list.itemChanged.connect(self._on_item_changed)
        self.list.setMinimumHeight(120)
        elide_middle(self.list)
        layout.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(button(self.tr("Add file…"), self.tr("Add a model file"), self._on_add_file_clicked))
        row.addWidget(button(self.tr("Add folder…"), self.tr("Add a model folder"), self._on_add_folder_clicked))
        row.addWidget(button(self.tr("Add remote…"), self.tr("Add a model on a remote server"),
                             self._on_add_remote_clicked))
        row.addStretch(1)
        layout.addLayout(row)
        hub_row = QHBoxLayout()  # a second row: one row of five buttons would widen the page past its window
        hub_row.addWidget(button(self.tr("From uploaders…"), self.tr("Compare one quant from several uploaders on the "
                                                                     "Hub"), self.uploaders_requested.emit))
        hub_row.addStretch(1)
        hub_row.addWidget(button(self.tr("Refresh"), self.tr("Refresh the list from the library"),
                                 self.refresh_library))
        layout.addLayout(hub_row)

    @Slot()
    def refresh_library(self) -> None:
        self._library_call.start(library_entries)

    @Slot(int, object)
    def _on_library_listed(self, ticket: int, entries: list[Any]) -> None:
        if ticket != self._library_call.latest:
            return
        for entry in entries:
            self.add_item(entry.path, entry_text(entry), checked=False)
        self.listed.emit(len(entries))

    @Slot(int, object)
    def _on_library_failed(self, ticket: int, error: object) -> None:
        self.list_failed.emit(error)

    def add_item(self, path: str, text: str, checked: bool) -> QListWidgetItem:
        """A variant in the list (once: the same model again is only ticked, if ``checked``)."""
        resolved = path if is_remote_ref(path) or path.startswith(HUB_PREFIX) else str(Path(path).expanduser()
                                                                                       .resolve())
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(PATH_ROLE) == resolved:
                if checked:
                    item.setCheckState(Qt.CheckState.Checked)
                return item
        item = QListWidgetItem(text)
        self.added.emit()
        item.setData(PATH_ROLE, resolved)
        item.setToolTip(resolved)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self.list.addItem(item)
        self.changed.emit()
        return item

    def add_paths(self, paths: Sequence[str | Path]) -> None:
        """Add model files or folders (or remote:CONNECTION/MODEL references) by hand; they come ticked."""
        from app.remote.connections import display_name

        for path in paths:
            if is_remote_ref(path):
                self.add_item(str(path), self.tr("{display_name} — remote")
                              .format(display_name=display_name(str(path))), checked=True)
                continue
            p = Path(path)
            kind = "folder" if p.is_dir() else "file"
            size = human_bytes(p.stat().st_size) if p.is_file() else ""
            self.add_item(str(p), f"{p.name} — {kind}" + (f" · {size}" if size else ""), checked=True)

    def add_hub_files(self, candidates: Sequence[Candidate]) -> None:
        """Hub files to compare (ticked), fetched into the lab's cache when the bench runs."""
        for candidate in candidates:
            item = self.add_item(HUB_PREFIX + candidate.label, self.tr("{file} — Hub · {size} (fetched when run)")
                                 .format(file=candidate.name, size=human_bytes(candidate.size)), checked=True)
            item.setData(HUB_ROLE, candidate)
            item.setToolTip(self.tr("{file} at {commit}; checked: {architecture}, {tokens} tokens")
                            .format(file=candidate.label, commit=candidate.commit[:12],
                                    architecture=candidate.architecture, tokens=number(candidate.n_vocab, 0)))
        self.changed.emit()

    def checked_paths(self) -> list[str]:
        """The ticked models on this machine (and remote ones): the Hub's files are ``checked_hub``."""
        return [self.list.item(r).data(PATH_ROLE) for r in range(self.list.count())
                if self.list.item(r).checkState() == Qt.CheckState.Checked
                and not self.list.item(r).data(HUB_ROLE)]

    def checked_hub(self) -> list[Candidate]:
        """The ticked Hub files, fetched when the bench runs."""
        return [self.list.item(r).data(HUB_ROLE) for r in range(self.list.count())
                if self.list.item(r).checkState() == Qt.CheckState.Checked and self.list.item(r).data(HUB_ROLE)]

    @Slot(QListWidgetItem)
    def _on_item_changed(self, _item: QListWidgetItem) -> None:
        self.changed.emit()

    @Slot()
    def _on_add_file_clicked(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, self.tr("Add model files"), "", self.tr(
                "GGUF models (*.gguf);;All files (*)"))
        self.add_paths(files)

    @Slot()
    def _on_add_remote_clicked(self) -> None:
        from app.ui.settings.remote_connections import RemoteModelDialog

        dialog = RemoteModelDialog(self)
        if dialog.exec() and dialog.chosen_ref:
            self.add_paths([dialog.chosen_ref])

    @Slot()
    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, self.tr("Add a model folder (MLX, safetensors, EXL)"))
        if folder:
            self.add_paths([folder])


def library_entries() -> list[Any]:
    """The library's models (scanning its folders: call it off the GUI thread)."""
    from app.hub.library import Library

    return Library().entries()


def entry_text(entry: Any) -> str:
    """A library entry in one line: name — quant · format · size."""
    detail = " · ".join(x for x in (entry.quant, entry.format, human_bytes(entry.size)) if x)
    return f"{entry.name} — {detail}"
