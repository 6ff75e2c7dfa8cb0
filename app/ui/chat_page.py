"""The Chat page: conversations on the left, the selected one on the right, streamed through the
EngineBridge and saved through the ChatStore as it arrives.

A reply belongs to the conversation it was asked in, not to the view: the user may open other chats
while it streams; it keeps being saved into its own message (by id) and shows in the view only while
its conversation is open. One reply streams at a time (one bridge, one request).

Each chat keeps its model: with the app's ModelPool, opening a chat switches to its model (at once when it is
loaded, else loaded beside the others within the budget), and what the pool unloads is said in the banner.

When the store refuses a write (the disk is full, ...), nothing the user wrote or the model said is
lost: a reply keeps streaming into the view from its ReplyWriter (whose text is the truth), the banner
says it is not saved yet and why, and it is saved on the next save attempt: the writer's own, "Save
now" in the banner, a retry every few seconds, or before the next write the page makes. A message
that cannot be saved is not sent and stays in the composer. The reply's lifecycle and its saving are the
ReplySession's (app.ui.reply_session); this page shows them and talks to the engine bridge. The list of chats is
the side panel's (app.ui.conversation_list), the model loads the ModelLoadController's (app.ui.model_load).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QT_TRANSLATE_NOOP, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QInputDialog, QLabel, QPushButton, QSplitter,
                               QVBoxLayout, QWidget)

from app.chats import export as chat_export
from app.chats.messages import ChatMessage, Conversation, DeletedConversation
from app.chats.store import AT_LEAF, ChatStore, ChatStoreError, NotFound, ReplyWriter
from app.errors import EngineCrashed, EngineError
from app.images import ImageError
from app.hardware.profile import HardwareProfile
from app.ui.chat_settings import ChatSettingsDialog, schema_refusal
from app.ui.chat_view import IMAGE_SUFFIXES, AttachmentStrip, Composer, MessageBubble, MessageView, StatsStrip
from app.ui.conversation_list import ConversationList
from app.ui.engine_bridge import EngineBridge, TokenChunk
from app.ui.formatting import capitalized
from app.ui.icons import decorate
from app.ui.model_bar import ModelBar, Prefill
from app.ui.model_load import ModelLoadController
from app.ui.reply_session import ReplySession
from app.ui.widgets import EmptyState, announce
from app.datatypes import ContextCut, ContextUse, Done, LoadSettings, Loaded

if TYPE_CHECKING:
    from app.documents.retrieve import Retrieval
    from app.ui.chat_tools import ChatTools, ToolStep
    from app.ui.documents_service import DocumentsService
    from app.hub.presets import ModelPreset

SEND_TIP = QT_TRANSLATE_NOOP("ChatPage", "Send (Enter)")  # shown through self.tr


@dataclass
class _DeletedChat:
    """What the undo bar can bring back: the deleted rows, or None while the delete waits for the
    conversation's reply to stop."""
    conversation_id: int
    title: str
    deleted: DeletedConversation | None = None
    unsaved: list[ReplyWriter] = field(default_factory=list)  # its replies the store had refused: saved on undo


class ChatPage(QWidget):
    conversation_changed = Signal(int)  # -1: none
    go_to = Signal(str)  # a page's name: the empty state's button

    def __init__(self, store: ChatStore, bridge: EngineBridge, parent: QWidget | None = None, *,
                 tools: Callable[[], ChatTools] | None = None,
                 documents: Callable[[], DocumentsService] | None = None) -> None:
        """``tools``: gives the app's MCP tools when the chat first needs them (None: the page makes its own);
        ``documents``: the app's documents (store and indexer) likewise."""
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self._documents_provider = documents
        # MCP servers' tools (app.ui.chat_tools): made on first use, so a chat without tools never imports them
        self._tools_provider = tools
        self._tools: ChatTools | None = None
        self._tools_started = False
        self._offered: list[Any] = []  # the ToolSpecs the streaming reply was given
        self._tool_steps = 0  # tool steps of the reply being written (its user message's), up to the step limit
        self._tool_problems: list[str] = []  # what went wrong with its tools, said until the reply is over
        self.current: Conversation | None = None
        self._edit_after: tuple[int, int | None] | None = None  # (conversation, parent) of a message being edited
        self.reply = ReplySession(self)  # the reply that streams, and those the store refused so far
        self.reply.save_problem_changed.connect(self._on_save_problem_changed)
        self._stats_chat: int | None = None  # the conversation the stats strip's figures are from
        self._reply_max_tokens = 0  # the streaming reply's max_tokens
        self._reply_overflow = ""  # and its chat's overflow policy (the meter's warning names it)
        # the streaming reply's system prompt count (0 or 1: a stored cut's start leaves it out) and the cut before it
        self._cut_context: tuple[int, ContextCut | None] = (0, None)
        self._pending_delete: int | None = None  # deleted while its reply streamed: goes once that stops
        self._undo: _DeletedChat | None = None
        self._busy_notice = False  # the banner says a reply in another chat must end first
        self._notice: tuple[str, bool] | None = None  # what the banner says (text, reload) besides a save problem
        self._build()
        for signal, slot in self._bridge_slots():
            signal.connect(slot)
        self._hears_bridge = True
        self.refresh_conversations()
        self._update_controls()

    # --- layout --------------------------------------------------------------------------------

    def _build(self) -> None:
        self.splitter = splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(splitter)

        self.conversations = side = ConversationList(self.store)
        side.opened.connect(self.open_conversation)
        side.new_requested.connect(self.new_conversation)
        side.rename_requested.connect(self._on_rename_clicked)
        side.delete_requested.connect(self._on_delete_clicked)
        side.export_requested.connect(self._on_export_clicked)
        side.settings_requested.connect(self._on_chat_settings_clicked)
        side.search_box.textChanged.connect(self._on_search_changed)
        side.undo_bar.undo_requested.connect(self._on_undo_requested)
        side.undo_bar.expired.connect(self._on_undo_expired)
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
        self.banner = QFrame()
        self.banner.setObjectName("banner")
        banner_layout = QHBoxLayout(self.banner)
        self.banner_text = QLabel()
        self.banner_text.setWordWrap(True)
        self.banner_text.setAccessibleName(self.tr("Notice"))
        self.reload_button = QPushButton(self.tr("Reload model"))
        self.reload_button.setAccessibleName(self.tr("Reload model"))
        self.reload_button.clicked.connect(self._on_reload_clicked)
        self.save_button = QPushButton(self.tr("Save now"))
        self.save_button.setAccessibleName(self.tr("Save the reply now"))
        self.save_button.setToolTip(self.tr("Try again to save the reply that is not saved yet"))
        self.save_button.clicked.connect(self._on_save_clicked)
        self.load_anyway_button = QPushButton(self.tr("Load anyway"))
        self.load_anyway_button.setAccessibleName(self.tr("Load the model anyway"))
        self.load_anyway_button.setToolTip(self.tr("Load it past what the fit check counts as free on this machine"))
        self.load_anyway_button.clicked.connect(self._on_load_anyway_clicked)
        banner_layout.addWidget(self.banner_text, 1)
        banner_layout.addWidget(self.load_anyway_button)
        banner_layout.addWidget(self.save_button)
        banner_layout.addWidget(self.reload_button)
        self.banner.hide()
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
        composer_row = QHBoxLayout()
        composer_row.setContentsMargins(12, 8, 12, 12)
        self.composer = Composer()
        self.composer.submitted.connect(self.send)
        self.composer.image_given.connect(self._on_image_given)
        self.composer.documents_given.connect(self._on_documents_given)
        self.attach_button = QPushButton(self.tr("Image…"))
        self.attach_button.setAccessibleName(self.tr("Attach an image"))
        self.attach_button.setToolTip(self.tr("Attach a PNG, JPEG or WebP image (or paste one, or drop it on the "
                                              "message box); the model must see images"))
        self.attach_button.clicked.connect(self._on_attach_clicked)
        # The user's documents (issue 28): attached to the chat, searched for each question, cited by the reply.
        from app.ui.chat_documents import ChatDocuments

        self.documents = ChatDocuments(self, self._documents_provider)
        layout.addWidget(self.documents.strip)
        self.send_button = QPushButton(self.tr("Send"))
        self.send_button.setAccessibleName(self.tr("Send message"))
        self.send_button.setToolTip(self.tr(SEND_TIP))
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setAccessibleName(self.tr("Stop the reply"))
        self.stop_button.setToolTip(self.tr("Stop the reply (Esc)"))
        self.stop_button.clicked.connect(self.stop)
        for action, name in ((self.send_button, "send"), (self.stop_button, "stop"), (self.attach_button, "image")):
            decorate(action, name)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.attach_button)
        buttons.addWidget(self.documents.button)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)
        layout.addLayout(composer_row)
        splitter.addWidget(main)
        splitter.addWidget(self.documents.panel)  # a cited passage, beside the messages; hidden until one is opened
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([240, 900, 0])

    def _build_model_bar(self) -> QWidget:
        self.model_bar = bar = ModelBar()
        self.model_label, self.load_progress, self.load_button = bar.model_label, bar.load_progress, bar.load_button
        self.context_box, self.gpu_layers_box = bar.context_box, bar.gpu_layers_box
        self.loader = ModelLoadController(bar, self.bridge, self._chat_draft, self)
        self.loader.notice.connect(self._on_load_notice)
        self.loader.notice_cleared.connect(self._hide_banner)
        self.loader.load_anyway_offered.connect(self._render_banner)
        self.loader.changed.connect(self._update_controls)
        return bar

    # --- tools (MCP) ---------------------------------------------------------------------------

    @property
    def tools(self) -> ChatTools:
        if self._tools is None:
            from app.ui.chat_tools import ChatTools

            self._tools = self._tools_provider() if self._tools_provider is not None else ChatTools(parent=self)
        if not self._tools_started:
            self._tools_started = True
            tools = self._tools
            tools.cards_changed.connect(self._on_tool_cards)
            tools.approval_needed.connect(self._on_tool_approval)
            tools.step_done.connect(self._on_tool_step_done)
            tools.problem.connect(self._on_tool_problem)
        return self._tools

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self._tools_started:  # after the first paint: the servers start while the user reads
            QTimer.singleShot(0, self._start_tools)

    @Slot()
    def _start_tools(self) -> None:
        if self._tools is not None or self._mcp_file_exists():
            self.tools.connect_all()

    def _takes_tools(self) -> bool:
        """Whether the loaded model's chat template can be given tools (the chat-format layer found its syntax)."""
        return self.loaded is not None and bool(self.loaded.details.get("tool_format"))

    def _tool_specs(self, conv: Conversation) -> list[Any]:
        """The tools the chat's model is given: its servers' (a server added in Settings → Tools since the app
        started counts too), none where its template cannot call tools."""
        if conv.tool_servers == () or not self._takes_tools():
            return []
        if self._tools is None and not self._mcp_file_exists():
            return []  # no servers: the tools are not even imported
        return self.tools.specs(conv.tool_servers)

    @Slot(object)
    def _on_tool_cards(self, step: ToolStep) -> None:
        try:
            self.store.update_message(step.message_id, tools=step.cards)
        except ChatStoreError as exc:  # shown all the same; the banner says why it is not kept
            self._show_store_error(exc)
        except NotFound:
            return  # its chat was deleted
        if bubble := self.view.bubble(step.message_id):
            bubble.set_tools(step.cards, live=self._tools is not None and self._tools.step is step)
            if step.running and (card_view := bubble.tool_card(step.running)):
                card_view.set_card(card_view.card, running=True)

    @Slot(object, str, str)
    def _on_tool_approval(self, step: ToolStep, call_id: str, description: str) -> None:
        bubble = self.view.bubble(step.message_id)
        card_view = bubble.tool_card(call_id) if bubble is not None else None
        if card_view is None:
            return  # its chat is not open: asked when it is (open_conversation)
        approval = card_view.ask(description)
        approval.decided.connect(lambda answer, call=call_id: self.tools.answer(call, answer))
        if self.current is not None and self.current.id == step.conversation_id:
            approval.buttons["once"].setFocus()
        announce(self.view, self.tr("The model wants to run the tool {name}: allow or deny it.")
                 .format(name=card_view.card.name))

    def _show_tool_step(self) -> None:
        """The open chat's tool step, as it stands (its approval asked again after the chat was reopened)."""
        step = self._tools.step if self._tools is not None else None
        if step is None or self.current is None or step.conversation_id != self.current.id:
            return
        self._on_tool_cards(step)
        waiting = next((c for c in step.cards if not c.answered), None)
        if waiting is not None and not step.running:
            spec = next((s for s in step.specs.values() if s.server == waiting.server and s.name == waiting.name),
                        None)
            self._on_tool_approval(step, waiting.call_id, spec.description if spec is not None else "")

    @Slot(object)
    def _on_tool_step_done(self, step: ToolStep) -> None:
        """Every call has its answer: the tool messages go back to the model, which goes on."""
        if not self.reply.streaming:
            return
        self.reply.end()
        self._tool_steps += 1
        self._generate(after=step.message_id, conversation_id=step.conversation_id)
        if self._tool_problems:  # starting the generation cleared the banner: the servers' trouble stays said
            self._show_banner(" ".join(self._tool_problems), reload=False)

    @Slot(str)
    def _on_tool_problem(self, text: str) -> None:
        said = capitalized(text) + ("" if text.endswith(".") else ".")
        if self.reply.streaming:
            self._tool_problems.append(said)
        self._show_banner(" ".join(self._tool_problems) or said, reload=False)

    # --- conversations -------------------------------------------------------------------------

    def refresh_conversations(self) -> None:
        self.conversations.refresh(self.current.id if self.current else None, self._pending_delete)

    @Slot()
    def new_conversation(self) -> None:
        try:
            conv = self.store.create_conversation(model_path=self.loaded.model_path if self.loaded else None)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        self.search_box.clear()
        self.current = conv
        self.refresh_conversations()
        self.open_conversation(conv.id)
        self.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        self.current = self.store.conversation(conversation_id)
        self._edit_after = None  # an edit not resent is abandoned: the branch on show is shown whole again
        self.view.clear()
        for message in self.store.messages(conversation_id):
            self._add_bubble(self.reply.as_written(message))
        self.documents.show_chat(self.current)
        self._show_tool_step()
        self._hide_busy_notice()  # it was about sending in the chat that was open
        self.model_bar.context_meter.clear()  # its figures were of the chat open before, until this one's next reply
        self._follow_chat_model()
        self.conversation_changed.emit(conversation_id)
        self._show_stats_source()
        self._update_controls()

    def _add_bubble(self, message: ChatMessage) -> MessageBubble:
        bubble = self.view.add(message)
        bubble.set_branches(self.store.branches(message.id))
        bubble.edit_requested.connect(self._on_edit_requested)
        bubble.regenerate_requested.connect(self._on_regenerate_requested)
        bubble.branch_requested.connect(self._on_branch_requested)
        bubble.delete_branch_requested.connect(self._on_delete_branch_requested)
        bubble.pin_requested.connect(self._on_pin_requested)
        bubble.citation_requested.connect(self.documents.open_citation)
        return bubble

    @Slot(int, bool)
    def _on_pin_requested(self, message_id: int, pinned: bool) -> None:
        """Pin a message (an overflow policy never leaves it out of the prompt) or unpin it: saved at once."""
        try:
            self.store.set_pinned(message_id, pinned)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        except NotFound:  # deleted meanwhile: nothing to pin
            return
        if bubble := self.view.bubble(message_id):
            bubble.set_pinned(pinned)
        announce(self.view, self.tr("Message pinned: it is always sent to the model.") if pinned
                 else self.tr("Message unpinned."))

    @Slot(str)
    def _on_search_changed(self, _text: str) -> None:
        self.refresh_conversations()

    @Slot()
    def _on_rename_clicked(self) -> None:
        if self.current is None:
            return
        title, ok = QInputDialog.getText(self, self.tr("Rename chat"), self.tr("New name:"), text=self.current.title)
        if ok and title.strip():
            self.rename_current(title.strip())

    def rename_current(self, title: str) -> None:
        try:
            self.store.rename(self.current.id, title)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        self.current = self.store.conversation(self.current.id)
        self.refresh_conversations()
        self._show_stats_source()

    @Slot()
    def _on_delete_clicked(self) -> None:
        self.delete_current()

    def delete_current(self) -> None:
        """Delete the open chat at once; the undo bar offers it back for conversation_list.UNDO_SECONDS. A chat
        whose reply is streaming is stopped first and deleted when the engine confirms the stop, so the
        reply's writer never writes into a deleted row (and an undo gets the reply as it stopped)."""
        if self.current is None:
            return
        conv = self.current
        undo = _DeletedChat(conv.id, conv.title)
        if self.reply.streaming and conv.id == self.reply.conversation_id:
            self._pending_delete = conv.id
            self.bridge.stop()
        else:
            self.reply.save_pending()  # what the undo keeps is the rows as they are: save first what they lack
            try:
                undo.deleted = self.store.delete_conversation(conv.id)
            except ChatStoreError as exc:
                self._show_store_error(exc)
                return
            undo.unsaved = self.reply.forget(conv.id)
        self._undo = undo  # a newer delete makes the older one final
        self.undo_bar.offer(self.tr("Chat “{title}” deleted").format(title=conv.title))
        self.current = None
        self.view.clear()
        self.documents.show_chat(None)
        self.refresh_conversations()
        self._show_stats_source()
        self._update_controls()

    @Slot()
    def _on_undo_requested(self) -> None:
        undo, self._undo = self._undo, None
        if undo is None:
            return
        if undo.deleted is not None:
            try:
                self.store.restore_conversation(undo.deleted)
            except ChatStoreError as exc:
                self._undo = undo  # still there to undo once the store takes it
                self.undo_bar.offer(self.tr("Chat “{title}” deleted").format(title=undo.title))
                self._show_store_error(exc)
                return
            self.reply.keep(undo.unsaved)
        elif self._pending_delete == undo.conversation_id:
            self._pending_delete = None  # not deleted yet: just keep it (its reply still stops)
        else:
            return
        self.current = self.store.conversation(undo.conversation_id)
        self.refresh_conversations()
        self.open_conversation(undo.conversation_id)

    @Slot()
    def _on_undo_expired(self) -> None:
        undo, self._undo = self._undo, None  # the rows it kept are let go; a pending delete still happens
        self.store.purge_attachments()  # and the deleted chat's image files with them
        if undo is not None and undo.deleted is not None:
            self.documents.forget_chat(undo.conversation_id)  # and the index of the files attached to it

    @Slot()
    def _on_chat_settings_clicked(self) -> None:
        if self.current is None:
            self.new_conversation()
            if self.current is None:  # the store refused it; the banner says why
                return
        loaded = self.loaded  # the model bar's load settings go with "Save as this model's defaults"
        request = self.loader.request
        load = request[1] if loaded is not None and request is not None and request[0] == self.current.model_path \
            and loaded.model_path == self.current.model_path else None
        servers, refusal = [], ""
        if self._tools is not None or self._mcp_file_exists():
            tools = self.tools
            servers = [(c.name, self._server_state(c)) for c in tools.configs()]
            from app.mcp.loop import tool_support_refusal

            if servers and self.loaded is not None:
                refusal = tool_support_refusal(self.loaded.details)
        ChatSettingsDialog(self.store, self.current, self, load=load, tool_servers=servers,
                           tools_refusal=refusal).exec()
        self.current = self.store.conversation(self.current.id)

    @staticmethod
    def _mcp_file_exists() -> bool:
        from app.mcp.config import McpServers

        return McpServers().path.exists()

    def _server_state(self, config: Any) -> str:
        status = self.tools.status(config.name)
        if config.disabled:
            return self.tr("off")
        if status is not None and status.state == "ready":
            return self.tr("connected · %n tool(s)", "", status.tools)
        if status is not None and status.state == "failed":
            return self.tr("failed")
        return self.tr("not connected")

    @Slot()
    def _on_export_clicked(self) -> None:
        if self.current is None:
            return
        path, chosen = QFileDialog.getSaveFileName(self, self.tr("Export chat"), _title_from(self.current.title, 40),
                                                   self.tr("Markdown (*.md);;JSON (*.json)"))
        if path:
            self.export_current(path, "json" if chosen.startswith("JSON") or path.endswith(".json") else "md")

    def export_current(self, path: str, kind: str) -> Path:
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix(f".{kind}")
        export = chat_export.to_json if kind == "json" else chat_export.to_markdown
        text = export(self.store, self.current.id)
        target.write_text(text, encoding="utf-8")
        return target

    # --- model: the ModelLoadController's (app/ui/model_load.py); the page's names for it -----------

    @property
    def loaded(self) -> Loaded | None:
        return self.loader.loaded

    @property
    def prefill(self) -> Prefill | None:
        return self.loader.prefill

    @prefill.setter
    def prefill(self, prefill: Prefill | None) -> None:
        self.loader.prefill = prefill

    @property
    def default_n_ctx(self) -> int:
        return self.loader.default_n_ctx

    def set_profile(self, profile: HardwareProfile) -> None:
        self.loader.profile = profile

    def set_default_context(self, n_ctx: int) -> None:
        self.loader.set_default_context(n_ctx)

    def open_model(self, path: str) -> None:
        self.loader.open_model(path)

    def load_model(self, path: str, settings: LoadSettings, *, force: bool = False) -> None:
        self.loader.load_model(path, settings, force=force)

    def load_settings(self) -> LoadSettings:
        return self.model_bar.settings()

    def _chat_draft(self) -> str:
        """The open chat's draft model (its settings), which a load takes where the model has none."""
        return str(self.current.sampling.get("draft") or "") if self.current is not None else ""

    def _follow_chat_model(self) -> None:
        """The open chat answers from its own model (ModelLoadController.follow), never under a reply: the chat
        follows once the reply ends."""
        conv = self.current
        if conv is None or not conv.model_path or self.reply.streaming:
            return
        self.loader.follow(conv.model_path)

    @Slot(str, bool)
    def _on_load_notice(self, text: str, reload: bool) -> None:
        self._show_banner(text, reload=reload)

    @Slot(object)
    def _on_model_loaded(self, info: Loaded) -> None:
        self.stats.set_memory(sum(info.memory_bytes.values()))

    @Slot()
    def _on_load_anyway_clicked(self) -> None:
        self.loader.load_anyway()

    @Slot()
    def _on_reload_clicked(self) -> None:
        self.loader.reload()

    # --- images --------------------------------------------------------------------------------

    @Slot()
    def _on_attach_clicked(self) -> None:
        patterns = " ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)
        paths, _ = QFileDialog.getOpenFileNames(self, self.tr("Attach images"), "", self.tr("Images ({patterns})")
                                                .format(patterns=patterns))
        for path in paths:
            self.attach_file(path)

    def attach_file(self, path: str | Path) -> bool:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            self._show_banner(self.tr("Cannot read the image {name}: {reason}.").format(
                name=Path(path).name, reason=exc.strerror), reload=False)
            return False
        return self.attach_image(data, Path(path).name)

    @Slot(bytes, str)
    def _on_image_given(self, data: bytes, name: str) -> None:
        self.attach_image(data, name)

    def attach_image(self, data: bytes, name: str) -> bool:
        """Add an image to the next message, checked from its header first (app/images); a text-only model
        says so now, before anything is sent."""
        from app.images import image_info

        if self.loaded is not None and not self._sees_images():
            self._show_banner(self._no_vision_sentence(), reload=False)
            return False
        try:
            info = image_info(data)
        except ImageError as exc:
            self._show_banner(f"{name}: {capitalized(exc.message)}.", reload=False)
            return False
        self.attachments.add(data, f"{name} ({info.width} × {info.height})")
        self._hide_banner()
        return True

    def _sees_images(self) -> bool:
        return self.loaded is not None and bool(self.loaded.details.get("vision"))

    def _no_vision_sentence(self) -> str:
        name = Path(self.loaded.model_path).name if self.loaded else self.tr("the model")
        return (self.tr("{name} does not see images: it is a text-only model, or its vision projector (an mmproj "
                        "GGUF file) is not beside it. Load a vision model to send images; your message stays here.")
                        .format(name=name))

    # --- sending -------------------------------------------------------------------------------

    @Slot()
    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        images = list(self.attachments.images)
        if not text and not images:
            return
        if self.reply.streaming:
            if self.current is None or self.current.id != self.reply.conversation_id:
                self._show_banner(self.tr("{busy_reason} Your message stays here until then.")
                                  .format(busy_reason=self._busy_reason()), reload=False)
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
        # An assistant turn's thinking goes back with it: the model's template decides whether the model sees it
        # again (most drop earlier turns' thinking). A reply that called tools goes back with its calls, then a
        # ``tool`` message per call with what it returned (or that it was denied or not run).
        shown = [m for m in self.store.messages(conv.id)
                 if (m.content or m.images or m.reasoning or m.tools) and m.id != writer.message_id]
        history = []
        pins: set[int] = set()  # the pinned messages' engine turns (a reply's tool results with it), as indices
        for m in shown:
            turn, *results = m.engine_turns()
            if m.pinned:
                pins.update(range(len(history), len(history) + 1 + len(results)))
            history += [replace(turn, images=_encoded(m.images)), *results]
        from app.engine.turn import ModelDefaults, with_system_prompt, with_tools

        # The turn's request (app/engine/turn.py): the chat's own settings, then the model's preset
        # (app/hub/presets.py), then the model's, then QuantDesk's; the system prompt likewise.
        model_path = self.loaded.model_path if self.loaded is not None else conv.model_path
        defaults = ModelDefaults.of(model_path)
        sent = with_system_prompt(history, defaults.system_prompt(conv.system_prompt or None))
        # The overflow policy goes on from the branch's last cut (its start stored without the system prompt).
        lead = len(sent) - len(history)
        history = sent
        last = next((m.context_cut for m in reversed(shown) if m.context_cut), None)
        previous = None
        if last is not None:
            previous = ContextCut.from_dict(last).shifted(lead)
        self._cut_context = (lead, previous)
        self.reply.begin(writer, conv.id)
        if self.current is not None and self.current.id == conv.id:
            self._add_bubble(self.store.message(writer.message_id))
        self._stats_chat = conv.id
        self._hide_banner()
        self.stats.start_reply()
        self._show_stats_source()
        self._update_controls()
        # The chat's own values, then the preset's, the model's recommended ones, QuantDesk's (choose_sampling).
        sampling = defaults.sampling(conv.sampling).settings
        # The tools of the servers the chat chose, in the model's own syntax; after the last step allowed, the
        # model is shown them still (the prompt stays as it was) but held to answer in words.
        self._offered = self._tool_specs(conv)
        sampling = with_tools(sampling, [spec.as_openai_function() for spec in self._offered],
                              last_step=self._tool_steps >= self.tools.max_steps)
        self._reply_max_tokens = sampling.max_tokens  # the context meter's warning: whether the next reply fits
        # The branch's saved model state is restored first (a chat reopened or switched back to is not read again),
        # and the reply's own saved after it: app/engine/states.py.
        from app.engine.states import chat_keys

        branch = [m.id for m in self.store.messages(conv.id) if m.id != writer.message_id]
        replies = [m.id for m in self.store.all_messages(conv.id) if m.role == "assistant"]  # other branches' tips
        self._reply_overflow = self._overflow_of(conv, defaults.preset)
        self.documents.documents_tokens = 0  # until the bridge says what the chat's documents gave this reply
        self.bridge.generate(history, sampling, chat_keys(conv.id, branch, writer.message_id, history, replies),
                             (self._reply_overflow, previous, frozenset(i + lead for i in pins)),
                             self.documents.request(conv))

    @staticmethod
    def _overflow_of(conv: Conversation, preset: ModelPreset | None) -> str:
        """The chat's overflow policy: its own, else its model's preset's, else the default in Settings."""
        from app.engine.turn import ModelDefaults
        from app.settings import load

        return ModelDefaults(preset=preset).overflow(conv.overflow, load().overflow)

    @Slot(object)
    def _on_cut(self, cut: ContextCut) -> None:
        """The overflow policy left earlier messages out of the reply's prompt: a new cut is kept with the reply
        and marked on it; the same cut as the reply before is no news."""
        if not self.reply.streaming or self.reply.writer is None:
            return
        lead, previous = self._cut_context
        if previous is not None and (cut.start, cut.dropped, cut.note, cut.kept) == (
                previous.start, previous.dropped, previous.note, previous.kept):
            return
        stored = cut.shifted(-lead).to_dict()
        try:
            self.store.set_context_cut(self.reply.writer.message_id, stored)
        except ChatStoreError as exc:
            self._show_store_error(exc)
        if bubble := self._streaming_bubble():
            bubble.show_cut(stored)

    @Slot(object)
    def _on_retrieved(self, retrieval: Retrieval) -> None:
        """The passages of the chat's documents the reply is given (before its tokens): kept with the reply, shown
        as its chips; what the user should know (a collection still indexing, nothing found) in the banner."""
        if not self.reply.streaming or self.reply.writer is None:
            return
        try:
            citations = self.documents.retrieved(self.reply.writer.message_id, retrieval)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            citations = []
        if citations and (bubble := self._streaming_bubble()):
            bubble.set_citations(citations)
        if retrieval.notes:
            self._show_banner(" ".join(capitalized(n) + ("" if n.endswith(".") else ".") for n in retrieval.notes),
                              reload=False)

    @Slot(list)
    def _on_documents_given(self, paths: list[Path]) -> None:
        """Documents dropped or pasted on the message box: attached to the chat, as "Attach files…" does."""
        self.documents.attach_files(paths)

    def ensure_conversation(self) -> Conversation | None:
        """The open chat, or a new one made now (the banner says why not)."""
        if self.current is None:
            self.new_conversation()
        return self.current

    def say(self, text: str) -> None:
        """A sentence in the banner (the documents' part of the page)."""
        self._show_banner(text, reload=False)

    @Slot()
    def stop(self) -> None:
        if self.reply.streaming:
            step = self._tools.stop() if self._tools is not None else None
            if step is None:
                self.bridge.stop()
                return
            # A tool step: its running call is cancelled (the ToolBox ends it within a fraction of a second) and the
            # reply ends now, its calls kept as they stand.
            self._on_tool_cards(step)
            self._end_reply()
            announce(self.view, self.tr("Reply stopped during a tool call."))

    @Slot(int)
    def _on_regenerate_requested(self, message_id: int) -> None:
        """Write the reply again, as a new version beside this one (the old one stays a click away)."""
        if self.reply.streaming or self.loaded is None or not self.reply.save_pending():
            return
        if refused := schema_refusal(self.store.conversation(self.current.id).sampling):  # before the view changes
            self._show_banner(refused, reload=False)
            return
        parent = self.store.message(message_id).parent_id
        self.view.remove_from(message_id)
        self._tool_steps, self._tool_problems = 0, []
        self._generate(after=parent)

    @Slot(int)
    def _on_edit_requested(self, message_id: int) -> None:
        """Put the message in the box; sent, it becomes a new version beside this one."""
        if self.reply.streaming:
            return
        message = self.store.message(message_id)
        self._edit_after = (message.conversation_id, message.parent_id)
        self.view.remove_from(message_id)
        self.composer.setPlainText(message.content)
        self.attachments.clear()
        for n, image in enumerate(message.images, 1):
            try:
                self.attachments.add(image.path.read_bytes(), self.tr("image {n} ({width} × {height})").format(
                    n=n, width=image.width, height=image.height))
            except OSError:
                continue
        self.composer.setFocus()

    @Slot(int)
    def _on_branch_requested(self, message_id: int) -> None:
        if self.reply.streaming or self.current is None:
            return
        try:
            self.store.show_branch(message_id)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        self.open_conversation(self.current.id)

    @Slot(int)
    def _on_delete_branch_requested(self, message_id: int) -> None:
        if self.reply.streaming or self.current is None:
            return
        self.reply.save_pending()
        try:
            self.store.delete_branch(message_id)
        except ChatStoreError as exc:
            self._show_store_error(exc)
            return
        self.reply.drop_deleted(self.current.id, {m.id for m in self.store.all_messages(self.current.id)})
        self.open_conversation(self.current.id)

    def _streaming_bubble(self) -> MessageBubble | None:
        """The streaming reply's bubble while its conversation is open, else None. Looked up each
        time: opening another chat deletes the bubbles of the one before."""
        return self.view.bubble(self.reply.writer.message_id) if self.reply.writer is not None else None

    @Slot(object)
    def _on_tokens(self, chunk: TokenChunk) -> None:
        if not self.reply.streaming:
            return
        self.reply.append(chunk.text, chunk.reasoning)
        if bubble := self._streaming_bubble():
            if chunk.reasoning:  # the thinking comes before the answer
                bubble.append_reasoning(chunk.reasoning, chunk.reasoning_ms)
            bubble.append_text(chunk.text)
        self.stats.on_progress(chunk)

    @Slot(object)
    def _on_done(self, done: Done) -> None:
        if not self.reply.streaming:
            return
        stats = done.stats.to_public_dict()
        self.reply.finish(stats, done.text, done.reasoning)
        if bubble := self._streaming_bubble():
            bubble.finish(done.text, stats, "complete", done.reasoning)
        self.stats.on_done(stats)
        loaded = self.loaded
        if loaded is not None and self.current is not None and self.current.id == self._stats_chat:
            use = ContextUse.after(done.stats, loaded.n_ctx, self.documents.documents_tokens)
            self.model_bar.context_meter.show_use(use, self._reply_max_tokens, loaded.model_path,
                                                  self._reply_overflow)
        if done.tool_calls and self._offered and done.stats.stop_reason != "cancelled":
            if self._tool_steps < self.tools.max_steps:
                # The reply stays under way through its tool step: Stop stops the call, Send waits.
                self.tools.begin_step(self.reply.conversation_id, self.reply.writer.message_id, done.tool_calls,
                                      self._tool_steps, self._offered)
                return
            self._show_banner(self.tr("The reply made %n tool step(s), the most one reply may: it ends here.", "",
                                      self.tools.max_steps), reload=False)
        self._end_reply()
        if done.notice:  # the engine crashed under this reply, replayed in a safer configuration (app/engine/guard.py)
            self._show_banner(done.notice, reload=False)
        # Screen readers hear the reply once it is whole (not token by token, which they would read as noise).
        ended = self.tr("Reply stopped") if done.stats.stop_reason == "cancelled" else self.tr("Reply done")
        if done.text.strip():
            announce(self.view, self.tr("{ended}: {text}").format(ended=ended, text=done.text.strip()))
        elif done.reasoning.strip():
            announce(self.view, self.tr("{ended}: the model only thought, it did not answer.").format(ended=ended))
        else:
            announce(self.view, self.tr("{ended}, empty.").format(ended=ended))

    def _interrupt_reply(self) -> bool:
        """Keep the reply so far, marked interrupted; returns whether the store has it."""
        saved = self.reply.interrupt()
        if bubble := self._streaming_bubble():
            bubble.finish(self.reply.writer.text, None, "interrupted", self.reply.writer.reasoning)
        self._end_reply()
        return saved

    @Slot(object)
    def _on_failed(self, error: EngineError) -> None:
        self.model_bar.hide_progress()
        if self.reply.streaming:
            self._interrupt_reply()
        else:  # a load that failed: the model loaded before (if any) is still there
            self.loader.show_loaded_model()
        self._show_banner(str(error), reload=False)

    @Slot(object)
    def _on_crashed(self, error: EngineCrashed) -> None:
        self.loader.engine_gone()
        kept = self.tr("the reply so far is kept and marked interrupted.")
        if self.reply.streaming and not self._interrupt_reply():
            notice = f"{error} {capitalized(kept)}"  # the banner goes on to say it is not saved yet
        else:
            notice = self.tr("{error} Your conversation is saved; {kept}").format(error=error, kept=kept)
        self._show_banner(notice, reload=self.loader.request is not None)
        self._update_controls()

    def _end_reply(self) -> None:
        self.reply.end()
        if self._pending_delete is not None:  # its reply has stopped (and is saved, where it could be): delete it
            self._delete_stopped_chat(self._pending_delete)
        self._hide_busy_notice()
        self.refresh_conversations()
        self._show_stats_source()
        self._update_controls()
        self._follow_chat_model()  # a chat opened while the reply streamed gets its own model now

    def _delete_stopped_chat(self, conversation_id: int) -> None:
        self._pending_delete = None
        try:
            deleted = self.store.delete_conversation(conversation_id)
        except ChatStoreError as exc:  # it stays, back in the list; the undo has nothing to do
            if self._undo is not None and self._undo.conversation_id == conversation_id:
                self._undo = None
                self.undo_bar.dismiss()
            self._show_store_error(exc)
            return
        unsaved = self.reply.forget(conversation_id)
        if self._undo is not None and self._undo.conversation_id == deleted.id:
            self._undo.deleted = deleted
            self._undo.unsaved = unsaved

    def _hide_busy_notice(self) -> None:
        if self._busy_notice:
            self._hide_banner()

    # --- saving what the store refused ---------------------------------------------------------

    @Slot(object)
    def _on_save_problem_changed(self, _error: ChatStoreError | None) -> None:
        self._render_banner()

    @Slot()
    def _on_save_clicked(self) -> None:
        self.reply.save_pending()

    def _title_of(self, conversation_id: int | None) -> str | None:
        if conversation_id is None or conversation_id == self._pending_delete:
            return None
        try:
            return self.store.conversation(conversation_id).title
        except NotFound:
            return None

    def _busy_reason(self) -> str:
        title = self._title_of(self.reply.conversation_id) or self.tr("another chat")
        return self.tr("A reply is being written in “{title}”: wait for it to finish, or stop it, to send "
                       "here.").format(title=title)

    def _show_stats_source(self) -> None:
        """The stats strip shows the latest reply, whichever chat it is in; say which when it is not
        the open one."""
        title = None
        if self.current is None or self.current.id != self._stats_chat:
            title = self._title_of(self._stats_chat)
        if title is None:
            self.stats.set_source("")
        else:
            source = self.tr("Reply being written in “{title}”:") if self.reply.streaming else self.tr(
                "Last reply in “{title}”:")
            self.stats.set_source(source.format(title=title))

    @Slot(bool)
    def _on_busy_changed(self, _busy: bool) -> None:
        self._update_controls()

    def _show_banner(self, text: str, *, reload: bool) -> None:
        """Say ``text`` in the banner, replacing what it said before, except that a reply is not saved:
        that stays said (after ``text``) until it is saved."""
        self._busy_notice = False
        self._notice = (text, reload)
        self.loader.blocked = None  # a load held back is offered with the notice that said so, not after
        self._render_banner()

    def _hide_banner(self) -> None:
        self._busy_notice = False
        self._notice = None
        self.loader.blocked = None
        self._render_banner()

    def _show_store_error(self, error: ChatStoreError) -> None:
        self._show_banner(f"{capitalized(error.message)}. {capitalized(error.hint)}.", reload=False)

    def _render_banner(self) -> None:
        text, reload = self._notice or ("", False)
        parts = [text] if text else []
        if self.reply.save_error is not None:
            error = self.reply.save_error
            parts.append(self.tr("{message}. The reply is shown here but is not saved yet: {hint}, then click “Save "
                                 "now” (QuantDesk also tries again every few seconds).")
                                 .format(message=capitalized(error.message), hint=error.hint))
        if not parts:
            self.banner.hide()
            return
        self.banner_text.setText(" ".join(parts))
        self.reload_button.setVisible(reload)
        self.load_anyway_button.setVisible(self.loader.blocked is not None and bool(text))
        self.save_button.setVisible(self.reply.save_error is not None)
        self.banner.show()

    def _update_controls(self) -> None:
        busy = self.bridge.busy
        self.empty_state.setVisible(self.loaded is None and not busy and not self.view.bubbles)
        # The open chat is the one whose reply streams: its settings and title stay as the reply began.
        generating = self.reply.streaming
        streaming_here = generating and self.current is not None and self.current.id == self.reply.conversation_id
        self.send_button.setEnabled(not busy and not generating)
        elsewhere = generating and not streaming_here
        self.send_button.setToolTip(self._busy_reason() if elsewhere else self.tr(SEND_TIP))
        self.stop_button.setEnabled(generating)
        title = self._title_of(self.reply.conversation_id) if elsewhere else None
        self.stop_button.setToolTip(self.tr("Stop the reply in “{title}” (Esc)").format(title=title) if title
                                    else self.tr("Stop the reply (Esc)"))
        self.load_button.setEnabled(not busy)
        self.model_bar.reload_button.setEnabled(not busy and not generating and self.loader.request is not None)
        self.conversations.set_actions(has_chat=self.current is not None, streaming_here=streaming_here)
        can_regenerate = not busy and self.loaded is not None
        for bubble in self.view.bubbles:
            if "regenerate" in bubble.actions:
                bubble.actions["regenerate"].setEnabled(can_regenerate)
            if "edit" in bubble.actions:
                bubble.actions["edit"].setEnabled(not generating)

    def _bridge_slots(self) -> list[tuple[Any, Any]]:
        bridge = self.bridge
        return [*self.loader.bridge_slots(), (bridge.loaded, self._on_model_loaded),
                (bridge.tokens, self._on_tokens), (bridge.done, self._on_done), (bridge.failed, self._on_failed),
                (bridge.crashed, self._on_crashed), (bridge.busy_changed, self._on_busy_changed),
                (bridge.waiting, self.stats.show_waiting), (bridge.cut, self._on_cut),
                (bridge.retrieved, self._on_retrieved)]

    def shutdown(self) -> None:
        """Save a reply still streaming (the window is closing) before the engine goes away; a chat
        deleted while it streamed stays deleted. From here on the page no longer hears the bridge: what the
        engine still sends (its busy state as the stopped reply ends) would reach a page whose store the
        caller closes next."""
        if self.reply.streaming:
            self.bridge.stop()
        if self._tools is not None:
            self._tools.shutdown()
        self.documents.shutdown()
        self.reply.close()
        if self._hears_bridge:
            self._hears_bridge = False
            for signal, slot in self._bridge_slots():
                signal.disconnect(slot)
        if self._pending_delete is not None:
            try:
                self.store.delete_conversation(self._pending_delete)
            except ChatStoreError:
                pass  # closing: it stays, and shows again next time
            self._pending_delete = None


def _encoded(images) -> tuple[str, ...]:
    """A message's kept images as the engine takes them (base64); one whose file is gone is left out."""
    from app.engine.turn import encoded_images

    return encoded_images(images)


def _title_from(text: str, limit: int = 48) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
