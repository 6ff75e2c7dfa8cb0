"""The Chat page: conversations on the left, the selected one on the right, streamed through the EngineBridge and
saved through the ChatStore as it arrives. A reply belongs to the conversation it was asked in, not to the view: the
user may open other chats while it streams, and send there too where the loaded model decodes several replies
together (the model bar's "Decode together"; one reply each chat, up to that many at once, and a reply given tools
answers alone), else the other chat waits for it; Stop stops the open chat's own reply. Each chat keeps its model
(opening a chat switches to it once no reply streams). What the store refuses is never lost: the banner says so and
it is saved on the next attempt.

The page is the layout and the request; its parts live beside it: the Qt-free ChatSession (app/chats/session.py:
the open chat, edits, deletes and undo, branches, the reply's state and its tool loop), the chat list's and the
bubbles' actions (chat_actions), the reply as it streams (chat_stream), the banner (chat_banner), images
(chat_images), MCP tools (chat_tool_cards over chat_tools), documents (chat_documents), the reply's lifecycle and
saving (reply_session), the list of chats (conversation_list) and the model loads (model_load).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QSplitter, QVBoxLayout, QWidget

from app.chats.messages import Conversation
from app.chats.session import ChatSession
from app.chats.session import title_from as _title_from
from app.chats.store import AT_LEAF, ChatStore, ChatStoreError, ReplyWriter
from app.hardware.profile import HardwareProfile
from app.images import ImageError
from app.ui.chat.chat_actions import ChatActions
from app.ui.chat.chat_banner import ChatBanner
from app.ui.chat.chat_images import ChatImages
from app.ui.chat.chat_settings import schema_refusal
from app.ui.chat.chat_stream import ChatStream
from app.ui.chat.chat_tool_cards import ChatToolCards
from app.ui.chat.chat_view import AttachmentStrip, Composer, MessageView, StatsStrip
from app.ui.chat.conversation_list import ConversationList
from app.ui.chat.engine_bridge import EngineBridge
from app.ui.chat.model_bar import ModelBar
from app.ui.chat.model_load import ModelLoadController
from app.ui.chat.reply_session import Reply, ReplySession
from app.ui.common.formatting import capitalized
from app.ui.common.icons import decorate
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, announce

if TYPE_CHECKING:
    from app.ui.chat.chat_tools import ChatTools
    from app.ui.documents.documents_service import DocumentsService

SEND_TIP = QT_TRANSLATE_NOOP("ChatPage", "Send (Enter)")  # shown through self.tr


def _to(part: str, name: str) -> Any:
    """The page's name for its part's ``name`` (a value or a method): the window, the tests, ``send`` and
    ``_generate`` reach the parts through the page."""
    return property(lambda page: getattr(getattr(page, part), name),
                    lambda page, value: setattr(getattr(page, part), name, value))


class ChatPage(QWidget):
    conversation_changed = Signal(int)  # -1: none
    go_to = Signal(str)  # a page's name: the empty state's button
    current, _edit_after, _stats_chat, _cut_context, _offered, _tool_steps, _tool_problems, _reply_max_tokens, \
        _reply_overflow, export_current = (_to("session", n) for n in (
            "current", "edit_after", "stats_chat", "cut_context", "offered", "tool_steps", "tool_problems",
            "reply_max_tokens", "reply_overflow", "export"))
    loaded, prefill, default_n_ctx, set_default_context, open_model, load_model = (_to("loader", n) for n in (
        "loaded", "prefill", "default_n_ctx", "set_default_context", "open_model", "load_model"))
    say, _show_banner, _hide_banner, _show_store_error, _busy_notice = (_to("banner", n) for n in (
        "say", "say", "clear", "say_store_error", "busy_notice"))
    attach_file, _sees_images, _no_vision_sentence = (_to("images", n) for n in (
        "attach_file", "sees_images", "no_vision_sentence"))
    tools, _tools, _tool_specs = _to("tool_cards", "tools"), _to("tool_cards", "made"), _to("tool_cards", "specs")
    _add_bubble, rename_current = _to("chat_actions", "add_bubble"), _to("chat_actions", "rename_current")
    load_settings = _to("model_bar", "settings")
    show_stats_source = _show_stats_source = _to("stream", "show_stats_source")

    def __init__(self, store: ChatStore, bridge: EngineBridge, parent: QWidget | None = None, *,
                 tools: Callable[[], ChatTools] | None = None,
                 documents: Callable[[], DocumentsService] | None = None) -> None:
        """``tools``: gives the app's MCP tools when the chat first needs them (None: the page makes its own);
        ``documents``: the app's documents (store and indexer) likewise."""
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.reply = ReplySession(self)  # the reply that streams, and those the store refused so far
        self.session = ChatSession(store, self.reply)
        self.tool_cards = ChatToolCards(self, tools)  # MCP servers' tools: made on first use
        self.images = ChatImages(self)
        self.stream = ChatStream(self)
        self._build(documents)
        self.chat_actions = ChatActions(self)  # not `actions`: QWidget.actions() is Qt's
        for signal, slot in self._bridge_slots():
            signal.connect(slot)
        self._hears_bridge = True
        self.refresh_conversations()
        self._update_controls()

    # --- layout --------------------------------------------------------------------------------

    def _build(self, documents: Callable[[], DocumentsService] | None) -> None:
        self.splitter = splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(splitter)
        self.conversations = side = ConversationList(self.store)
        side.opened.connect(self.open_conversation)
        side.new_requested.connect(self.new_conversation)
        # the page's names for the panel's parts (the window and the tests reach them through the page)
        self.conversation_list, self.search_box, self.undo_bar = side.list, side.search_box, side.undo_bar
        self.new_button, self.rename_button = side.new_button, side.rename_button
        self.delete_button = side.delete_button
        self.export_button, self.chat_settings_button = side.export_button, side.chat_settings_button
        splitter.addWidget(side)

        main = QWidget()
        layout = QVBoxLayout(main)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._build_model_bar())
        self.banner = ChatBanner(self.reply, self.loader)
        self.banner_text, self.reload_button = self.banner.text, self.banner.reload_button
        self.save_button, self.load_anyway_button = self.banner.save_button, self.banner.load_anyway_button
        layout.addWidget(self.banner)
        self.empty_state = EmptyState(self.tr("No model loaded"),
                                      self.tr("Load a model you have with “Load model…” above, or find one that fits "
                                              "this machine and download it."),
                                      self.tr("Find a model"), "Discover")
        self.empty_state.button.clicked.connect(lambda: self.go_to.emit("Discover"))
        layout.addWidget(self.empty_state)
        self.view = MessageView()
        layout.addWidget(self.view, 1)
        self.stats = StatsStrip()
        layout.addWidget(self.stats)
        self.attachments = AttachmentStrip()
        layout.addWidget(self.attachments)
        row = self._build_composer(documents)  # the widgets made in the order Tab goes through them
        layout.addWidget(self.documents.strip)
        layout.addLayout(row)
        splitter.addWidget(main)
        splitter.addWidget(self.documents.panel)  # a cited passage, beside the messages; hidden until one is opened
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([240, 900, 0])

    def _build_composer(self, documents: Callable[[], DocumentsService] | None) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setContentsMargins(12, 8, 12, 12)
        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.image_given.connect(self.images.attach)
        self.attach_button = QPushButton(self.tr("Image…"))
        self.attach_button.setAccessibleName(self.tr("Attach an image"))
        self.attach_button.setToolTip(self.tr("Attach a PNG, JPEG or WebP image (or paste one, or drop it on the "
                                              "message box); the model must see images"))
        self.attach_button.clicked.connect(self.images.choose)
        # The user's documents (issue 28): attached to the chat, searched for each question, cited by the reply.
        from app.ui.chat.chat_documents import ChatDocuments

        self.documents = ChatDocuments(self, documents)
        self.composer.documents_given.connect(self.documents.attach_files)
        self.send_button = QPushButton(self.tr("Send"))
        self.send_button.setAccessibleName(self.tr("Send message"))
        self.send_button.setToolTip(self.tr(SEND_TIP))
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setAccessibleName(self.tr("Stop the reply"))
        self.stop_button.setToolTip(self.tr("Stop the reply (Esc)"))
        self.stop_button.clicked.connect(self.stop)
        buttons = QVBoxLayout()
        for action, name in ((self.send_button, "send"), (self.stop_button, "stop"), (self.attach_button, "image")):
            decorate(action, name)
            buttons.addWidget(action)
        buttons.addWidget(self.documents.button)
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        return row

    def _build_model_bar(self) -> QWidget:
        self.model_bar = bar = ModelBar()
        self.model_label, self.load_progress, self.load_button = bar.model_label, bar.load_progress, bar.load_button
        self.context_box, self.gpu_layers_box = bar.context_box, bar.gpu_layers_box
        self.loader = ModelLoadController(bar, self.bridge, self.session.chat_draft, self)
        self.loader.changed.connect(self._update_controls)
        return bar

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.tool_cards.start_after_paint()

    def set_profile(self, profile: HardwareProfile) -> None:
        self.loader.profile = profile

    # --- conversations -------------------------------------------------------------------------------------------

    def refresh_conversations(self) -> None:
        self.conversations.refresh(self.current.id if self.current else None, self.session.pending_delete,
                                   self.reply.replies)

    @Slot()
    def new_conversation(self) -> None:
        try:
            conv = self.session.create(self.loaded.model_path if self.loaded else None)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        self.search_box.clear()
        self.refresh_conversations()
        self.open_conversation(conv.id)
        self.composer.setFocus()

    def ensure_conversation(self) -> Conversation | None:
        """The open chat, or a new one made now (the banner says why not)."""
        if self.current is None:
            self.new_conversation()
        current: Conversation | None = self.current
        return current

    def open_conversation(self, conversation_id: int) -> None:
        messages = self.session.open(conversation_id)
        self.view.clear()
        for message in messages:
            self._add_bubble(self.reply.as_written(message))
        self.documents.show_chat(self.current)
        self.tool_cards.show_step()
        self.banner.clear_busy()  # it was about sending in the chat that was open
        if self.reply.streams_in(conversation_id) and self._stats_chat != conversation_id:
            self._stats_chat = conversation_id  # the strip follows the reply on show from its next tokens
            self.stats.start_reply()
        self.model_bar.context_meter.clear()  # its figures were of the chat open before, until this one's next reply
        self.follow_chat_model()
        self.conversation_changed.emit(conversation_id)
        self._show_stats_source()
        self._update_controls()

    def follow_chat_model(self) -> None:
        """The open chat answers from its own model (ModelLoadController.follow), never under a reply: the chat
        follows once the reply ends."""
        conv = self.current
        if conv is not None and conv.model_path and not self.reply.streaming:
            self.loader.follow(conv.model_path)

    # --- sending -------------------------------------------------------------------------------

    @Slot()
    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        images = list(self.attachments.images)
        if not text and not images:
            return
        here = self.current.id if self.current is not None else None
        tools = here is not None and bool(self._tool_specs(self.store.conversation(here)))
        if (holder := self.blocking(here, tools=tools)) is not None:
            if holder.conversation_id != here:
                self._show_banner(self.tr("{busy_reason} Your message stays here until then.")
                                  .format(busy_reason=self._busy_reason(holder)), reload=False)
                self._busy_notice = True
            return
        if self.loaded is None:
            self._show_banner(self.tr("Load a model first: choose a GGUF file with “Load model…”."), reload=False)
            return
        if images and not self._sees_images():  # before anything is saved or sent
            self._show_banner(self._no_vision_sentence(), reload=False)
            return
        # A JSON schema the grammar cannot hold: refused as the server and the CLI refuse it, before any token.
        if refused := schema_refusal(self.current.sampling if self.current is not None else {}):
            self._show_banner(refused, reload=False)
            return
        if not self.reply.save_pending():  # the reply before comes first; the banner says why it cannot
            self._show_banner(self.tr("Your message is not sent yet: it stays in the box below."), reload=False)
            return
        try:
            if self.current is None:
                self.current = self.store.create_conversation(model_path=self.loaded.model_path)
            if not self.store.messages(self.current.id):
                self.store.rename(self.current.id, _title_from(text or self.tr("Image")))
            self.store.update_settings(self.current.id, model_path=self.loaded.model_path)
            # The message and its reply's row in one transaction: a message never waits without one. An edited
            # message goes beside the one it replaces (a new branch); the old one stays a click away.
            after = self._edit_after[1] if self._edit_after and self._edit_after[0] == self.current.id else AT_LEAF
            writer = self.store.begin_reply(self.current.id, prompt=text, images=images, after=after)
        except ChatStoreError as exc:
            self.refresh_conversations()
            self._show_banner(self.tr("{message}. It stays in the box below: {hint}, then send it again.")
                              .format(message=capitalized(exc.message), hint=exc.hint), reload=False)
            return
        except ImageError as exc:
            self._show_banner(self.tr("{message}. Your message stays in the box below.")
                              .format(message=capitalized(exc.message)), reload=False)
            return
        self.composer.clear()
        self.attachments.clear()
        self._edit_after = None
        assert writer.prompt_id is not None  # begin_reply was given the prompt
        self._add_bubble(self.store.message(writer.prompt_id))
        self.refresh_conversations()
        self._tool_steps, self._tool_problems = 0, []
        self._generate(writer)

    def _generate(self, writer: ReplyWriter | None = None, after: int | None = AT_LEAF,
                  conversation_id: int | None = None) -> None:
        """Stream a reply into ``writer``, or into a new reply after ``after`` (by default the end of the branch on
        show; an earlier message: a new version of the reply that followed it), in the open chat or, going on after
        a tool step, in the chat the reply belongs to."""
        conv = self.store.conversation(self.current.id if conversation_id is None else conversation_id)
        if writer is None:
            try:
                writer = self.store.begin_reply(conv.id, after=after)
            except ChatStoreError as exc:
                self._show_store_error(exc)
                return
        from app.settings import load

        # The reply's request (app/chats/session.py over app/engine/turn.py's rules), then the page shows it going.
        model_path = self.loaded.model_path if self.loaded is not None else conv.model_path
        specs = self._tool_specs(conv)
        turn = self.session.reply_turn(conv, writer, model_path, specs, max_steps=self.tools.max_steps,
                                       default_overflow=load().overflow)
        reply = self.reply.begin(writer, conv.id)
        reply.max_tokens, reply.overflow, reply.cut_context = self._reply_max_tokens, self._reply_overflow, \
            self._cut_context
        reply.tools = bool(specs)
        self.refresh_conversations()  # the list says which chats are writing
        if self.current is not None and self.current.id == conv.id:
            self._add_bubble(self.store.message(writer.message_id))
        self._stats_chat = conv.id
        self._hide_banner()
        self.stats.start_reply()
        self._show_stats_source()
        self._update_controls()
        self.documents.documents_tokens = 0  # until the bridge says what the chat's documents gave this reply
        reply.request_id = self.bridge.generate(turn.messages, turn.sampling, turn.keys, turn.overflow,
                                                self.documents.request(conv))

    def blocking(self, conversation_id: int | None, *, tools: bool = False) -> Reply | None:
        """The reply under way that keeps a new one in ``conversation_id`` (given tools, or not) from starting; None:
        it may start now. The chat's own; else, the latest of the others where the loaded model answers one reply at
        a time, where it already decodes as many as it can together, or where the new reply or one under way is
        given tools (a tool loop answers alone: its approvals and steps are the chat's)."""
        own = self.reply.of(conversation_id)
        others = self.reply.latest
        if own is not None or others is None:
            return own
        parallel = self.bridge.parallel
        if parallel <= 1 or tools or len(self.reply.replies) >= parallel or any(
                r.tools for r in self.reply.replies.values()):
            return others
        return None

    @Slot()
    def stop(self) -> None:
        """Stop the open chat's reply (or the one it waits for, in another chat); any other reply goes on."""
        if (reply := self.blocking(self.current.id if self.current is not None else None)) is not None:
            self.stop_reply(reply)

    def stop_reply(self, reply: Reply) -> None:
        if reply.request_id:
            self.bridge.stop(reply.request_id)
            return
        if self.tool_cards.stop() is None:
            return
        # A tool step: its running call is cancelled (the ToolBox ends it within a fraction of a second) and the
        # reply ends now, its calls kept as they stand.
        self.stream.end_reply(reply)
        announce(self.view, self.tr("Reply stopped during a tool call."))

    def _busy_reason(self, holder: Reply | None = None) -> str:
        together = self.bridge.parallel
        if together > 1 and len(self.reply.replies) >= together and not any(
                r.tools for r in self.reply.replies.values()):
            return self.tr("%n replies are being written, as many as this model writes at once: wait for one to "
                           "finish, or stop one, to send here.", "", together)
        holder = holder or self.reply.latest
        title = self.session.title_of(holder.conversation_id if holder is not None else None) or self.tr(
            "another chat")
        return self.tr("A reply is being written in “{title}”: wait for it to finish, or stop it, to send "
                       "here.").format(title=title)

    def update_controls(self) -> None:
        busy = self.bridge.busy
        self.empty_state.setVisible(self.loaded is None and not busy and not self.view.bubbles)
        # A chat whose reply streams: its settings and title stay as the reply began.
        generating = self.reply.streaming
        here = self.current.id if self.current is not None else None
        holder = self.blocking(here)
        streaming_here = holder is not None and holder.conversation_id == here
        self.send_button.setEnabled(not self.bridge.loading and holder is None)
        elsewhere = holder is not None and not streaming_here
        self.send_button.setToolTip(self._busy_reason(holder) if elsewhere else self.tr(SEND_TIP))
        self.stop_button.setEnabled(holder is not None)
        title = self.session.title_of(holder.conversation_id) if elsewhere and holder is not None else None
        self.stop_button.setToolTip(self.tr("Stop the reply in “{title}” (Esc)").format(title=title) if title
                                    else self.tr("Stop the reply (Esc)"))
        self.load_button.setEnabled(not busy)
        self.model_bar.reload_button.setEnabled(not busy and not generating and self.loader.request is not None)
        self.conversations.set_actions(has_chat=self.current is not None, streaming_here=streaming_here)
        can_regenerate = not self.bridge.loading and holder is None and self.loaded is not None
        for bubble in self.view.bubbles:
            if "regenerate" in bubble.actions:
                bubble.actions["regenerate"].setEnabled(can_regenerate)
            if "edit" in bubble.actions:
                bubble.actions["edit"].setEnabled(not streaming_here)

    _update_controls = update_controls  # send's and _generate's name

    def _bridge_slots(self) -> list[tuple[Any, Any]]:
        return [*self.loader.bridge_slots(), *self.stream.bridge_slots()]

    def shutdown(self) -> None:
        """Save a reply still streaming (the window is closing) before the engine goes away; a chat
        deleted while it streamed stays deleted. From here on the page no longer hears the bridge: what the
        engine still sends (its busy state as the stopped reply ends) would reach a page whose store the
        caller closes next."""
        if self.reply.streaming:
            self.bridge.stop()
        self.tool_cards.shutdown()
        self.documents.shutdown()
        self.reply.close()
        if self._hears_bridge:
            self._hears_bridge = False
            for signal, slot in self._bridge_slots():
                signal.disconnect(slot)
        self.session.close()
