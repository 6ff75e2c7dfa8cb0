"""The Documents page (issue 28): the user's collections (a folder, watched, or files added by hand), each with its
files, chunks, how many are embedded, its size on disk and its state; "Add folder…" and "Add files…"; and for the
collection selected its embedding model (changing it re-embeds, after asking), the indexing progress with time
left, Pause / Resume, Remove and the report's lines (the files that could not be read, and why).

The work is the window's ``DocumentsService``'s (app/ui/documents/documents_service.py: the store and the one indexer,
its progress delivered here as queued signals); what the page asks of the store runs on the GUI thread and is small
(a few rows), the indexing never does. Everything stays on this computer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, Qt, Slot
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QHeaderView,
                               QInputDialog, QLabel, QListWidget, QListWidgetItem, QMessageBox, QProgressBar,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.ui.common.formatting import capitalized, grouped, human_bytes, human_seconds
from app.ui.common.icons import decorate
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, page_title, section_title
from app.ui.documents.documents_service import embedding_model_choices

if TYPE_CHECKING:
    from app.documents.indexer import IndexProgress
    from app.documents.store import Collection
    from app.ui.documents.documents_service import DocumentsService

ROW_EVERY_S = 1.0  # while a collection is indexed, its row's figures are read from the store at most this often
COLUMNS = (QT_TRANSLATE_NOOP("DocumentsPage", "Collection"), QT_TRANSLATE_NOOP("DocumentsPage", "Files"),
           QT_TRANSLATE_NOOP("DocumentsPage", "Chunks"), QT_TRANSLATE_NOOP("DocumentsPage", "Embedded"),
           QT_TRANSLATE_NOOP("DocumentsPage", "Size on disk"), QT_TRANSLATE_NOOP("DocumentsPage", "State"))
STATES = {"scanning": QT_TRANSLATE_NOOP("documents_page", "Scanning"),
          "indexing": QT_TRANSLATE_NOOP("documents_page", "Indexing"),
          "embedding": QT_TRANSLATE_NOOP("documents_page", "Embedding"),
          "paused": QT_TRANSLATE_NOOP("documents_page", "Paused"),
          "done": QT_TRANSLATE_NOOP("documents_page", "Ready"),
          "failed": QT_TRANSLATE_NOOP("documents_page", "Failed")}  # shown through translate()


def state_text(state: str) -> str:
    return QCoreApplication.translate("documents_page", STATES[state]) if state in STATES else state


def collection_state(collection: Collection, progress: IndexProgress | None) -> str:
    """What a collection is doing: the indexer's latest word on it, else what its figures say."""
    if collection.paused:
        return "paused"
    if progress is not None and progress.state != "done":
        return progress.state
    if collection.pending > 0:
        return "indexing"
    if collection.embed_model is not None and collection.embedded < collection.chunks:
        return "embedding"
    return "done"


class DocumentsPage(QWidget):
    def __init__(self, service: DocumentsService, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.collections: list[Collection] = []
        self._models: list[tuple[str, str]] = []  # the library's embedding models: (label, path)
        self._row_read: dict[str, float] = {}  # when a collection's row was last read from the store while indexed
        self._build()
        service.progress.connect(self._on_progress)
        service.changed.connect(self.refresh)
        self.refresh()

    # --- layout --------------------------------------------------------------------------------

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 16)
        layout.setSpacing(10)
        head = QHBoxLayout()
        head.addWidget(page_title(self.tr("Documents")), 1)
        self.add_folder_button = QPushButton(self.tr("Add folder…"))
        self.add_folder_button.setAccessibleName(self.tr("Add a folder as a collection"))
        self.add_folder_button.setToolTip(self.tr("A folder is watched: new, changed and deleted files are picked up"))
        self.add_folder_button.clicked.connect(self._on_add_folder_clicked)
        self.add_files_button = QPushButton(self.tr("Add files…"))
        self.add_files_button.setAccessibleName(self.tr("Add files to a collection"))
        self.add_files_button.clicked.connect(self._on_add_files_clicked)
        decorate(self.add_folder_button, "folder")
        decorate(self.add_files_button, "documents")
        head.addWidget(self.add_folder_button)
        head.addWidget(self.add_files_button)
        layout.addLayout(head)
        intro = QLabel(self.tr("Collections of your files for the Chat to search and cite: PDF, Word, HTML, Markdown, "
                               "text and source code. They are indexed here, and nothing leaves this computer."))
        intro.setObjectName("caption")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.empty_state = EmptyState(self.tr("No documents yet"),
                                      self.tr("Add a folder (it stays watched) or some files: they are indexed in the "
                                              "background, and a chat can then search them."),
                                      self.tr("Add folder…"), "folder")
        self.empty_state.button.clicked.connect(self._on_add_folder_clicked)
        layout.addWidget(self.empty_state)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setAccessibleName(self.tr("Collections"))
        self.table.setHorizontalHeaderLabels([self.tr(c) for c in COLUMNS])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setCornerButtonEnabled(False)
        for corner in self.table.findChildren(QAbstractButton):  # Qt's select-all corner: named for screen readers
            corner.setAccessibleName(self.tr("Select all collections"))
        self.table.setTabKeyNavigation(False)  # arrows pick a collection; Tab goes on to its controls
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            self.table.horizontalHeader().setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.table.itemSelectionChanged.connect(self._show_selected)
        layout.addWidget(self.table, 1)

        self.detail = QWidget()
        detail = QVBoxLayout(self.detail)
        detail.setContentsMargins(0, 0, 0, 0)
        detail.setSpacing(6)
        self.detail_title = section_title("")
        detail.addWidget(self.detail_title)
        self.source_label = QLabel()
        self.source_label.setObjectName("caption")
        self.source_label.setWordWrap(True)
        detail.addWidget(self.source_label)
        model_row = QHBoxLayout()
        model_label = QLabel(self.tr("Embedding model:"))
        self.model_box = QComboBox()
        self.model_box.setAccessibleName(self.tr("Embedding model"))
        self.model_box.setToolTip(self.tr("The model that turns passages into vectors, so that a question finds "
                                          "what it means and not only its words; changing it embeds the collection "
                                          "again"))
        self.model_box.activated.connect(self._on_model_chosen)
        model_label.setBuddy(self.model_box)
        model_row.addWidget(model_label)
        model_row.addWidget(self.model_box, 1)
        detail.addLayout(model_row)
        progress_row = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Indexing progress"))
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress_label = QLabel()
        self.progress_label.setObjectName("caption")
        self.progress_label.setAccessibleName(self.tr("Indexing"))
        progress_row.addWidget(self.progress, 1)
        progress_row.addWidget(self.progress_label, 2)
        detail.addLayout(progress_row)
        actions = QHBoxLayout()
        self.pause_button = QPushButton(self.tr("Pause"))
        self.pause_button.setAccessibleName(self.tr("Pause indexing"))
        self.pause_button.clicked.connect(self._on_pause_clicked)
        self.remove_button = QPushButton(self.tr("Remove"))
        self.remove_button.setAccessibleName(self.tr("Remove the collection"))
        self.remove_button.setToolTip(self.tr("Remove the collection and its index (your files stay where they are)"))
        self.remove_button.clicked.connect(self._on_remove_clicked)
        decorate(self.pause_button, "pause")
        decorate(self.remove_button, "delete")
        actions.addWidget(self.pause_button)
        actions.addWidget(self.remove_button)
        actions.addStretch(1)
        detail.addLayout(actions)
        self.report_title = QLabel(self.tr("Files that could not be read"))
        self.report_title.setObjectName("caption")
        detail.addWidget(self.report_title)
        self.report = QListWidget()
        self.report.setAccessibleName(self.tr("Report"))
        self.report.setWordWrap(True)  # a reason is a sentence: read whole, not cut at the edge
        detail.addWidget(self.report, 1)
        layout.addWidget(self.detail, 2)

    # --- data ----------------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        """The collections as the store has them, the selection kept."""
        from app.documents.passages import DocumentsError

        selected = self.selected_name()
        try:
            self.collections = self.service.store.collections()
        except DocumentsError as exc:
            self.source_label.setText(f"{capitalized(exc.message)}.")
            self.collections = []
        self.table.setRowCount(len(self.collections))
        for row, collection in enumerate(self.collections):
            self._fill_row(row, collection)
        has = bool(self.collections)
        self.empty_state.setVisible(not has)
        self.table.setVisible(has)
        names = [c.name for c in self.collections]
        if has:
            self.table.selectRow(names.index(selected) if selected in names else 0)
        self._show_selected()

    def _fill_row(self, row: int, collection: Collection) -> None:
        progress = self.service.latest.get(collection.name)
        size: int | None = progress.size_bytes if progress is not None and progress.size_bytes else None
        if size is None:  # the indexer's figure is fresh; without one the store adds it up (a query over its chunks)
            from app.documents.passages import DocumentsError

            try:
                size = self.service.store.size_on_disk(collection.name)
            except DocumentsError:
                size = None  # the row still shows, without the figure
        values = (collection.name, grouped(collection.files), grouped(collection.chunks),
                  grouped(collection.embedded) if collection.embed_model else self.tr("words only"),
                  human_bytes(size) if size is not None else "—",
                  state_text(collection_state(collection, progress)))
        for column, value in enumerate(values):
            item = QTableWidgetItem(value)
            if column:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, column, item)

    def selected_name(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or rows[0].row() >= len(self.collections):
            return None
        return self.collections[rows[0].row()].name

    def selected(self) -> Collection | None:
        name = self.selected_name()
        return next((c for c in self.collections if c.name == name), None)

    def select(self, name: str) -> None:
        names = [c.name for c in self.collections]
        if name in names:
            self.table.selectRow(names.index(name))

    @Slot()
    def _show_selected(self) -> None:
        collection = self.selected()
        self.detail.setVisible(collection is not None)
        if collection is None:
            return
        self.detail_title.setText(collection.name)
        if collection.folder:
            self.source_label.setText(self.tr("Folder {folder}, watched for changes").format(folder=collection.folder))
        else:
            self.source_label.setText(self.tr("Files added by hand: %n file(s)", "", collection.files))
        self._fill_models(collection)
        self._show_progress(collection, self.service.latest.get(collection.name))
        paused = collection.paused
        self.pause_button.setText(self.tr("Resume") if paused else self.tr("Pause"))
        self.pause_button.setAccessibleName(self.tr("Resume indexing") if paused else self.tr("Pause indexing"))
        decorate(self.pause_button, "resume" if paused else "pause")
        self.report.clear()
        from app.documents.passages import DocumentsError

        try:
            lines = self.service.store.report(collection.name)
        except DocumentsError:
            lines = []  # removed meanwhile: the next refresh drops its row
        root = Path(collection.folder) if collection.folder else None
        for line in lines:
            path = Path(line.path)
            shown = path.relative_to(root) if root is not None and path.is_relative_to(root) else path
            item = QListWidgetItem(f"{shown} — {line.reason}")
            item.setToolTip(f"{line.path}\n{line.reason}")
            self.report.addItem(item)
        self.report_title.setText(self.tr("Files that could not be read: %n", "", len(lines)) if lines
                                  else self.tr("Every file could be read"))

    def _fill_models(self, collection: Collection) -> None:
        if not self._models:
            self._models = embedding_model_choices()
        self.model_box.clear()
        self.model_box.addItem(self.tr("None: search the words only"), "")
        for label, path in self._models:
            self.model_box.addItem(label, path)
        current = collection.embed_model or ""
        if current and self.model_box.findData(current) < 0:
            self.model_box.addItem(self.tr("{name} (not in the library)").format(name=Path(current).name), current)
        self.model_box.setCurrentIndex(max(0, self.model_box.findData(current)))

    def _show_progress(self, collection: Collection, progress: IndexProgress | None) -> None:
        state = collection_state(collection, progress)
        if progress is not None and progress.files_total:
            fraction = progress.fraction
            parts = [state_text(state),
                     self.tr("{done} of {total} files").format(done=grouped(progress.files_done),
                                                               total=grouped(progress.files_total))]
            if progress.eta_s is not None and state not in ("done", "paused", "failed"):
                parts.append(self.tr("{time} left").format(time=human_seconds(progress.eta_s * 1000)))
            if progress.current and state in ("indexing", "embedding"):
                parts.append(Path(progress.current).name)
        else:
            files = max(collection.files, 1)
            fraction = (collection.indexed + collection.failed) / files if collection.files else 1.0
            if state == "embedding" and collection.chunks:
                fraction = collection.embedded / collection.chunks
            parts = [state_text(state)]
            if collection.files:
                parts.append(self.tr("{done} of {total} files").format(
                    done=grouped(collection.indexed + collection.failed), total=grouped(collection.files)))
        if progress is not None and progress.problem:  # why it failed, or why it has no vectors
            parts.append(capitalized(progress.problem))
        self.progress.setValue(round(1000 * fraction))
        self.progress_label.setText(" · ".join(parts))

    @Slot(object)
    def _on_progress(self, progress: IndexProgress) -> None:
        names = [c.name for c in self.collections]
        if progress.collection not in names or progress.state in ("done", "failed"):
            self.refresh()  # a collection's end (or a new one): its figures from the store
            return
        row = names.index(progress.collection)
        now = time.monotonic()
        if now - self._row_read.get(progress.collection, 0.0) >= ROW_EVERY_S:  # its figures as they grow
            self._row_read[progress.collection] = now
            from app.documents.passages import DocumentsError

            try:
                self.collections[row] = self.service.store.collection(progress.collection)
            except DocumentsError:
                pass  # removed meanwhile: its "done" or the next refresh drops the row
        self._fill_row(row, self.collections[row])
        if self.selected_name() == progress.collection:
            self._show_progress(self.collections[row], progress)

    # --- actions -------------------------------------------------------------------------------

    @Slot()
    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, self.tr("Add a folder"))
        if folder:
            self.add_folder(Path(folder))

    def add_folder(self, folder: Path, name: str | None = None) -> bool:
        from app.documents.passages import DocumentsError

        try:
            collection = self.service.add_folder(name or folder.name, folder, embed_model=self._default_model())
        except DocumentsError as exc:
            self._say(exc)
            return False
        self.refresh()
        self.select(collection.name)
        return True

    @Slot()
    def _on_add_files_clicked(self) -> None:
        from app.documents.extract import SUPPORTED_SUFFIXES

        patterns = " ".join(f"*{suffix}" for suffix in sorted(SUPPORTED_SUFFIXES))
        paths, _ = QFileDialog.getOpenFileNames(self, self.tr("Add files"), "",
                                                self.tr("Documents ({patterns})").format(patterns=patterns))
        if not paths:
            return
        current = self.selected()
        default = current.name if current is not None and not current.folder else self.tr("My files")
        name, ok = QInputDialog.getText(self, self.tr("Add files"), self.tr("Collection:"), text=default)
        if ok and name.strip():
            self.add_files(name.strip(), [Path(p) for p in paths])

    def add_files(self, name: str, paths: list[Path]) -> bool:
        from app.documents.passages import DocumentsError

        try:
            collection = self.service.add_files(name, paths, embed_model=self._default_model())
        except DocumentsError as exc:
            self._say(exc)
            return False
        self.refresh()
        self.select(collection.name)
        return True

    def _default_model(self) -> str | None:
        if not self._models:
            self._models = embedding_model_choices()
        return self._models[0][1] if self._models else None

    @Slot(int)
    def _on_model_chosen(self, index: int) -> None:
        collection = self.selected()
        if collection is None:
            return
        model = self.model_box.itemData(index) or None
        if model == collection.embed_model:
            return
        if collection.embedded and not self.confirm_reembed(collection, model):
            self._fill_models(collection)  # back to the model it has
            return
        self.set_embed_model(collection.name, model)

    def confirm_reembed(self, collection: Collection, model: str | None) -> bool:
        """Asks before the vectors of a collection are made again (``QMessageBox``; tests answer it)."""
        text = (self.tr("Embed “{name}” again with {model}? Its {count} passages are embedded anew in the background; "
                        "until then its search uses the words only.")
                .format(name=collection.name, model=Path(model).name, count=grouped(collection.chunks)) if model
                else self.tr("Search “{name}” by its words only? Its vectors are no longer used.")
                .format(name=collection.name))
        answer = QMessageBox.question(self, self.tr("Change the embedding model"), text)
        return answer == QMessageBox.StandardButton.Yes

    def set_embed_model(self, name: str, model: str | None) -> None:
        from app.documents.passages import DocumentsError

        try:
            self.service.set_embed_model(name, model)
        except DocumentsError as exc:
            self._say(exc)
        self.refresh()

    @Slot()
    def _on_pause_clicked(self) -> None:
        collection = self.selected()
        if collection is None:
            return
        if collection.paused:
            self.service.resume(collection.name)
        else:
            self.service.pause(collection.name)
        self.refresh()

    @Slot()
    def _on_remove_clicked(self) -> None:
        collection = self.selected()
        if collection is None:
            return
        answer = QMessageBox.question(self, self.tr("Remove the collection"), self.tr(
            "Remove “{name}” and its index? Your files stay where they are; a chat that used it no longer searches "
            "it.").format(name=collection.name))
        if answer == QMessageBox.StandardButton.Yes:
            self.remove(collection.name)

    def remove(self, name: str) -> None:
        from app.documents.passages import DocumentsError

        try:
            self.service.remove(name)
        except DocumentsError as exc:
            self._say(exc)
        self.refresh()

    def _say(self, exc: Any) -> None:
        self.source_label.setText(f"{capitalized(exc.message)}." + (f" {capitalized(exc.hint)}." if exc.hint else ""))
        self.detail.setVisible(True)

