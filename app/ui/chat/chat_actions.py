"""What the user does to the Chat page's chats and messages, between the widgets and the Qt-free ChatSession
(app/chats/session.py): the side panel's rename, delete (with its undo bar), export and chat settings, and a
bubble's edit, regenerate, versions (branches), delete version and pin. A store that refuses is said in the banner."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QFileDialog, QInputDialog

from app.chats.session import title_from
from app.chats.store import ChatStoreError
from app.ui.chat.chat_settings import ChatSettingsDialog, schema_refusal
from app.ui.common.widgets import announce

if TYPE_CHECKING:
    from app.chats.messages import ChatMessage
    from app.ui.chat.chat_bubble import MessageBubble


class ChatActions(QObject):
    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self._page = page
        self.session = page.session
        side = page.conversations
        side.rename_requested.connect(self.rename)
        side.delete_requested.connect(self.delete)
        side.export_requested.connect(self.export)
        side.settings_requested.connect(self.chat_settings)
        side.search_box.textChanged.connect(lambda _text: page.refresh_conversations())
        side.undo_bar.undo_requested.connect(self.undo)
        side.undo_bar.expired.connect(self._on_undo_expired)

    # --- the side panel -----------------------------------------------------------------------------------------

    @Slot()
    def rename(self) -> None:
        page = self._page
        if page.current is None:
            return
        title, ok = QInputDialog.getText(page, self.tr("Rename chat"), self.tr("New name:"), text=page.current.title)
        if ok and title.strip():
            self.rename_current(title.strip())

    def rename_current(self, title: str) -> None:
        try:
            self.session.rename(title)
        except ChatStoreError as exc:
            self._page.banner.say_store_error(exc)
            return
        self._page.refresh_conversations()
        self._page.show_stats_source()

    @Slot()
    def delete(self) -> None:
        """Delete the open chat at once; the undo bar offers it back for conversation_list.UNDO_SECONDS. A chat
        whose reply is streaming is stopped first and deleted when the engine confirms the stop, so the
        reply's writer never writes into a deleted row (and an undo gets the reply as it stopped)."""
        page = self._page
        try:
            undo = self.session.delete_current()
        except ChatStoreError as exc:
            page.banner.say_store_error(exc)
            return
        if undo is None:
            return
        if self.session.pending_delete == undo.conversation_id and (
                reply := page.reply.of(undo.conversation_id)) is not None:
            page.stop_reply(reply)
        page.undo_bar.offer(self.tr("Chat “{title}” deleted").format(title=undo.title))
        page.view.clear()
        page.documents.show_chat(None)
        page.refresh_conversations()
        page.show_stats_source()
        page.update_controls()

    @Slot()
    def undo(self) -> None:
        page = self._page
        try:
            reopened = self.session.undo_delete()
        except ChatStoreError as exc:
            assert self.session.undo is not None
            page.undo_bar.offer(self.tr("Chat “{title}” deleted").format(title=self.session.undo.title))
            page.banner.say_store_error(exc)
            return
        if reopened is not None:
            page.refresh_conversations()
            page.open_conversation(reopened)

    @Slot()
    def _on_undo_expired(self) -> None:
        if (deleted := self.session.undo_expired()) is not None:
            self._page.documents.forget_chat(deleted)  # and the index of the files attached to it

    def delete_stopped_chat(self) -> None:
        """The reply of a chat deleted while it streamed has stopped (and is saved, where it could be): delete it."""
        undo = self.session.undo
        try:
            self.session.delete_stopped()
        except ChatStoreError as exc:  # it stays, back in the list; the undo has nothing to do
            if undo is not None and self.session.undo is None:
                self._page.undo_bar.dismiss()
            self._page.banner.say_store_error(exc)

    @Slot()
    def export(self) -> None:
        page = self._page
        if page.current is None:
            return
        path, chosen = QFileDialog.getSaveFileName(page, self.tr("Export chat"), title_from(page.current.title, 40),
                                                   self.tr("Markdown (*.md);;JSON (*.json)"))
        if path:
            page.export_current(path, "json" if chosen.startswith("JSON") or path.endswith(".json") else "md")

    @Slot()
    def chat_settings(self) -> None:
        page = self._page
        if page.ensure_conversation() is None:  # the store refused it; the banner says why
            return
        current, loaded, request = page.current, page.loaded, page.loader.request
        assert current is not None
        # the model bar's load settings go with "Save as this model's defaults"
        load = request[1] if loaded is not None and request is not None and request[0] == current.model_path \
            and loaded.model_path == current.model_path else None
        servers, refusal = page.tool_cards.servers()
        ChatSettingsDialog(page.store, current, page, load=load, tool_servers=servers, tools_refusal=refusal).exec()
        self.session.reread()

    # --- a bubble's actions -------------------------------------------------------------------------------------

    def add_bubble(self, message: ChatMessage) -> MessageBubble:
        page = self._page
        bubble: MessageBubble = page.view.add(message)
        bubble.set_branches(page.store.branches(message.id))
        bubble.edit_requested.connect(self.edit)
        bubble.regenerate_requested.connect(self.regenerate)
        bubble.branch_requested.connect(self.show_branch)
        bubble.delete_branch_requested.connect(self.delete_branch)
        bubble.pin_requested.connect(self.pin)
        bubble.citation_requested.connect(page.documents.open_citation)
        return bubble

    @Slot(int, bool)
    def pin(self, message_id: int, pinned: bool) -> None:
        """Pin a message (an overflow policy never leaves it out of the prompt) or unpin it: saved at once."""
        page = self._page
        try:
            if not self.session.pin(message_id, pinned):
                return  # deleted meanwhile: nothing to pin
        except ChatStoreError as exc:
            page.banner.say_store_error(exc)
            return
        if bubble := page.view.bubble(message_id):
            bubble.set_pinned(pinned)
        announce(page.view, self.tr("Message pinned: it is always sent to the model.") if pinned
                 else self.tr("Message unpinned."))

    @Slot(int)
    def regenerate(self, message_id: int) -> None:
        """Write the reply again, as a new version beside this one (the old one stays a click away)."""
        page = self._page
        assert page.current is not None
        conv = page.store.conversation(page.current.id)
        if page.blocking(conv.id, tools=bool(page._tool_specs(conv))) is not None or page.loaded is None or \
                not page.reply.save_pending():
            return
        if refused := schema_refusal(conv.sampling):  # before the view changes
            page.banner.say(refused)
            return
        parent = self.session.regenerate_after(message_id)
        page.view.remove_from(message_id)
        page._generate(after=parent)

    @Slot(int)
    def edit(self, message_id: int) -> None:
        """Put the message in the box; sent, it becomes a new version beside this one."""
        page = self._page
        if page.current is None or page.reply.streams_in(page.current.id):
            return
        message = self.session.edit(message_id)
        page.view.remove_from(message_id)
        page.composer.setPlainText(message.content)
        page.images.put_back(message)
        page.composer.setFocus()

    @Slot(int)
    def show_branch(self, message_id: int) -> None:
        self._branch(message_id, self.session.show_branch)

    @Slot(int)
    def delete_branch(self, message_id: int) -> None:
        self._branch(message_id, self.session.delete_branch)

    def _branch(self, message_id: int, action: Callable[[int], None]) -> None:
        page = self._page
        if page.current is None or page.reply.streams_in(page.current.id):
            return
        try:
            action(message_id)
        except ChatStoreError as exc:
            page.banner.say_store_error(exc)
            return
        page.open_conversation(page.current.id)
