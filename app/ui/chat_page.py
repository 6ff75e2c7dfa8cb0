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
ReplySession's (app.ui.reply_session); this page shows them and talks to the engine bridge.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QT_TRANSLATE_NOOP, Qt, Signal, Slot
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QInputDialog, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPushButton, QSplitter, QVBoxLayout, QWidget)

from app.chats.store import (AT_LEAF, ChatMessage, ChatStore, ChatStoreError, Conversation, DeletedConversation,
                             NotFound, ReplyWriter)
from app.errors import EngineCrashed, EngineError
from app.images import ImageError
from app.hardware.profile import HardwareProfile
from app.ui.background import BackgroundCall, sentence
from app.ui.chat_settings import ChatSettingsDialog
from app.ui.chat_view import IMAGE_SUFFIXES, AttachmentStrip, Composer, MessageBubble, MessageView, StatsStrip
from app.ui.engine_bridge import EngineBridge, TokenChunk
from app.ui.formatting import capitalized
from app.ui.icons import decorate
from app.ui.model_bar import ModelBar, Prefill, prefill_for, spill_warning
from app.ui.reply_session import ReplySession
from app.ui.widgets import EmptyState, UndoBar, announce
from app.datatypes import Done, LoadSettings, Loaded, Message, SamplingSettings

CONVERSATION_ID = Qt.ItemDataRole.UserRole
UNDO_SECONDS = 10
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

    def __init__(self, store: ChatStore, bridge: EngineBridge, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.current: Conversation | None = None
        self._edit_after: tuple[int, int | None] | None = None  # (conversation, parent) of a message being edited
        self.loaded: Loaded | None = None
        self._load_request: tuple[str, LoadSettings] | None = None
        self.profile: HardwareProfile | None = None  # from the window's probe; detected by the estimator if None
        self.default_n_ctx = LoadSettings().n_ctx
        self.prefill: Prefill | None = None
        self._estimator = BackgroundCall("load-estimate")
        self._estimator.succeeded.connect(self._on_estimated)
        self._estimator.failed.connect(self._on_estimate_failed)
        self.reply = ReplySession(self)  # the reply that streams, and those the store refused so far
        self.reply.save_problem_changed.connect(self._on_save_problem_changed)
        self._stats_chat: int | None = None  # the conversation the stats strip's figures are from
        self._pending_delete: int | None = None  # deleted while its reply streamed: goes once that stops
        self._undo: _DeletedChat | None = None
        self._busy_notice = False  # the banner says a reply in another chat must end first
        self._notice: tuple[str, bool] | None = None  # what the banner says (text, reload) besides a save problem
        self._blocked_load: Prefill | None = None  # a load the fit check held back; the banner offers “Load anyway”
        self._forced_warning = ""  # the risk, said once the model loaded anyway is loaded
        self._budget_refusal = None  # app.engine.pool.BudgetRefused the banner's “Load anyway” answers
        self._build()
        for signal, slot in self._bridge_slots():
            signal.connect(slot)
        self._hears_bridge = True
        self.refresh_conversations()
        self._update_controls()

    # --- layout --------------------------------------------------------------------------------

    def _build(self) -> None:
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        outer = QHBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(splitter)

        side = QWidget()
        side.setObjectName("conversationPanel")
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(8, 8, 8, 8)
        self.new_button = QPushButton(self.tr("New chat"))
        self.new_button.setToolTip(self.tr("Start a new conversation (Ctrl+N)"))
        self.new_button.setAccessibleName(self.tr("New chat"))
        self.new_button.clicked.connect(self.new_conversation)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText(self.tr("Search chats"))
        self.search_box.setAccessibleName(self.tr("Search chats"))
        self.search_box.setClearButtonEnabled(True)
        self.search_box.textChanged.connect(self._on_search_changed)
        self.conversation_list = QListWidget()
        self.conversation_list.setAccessibleName(self.tr("Conversations"))
        self.conversation_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.conversation_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.conversation_list.currentItemChanged.connect(self._on_conversation_selected)
        row = QHBoxLayout()
        self.rename_button = QPushButton(self.tr("Rename"))
        self.rename_button.setAccessibleName(self.tr("Rename chat"))
        self.rename_button.clicked.connect(self._on_rename_clicked)
        self.delete_button = QPushButton(self.tr("Delete"))
        self.delete_button.setAccessibleName(self.tr("Delete chat"))
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.export_button = QPushButton(self.tr("Export…"))
        self.export_button.setAccessibleName(self.tr("Export chat"))
        self.export_button.setToolTip(self.tr("Save this chat as Markdown or JSON"))
        self.export_button.clicked.connect(self._on_export_clicked)
        self.chat_settings_button = QPushButton(self.tr("Options…"))  # not "Settings": that is the app's page
        self.chat_settings_button.setAccessibleName(self.tr("Chat settings"))
        self.chat_settings_button.setToolTip(self.tr("System prompt, sampling and presets for this chat"))
        self.chat_settings_button.clicked.connect(self._on_chat_settings_clicked)
        second_row = QHBoxLayout()
        for layout, buttons in ((row, (self.rename_button, self.delete_button)),
                                (second_row, (self.export_button, self.chat_settings_button))):
            for button in buttons:
                button.setMinimumWidth(56)  # the style's 80 px minimum would make the window wider than it needs
                layout.addWidget(button)
        side_layout.addWidget(self.new_button)
        side_layout.addWidget(self.search_box)
        side_layout.addWidget(self.conversation_list, 1)
        self.undo_bar = UndoBar(UNDO_SECONDS)
        self.undo_bar.undo_requested.connect(self._on_undo_requested)
        self.undo_bar.expired.connect(self._on_undo_expired)
        side_layout.addWidget(self.undo_bar)
        side_layout.addLayout(row)
        side_layout.addLayout(second_row)
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
        self.attach_button = QPushButton(self.tr("Image…"))
        self.attach_button.setAccessibleName(self.tr("Attach an image"))
        self.attach_button.setToolTip(self.tr("Attach a PNG, JPEG or WebP image (or paste one, or drop it on the "
                                              "message box); the model must see images"))
        self.attach_button.clicked.connect(self._on_attach_clicked)
        self.send_button = QPushButton(self.tr("Send"))
        self.send_button.setAccessibleName(self.tr("Send message"))
        self.send_button.setToolTip(self.tr(SEND_TIP))
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton(self.tr("Stop"))
        self.stop_button.setAccessibleName(self.tr("Stop the reply"))
        self.stop_button.setToolTip(self.tr("Stop the reply (Esc)"))
        self.stop_button.clicked.connect(self.stop)
        for action, name in ((self.send_button, "send"), (self.stop_button, "stop"), (self.attach_button, "image"),
                             (self.new_button, "new"), (self.delete_button, "delete"), (self.rename_button, "edit"),
                             (self.export_button, "export"), (self.chat_settings_button, "settings")):
            decorate(action, name)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.attach_button)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)
        layout.addLayout(composer_row)
        splitter.addWidget(main)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([240, 900])

    def _build_model_bar(self) -> QWidget:
        self.model_bar = bar = ModelBar()
        self.model_label, self.load_progress, self.load_button = bar.model_label, bar.load_progress, bar.load_button
        self.context_box, self.gpu_layers_box = bar.context_box, bar.gpu_layers_box
        bar.load_clicked.connect(self._on_load_clicked)
        bar.remote_clicked.connect(self._on_remote_clicked)
        bar.reload_clicked.connect(self._on_reload_with_settings)
        bar.runtime_chosen.connect(self._on_runtime_chosen)
        bar.eject_requested.connect(self.bridge.eject)
        return bar

    # --- conversations -------------------------------------------------------------------------

    def refresh_conversations(self) -> None:
        query = self.search_box.text()
        found = self.store.search(query) if query.strip() else self.store.conversations()
        keep = self.current.id if self.current else None
        self.conversation_list.blockSignals(True)
        self.conversation_list.clear()
        for conv in found:
            if conv.id == self._pending_delete:
                continue
            item = QListWidgetItem(conv.title)
            item.setData(CONVERSATION_ID, conv.id)
            item.setToolTip(conv.title)
            self.conversation_list.addItem(item)
            if conv.id == keep:
                self.conversation_list.setCurrentItem(item)
        self.conversation_list.blockSignals(False)
        if self.current is None and self.conversation_list.count() and not query.strip():
            self.conversation_list.setCurrentRow(0)

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
        self._hide_busy_notice()  # it was about sending in the chat that was open
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
        return bubble

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_conversation_selected(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.open_conversation(item.data(CONVERSATION_ID))

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
        """Delete the open chat at once; the undo bar offers it back for UNDO_SECONDS. A chat whose
        reply is streaming is stopped first and deleted when the engine confirms the stop, so the
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
        self._undo = None  # the rows it kept are let go; a pending delete still happens
        self.store.purge_attachments()  # and the deleted chat's image files with them

    @Slot()
    def _on_chat_settings_clicked(self) -> None:
        if self.current is None:
            self.new_conversation()
            if self.current is None:  # the store refused it; the banner says why
                return
        ChatSettingsDialog(self.store, self.current, self).exec()
        self.current = self.store.conversation(self.current.id)

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
        export = self.store.export_json if kind == "json" else self.store.export_markdown
        text = export(self.current.id)
        target.write_text(text, encoding="utf-8")
        return target

    # --- model ---------------------------------------------------------------------------------

    @Slot()
    def _on_load_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Load a model"), "",
                                              self.tr("GGUF models (*.gguf);;All files (*)"))
        if path:
            self.open_model(path)

    @Slot()
    def _on_remote_clicked(self) -> None:
        from app.ui.remote_connections import RemoteModelDialog

        dialog = RemoteModelDialog(self)
        if dialog.exec() and dialog.chosen_ref:
            self.open_model(dialog.chosen_ref)

    def set_profile(self, profile: HardwareProfile) -> None:
        self.profile = profile

    def set_default_context(self, n_ctx: int) -> None:
        self.default_n_ctx = n_ctx
        if self.loaded is None and self._load_request is None:
            self.context_box.setValue(n_ctx)

    def open_model(self, path: str) -> None:
        """Fill in the load settings from the estimator for this machine (in a worker), then load: a model the fit
        check says does not fit waits for “Load anyway” (the same override as ``quantdesk chat --force``)."""
        self._hide_banner()
        self.model_bar.show_loading(self.tr("Sizing up {name}…").format(name=Path(path).name))
        self.load_button.setEnabled(False)
        self._estimator.start(prefill_for, path, self.profile, self.default_n_ctx)

    @Slot(int, object)
    def _on_estimated(self, ticket: int, prefill: Prefill) -> None:
        if ticket != self._estimator.latest:
            return
        if self.profile is None:
            self.profile = prefill.profile
        self.prefill = prefill
        self.model_bar.show_estimate(prefill)
        if not prefill.fits:
            from app.models.budget import fit_refusal

            self.model_bar.hide_progress()
            self.model_bar.show_settings(prefill.settings)
            self._show_loaded_model()
            self._update_controls()
            self._show_banner(fit_refusal(Path(prefill.path).name, prefill.reason, self.tr("“Load anyway”"))
                              + self.tr(" Or pick a smaller quant, or a shorter context."), reload=False)
            self._blocked_load = prefill  # after the banner: showing it forgets any load it held back
            self._render_banner()
            return
        self.load_model(prefill.path, prefill.settings)

    @Slot()
    def _on_load_anyway_clicked(self) -> None:
        from app.models.budget import fit_warning

        prefill, refusal = self._blocked_load, self._budget_refusal
        if prefill is not None:  # with the settings the bar shows: the prefill's, or what the user made of them
            self.load_model(prefill.path, self.model_bar.settings(), force=True)
            self._forced_warning = (refusal.check.warning() if refusal is not None else
                                    fit_warning(Path(prefill.path).name, prefill.reason))

    @Slot(int, object)
    def _on_estimate_failed(self, ticket: int, error: Exception) -> None:
        if ticket == self._estimator.latest:
            self.model_bar.hide_progress()
            self._show_loaded_model()
            self._update_controls()
            self._show_banner(sentence(error), reload=False)

    def load_settings(self) -> LoadSettings:
        return self.model_bar.settings()

    def _follow_chat_model(self) -> None:
        """With several models loaded (a ModelPool): the open chat answers from its own model. Loaded, it is
        switched to at once; not loaded, it is sized up and loaded beside the others (the budget decides what
        unloads). Only while a model is loaded at all (opening the app loads nothing), and never under a reply:
        the chat follows once the reply ends."""
        pool, conv = self.bridge.pool, self.current
        if pool is None or conv is None or not conv.model_path or self.bridge.busy or self.reply.streaming:
            return
        if self.loaded is not None and self.loaded.model_path == conv.model_path:
            return
        pooled = pool.get(conv.model_path)
        if pooled is not None:
            self.load_model(conv.model_path, pooled.settings)
        elif self.loaded is not None and (Path(conv.model_path).exists() or conv.model_path.startswith("remote:")):
            self.open_model(conv.model_path)

    def load_model(self, path: str, settings: LoadSettings, *, force: bool = False) -> None:
        if not settings.draft and self.current is not None and self.current.sampling.get("draft"):
            from app.models.drafts import usable_draft  # the chat's draft (its settings), where it fits this model

            settings = dataclasses.replace(settings, draft=usable_draft(path, self.current.sampling["draft"]))
        self._forced_warning = ""
        self._budget_refusal = None
        self._load_request = (path, settings)
        if self.prefill is not None and self.prefill.path != path:
            self.prefill = None
            self.model_bar.show_estimate(None)
        self.model_bar.show_settings(settings)
        self._hide_banner()
        self.model_bar.show_loading(self.tr("Loading {name}…").format(name=Path(path).name))
        estimate = self.prefill.estimated_bytes if self.prefill is not None else None
        self.bridge.load(path, settings, estimate_bytes=estimate, force=force)

    @Slot()
    def _on_reload_clicked(self) -> None:
        if self._load_request:
            self.load_model(*self._load_request)

    @Slot()
    def _on_reload_with_settings(self) -> None:
        if self._load_request:
            self.load_model(self._load_request[0], self.model_bar.settings())

    @Slot(str)
    def _on_runtime_chosen(self, name: str) -> None:
        """Pin the runtime for this model (app/runtimes/pins.py), then size it up and load it again."""
        from app.runtimes import pins

        if self._load_request:
            pins.pin(name, self._load_request[0])
            self.open_model(self._load_request[0])

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        self.model_bar.set_progress(fraction)

    @Slot(object)
    def _on_loaded(self, info: Loaded) -> None:
        self.loaded = info
        self._show_loaded_model()
        self.stats.set_memory(sum(info.memory_bytes.values()))
        # A remote model's memory is on its server: this machine's engine process only relays it.
        self.model_bar.watch_process(None if info.backend == "remote" else self.bridge.engine_pid)
        requested = self._load_request[1].gpu_layers if self._load_request else 0
        warning = " ".join(w for w in (self._forced_warning, spill_warning(info, self.prefill, requested)) if w)
        self._forced_warning = ""
        if warning:
            self._show_banner(warning, reload=False)
        self._update_controls()

    def _show_loaded_model(self) -> None:
        self.model_bar.show_loaded(self.loaded, self.prefill)
        self._show_pool()

    @Slot()
    def _show_pool(self) -> None:
        pool = self.bridge.pool
        if pool is not None:
            active = self.loaded.model_path if self.loaded is not None else None
            self.model_bar.show_pool([(m.path, m.estimate_bytes or sum(m.loaded.memory_bytes.values()),
                                       m.path == active) for m in pool.models()])

    @Slot(object)
    def _on_refused(self, refusal) -> None:
        """The memory budget has no room beside the models answering now: say so, and offer “Load anyway”."""
        self.model_bar.hide_progress()
        self._show_loaded_model()
        request = self._load_request
        self._show_banner(str(refusal), reload=False)
        if request is not None and refusal.forceable:  # after the banner: showing it forgets the load
            self._blocked_load = (self.prefill if self.prefill is not None and self.prefill.path == request[0]
                                  else Prefill(request[0], request[1]))
            self._budget_refusal = refusal
            self._render_banner()
        self._update_controls()

    @Slot(str, str)
    def _on_model_unloaded(self, path: str, why: str) -> None:
        """A model of the pool unloaded (room for another, idle, ejected): the bar and the banner say which and
        why; the chat's own model gone, Reload brings it back."""
        ours = self.loaded is not None and self.loaded.model_path == path
        if ours:
            self.loaded = None
            self.model_bar.watch_process(None)
        self._show_loaded_model()
        if ours and not self.bridge.busy:
            self._show_banner(self.tr("{why} Reload loads it again.").format(why=why), reload=True)
        else:
            self._show_banner(why, reload=False)
        self._update_controls()

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
        self._generate(writer)

    def _generate(self, writer: ReplyWriter | None = None, after: int | None = AT_LEAF) -> None:
        """Stream a reply into ``writer``, or into a new reply after ``after`` (by default the end of the branch on
        show; an earlier message: a new version of the reply that followed it)."""
        conv = self.store.conversation(self.current.id)
        if writer is None:
            try:
                writer = self.store.begin_reply(conv.id, after=after)
            except ChatStoreError as exc:
                self._show_store_error(exc)
                return
        # An assistant turn's thinking goes back with it: the model's template decides whether the model sees it
        # again (most drop earlier turns' thinking).
        history = [Message(m.role, m.content, _encoded(m.images), reasoning=m.reasoning)
                   for m in self.store.messages(conv.id)
                   if (m.content or m.images or m.reasoning) and m.id != writer.message_id]
        if conv.system_prompt:
            history.insert(0, Message("system", conv.system_prompt))
        self.reply.begin(writer, conv.id)
        self._add_bubble(self.store.message(writer.message_id))
        self._stats_chat = conv.id
        self._hide_banner()
        self.stats.start_reply()
        self._show_stats_source()
        self._update_controls()
        self.bridge.generate(history, SamplingSettings.from_dict(conv.sampling))

    @Slot()
    def stop(self) -> None:
        if self.reply.streaming:
            self.bridge.stop()

    @Slot(int)
    def _on_regenerate_requested(self, message_id: int) -> None:
        """Write the reply again, as a new version beside this one (the old one stays a click away)."""
        if self.reply.streaming or self.loaded is None or not self.reply.save_pending():
            return
        parent = self.store.message(message_id).parent_id
        self.view.remove_from(message_id)
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
        self._end_reply()
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
            self._show_loaded_model()
        self._show_banner(str(error), reload=False)

    @Slot(object)
    def _on_crashed(self, error: EngineCrashed) -> None:
        self.model_bar.hide_progress()
        self.model_bar.watch_process(None)
        self.loaded = None
        self.model_label.setText(self.tr("No model loaded — the engine stopped"))
        kept = self.tr("the reply so far is kept and marked interrupted.")
        if self.reply.streaming and not self._interrupt_reply():
            notice = f"{error} {capitalized(kept)}"  # the banner goes on to say it is not saved yet
        else:
            notice = self.tr("{error} Your conversation is saved; {kept}").format(error=error, kept=kept)
        self._show_banner(notice, reload=self._load_request is not None)
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
        self._blocked_load = None
        self._render_banner()

    def _hide_banner(self) -> None:
        self._busy_notice = False
        self._notice = None
        self._blocked_load = None
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
        self.load_anyway_button.setVisible(self._blocked_load is not None and bool(text))
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
        self.model_bar.reload_button.setEnabled(not busy and not generating and self._load_request is not None)
        for button in (self.rename_button, self.export_button):
            button.setEnabled(self.current is not None and not streaming_here)
        self.delete_button.setEnabled(self.current is not None)  # a streaming chat is stopped, then deleted
        self.chat_settings_button.setEnabled(not streaming_here)
        can_regenerate = not busy and self.loaded is not None
        for bubble in self.view.bubbles:
            if "regenerate" in bubble.actions:
                bubble.actions["regenerate"].setEnabled(can_regenerate)
            if "edit" in bubble.actions:
                bubble.actions["edit"].setEnabled(not generating)

    def _bridge_slots(self) -> list[tuple[Any, Any]]:
        bridge = self.bridge
        return [(bridge.loaded, self._on_loaded), (bridge.load_progress, self._on_load_progress),
                (bridge.tokens, self._on_tokens), (bridge.done, self._on_done), (bridge.failed, self._on_failed),
                (bridge.crashed, self._on_crashed), (bridge.busy_changed, self._on_busy_changed),
                (bridge.refused, self._on_refused), (bridge.model_unloaded, self._on_model_unloaded),
                (bridge.models_changed, self._show_pool),
                (bridge.waiting, self.stats.show_waiting)]

    def shutdown(self) -> None:
        """Save a reply still streaming (the window is closing) before the engine goes away; a chat
        deleted while it streamed stays deleted. From here on the page no longer hears the bridge: what the
        engine still sends (its busy state as the stopped reply ends) would reach a page whose store the
        caller closes next."""
        if self.reply.streaming:
            self.bridge.stop()
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
    from app.images import to_base64

    out = []
    for image in images:
        try:
            out.append(to_base64(image.path.read_bytes()))
        except OSError:
            continue  # removed from the data folder by hand: the rest of the chat still goes
    return tuple(out)


def _title_from(text: str, limit: int = 48) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
