"""The reply lifecycle of the Chat page: the reply that streams, the conversation it belongs to, and the replies the
store has refused so far (a full disk), kept until they are saved.

A reply's ReplyWriter holds the truth of its text; the store may lag it by a save interval, or refuse it. The
session saves again what was refused (before the next write the page makes, on "Save now", and every
``SAVE_RETRY_MS`` on its own) and says through ``save_problem_changed`` when the reason a reply is not saved
changes, so the page can say it. It knows nothing of bubbles, banners or the engine bridge: the page feeds it
what the engine sends and shows what it keeps.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.chats.messages import ChatMessage
from app.chats.store import ChatStoreError, ReplyWriter

SAVE_RETRY_MS = 5000  # a reply the store refused is tried again this often, until it is saved


class ReplySession(QObject):
    save_problem_changed = Signal(object)  # ChatStoreError: why a reply is not saved yet; None: all saved

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.writer: ReplyWriter | None = None  # the reply streaming now
        self.conversation_id: int | None = None  # the conversation it belongs to
        self.unsaved: list[ReplyWriter] = []  # replies that ended but the store has refused so far
        self.save_error: ChatStoreError | None = None  # why a reply is not saved
        self.retry_timer = QTimer(self)
        self.retry_timer.setInterval(SAVE_RETRY_MS)
        self.retry_timer.timeout.connect(self._on_retry)

    @property
    def streaming(self) -> bool:
        return self.writer is not None

    # --- one reply --------------------------------------------------------------------------------------------

    def begin(self, writer: ReplyWriter, conversation_id: int) -> None:
        self.writer, self.conversation_id = writer, conversation_id

    def append(self, text: str, reasoning: str = "") -> None:
        """The answer's text and the thinking as they come; a save the store refuses does not raise: the writer
        keeps them for later."""
        if self.writer is not None:
            self.writer.append(text, reasoning)
            self.track()

    def finish(self, stats: dict[str, Any], text: str, reasoning: str = "") -> None:
        if self.writer is not None:
            self.writer.finish(stats, text=text, reasoning=reasoning)

    def interrupt(self) -> bool:
        """Keep the reply so far, marked interrupted; returns whether the store has it."""
        return self.writer.interrupt() if self.writer is not None else True

    def end(self) -> None:
        """The reply is over (finished or interrupted): kept for saving again when the store refused it."""
        writer, self.writer, self.conversation_id = self.writer, None, None
        if writer is not None and not writer.saved:
            self.unsaved.append(writer)
        self.track()

    def as_written(self, message: ChatMessage) -> ChatMessage:
        """``message`` as the session knows it: the streaming reply has every word (the store lags it by up to
        one save interval); an ended reply not saved yet has its words, thinking, end state and stats."""
        if self.writer is not None and message.id == self.writer.message_id:
            return replace(message, content=self.writer.text, reasoning=self.writer.reasoning)
        if unsaved := next((w for w in self.unsaved if w.message_id == message.id), None):
            return replace(message, content=unsaved.text, reasoning=unsaved.reasoning, state=unsaved.state,
                           stats=unsaved.stats)
        return message

    # --- what the store refused ----------------------------------------------------------------------------

    def save_pending(self) -> bool:
        """Try again to save the replies the store refused; True when nothing is left unsaved."""
        waiting = [*self.unsaved, *([self.writer] if self.writer and self.writer.error else [])]
        for writer in waiting:
            if not writer.save():
                break  # the store refuses this one: it has no more room for the next
        self.track()
        return self.save_error is None

    def track(self) -> None:
        """Keep the retry timer in step with the replies that are not saved; say when the reason changes."""
        self.unsaved = [w for w in self.unsaved if not w.saved]
        writers = [*self.unsaved, *([self.writer] if self.writer else [])]
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
        """The window is closing: the streaming reply is kept as interrupted, a last try saves the rest (what a
        full disk still refuses now cannot be kept)."""
        self.retry_timer.stop()
        if self.writer is not None:
            if not self.writer.interrupt():
                self.unsaved.append(self.writer)
            self.writer, self.conversation_id = None, None
        for writer in self.unsaved:
            writer.save()

    @Slot()
    def _on_retry(self) -> None:
        self.save_pending()
