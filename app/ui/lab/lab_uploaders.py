"""The Lab page's "From uploaders…" dialog: name a base model and a quant, see every GGUF repo on the Hub that
quantizes it with its file of that quant (checked by its header to be the same model: architecture and vocabulary),
tick the ones to compare. app/lab/uploaders finds them (on a worker thread); the page fetches the ticked ones when the
bench runs."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.lab.uploaders import Candidate, Found, find
from app.ui.common.background import BackgroundCall, Job, sentence
from app.ui.common.formatting import human_bytes, number
from app.ui.common.widgets import button


class UploadersDialog(QDialog):
    """Find a base model's quantizations of one quant on the Hub and choose which to compare."""

    def __init__(self, reference: str | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Compare uploaders"))
        self.setAccessibleName(self.tr("Compare one quant from several uploaders"))
        self.reference = reference  # the page's reference model, which the headers are checked against
        self.found: Found | None = None
        self._finder = BackgroundCall("lab-uploaders")
        self._finder.progressed.connect(self._on_progress)
        self._finder.succeeded.connect(self._on_found)
        self._finder.failed.connect(self._on_failed)
        self.resize(860, 520)

        layout = QVBoxLayout(self)
        intro = QLabel(self.tr("Files of one quant name differ by uploader. Name the base model (as its page on the "
                               "Hub names it) and the quant: every GGUF repo whose model card names it as its base is "
                               "listed with its file, each checked by its header to be the same model."))
        intro.setWordWrap(True)
        intro.setObjectName("caption")
        layout.addWidget(intro)
        form = QFormLayout()
        self.base = QLineEdit()
        self.base.setAccessibleName(self.tr("Base model"))
        self.base.setPlaceholderText(self.tr("owner/name, e.g. Qwen/Qwen2.5-7B-Instruct"))
        self.quant = QLineEdit("Q4_K_M")
        self.quant.setAccessibleName(self.tr("Quant"))
        row = QHBoxLayout()
        row.addWidget(self.quant, 1)
        self.find_button = button(self.tr("Find on the Hub"), self.tr("Find the quantizations on the Hub"),
                                  self.search)
        self.find_button.setDefault(True)
        row.addWidget(self.find_button)
        form.addRow(self.tr("Base model"), self.base)
        form.addRow(self.tr("Quant"), row)
        layout.addLayout(form)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setAccessibleName(self.tr("Search status"))
        layout.addWidget(self.status)
        self.table = QTableWidget(0, 4)
        self.table.setAccessibleName(self.tr("Files found"))
        self.table.setHorizontalHeaderLabels([self.tr("Repo and file"), self.tr("Size"), self.tr("Downloads"),
                                              self.tr("Check")])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)
        layout.addWidget(self.table, 1)
        self.skipped = QLabel("")
        self.skipped.setObjectName("caption")
        self.skipped.setWordWrap(True)
        self.skipped.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.skipped)
        self.use_precise = QCheckBox()
        self.use_precise.setAccessibleName(self.tr("Fetch the highest-precision file as the reference"))
        self.use_precise.hide()
        layout.addWidget(self.use_precise)
        self.keep = QCheckBox(self.tr("Keep the fetched files in the lab's cache after the bench"))
        self.keep.setAccessibleName(self.tr("Keep the fetched files"))
        self.keep.setToolTip(self.tr("Kept files are found again by the next bench; otherwise they are removed after "
                                     "it (a file the library already holds is used where it is)"))
        layout.addWidget(self.keep)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.add_button = self.buttons.addButton(self.tr("Add to the bench"), QDialogButtonBox.ButtonRole.AcceptRole)
        self.add_button.setAccessibleName(self.tr("Add the ticked files to the bench"))
        self.add_button.setEnabled(False)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)

    # --- finding --------------------------------------------------------------------------------

    @Slot()
    def search(self) -> None:
        base, quant = self.base.text().strip(), self.quant.text().strip()
        if base.count("/") != 1 or not all(base.split("/")) or not quant:
            self.status.setText(self.tr("Name the base model as owner/name and a quant, such as Q4_K_M."))
            return
        self.find_button.setEnabled(False)
        self.add_button.setEnabled(False)
        self.table.setRowCount(0)
        self.status.setText(self.tr("Asking the Hub for the quantizations of {base}…").format(base=base))
        self._finder.start_job(_find, base, quant, self.reference)

    @Slot(int, object)
    def _on_progress(self, ticket: int, message: str) -> None:
        if ticket == self._finder.latest:
            self.status.setText(message)

    @Slot(int, object)
    def _on_failed(self, ticket: int, error: Exception) -> None:
        if ticket == self._finder.latest:
            self.find_button.setEnabled(True)
            self.status.setText(sentence(error))

    @Slot(int, object)
    def _on_found(self, ticket: int, found: Found) -> None:
        if ticket == self._finder.latest:
            self.find_button.setEnabled(True)
            self.show_found(found)

    def show_found(self, found: Found) -> None:
        self.found = found
        muted = QColor(self.palette().color(QPalette.ColorRole.PlaceholderText))
        self.table.setRowCount(len(found.candidates))
        for row, c in enumerate(found.candidates):
            name = QTableWidgetItem(c.label)
            name.setData(Qt.ItemDataRole.UserRole, c)
            if c.problem:
                name.setFlags(Qt.ItemFlag.ItemIsEnabled)  # not tickable: it is another model
            else:
                name.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
                name.setCheckState(Qt.CheckState.Checked)
            check = self.tr("left out: {why}").format(why=c.problem) if c.problem else self.tr(
                "same model: {architecture}, {tokens} tokens").format(architecture=c.architecture,
                                                                       tokens=number(c.n_vocab, 0))
            cells = [name, QTableWidgetItem(human_bytes(c.size)),
                     QTableWidgetItem(number(c.downloads, 0) if c.downloads is not None else "—"),
                     QTableWidgetItem(check)]
            for column, item in enumerate(cells):
                item.setToolTip(check)
                if c.problem:
                    item.setForeground(muted)
                self.table.setItem(row, column, item)
        comparable = len(found.comparable)
        self.status.setText(self.tr("%n file(s) of {quant} can be compared", "", comparable).format(
            quant=" / ".join(found.quants)) + (self.tr(" (checked against {reference}).").format(
                reference=found.checked_against) if found.checked_against else "."))
        self.skipped.setText("\n".join(self.tr("Not listed: {why}").format(why=why) for why in found.skipped))
        precise = found.precise
        self.use_precise.setVisible(precise is not None and self.reference is None)
        if precise is not None:
            self.use_precise.setText(self.tr("Fetch {file} ({quant}, the highest precision found) as the reference")
                                     .format(file=precise.label, quant=precise.quant))
            self.use_precise.setChecked(self.reference is None)
        self.add_button.setEnabled(comparable > 0)

    # --- the choice -----------------------------------------------------------------------------

    def chosen(self) -> list[Candidate]:
        """The ticked files."""
        out = []
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            assert item is not None  # every row has its check box item
            if item.checkState() == Qt.CheckState.Checked and item.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                out.append(item.data(Qt.ItemDataRole.UserRole))
        return out

    def reference_candidate(self) -> Candidate | None:
        """The highest-precision file found, when it is to be fetched as the reference."""
        if self.found is None or self.use_precise.isHidden() or not self.use_precise.isChecked():
            return None
        return self.found.precise

    def done(self, result: int) -> None:
        self._finder.cancel(self._finder.latest)  # a search still running is not waited for
        super().done(result)


def _find(job: Job, base: str, quant: str, reference: str | None) -> Found:
    return find(base, [quant], reference, on_progress=job.report)
