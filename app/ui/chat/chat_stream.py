"""The Chat page's reply as the engine bridge sends it: its tokens into the bubble (thinking first) and the stats
strip, the overflow policy's cut and the documents' passages kept with it, its end (a tool step where it called
tools, else done: the context meter, the words a screen reader hears), and a failure or a crash that interrupts it
(what was written is kept, marked interrupted). The reply's lifecycle and saving are the ReplySession's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Slot

from app.chats.store import ChatStoreError
from app.datatypes import ContextCut, ContextUse, Done, Loaded
from app.ui.common.formatting import capitalized
from app.ui.common.widgets import announce

if TYPE_CHECKING:
    from app.documents.retrieve import Retrieval
    from app.errors import EngineCrashed, EngineError
    from app.ui.chat.chat_bubble import MessageBubble
    from app.ui.chat.engine_bridge import TokenChunk


class ChatStream(QObject):
    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self._page = page

    def bridge_slots(self) -> list[tuple[object, object]]:
        page, bridge = self._page, self._page.bridge
        return [(bridge.loaded, self._on_model_loaded), (bridge.tokens, self._on_tokens), (bridge.done, self._on_done),
                (bridge.failed, self._on_failed), (bridge.crashed, self._on_crashed),
                (bridge.busy_changed, self._on_busy_changed), (bridge.waiting, page.stats.show_waiting),
                (bridge.cut, self._on_cut), (bridge.retrieved, self._on_retrieved)]

    def bubble(self) -> MessageBubble | None:
        """The streaming reply's bubble while its conversation is open, else None. Looked up each time: opening
        another chat deletes the bubbles of the one before."""
        writer = self._page.reply.writer
        return self._page.view.bubble(writer.message_id) if writer is not None else None

    @Slot(object)
    def _on_model_loaded(self, info: Loaded) -> None:
        self._page.stats.set_memory(sum(info.memory_bytes.values()))

    @Slot(bool)
    def _on_busy_changed(self, _busy: bool) -> None:
        self._page.update_controls()

    @Slot(object)
    def _on_tokens(self, chunk: TokenChunk) -> None:
        page = self._page
        if not page.reply.streaming:
            return
        page.reply.append(chunk.text, chunk.reasoning)
        if bubble := self.bubble():
            if chunk.reasoning:  # the thinking comes before the answer
                bubble.append_reasoning(chunk.reasoning, chunk.reasoning_ms)
            bubble.append_text(chunk.text)
        page.stats.on_progress(chunk)

    @Slot(object)
    def _on_cut(self, cut: ContextCut) -> None:
        """The overflow policy left earlier messages out of the reply's prompt: a new cut is kept with the reply
        and marked on it; the same cut as the reply before is no news."""
        page = self._page
        if not page.reply.streaming or page.reply.writer is None:
            return
        stored, refused = page.session.keep_cut(page.reply.writer.message_id, cut)
        if refused is not None:
            page.banner.say_store_error(refused)
        if stored is not None and (bubble := self.bubble()):
            bubble.show_cut(stored)

    @Slot(object)
    def _on_retrieved(self, retrieval: Retrieval) -> None:
        """The passages of the chat's documents the reply is given (before its tokens): kept with the reply, shown
        as its chips; what the user should know (a collection still indexing, nothing found) in the banner."""
        page = self._page
        if not page.reply.streaming or page.reply.writer is None:
            return
        try:
            citations = page.documents.retrieved(page.reply.writer.message_id, retrieval)
        except ChatStoreError as exc:
            page.banner.say_store_error(exc)
            citations = []
        if citations and (bubble := self.bubble()):
            bubble.set_citations(citations)
        if retrieval.notes:
            page.banner.say(" ".join(capitalized(n) + ("" if n.endswith(".") else ".") for n in retrieval.notes))

    @Slot(object)
    def _on_done(self, done: Done) -> None:
        page = self._page
        if not page.reply.streaming:
            return
        stats = done.stats.to_public_dict()
        page.reply.finish(stats, done.text, done.reasoning)
        if bubble := self.bubble():
            bubble.finish(done.text, stats, "complete", done.reasoning)
        page.stats.on_done(stats)
        loaded, session = page.loaded, page.session
        if loaded is not None and page.current is not None and page.current.id == session.stats_chat:
            use = ContextUse.after(done.stats, loaded.n_ctx, page.documents.documents_tokens)
            page.model_bar.context_meter.show_use(use, session.reply_max_tokens, loaded.model_path,
                                                  session.reply_overflow)
        if page.tool_cards.after_done(done):
            return  # the reply stays under way through its tool step
        self.end_reply()
        if done.notice:  # the engine crashed under this reply, replayed in a safer configuration (app/engine/guard.py)
            page.banner.say(done.notice)
        # Screen readers hear the reply once it is whole (not token by token, which they would read as noise).
        ended = self.tr("Reply stopped") if done.stats.stop_reason == "cancelled" else self.tr("Reply done")
        if done.text.strip():
            announce(page.view, self.tr("{ended}: {text}").format(ended=ended, text=done.text.strip()))
        elif done.reasoning.strip():
            announce(page.view, self.tr("{ended}: the model only thought, it did not answer.").format(ended=ended))
        else:
            announce(page.view, self.tr("{ended}, empty.").format(ended=ended))

    def _interrupt(self) -> bool:
        """Keep the reply so far, marked interrupted; returns whether the store has it."""
        reply = self._page.reply
        saved: bool = reply.interrupt()
        if (bubble := self.bubble()) and reply.writer is not None:
            bubble.finish(reply.writer.text, None, "interrupted", reply.writer.reasoning)
        self.end_reply()
        return saved

    @Slot(object)
    def _on_failed(self, error: EngineError) -> None:
        page = self._page
        page.model_bar.hide_progress()
        if page.reply.streaming:
            self._interrupt()
        else:  # a load that failed: the model loaded before (if any) is still there
            page.loader.show_loaded_model()
        page.banner.say(str(error))

    @Slot(object)
    def _on_crashed(self, error: EngineCrashed) -> None:
        page = self._page
        page.loader.engine_gone()
        kept = self.tr("the reply so far is kept and marked interrupted.")
        if page.reply.streaming and not self._interrupt():
            notice = f"{error} {capitalized(kept)}"  # the banner goes on to say it is not saved yet
        else:
            notice = self.tr("{error} Your conversation is saved; {kept}").format(error=error, kept=kept)
        page.banner.say(notice, reload=page.loader.request is not None)
        page.update_controls()

    def show_stats_source(self) -> None:
        """The stats strip shows the latest reply, whichever chat it is in; say which when it is not
        the open one."""
        page, title = self._page, None
        if page.current is None or page.current.id != page.session.stats_chat:
            title = page.session.title_of(page.session.stats_chat)
        if title is None:
            page.stats.set_source("")
        else:
            source = self.tr("Reply being written in “{title}”:") if page.reply.streaming else self.tr(
                "Last reply in “{title}”:")
            page.stats.set_source(source.format(title=title))

    def end_reply(self) -> None:
        page = self._page
        page.reply.end()
        if page.session.pending_delete is not None:  # its reply has stopped: the chat deleted meanwhile goes now
            page.chat_actions.delete_stopped_chat()
        page.banner.clear_busy()
        page.refresh_conversations()
        page.show_stats_source()
        page.update_controls()
        page.follow_chat_model()  # a chat opened while the reply streamed gets its own model now
