"""The Chat page's replies as the engine bridge sends them, each routed by its request id to its own reply (several
chats answer at once on a model that decodes them together): its tokens into its bubble while its chat is open
(thinking first) and the stats strip while it shows that reply, the overflow policy's cut and the documents' passages
kept with it, its end (a tool step where it called tools, else done: the context meter, the words a screen reader
hears), and a failure or a crash that interrupts it (what was written is kept, marked interrupted). The replies'
lifecycle and saving are the ReplySession's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QObject, Slot

from app.chats.store import ChatStoreError
from app.datatypes import ContextCut, ContextUse, Done, Loaded
from app.errors import EngineCrashed, EngineError
from app.ui.chat.engine_bridge import TokenChunk, Waiting
from app.ui.common.formatting import capitalized
from app.ui.common.widgets import announce

if TYPE_CHECKING:
    from app.documents.retrieve import Retrieval
    from app.ui.chat.chat_bubble import MessageBubble
    from app.ui.chat.reply_session import Reply


class ChatStream(QObject):
    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self._page = page

    def bridge_slots(self) -> list[tuple[object, object]]:
        bridge = self._page.bridge
        return [(bridge.loaded, self._on_model_loaded), (bridge.replied, self._on_replied),
                (bridge.load_failed, self._on_load_failed), (bridge.busy_changed, self._on_busy_changed)]

    def bubble(self, reply: Reply | None = None) -> MessageBubble | None:
        """The reply's bubble (by default the latest reply's) while its conversation is open, else None. Looked up
        each time: opening another chat deletes the bubbles of the one before."""
        reply = reply or self._page.reply.latest
        return self._page.view.bubble(reply.writer.message_id) if reply is not None else None

    def _shows_stats(self, reply: Reply) -> bool:
        return bool(self._page.session.stats_chat == reply.conversation_id)

    @Slot(object)
    def _on_model_loaded(self, info: Loaded) -> None:
        self._page.stats.set_memory(sum(info.memory_bytes.values()))

    @Slot(bool)
    def _on_busy_changed(self, _busy: bool) -> None:
        self._page.update_controls()

    @Slot(str, object)
    def _on_replied(self, request_id: str, event: object) -> None:
        reply = self._page.reply.by_request(request_id)
        if reply is None:  # ended meanwhile (the window closing, a tool step stopped), or not the page's request
            if isinstance(event, Waiting):
                self._page.stats.show_waiting(event.ahead)  # the engine's queue, whoever asked
            return
        if isinstance(event, TokenChunk):
            self._on_tokens(reply, event)
        elif isinstance(event, Waiting):
            if self._shows_stats(reply):
                self._page.stats.show_waiting(event.ahead)
        elif isinstance(event, ContextCut):
            self._on_cut(reply, event)
        elif isinstance(event, Done):
            self._on_done(reply, event)
        elif isinstance(event, EngineCrashed):
            self._on_crashed(reply, event)
        elif isinstance(event, EngineError):
            self._on_failed(reply, event)
        else:
            self._on_retrieved(reply, cast("Retrieval", event))

    def _on_tokens(self, reply: Reply, chunk: TokenChunk) -> None:
        page = self._page
        page.reply.append(chunk.text, chunk.reasoning, reply)
        if bubble := self.bubble(reply):
            if chunk.reasoning:  # the thinking comes before the answer
                bubble.append_reasoning(chunk.reasoning, chunk.reasoning_ms)
            bubble.append_text(chunk.text)
        if self._shows_stats(reply):
            page.stats.on_progress(chunk)

    def _on_cut(self, reply: Reply, cut: ContextCut) -> None:
        """The overflow policy left earlier messages out of the reply's prompt: a new cut is kept with the reply
        and marked on it; the same cut as the reply before is no news."""
        page = self._page
        stored, refused = page.session.keep_cut(reply.writer.message_id, cut, reply.cut_context)
        if refused is not None:
            page.banner.say_store_error(refused)
        if stored is not None and (bubble := self.bubble(reply)):
            bubble.show_cut(stored)

    def _on_retrieved(self, reply: Reply, retrieval: Retrieval) -> None:
        """The passages of the chat's documents the reply is given (before its tokens): kept with the reply, shown
        as its chips; what the user should know (a collection still indexing, nothing found) in the banner."""
        page = self._page
        reply.documents_tokens = retrieval.tokens
        try:
            citations = page.documents.retrieved(reply.writer.message_id, retrieval)
        except ChatStoreError as exc:
            page.banner.say_store_error(exc)
            citations = []
        if citations and (bubble := self.bubble(reply)):
            bubble.set_citations(citations)
        if retrieval.notes:
            page.banner.say(" ".join(capitalized(n) + ("" if n.endswith(".") else ".") for n in retrieval.notes))

    def _on_done(self, reply: Reply, done: Done) -> None:
        page = self._page
        stats = done.stats.to_public_dict()
        page.reply.finish(stats, done.text, done.reasoning, reply)
        if bubble := self.bubble(reply):
            bubble.finish(done.text, stats, "complete", done.reasoning)
        if self._shows_stats(reply):
            page.stats.on_done(stats)
        loaded = page.loaded
        if loaded is not None and page.current is not None and page.current.id == reply.conversation_id:
            use = ContextUse.after(done.stats, loaded.n_ctx, reply.documents_tokens)
            page.model_bar.context_meter.show_use(use, reply.max_tokens, loaded.model_path, reply.overflow)
        if page.tool_cards.after_done(done, reply):
            return  # the reply stays under way through its tool step
        self.end_reply(reply)
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

    def _interrupt(self, reply: Reply) -> bool:
        """Keep the reply so far, marked interrupted; returns whether the store has it."""
        saved: bool = self._page.reply.interrupt(reply)
        if bubble := self.bubble(reply):
            bubble.finish(reply.writer.text, None, "interrupted", reply.writer.reasoning)
        self.end_reply(reply)
        return saved

    def _on_failed(self, reply: Reply, error: EngineError) -> None:
        self._interrupt(reply)
        self._page.banner.say(str(error))

    @Slot(object)
    def _on_load_failed(self, error: EngineError | EngineCrashed) -> None:
        """A load failed (the model loaded before, if any, is still there) or its engine died."""
        page = self._page
        if isinstance(error, EngineCrashed):
            self._engine_gone(error, kept=True)
            return
        page.model_bar.hide_progress()
        page.loader.show_loaded_model()
        page.banner.say(str(error))

    def _on_crashed(self, reply: Reply, error: EngineCrashed) -> None:
        self._engine_gone(error, kept=self._interrupt(reply))

    def _engine_gone(self, error: EngineCrashed, *, kept: bool) -> None:
        page = self._page
        page.loader.engine_gone()
        said = self.tr("the reply so far is kept and marked interrupted.")
        if not kept:
            notice = f"{error} {capitalized(said)}"  # the banner goes on to say it is not saved yet
        else:
            notice = self.tr("{error} Your conversation is saved; {kept}").format(error=error, kept=said)
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
            source = self.tr("Reply being written in “{title}”:") if page.reply.of(
                page.session.stats_chat) is not None else self.tr("Last reply in “{title}”:")
            page.stats.set_source(source.format(title=title))

    def end_reply(self, reply: Reply | None = None) -> None:
        """The reply (by default the latest) is over: the chat deleted while it streamed goes now."""
        page = self._page
        reply = reply or page.reply.latest
        page.reply.end(reply)
        pending = page.session.pending_delete
        if pending is not None and not page.reply.streams_in(pending):  # its reply has stopped: it goes now
            page.chat_actions.delete_stopped_chat()
        page.banner.clear_busy()
        page.refresh_conversations()
        page.show_stats_source()
        page.update_controls()
        page.follow_chat_model()  # a chat opened while the replies streamed gets its own model now
