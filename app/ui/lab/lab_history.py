"""The Quant lab's past results: the bench results the lab's store keeps, newest first, to open again or delete (after
a confirmation). The page (app/ui/lab/lab_page.py) reads them from its store, opens and deletes them, and says what
happened; this list shows them and asks.
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import cast

from PySide6.QtCore import QCoreApplication, Qt, Signal, Slot
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QListWidget, QListWidgetItem, QMessageBox, QVBoxLayout

from app.lab.store import SavedResult
from app.ui.common.formatting import short_date_time
from app.ui.common.widgets import button, elide_middle

RESULT_ID = Qt.ItemDataRole.UserRole


def describe_saved(created_at: str, reference: str, variants: tuple[str, ...]) -> str:
    """Two lines for the history list: when and how many variants, then the reference."""
    try:
        when = short_date_time(datetime.fromisoformat(created_at))
    except ValueError:
        when = created_at
    count = QCoreApplication.translate("lab_page", "1 variant") if len(variants) == 1 else QCoreApplication.translate(
        "lab_page", "{count} variants").format(count=len(variants))
    return QCoreApplication.translate("lab_page", "{when} · {count}\nreference {reference}").format(
        when=when, count=count, reference=reference)


class LabHistory(QGroupBox):
    open_requested = Signal(str)  # a result's id: opened by a double click, Enter or Open
    delete_confirmed = Signal(str)  # a result's id, its deletion confirmed
    changed = Signal()  # the list was read again from the store

    def __init__(self) -> None:
        super().__init__(self.tr("Past results"))
        self.confirm: QMessageBox | None = None  # the open delete confirmation
        layout = QVBoxLayout(self)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Past results"))
        elide_middle(self.list)
        self.list.setAlternatingRowColors(True)  # two lines per result: keep the results apart
        self.list.itemActivated.connect(self._on_activated)
        self.list.currentItemChanged.connect(self._on_selection)
        layout.addWidget(self.list, 1)
        row = QHBoxLayout()
        self.open_button = button(self.tr("Open"), self.tr("Open the selected past result"), self._on_open_clicked)
        self.delete_button = button(self.tr("Delete…"), self.tr("Delete the selected past result"),
                                    self._on_delete_clicked)
        self.open_button.setEnabled(False)
        self.delete_button.setEnabled(False)
        row.addWidget(self.open_button)
        row.addWidget(self.delete_button)
        row.addStretch(1)
        layout.addLayout(row)

    def show_saved(self, history: list[SavedResult]) -> None:
        self.list.clear()
        for saved in history:
            item = QListWidgetItem(describe_saved(saved.created_at, saved.reference, saved.variants))
            item.setData(RESULT_ID, saved.id)
            item.setToolTip("\n".join((saved.id, *saved.variants)))
            self.list.addItem(item)
        if self.list.count() == 0:
            placeholder = QListWidgetItem(self.tr("No saved results yet."))
            placeholder.setFlags(Qt.ItemFlag.NoItemFlags)
            self.list.addItem(placeholder)
        self.changed.emit()

    def saved_ids(self) -> list[str]:
        return [self.list.item(r).data(RESULT_ID) for r in range(self.list.count())
                if self.list.item(r).data(RESULT_ID)]

    def _selected_id(self) -> str | None:
        item = self.list.currentItem()
        return cast("str | None", item.data(RESULT_ID)) if item is not None else None  # a result's id, or None

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_selection(self, _current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        has = self._selected_id() is not None
        self.open_button.setEnabled(has)
        self.delete_button.setEnabled(has)

    @Slot(QListWidgetItem)
    def _on_activated(self, item: QListWidgetItem) -> None:
        if item.data(RESULT_ID):
            self.open_requested.emit(item.data(RESULT_ID))

    @Slot()
    def _on_open_clicked(self) -> None:
        if (result_id := self._selected_id()) is not None:
            self.open_requested.emit(result_id)

    @Slot()
    def _on_delete_clicked(self) -> None:
        result_id = self._selected_id()
        if result_id is None:
            return
        self.confirm = QMessageBox(QMessageBox.Icon.Question, self.tr("Delete this result?"),
                                   self.tr("Delete the saved bench result {result_id}? This cannot be undone.")
                                   .format(result_id=html.escape(result_id)),
                                   QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        self.confirm.setProperty("result_id", result_id)
        self.confirm.finished.connect(self._on_delete_answered)
        self.confirm.open()  # window-modal, not a nested event loop

    @Slot(int)
    def _on_delete_answered(self, answer: int) -> None:
        if answer == QMessageBox.StandardButton.Yes.value and self.confirm is not None:
            self.delete_confirmed.emit(self.confirm.property("result_id"))
