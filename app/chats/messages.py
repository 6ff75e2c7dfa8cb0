"""A conversation's records as the store reads them back: the conversation, its messages (each with its images,
thinking, tool cards, cut and citations), where a message stands among its branches, presets, and a deleted
conversation kept for undo. Plain frozen dataclasses, no SQL: app/chats/store.py reads and writes them;
``ChatMessage.engine_turns`` is how a message goes back to the engine."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.datatypes import Message
from app.records import from_known

MessageState = Literal["complete", "streaming", "interrupted"]
Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    system_prompt: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)
    model_path: str | None = None
    tool_servers: tuple[str, ...] | None = None  # the MCP servers whose tools the model sees; None: every one
    overflow: str | None = None  # the chat's overflow policy; None: the Settings' default
    documents: tuple[str, ...] = ()  # the document collections attached to the chat (ChatStore.set_documents)


@dataclass(frozen=True)
class Attachment:
    """An image kept with a message: ``path`` is its file under the store's ``attachments/`` folder."""
    path: Path
    media_type: str
    width: int
    height: int


ToolDecision = Literal["", "allowed", "denied"]
# What the model is told for a call that never ran: the reply was stopped (or the app closed) before an answer.
NOT_RUN = "The tool was not run: the user stopped the reply before it ran."


@dataclass(frozen=True)
class ToolCard:
    """One tool call of an assistant reply and what came of it, kept with the reply (schema 6).

    ``name`` is the tool's name on its ``server``; ``function`` the name the model called it by, where that differs
    (MCP tools reach the model as ``server__tool``: the name goes back to it next turn as it was written).
    ``arguments`` is the call's JSON text as the model wrote it; ``result`` what the model is told (the tool's
    text, an error's sentence, or that the user denied it); ``cut`` that the result was shortened to fit; ``decision``
    is "" until the user answers the approval; ``seconds`` the call took (None: not run)."""

    call_id: str
    name: str
    arguments: str = "{}"
    server: str = ""
    result: str = ""
    is_error: bool = False
    cut: bool = False
    decision: ToolDecision = ""
    seconds: float | None = None
    function: str = ""

    @property
    def called(self) -> str:
        """The function name as the model called it."""
        return self.function or self.name

    @property
    def answered(self) -> bool:
        """The call has its result (run, failed or denied)."""
        return self.decision == "denied" or self.seconds is not None

    def template_call(self) -> dict[str, Any]:
        """The call as chat templates read an assistant turn's tool_calls: arguments as an object."""
        try:
            arguments = json.loads(self.arguments) if self.arguments.strip() else {}
        except ValueError:
            arguments = {}
        if not isinstance(arguments, dict):
            arguments = {}
        return {"id": self.call_id, "type": "function", "function": {"name": self.called, "arguments": arguments}}

    def tool_message(self) -> Message:
        """The ``tool`` message that answers the call; a call never answered says so."""
        return Message("tool", self.result if self.answered else NOT_RUN, tool_call_id=self.call_id, name=self.called)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCard:
        """A card as this or another version saved it: unknown keys left out (app/records)."""
        return from_known(cls, data)


@dataclass(frozen=True)
class ChatMessage:
    id: int
    conversation_id: int
    role: Role
    content: str
    created: float
    stats: dict[str, Any] | None = None
    state: MessageState = "complete"
    images: tuple[Attachment, ...] = ()
    parent_id: int | None = None  # the message it answers or follows; None for a conversation's first
    reasoning: str = ""  # an assistant reply's thinking, apart from its answer (``content``)
    tools: tuple[ToolCard, ...] = ()  # an assistant reply's tool calls, each with what it returned

    def engine_turns(self) -> list[Message]:
        """The message as the engine takes it back next turn (without its images: the page encodes those): an
        assistant reply that called tools is its turn with ``tool_calls`` then one ``tool`` message per call, as
        the chat-format layer expects them."""
        turn = Message(self.role, self.content, reasoning=self.reasoning,
                       tool_calls=tuple(card.template_call() for card in self.tools))
        return [turn, *(card.tool_message() for card in self.tools)]
    # A reply whose prompt left earlier messages out (the overflow policy): ContextCut.to_dict(), else None
    context_cut: dict[str, Any] | None = None
    pinned: bool = False  # an overflow policy never leaves it out of the prompt (ChatStore.set_pinned)
    # The passages of the chat's documents the reply was given, by the number it cites them with: each a dict of
    # app.documents.passages.Citation.to_dict() (number, score, collection, path, text, page, heading, line,
    # where), read back with Citation.from_dict (ChatStore.set_citations)
    citations: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Branches:
    """Where a message stands among its siblings (the messages with the same parent): ``index`` of ``count``,
    1-based, and the siblings' ids in the order they were written."""

    index: int
    count: int
    ids: tuple[int, ...]


@dataclass(frozen=True)
class Preset:
    name: str
    system_prompt: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeletedConversation:
    """The rows ``ChatStore.delete_conversation`` removed, column for column (kept in memory for undo)."""
    row: dict[str, Any]
    messages: tuple[dict[str, Any], ...]
    attachments: tuple[dict[str, Any], ...] = ()

    @property
    def id(self) -> int:
        return int(self.row["id"])

    @property
    def title(self) -> str:
        return str(self.row["title"])
