"""A conversation exported: JSON with every branch (``to_json``, versioned by ``EXPORT_VERSION``), or the branch on show
as Markdown (``to_markdown``), read from the store."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.chats.messages import ToolCard

if TYPE_CHECKING:
    from app.chats.store import ChatStore

EXPORT_FORMAT = "quantdesk-chat"
# 2: every branch's messages, each with its parent_id, and the ids of the branch on show; 3: an assistant message's
# thinking as its ``reasoning`` (left out where there was none); 4: an assistant message's tool calls with their
# results as ``tool_calls`` (left out where there were none); 5: a pinned message's ``pinned: true`` (left out where
# it is not pinned); 6: a reply's ``citations`` (the passages of the user's documents it was given, left out where
# there were none) and the conversation's ``documents`` (the collections attached to it)
EXPORT_VERSION = 6


def to_json(store: ChatStore, conversation_id: int) -> str:
    """Every branch of the conversation, its messages with their thinking, tool cards, cuts, pins, citations and
    images' files named, and the branch on show (``EXPORT_VERSION``)."""
    conv = store.conversation(conversation_id)
    on_show = [m.id for m in store.messages(conversation_id)]
    data = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "conversation": asdict(conv),
            "messages": [{k: v for k, v in asdict(m).items()
                          if k not in ("conversation_id", "images", "reasoning", "tools", "context_cut",
                                       "pinned", "citations")}
                         | ({"pinned": True} if m.pinned else {})
                         | ({"citations": list(m.citations)} if m.citations else {})
                         | ({"reasoning": m.reasoning} if m.reasoning else {})
                         | ({"tool_calls": [card.to_dict() for card in m.tools]} if m.tools else {})
                         | ({"context_cut": m.context_cut} if m.context_cut else {})
                         | ({"images": [{"file": a.path.name, "media_type": a.media_type, "width": a.width,
                                         "height": a.height} for a in m.images]} if m.images else {})
                         for m in store.all_messages(conversation_id)],
            "branch_on_show": on_show}
    return json.dumps(data, indent=2, ensure_ascii=False)

def to_markdown(store: ChatStore, conversation_id: int) -> str:
    """The branch on show as a Markdown document: thinking quoted, tool calls and their results, sources."""
    conv = store.conversation(conversation_id)
    parts = [f"# {conv.title}\n"]
    if conv.model_path:
        parts.append(f"Model: `{Path(conv.model_path).name}`\n")
    if conv.system_prompt:
        parts.append("## System\n\n" + conv.system_prompt + "\n")
    for msg in store.messages(conversation_id):
        heading = {"user": "You", "assistant": "Assistant", "system": "System"}[msg.role]
        parts.append(f"## {heading}\n")
        if msg.reasoning:
            parts.append(_quoted_thinking(msg.reasoning, msg.stats))
        parts.append(f"{msg.content}\n")
        parts.extend(_tool_card_markdown(card) for card in msg.tools)
        if msg.citations:
            parts.append(_citations_markdown(msg.citations))
        if msg.images:
            names = ", ".join(f"{a.path.name} ({a.width} × {a.height})" for a in msg.images)
            parts.append(f"*(images: {names})*\n")
        if msg.state == "interrupted":
            parts.append("*(reply interrupted)*\n")
    return "\n".join(parts)


def _quoted_thinking(reasoning: str, stats: dict[str, Any] | None) -> str:
    """A reply's thinking as a Markdown quote ahead of its answer, headed by how long and how many tokens it took:
    every viewer shows it set apart, and it reads as plain text too."""
    figures = []
    if stats and stats.get("reasoning_ms"):
        figures.append(f"{stats['reasoning_ms'] / 1000:.1f} s")
    if stats and stats.get("reasoning_tokens"):
        figures.append(f"{stats['reasoning_tokens']} tokens")
    head = "> **Thinking**" + (f" ({' · '.join(figures)})" if figures else "")
    body = "\n".join(f"> {line}".rstrip() for line in reasoning.strip("\n").split("\n"))
    return f"{head}\n>\n{body}\n"


def _citations_markdown(citations: Sequence[dict[str, Any]]) -> str:
    """A reply's sources under it: "[1] guide.pdf, page 3" a line each, the passage's place as the citation says it
    (its ``where``; the file's name for a record kept without one)."""
    lines = ["**Sources**", ""]
    for citation in citations:
        where = citation.get("where") or str(citation.get("path", "")).replace("\\", "/").rsplit("/", 1)[-1]
        lines.append(f"- [{citation.get('number', '?')}] {where}")
    return "\n".join(lines) + "\n"


def _tool_card_markdown(card: ToolCard) -> str:
    """A tool call and its result as a Markdown quote: the tool, its server, what became of it, the arguments, and
    the result as a code block (a tool's text is shown as text, never read as Markdown)."""
    if card.decision == "denied":
        outcome = "denied"
    elif not card.answered:
        outcome = "not run"
    else:
        outcome = ("error" if card.is_error else "done") + (", cut" if card.cut else "") + \
            (f", {card.seconds:.1f} s" if card.seconds is not None else "")
    server = f" ({card.server})" if card.server else ""
    fence = "~~~~" if "```" in card.result or "```" in card.arguments else "```"
    lines = [f"**Tool** `{card.name}`{server}: {outcome}", "", "Arguments:", fence + "json", card.arguments, fence]
    if card.answered:
        lines += ["", "Result:", fence, card.result if card.decision != "denied" else "(denied by the user)", fence]
    return "\n".join(f"> {line}".rstrip() for line in "\n".join(lines).split("\n")) + "\n"
