"""The reply lifecycle of the Chat page: the replies under way, each with the conversation it belongs to (one a
conversation; several chats answer at once on a model that decodes them together), and the replies the store has
refused so far (a full disk), kept until they are saved.

A reply's ReplyWriter holds the truth of its text; the store may lag it by a save interval, or refuse it. The
session saves again what was refused (before the next write the page makes, on "Save now", and every
``SAVE_RETRY_MS`` on its own) and says through ``save_problem_changed`` when the reason a reply is not saved
changes, so the page can say it. It knows nothing of bubbles, banners or the engine bridge: the page feeds it
what the engine sends and shows what it keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chats.messages import ChatMessage
from app.chats.store import ChatStoreError, ReplyWriter
from app.datatypes import ContextCut

SAVE_RETRY_MS = 5000  # a reply the store refused is tried again this often, until it is saved


@dataclass(eq=False)
class Reply:
    """One reply under way: its writer, its conversation, the engine bridge's request id of its generation ("" until
    it is sent, and during a tool step), and what its request was built with (app/chats/session.py ``reply_turn``:
    its max_tokens and overflow policy for the context meter, the cut it went on from; whether it was given tools)
    and what the chat's documents gave its prompt."""

    writer: ReplyWriter
    conversation_id: int
    request_id: str = ""
    max_tokens: int = 0
    overflow: str = ""
    cut_context: tuple[int, ContextCut | None] = (0, None)
    tools: bool = False
    documents_tokens: int = 0


class ReplySession(QObject):
    save_problem_changed = Signal(object)  # ChatStoreError: why a reply is not saved yet; None: all saved

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.replies: dict[int, Reply] = {}  # the replies under way by conversation, the latest begun last
        self.unsaved: list[ReplyWriter] = []  # replies that ended but the store has refused so far
        self.save_error: ChatStoreError | None = None  # why a reply is not saved
        self.retry_timer = QTimer(self)
        self.retry_timer.setInterval(SAVE_RETRY_MS)
        self.retry_timer.timeout.connect(self._on_retry)

    @property
    def streaming(self) -> bool:
        """Whether any reply is under way."""
        return bool(self.replies)

    @property
    def latest(self) -> Reply | None:
        """The reply begun last of those under way."""
        return next(reversed(self.replies.values()), None)

    @property
    def writer(self) -> ReplyWriter | None:
        """The latest reply's writer (None: none under way)."""
        return self.latest.writer if self.latest is not None else None

    @property
    def conversation_id(self) -> int | None:
        """The latest reply's conversation (None: none under way)."""
        return self.latest.conversation_id if self.latest is not None else None

    def of(self, conversation_id: int | None) -> Reply | None:
        """The reply under way in that conversation."""
        return self.replies.get(conversation_id) if conversation_id is not None else None

    def streams_in(self, conversation_id: int) -> bool:
        return conversation_id in self.replies

    def by_request(self, request_id: str) -> Reply | None:
        """The reply whose generation the bridge knows by ``request_id``."""
        return next((r for r in self.replies.values() if request_id and r.request_id == request_id), None)

    # --- one reply --------------------------------------------------------------------------------------------

    def begin(self, writer: ReplyWriter, conversation_id: int) -> Reply:
        self.replies.pop(conversation_id, None)  # a tool step's next generation: begun again, the latest
        reply = self.replies[conversation_id] = Reply(writer, conversation_id)
        return reply

    def append(self, text: str, reasoning: str = "", reply: Reply | None = None) -> None:
        """The answer's text and the thinking as they come (to ``reply``, by default the latest); a save the store
        refuses does not raise: the writer keeps them for later."""
        if (reply := reply or self.latest) is not None:
            reply.writer.append(text, reasoning)
            self.track()

    def finish(self, stats: dict[str, Any], text: str, reasoning: str = "", reply: Reply | None = None) -> None:
        if (reply := reply or self.latest) is not None:
            reply.writer.finish(stats, text=text, reasoning=reasoning)

    def interrupt(self, reply: Reply | None = None) -> bool:
        """Keep the reply so far, marked interrupted; returns whether the store has it."""
        return (reply := reply or self.latest) is None or reply.writer.interrupt()

    def end(self, reply: Reply | None = None) -> None:
        """The reply is over (finished or interrupted): kept for saving again when the store refused it."""
        if (reply := reply or self.latest) is not None and self.replies.get(reply.conversation_id) is reply:
            del self.replies[reply.conversation_id]
            if not reply.writer.saved:
                self.unsaved.append(reply.writer)
        self.track()

    def as_written(self, message: ChatMessage) -> ChatMessage:
        """``message`` as the session knows it: a streaming reply has every word (the store lags it by up to
        one save interval); an ended reply not saved yet has its words, thinking, end state and stats."""
        if streaming := next((r.writer for r in self.replies.values() if r.writer.message_id == message.id), None):
            return replace(message, content=streaming.text, reasoning=streaming.reasoning)
        if unsaved := next((w for w in self.unsaved if w.message_id == message.id), None):
            return replace(message, content=unsaved.text, reasoning=unsaved.reasoning, state=unsaved.state,
                           stats=unsaved.stats)
        return message

    # --- what the store refused ----------------------------------------------------------------------------

    def save_pending(self) -> bool:
        """Try again to save the replies the store refused; True when nothing is left unsaved."""
        waiting = [*self.unsaved, *(r.writer for r in self.replies.values() if r.writer.error)]
        for writer in waiting:
            if not writer.save():
                break  # the store refuses this one: it has no more room for the next
        self.track()
        return self.save_error is None

    def track(self) -> None:
        """Keep the retry timer in step with the replies that are not saved; say when the reason changes."""
        self.unsaved = [w for w in self.unsaved if not w.saved]
        writers = [*self.unsaved, *(r.writer for r in self.replies.values())]
        error = next((w.error for w in writers if not w.saved and w.error is not None), None)
        before, self.save_error = self.save_error, error
        if error is None:
            self.retry_timer.stop()
        elif not self.retry_timer.isActive():
            self.retry_timer.start()
        if (before is None) != (error is None) or error is not None and str(error) != str(before):
            self.save_problem_changed.emit(error)

    def forget(self, conversation_id: int) -> list[ReplyWriter]:
        """Its conversation is deleted: nothing left to save them into (until an undo). Returns them."""
        gone = [w for w in self.unsaved if w.conversation_id == conversation_id]
        self.unsaved = [w for w in self.unsaved if w.conversation_id != conversation_id]
        self.track()
        return gone

    def keep(self, writers: list[ReplyWriter]) -> None:
        """Replies an undo brings back with their conversation: saved now, or kept trying."""
        self.unsaved.extend(writers)
        self.save_pending()

    def drop_deleted(self, conversation_id: int, remaining_ids: set[int]) -> None:
        """Messages of that conversation were deleted (a branch): their unsaved replies go with them."""
        self.unsaved = [w for w in self.unsaved
                        if w.conversation_id != conversation_id or w.message_id in remaining_ids]
        self.track()

    def close(self) -> None:
        """The window is closing: the streaming replies are kept as interrupted, a last try saves the rest (what a
        full disk still refuses now cannot be kept)."""
        self.retry_timer.stop()
        for reply in self.replies.values():
            if not reply.writer.interrupt():
                self.unsaved.append(reply.writer)
        self.replies.clear()
        for writer in self.unsaved:
            writer.save()

    @Slot()
    def _on_retry(self) -> None:
        self.save_pending()
