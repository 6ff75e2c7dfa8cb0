"""The Chat's conversation without Qt: which chat is open, the message being edited, deleting a chat with its undo
(a chat whose reply streams is deleted once that reply stops), branches, pins, export, and the state of the reply
under way: its chat, its context figures, the overflow cut it goes on from, and its tool loop (the tools it was
offered, the steps it made, what went wrong with them; each step is ``app.mcp.loop.ToolStep``, the state machine
``quantdesk chat --tools`` drives too, and ``tool_step_after`` is the rule by which a reply starts one).

``app.ui.chat.chat_page.ChatPage`` shows it and talks to the engine bridge; the reply's lifecycle and its saving are the
page's ``ReplySession`` (handed in as ``replies``: what the store refused is saved before a delete, and an undo
brings it back). A store that refuses a write raises ``ChatStoreError``: the caller says it. A reply's request is
built here (``reply_turn``: the branch's engine turns with its pins and last cut, and the chat's own settings over
its model's preset by app/engine/turn.py's rules), beside the tool loop it feeds; the page sends it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from app.chats import export as chat_export
from app.chats.messages import ChatMessage, Conversation, DeletedConversation
from app.chats.store import ChatStore, ChatStoreError, NotFound, ReplyWriter
from app.datatypes import ContextCut, Done, Message, SamplingSettings
from app.engine.states import StateKeys, chat_keys
from app.engine.turn import ModelDefaults, encoded_images, with_system_prompt, with_tools


class Replies(Protocol):
    """What the session asks of the page's replies (app.ui.chat.reply_session.ReplySession)."""

    @property
    def streaming(self) -> bool: ...

    def streams_in(self, conversation_id: int) -> bool: ...

    def save_pending(self) -> bool: ...

    def forget(self, conversation_id: int) -> list[ReplyWriter]: ...

    def keep(self, writers: list[ReplyWriter]) -> None: ...

    def drop_deleted(self, conversation_id: int, kept: set[int]) -> None: ...


@dataclass
class DeletedChat:
    """What the undo bar can bring back: the deleted rows, or None while the delete waits for the
    conversation's reply to stop."""

    conversation_id: int
    title: str
    deleted: DeletedConversation | None = None
    unsaved: list[ReplyWriter] = field(default_factory=list)  # its replies the store had refused: saved on undo


def title_from(text: str, limit: int = 48) -> str:
    """A chat's title from its first message (or a file name from its title): one line, cut with "…"."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class ReplyTurn:
    """What one reply of the Chat asks of the engine: the branch's turns as the engine takes them (the system prompt
    first), the sampling with the chat's tools, the saved states' keys, and the overflow policy with the cut it goes
    on from and the turns it must keep (the pinned messages')."""

    messages: list[Message]
    sampling: SamplingSettings
    keys: StateKeys
    overflow: tuple[str, ContextCut | None, frozenset[int]]


class ChatSession:
    def __init__(self, store: ChatStore, replies: Replies) -> None:
        self.store = store
        self.replies = replies
        self.current: Conversation | None = None
        self.edit_after: tuple[int, int | None] | None = None  # (conversation, parent) of a message being edited
        self.pending_delete: int | None = None  # deleted while its reply streamed: goes once that stops
        self.undo: DeletedChat | None = None
        # The reply under way (or the latest): its chat (the stats strip's figures are from it), its max_tokens and
        # overflow policy (the context meter's warning), its system prompt count (0 or 1: a stored cut's start
        # leaves it out) and the cut before it.
        self.stats_chat: int | None = None
        self.reply_max_tokens = 0
        self.reply_overflow = ""
        self.cut_context: tuple[int, ContextCut | None] = (0, None)
        # Its tool loop: the ToolSpecs it was given, the steps it made (up to the step limit), what went wrong with
        # its tools (said until the reply is over).
        self.offered: list[Any] = []
        self.tool_steps = 0
        self.tool_problems: list[str] = []

    # --- the reply's request -------------------------------------------------------------------------------------

    def reply_turn(self, conv: Conversation, writer: ReplyWriter, model_path: str | None, tools: list[Any], *,
                   max_steps: int, default_overflow: str) -> ReplyTurn:
        """The request of the reply ``writer`` in ``conv`` on the model at ``model_path``, offered ``tools``
        (ToolSpecs), and the reply's figures kept here (its cut context, max_tokens, overflow policy, tools offered).

        An assistant turn's thinking goes back with it (the model's template decides whether the model sees it again);
        a reply that called tools goes back with its calls, then a ``tool`` message per call with what it returned (or
        that it was denied or not run). The chat's own settings come first, then the model's preset, its recommended
        values, QuantDesk's; after the last tool step allowed the model is shown its tools still (the prompt stays as
        it was) but held to answer in words."""
        branch = [m for m in self.store.messages(conv.id) if m.id != writer.message_id]
        shown = [m for m in branch if m.content or m.images or m.reasoning or m.tools]
        history: list[Message] = []
        pins: set[int] = set()  # the pinned messages' engine turns (a reply's tool results with it), as indices
        for m in shown:
            turn, *results = m.engine_turns()
            if m.pinned:
                pins.update(range(len(history), len(history) + 1 + len(results)))
            history += [replace(turn, images=encoded_images(m.images)), *results]
        defaults = ModelDefaults.of(model_path)
        sent = with_system_prompt(history, defaults.system_prompt(conv.system_prompt or None))
        # The overflow policy goes on from the branch's last cut (its start stored without the system prompt).
        lead = len(sent) - len(history)
        last = next((m.context_cut for m in reversed(shown) if m.context_cut), None)
        previous = ContextCut.from_dict(last).shifted(lead) if last is not None else None
        self.cut_context = (lead, previous)
        self.offered = tools
        sampling = with_tools(defaults.sampling(conv.sampling).settings, [spec.as_openai_function() for spec in tools],
                              last_step=self.tool_steps >= max_steps)
        self.reply_max_tokens = sampling.max_tokens  # the context meter's warning: whether the next reply fits
        self.reply_overflow = defaults.overflow(conv.overflow, default_overflow)
        # The branch's saved model state is restored first (a chat reopened or switched back to is not read again),
        # and the reply's own saved after it (app/engine/states.py); other branches' tips as well.
        replies = [m.id for m in self.store.all_messages(conv.id) if m.role == "assistant"]
        return ReplyTurn(sent, sampling, chat_keys(conv.id, [m.id for m in branch], writer.message_id, sent, replies),
                         (self.reply_overflow, previous, frozenset(i + lead for i in pins)))

    # --- the open chat ------------------------------------------------------------------------------------------

    def create(self, model_path: str | None) -> Conversation:
        self.current = self.store.create_conversation(model_path=model_path)
        return self.current

    def open(self, conversation_id: int) -> list[ChatMessage]:
        """Open a chat: its branch on show; an edit not resent is abandoned."""
        self.current = self.store.conversation(conversation_id)
        self.edit_after = None
        return self.store.messages(conversation_id)

    def reread(self) -> Conversation | None:
        """The open chat as the store has it now (its settings changed elsewhere)."""
        if self.current is not None:
            self.current = self.store.conversation(self.current.id)
        return self.current

    def rename(self, title: str) -> None:
        assert self.current is not None
        self.store.rename(self.current.id, title)
        self.reread()

    def title_of(self, conversation_id: int | None) -> str | None:
        """A chat's title; None for none, or one deleted (or being deleted)."""
        if conversation_id is None or conversation_id == self.pending_delete:
            return None
        try:
            return self.store.conversation(conversation_id).title
        except NotFound:
            return None

    def export(self, path: str, kind: str) -> Path:
        """The open chat as Markdown ("md") or JSON ("json") at ``path`` (its suffix added where it has none)."""
        assert self.current is not None
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix(f".{kind}")
        export = chat_export.to_json if kind == "json" else chat_export.to_markdown
        target.write_text(export(self.store, self.current.id), encoding="utf-8")
        return target

    def chat_draft(self) -> str:
        """The open chat's draft model (its settings), which a load takes where the model has none."""
        return str(self.current.sampling.get("draft") or "") if self.current is not None else ""

    # --- deleting, with undo ------------------------------------------------------------------------------------

    def delete_current(self) -> DeletedChat | None:
        """Delete the open chat at once, kept for the undo. A chat whose reply is streaming is marked and deleted
        when the reply has stopped (``delete_stopped``: the caller stops it), so the reply's writer never writes
        into a deleted row. None when no chat is open."""
        conv = self.current
        if conv is None:
            return None
        undo = DeletedChat(conv.id, conv.title)
        if self.replies.streams_in(conv.id):
            self.pending_delete = conv.id
        else:
            self.replies.save_pending()  # what the undo keeps is the rows as they are: save first what they lack
            undo.deleted = self.store.delete_conversation(conv.id)
            undo.unsaved = self.replies.forget(conv.id)
        self.undo = undo  # a newer delete makes the older one final
        self.current = None
        return undo

    def undo_delete(self) -> int | None:
        """The deleted chat back (its id, opened by the caller); None when there is nothing to undo. A store that
        refuses keeps the undo."""
        undo, self.undo = self.undo, None
        if undo is None:
            return None
        if undo.deleted is not None:
            try:
                self.store.restore_conversation(undo.deleted)
            except ChatStoreError:
                self.undo = undo  # still there to undo once the store takes it
                raise
            self.replies.keep(undo.unsaved)
        elif self.pending_delete == undo.conversation_id:
            self.pending_delete = None  # not deleted yet: just keep it (its reply still stops)
        else:
            return None
        self.current = self.store.conversation(undo.conversation_id)
        return undo.conversation_id

    def undo_expired(self) -> int | None:
        """The undo is over: the rows it kept are let go, and the deleted chats' image files. Returns the chat
        whose attached documents go too (None: none was deleted yet; a pending delete still happens)."""
        undo, self.undo = self.undo, None
        self.store.purge_attachments()
        return undo.conversation_id if undo is not None and undo.deleted is not None else None

    def delete_stopped(self) -> bool:
        """The reply of a chat deleted while it streamed has stopped: delete it now. Returns False when nothing was
        pending; raises ChatStoreError (the chat stays, and the undo has nothing to do) where the store refuses."""
        conversation_id, self.pending_delete = self.pending_delete, None
        if conversation_id is None:
            return False
        try:
            deleted = self.store.delete_conversation(conversation_id)
        except ChatStoreError:
            if self.undo is not None and self.undo.conversation_id == conversation_id:
                self.undo = None
            raise
        unsaved = self.replies.forget(conversation_id)
        if self.undo is not None and self.undo.conversation_id == deleted.id:
            self.undo.deleted, self.undo.unsaved = deleted, unsaved
        return True

    def close(self) -> None:
        """The window closes: a chat deleted while its reply streamed stays deleted (where the store lets it)."""
        if self.pending_delete is not None:
            try:
                self.store.delete_conversation(self.pending_delete)
            except ChatStoreError:
                pass  # closing: it stays, and shows again next time
            self.pending_delete = None

    # --- messages: edit, regenerate, branches, pins -------------------------------------------------------------

    def edit(self, message_id: int) -> ChatMessage:
        """Edit a message: sent again, it becomes a new version beside this one."""
        message = self.store.message(message_id)
        self.edit_after = (message.conversation_id, message.parent_id)
        return message

    def regenerate_after(self, message_id: int) -> int | None:
        """Where a new version of a reply goes: after its parent. A new user turn of the loop starts."""
        self.tool_steps, self.tool_problems = 0, []
        return self.store.message(message_id).parent_id

    def show_branch(self, message_id: int) -> None:
        self.store.show_branch(message_id)

    def delete_branch(self, message_id: int) -> None:
        """Delete a message's version and what followed it (what the store refused to save is saved first)."""
        assert self.current is not None
        self.replies.save_pending()
        self.store.delete_branch(message_id)
        self.replies.drop_deleted(self.current.id, {m.id for m in self.store.all_messages(self.current.id)})

    def pin(self, message_id: int, pinned: bool) -> bool:
        """Pin a message (an overflow policy never leaves it out of the prompt) or unpin it: saved at once. False:
        the message is gone."""
        try:
            self.store.set_pinned(message_id, pinned)
        except NotFound:
            return False
        return True

    # --- the reply under way ------------------------------------------------------------------------------------

    def keep_cut(self, message_id: int, cut: ContextCut, context: tuple[int, ContextCut | None] | None = None
                 ) -> tuple[dict[str, Any] | None, ChatStoreError | None]:
        """The overflow policy left earlier messages out of the reply's prompt: a new cut is kept with the reply
        (its start stored without the system prompt) and returned for its mark, with the store's refusal if it
        refused (shown all the same); the same cut as the reply's before is no news (None). ``context``: the
        reply's ``cut_context`` as ``reply_turn`` left it (by default the latest reply's)."""
        lead, previous = context if context is not None else self.cut_context
        if previous is not None and (cut.start, cut.dropped, cut.note, cut.kept) == (
                previous.start, previous.dropped, previous.note, previous.kept):
            return None, None
        stored = cut.shifted(-lead).to_dict()
        try:
            self.store.set_context_cut(message_id, stored)
        except ChatStoreError as exc:
            return stored, exc
        return stored, None

    def tool_step_after(self, done: Done, max_steps: int) -> Literal["step", "limit", ""]:
        """After a reply: "step" when it made tool calls that start a step (the rule of app.mcp.loop, both faces'),
        "limit" when it made them past the step limit (the reply ends there), "" when it is over."""
        from app.mcp.loop import calls_tools  # the tools' home: imported once a reply was given tools

        if not (self.offered and calls_tools(done)):
            return ""
        return "step" if self.tool_steps < max_steps else "limit"

    def tool_problem(self, said: str) -> str:
        """A tool's trouble, in a sentence: kept while the reply is under way; returns what to say (every trouble
        of the reply so far)."""
        if self.replies.streaming:
            self.tool_problems.append(said)
        return " ".join(self.tool_problems) or said
