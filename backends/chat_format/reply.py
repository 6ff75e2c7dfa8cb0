"""A reply as the engine reads it while generating: reasoning, content and tool calls apart, and how long it thinks.

``ReplyReader`` keeps the text the model wrote so far; ``deltas()`` re-reads it through the request's parser
(backends/chat_format/formats.Prepared) and hands out what is new, each tool call with a stable id (the model's own
when its syntax has one). ``ThinkingTracker`` follows, token by token and for the price of a few string compares,
whether the model is inside its thinking block: the engine counts thinking tokens with it, closes the block when a
thinking budget runs out, and times thinking apart from the answer.
"""

from __future__ import annotations

import secrets
import string

from backends.chat_format.builder import WHITESPACE, ParsedReply
from backends.chat_format.formats import Prepared
from backends.chat_format.stream import Delta, DiffError, diffs
from app.datatypes import ToolCall


def new_call_id(template_source: str) -> str:
    """A fresh tool-call id: Mistral's templates refuse any id that is not 9 letters or digits ("Tool call IDs should
    be alphanumeric strings with length 9!"), and the id comes back to the template with the call's result."""
    if "[TOOL_CALLS]" in template_source:
        return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))
    return f"call_{secrets.token_hex(12)}"


class ReplyReader:
    def __init__(self, prepared: Prepared, template_source: str = "") -> None:
        self.prepared = prepared
        self.text = ""
        self._read = ParsedReply()
        self._ids: list[str] = []
        self._source = template_source

    def feed(self, piece: str) -> None:
        self.text += piece

    def _id(self, index: int, given: str) -> str:
        while len(self._ids) <= index:
            self._ids.append("")
        if not self._ids[index]:
            self._ids[index] = given or new_call_id(self._source)
        return self._ids[index]

    def deltas(self, final: bool = False) -> list[Delta]:
        """What the reply so far says beyond what earlier calls handed out; ``final``: the reply is whole (a
        format may read a finished reply otherwise, e.g. trailing whitespace trimmed: what was sent stands)."""
        now = self._message(final) if final else self._partial()
        if now is None:
            return []
        try:
            out = diffs(self._read, now)
        except DiffError:
            return []  # a re-read that would take back what was sent: wait for more
        self._read = now
        return [Delta(d.content, d.reasoning, d.tool_index, d.tool_name,
                      self._id(d.tool_index, d.tool_id) if d.tool_index >= 0 and (d.tool_name or d.tool_id) else "",
                      d.tool_arguments) for d in out]

    def _partial(self) -> ParsedReply | None:
        try:
            return self.prepared.parse(self.text, partial=True)
        except ValueError:
            return None  # not readable yet

    def _message(self, final: bool) -> ParsedReply:
        """The whole reply read. One that does not match the model's format (llama.cpp refuses it) is read as far as
        it goes where that finds thinking or calls; else the whole text is content: nothing the model wrote is lost."""
        try:
            return self.prepared.parse(self.text, partial=False)
        except ValueError:
            partial = self._partial()
            if partial is not None and (partial.reasoning or partial.tool_calls):
                return partial
            return ParsedReply(content=self.text)

    def finish(self) -> tuple[str, str, tuple[ToolCall, ...]]:
        """The whole reply: its content, its reasoning and its tool calls."""
        message = self._message(True)
        calls = tuple(ToolCall(self._id(i, c.id), c.name, c.arguments) for i, c in enumerate(message.tool_calls)
                      if c.name)
        return message.content, message.reasoning, calls


class ThinkingTracker:
    """Whether the reply is inside a thinking block, fed one token's text at a time. It starts inside when the
    generation prompt opened the block (Qwen3's ``<think>\\n``); it ends at any of the format's end tags (a tool
    call's opening also ends Qwen's thinking) and opens again at the start tag."""

    def __init__(self, prepared: Prepared) -> None:
        self.start = prepared.thinking_start_tag.strip(WHITESPACE)
        self.ends = tuple(dict.fromkeys(t.strip(WHITESPACE) for t in prepared.thinking_end_tags if t.strip()))
        self.active = bool(self.ends) and prepared.supports_thinking
        gen = prepared.generation_prompt
        opened = gen.rfind(self.start) if self.start else -1
        self.inside = self.active and opened >= 0 and not any(gen.find(e, opened) >= 0 for e in self.ends)
        self._keep = max([len(self.start), *map(len, self.ends)]) - 1 if self.active else 0
        self._tail = ""

    def feed(self, piece: str) -> bool:
        """Read one token's text; whether that token belongs to the thinking (its opening and closing tags do)."""
        if not self.active:
            return False
        was_inside = self.inside
        text = self._tail + piece
        position = 0
        while True:
            if self.inside:
                found = [(i, e) for e in self.ends if (i := text.find(e, position)) >= 0]
                if not found:
                    break
                at, tag = min(found)
                self.inside, position = False, at + len(tag)
            else:
                at = text.find(self.start, position) if self.start else -1
                if at < 0:
                    break
                self.inside, position = True, at + len(self.start)
        self._tail = text[max(len(text) - self._keep, position):] if self._keep else ""
        return was_inside or self.inside
