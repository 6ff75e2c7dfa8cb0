"""The Chat page's side panel: the conversations the store holds (searched through the box above them), the new-chat
button, the undo bar of a deleted chat and the open chat's actions (rename, delete, export, options).

The panel lists and asks; the page (app/ui/chat/chat_page.py) decides what opening, renaming and deleting a chat do, and
which chat is open.
"""

from __future__ import annotations

from collections.abc import Collection

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtWidgets import (QHBoxLayout, QLineEdit, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout,
                               QWidget)

from app.chats.store import ChatStore
from app.ui.common.icons import decorate, icon
from app.ui.common.widgets import UndoBar

CONVERSATION_ID = Qt.ItemDataRole.UserRole
UNDO_SECONDS = 10


class ConversationList(QWidget):
    opened = Signal(int)  # a conversation chosen in the list
    new_requested = Signal()
    rename_requested = Signal()
    delete_requested = Signal()
    export_requested = Signal()
    settings_requested = Signal()

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.setObjectName("conversationPanel")
        side_layout = QVBoxLayout(self)
        side_layout.setContentsMargins(8, 8, 8, 8)
        self.new_button = QPushButton(self.tr("New chat"))
        self.new_button.setToolTip(self.tr("Start a new conversation (Ctrl+N)"))
        self.new_button.setAccessibleName(self.tr("New chat"))
        self.new_button.clicked.connect(self.new_requested)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText(self.tr("Search chats"))
        self.search_box.setAccessibleName(self.tr("Search chats"))
        self.search_box.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Conversations"))
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        line = self.list.fontMetrics().height()  # a chat that is writing wears a pencil no taller than its title
        self.list.setIconSize(QSize(line, line))
        self.list.currentItemChanged.connect(self._on_current_item_changed)
        row = QHBoxLayout()
        self.rename_button = QPushButton(self.tr("Rename"))
        self.rename_button.setAccessibleName(self.tr("Rename chat"))
        self.rename_button.clicked.connect(self.rename_requested)
        self.delete_button = QPushButton(self.tr("Delete"))
        self.delete_button.setAccessibleName(self.tr("Delete chat"))
        self.delete_button.clicked.connect(self.delete_requested)
        self.export_button = QPushButton(self.tr("Export…"))
        self.export_button.setAccessibleName(self.tr("Export chat"))
        self.export_button.setToolTip(self.tr("Save this chat as Markdown or JSON"))
        self.export_button.clicked.connect(self.export_requested)
        self.chat_settings_button = QPushButton(self.tr("Options…"))  # not "Settings": that is the app's page
        self.chat_settings_button.setAccessibleName(self.tr("Chat settings"))
        self.chat_settings_button.setToolTip(self.tr("System prompt, sampling and presets for this chat"))
        self.chat_settings_button.clicked.connect(self.settings_requested)
        second_row = QHBoxLayout()
        for layout, buttons in ((row, (self.rename_button, self.delete_button)),
                                (second_row, (self.export_button, self.chat_settings_button))):
            for button in buttons:  # each as wide as its words (German's are longer): the panel widens for them
                layout.addWidget(button)
        for button, name in ((self.new_button, "new"), (self.delete_button, "delete"), (self.rename_button, "edit"),
                             (self.export_button, "export"), (self.chat_settings_button, "settings")):
            decorate(button, name)
        side_layout.addWidget(self.new_button)
        side_layout.addWidget(self.search_box)
        side_layout.addWidget(self.list, 1)
        self.undo_bar = UndoBar(UNDO_SECONDS)
        side_layout.addWidget(self.undo_bar)
        side_layout.addLayout(row)
        side_layout.addLayout(second_row)

    def refresh(self, open_id: int | None, hidden_id: int | None = None, writing: Collection[int] = ()) -> None:
        """List the conversations the search finds (all of them without a query), ``open_id``'s selected, and
        ``hidden_id`` left out (deleted while its reply stops); those in ``writing`` (a reply under way) wear a
        pencil and say so to a screen reader and in their tooltip. With none open and no query, the first opens."""
        query = self.search_box.text()
        found = self.store.search(query) if query.strip() else self.store.conversations()
        self.list.blockSignals(True)
        self.list.clear()
        for conv in found:
            if conv.id == hidden_id:
                continue
            item = QListWidgetItem(conv.title)
            item.setData(CONVERSATION_ID, conv.id)
            item.setToolTip(conv.title)
            if conv.id in writing:
                said = self.tr("{title}: a reply is being written").format(title=conv.title)
                item.setIcon(icon("edit"))
                item.setToolTip(said)
                item.setData(Qt.ItemDataRole.AccessibleTextRole, said)
            self.list.addItem(item)
            if conv.id == open_id:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        if open_id is None and self.list.count() and not query.strip():
            self.list.setCurrentRow(0)

    def set_actions(self, *, has_chat: bool, streaming_here: bool) -> None:
        """The open chat's actions: none without one; while its reply streams, only delete (stopped, then
        deleted) — its settings and title stay as the reply began."""
        for button in (self.rename_button, self.export_button):
            button.setEnabled(has_chat and not streaming_here)
        self.delete_button.setEnabled(has_chat)
        self.chat_settings_button.setEnabled(not streaming_here)

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current_item_changed(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.opened.emit(item.data(CONVERSATION_ID))
