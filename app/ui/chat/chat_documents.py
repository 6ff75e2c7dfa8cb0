"""The Chat's documents (issue 28): the composer's "Documents" button ("Attach files…": the chat's own collection,
made on demand and indexed in the background; "Use a collection…": collections of the Documents page), the
collections attached to the open chat as chips with Remove, and the side panel a citation opens.

``ChatDocuments`` is the Chat page's part for it: it keeps the chat's choice in the chat store
(``Conversation.documents``), gives the engine bridge the store and the chat's collections with each question, and
keeps the passages a reply was given with the reply (``set_citations``) once the bridge says what it found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QFrame, QHBoxLayout, QLabel, QListWidget,
                               QListWidgetItem, QMenu, QPushButton, QToolButton, QVBoxLayout, QWidget)

from app.chats.messages import Conversation
from app.chats.store import ChatStoreError, NotFound
from app.ui.chat.citations import CitationPanel
from app.ui.common.formatting import capitalized
from app.ui.common.icons import decorate
from app.ui.common.widgets import announce

if TYPE_CHECKING:
    from app.documents.retrieve import Retrieval
    from app.ui.chat.engine_bridge import Documents
    from app.ui.documents.documents_service import DocumentsService


PANEL_WIDTH = 300  # pixels: the citation panel's width when it opens (the splitter lets the user change it)


class DocumentStrip(QFrame):
    """The collections attached to the open chat, a chip each with a button that detaches it."""

    remove_requested = Signal(str)  # a collection's name

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachedDocuments")
        self.setAccessibleName(self.tr("Attached documents"))
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(12, 6, 12, 0)
        self._row.setSpacing(6)
        caption = QLabel(self.tr("Documents:"))
        caption.setObjectName("caption")
        self._row.addWidget(caption)
        self._row.addStretch(1)
        self.names: tuple[str, ...] = ()
        self._items: list[QWidget] = []
        self.hide()

    def set_documents(self, names: Sequence[str], labels: dict[str, str] | None = None) -> None:
        """``labels``: what a chip says for a name, where not the name (the chat's own files)."""
        for item in self._items:
            item.deleteLater()
        self._items = []
        self.names = tuple(names)
        for name in self.names:
            text = (labels or {}).get(name, name)
            item = QWidget()
            row = QHBoxLayout(item)
            row.setContentsMargins(0, 0, 0, 0)
            row.setSpacing(0)
            chip = QLabel(text)
            chip.setObjectName("chip")
            chip.setToolTip(self.tr("Each question searches “{name}” and the reply cites what it was given")
                            .format(name=name))
            remove = QToolButton()
            remove.setText("×")
            remove.setAutoRaise(True)
            remove.setToolTip(self.tr("Detach {name} from this chat").format(name=text))
            remove.setAccessibleName(self.tr("Remove {name}").format(name=text))
            remove.setProperty("collection", name)
            remove.clicked.connect(self._on_remove_clicked)
            row.addWidget(chip)
            row.addWidget(remove)
            self._row.insertWidget(self._row.count() - 1, item)
            item.show()
            self._items.append(item)
        self.setVisible(bool(self.names))

    @property
    def remove_buttons(self) -> list[QToolButton]:
        return [cast(QToolButton, item.findChild(QToolButton)) for item in self._items]  # each item has its button

    @Slot()
    def _on_remove_clicked(self) -> None:
        self.remove_requested.emit(str(self.sender().property("collection")))


class CollectionPicker(QDialog):
    """Choose collections of the Documents page for a chat (those attached already come checked)."""

    def __init__(self, collections: Sequence[tuple[str, str]], chosen: Sequence[str],
                 parent: QWidget | None = None) -> None:
        """``collections``: (name, what it holds in words) each."""
        super().__init__(parent)
        self.setWindowTitle(self.tr("Use a collection"))
        layout = QVBoxLayout(self)
        intro = QLabel(self.tr("Each question in this chat searches the collections checked here; the reply cites "
                               "the passages it was given."))
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Collections"))
        for name, summary in collections:
            item = QListWidgetItem(f"{name} — {summary}" if summary else name)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in chosen else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        layout.addWidget(self.list)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def chosen(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())
                if self.list.item(i).checkState() == Qt.CheckState.Checked]


class ChatDocuments(QObject):
    """The Chat page's documents: the button, the strip and the citation panel (placed by the page), the chat's
    choice kept in the store, and a reply's citations."""

    def __init__(self, page: Any, service: Callable[[], DocumentsService] | None = None) -> None:
        """``page``: the Chat page (its store, bridge, open chat, ``ensure_conversation`` and ``say``)."""
        super().__init__(page)
        self._page = page
        self._provider = service
        self._service: DocumentsService | None = None
        self.button = QPushButton(self.tr("Documents"))
        self.button.setAccessibleName(self.tr("Documents for this chat"))
        self.button.setToolTip(self.tr("Attach files or collections: each question searches them and the reply "
                                       "cites the passages it used. Nothing leaves this computer."))
        self.menu = QMenu(self.button)
        # The actions are this object's children: the wrappers a test or a shortcut holds stay valid with it.
        self.attach_action = QAction(self.tr("Attach files…"), self)
        self.attach_action.triggered.connect(self._on_attach_clicked)
        self.use_action = QAction(self.tr("Use a collection…"), self)
        self.use_action.triggered.connect(self._on_use_clicked)
        self.menu.addAction(self.attach_action)
        self.menu.addAction(self.use_action)
        self.button.setMenu(self.menu)
        decorate(self.button, "documents")
        self.strip = DocumentStrip()
        self.strip.remove_requested.connect(self.detach)
        self.panel = CitationPanel()
        self.documents_tokens = 0  # of the streaming reply's prompt: the passages it was given (the context meter)

    @property
    def service(self) -> DocumentsService:
        if self._service is None:
            if self._provider is not None:
                self._service = self._provider()
            else:
                from app.ui.documents.documents_service import DocumentsService

                self._service = DocumentsService(self._page.bridge)
            self._service.progress.connect(self._on_progress)
        return self._service

    @Slot(object)
    def _on_progress(self, progress: Any) -> None:
        """A collection of the open chat indexed further: its chip's count of files as it stands."""
        conv = self._page.current
        if conv is not None and progress.collection in conv.documents and progress.state in ("done", "paused",
                                                                                            "failed"):
            self.show_chat(conv, keep_panel=True)

    # --- the open chat's collections ------------------------------------------------------------

    def show_chat(self, conv: Conversation | None, *, keep_panel: bool = False) -> None:
        """The chips of the open chat's collections; the panel's passage was of the chat before."""
        if self.panel.isVisible() and not keep_panel:
            self.panel.close_panel()
        names = conv.documents if conv is not None else ()
        labels = {}
        if conv is not None:
            from app.ui.documents.documents_service import chat_collection

            own = chat_collection(conv.id)
            if own in names:
                labels[own] = self._own_label(own)
        self.strip.set_documents(names, labels)

    def _own_label(self, name: str) -> str:
        from app.documents.passages import DocumentsError

        try:
            files = self.service.store.collection(name).files
        except DocumentsError:  # gone or unreadable: said when the chat asks it; the chip still shows
            return self.tr("This chat's files")
        return self.tr("This chat's files (%n)", "", files)

    def request(self, conv: Conversation) -> Documents | None:
        """What the bridge needs to retrieve for the chat's next question: the store and its collections."""
        if not conv.documents:
            return None
        return self.service.store, tuple(conv.documents)

    def attach_files(self, paths: Sequence[str | Path]) -> bool:
        """Add files to the open chat's own collection (made on demand; indexed in the background) and attach it."""
        if not paths:
            return False
        conv = self._page.ensure_conversation()
        if conv is None:
            return False
        from app.documents.passages import DocumentsError
        from app.ui.documents.documents_service import chat_collection

        name = chat_collection(conv.id)
        try:
            self.service.add_files(name, [Path(p) for p in paths], embed_model=default_embed_model())
        except DocumentsError as exc:
            self._page.say(f"{capitalized(exc.message)}.")
            return False
        return self._attach(conv, [*conv.documents, name])

    def use_collections(self, names: Sequence[str]) -> bool:
        """Attach these collections (the chat's own files stay attached if they were)."""
        conv = self._page.ensure_conversation()
        if conv is None:
            return False
        from app.ui.documents.documents_service import chat_collection

        own = [n for n in conv.documents if n == chat_collection(conv.id)]
        return self._attach(conv, [*own, *names])

    @Slot(str)
    def detach(self, name: str) -> None:
        conv = self._page.current
        if conv is None or name not in conv.documents:
            return
        self._attach(conv, [n for n in conv.documents if n != name])
        announce(self.strip, self.tr("{name} detached from this chat.").format(name=name))

    def _attach(self, conv: Conversation, names: list[str]) -> bool:
        try:
            self._page.store.set_documents(conv.id, names)
        except (ChatStoreError, NotFound) as exc:
            self._page.say(f"{capitalized(exc.message)}.")
            return False
        self._page.current = self._page.store.conversation(conv.id)
        self.show_chat(self._page.current)
        return True

    @Slot()
    def _on_attach_clicked(self) -> None:
        from app.documents.extract import SUPPORTED_SUFFIXES

        patterns = " ".join(f"*{suffix}" for suffix in sorted(SUPPORTED_SUFFIXES))
        paths, _ = QFileDialog.getOpenFileNames(self._page, self.tr("Attach files"), "",
                                                self.tr("Documents ({patterns})").format(patterns=patterns))
        self.attach_files(paths)

    @Slot()
    def _on_use_clicked(self) -> None:
        collections = [(c.name, self.tr("%n file(s)", "", c.files)) for c in self.service.store.collections()
                       if not c.name.startswith("chat-")]
        if not collections:
            self._page.say(self.tr("There are no collections yet: add a folder on the Documents page, or attach "
                                   "files to this chat."))
            return
        chosen = self._page.current.documents if self._page.current is not None else ()
        picker = CollectionPicker(collections, chosen, self._page)
        if picker.exec() == QDialog.DialogCode.Accepted:
            self.use_collections(picker.chosen())

    def forget_chat(self, conversation_id: int) -> None:
        """A chat deleted for good: its own collection (the files attached to it) goes with it; the files stay."""
        from app.documents.passages import DocumentsError
        from app.documents.store import default_path
        from app.ui.documents.documents_service import chat_collection

        if self._service is None and not default_path().exists():
            return  # no documents at all: nothing to open or make
        name = chat_collection(conversation_id)
        try:
            if any(c.name == name for c in self.service.store.collections()):
                self.service.remove(name)
        except DocumentsError as exc:  # it stays, listed on the Documents page, where it can be removed
            self._page.say(f"{capitalized(exc.message)}.")

    def shutdown(self) -> None:
        """The documents the page made for itself (no window gave it the app's) are closed with it."""
        if self._service is not None and self._provider is None:
            self._service.shutdown()

    # --- a reply's citations --------------------------------------------------------------------

    def retrieved(self, message_id: int, retrieval: Retrieval) -> list[dict[str, Any]]:
        """Keep the passages the reply was given with it (each Citation's dict with its ``where``); returns them."""
        self.documents_tokens = retrieval.tokens
        citations = [c.to_dict() | {"where": c.passage.where} for c in retrieval.citations]
        if citations:
            self._page.store.set_citations(message_id, citations)
        return citations

    @Slot(object)
    def open_citation(self, citation: dict[str, Any]) -> None:
        opening = self.panel.isHidden()
        self.panel.show_citation(citation)
        splitter = getattr(self._page, "splitter", None)
        if opening and splitter is not None:  # its room comes from the messages, the chat list keeps its width
            sizes = splitter.sizes()
            width = min(PANEL_WIDTH, max(sizes[1] // 2, self.panel.minimumWidth()))
            splitter.setSizes([sizes[0], max(sizes[1] - width, 0), width])



def default_embed_model() -> str | None:
    """The embedding model a chat's own collection gets: the library's first (None: its words are searched)."""
    from app.ui.documents.documents_service import embedding_model_choices

    models = embedding_model_choices()
    return models[0][1] if models else None
