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

from backends.chat_format.builder import WHITESPACE, ParsedReply, args_as_json
from backends.chat_format.request import Prepared
from backends.chat_format.stream import Delta, DiffError, diffs
from app.datatypes import ToolCall


def new_call_id(template_source: str) -> str:
    """A fresh tool-call id: Mistral's templates refuse any id that is not 9 letters or digits ("Tool call IDs should
    be alphanumeric strings with length 9!"), and the id comes back to the template with the call's result."""
    if "[TOOL_CALLS]" in template_source:
        return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))
    return f"call_{secrets.token_hex(12)}"


class ReplyReader:
    """The reply read as it streams, handed out so that what a streaming client builds is the whole reply's message.

    Reasoning and content go out as they grow; a tool call goes out whole (name, id and arguments in one delta)
    once its syntax is read to its end, never while it is being written: a client that acts on calls never sees one
    the whole reply lacks. A re-read that does not extend what was handed out waits for more text (held back, never
    sent and taken back). ``deltas(final=True, cut=…)`` reads the finished reply: whole, its last call stands where
    its arguments are whole JSON (some formats end a call with the end of the turn); cut (max tokens, a stop word,
    a cancel, a disconnect), a call not read to its end is no call, and its text is not content either.
    ``finish()`` is the message those deltas add up to.
    """

    def __init__(self, prepared: Prepared, template_source: str = "") -> None:
        self.prepared = prepared
        self.text = ""
        self._read = ParsedReply()  # what was handed out
        self._ids: list[str] = []
        self._source = template_source
        self._closed = False

    def feed(self, piece: str) -> None:
        self.text += piece

    def _id(self, index: int, given: str) -> str:
        while len(self._ids) <= index:
            self._ids.append("")
        if not self._ids[index]:
            self._ids[index] = given or new_call_id(self._source)
        return self._ids[index]

    def deltas(self, final: bool = False, cut: bool = False) -> list[Delta]:
        """What the reply so far says beyond what earlier calls handed out. ``final``: the reply is finished (no
        more text comes; later calls hand out nothing), ``cut`` when something other than the model ended it."""
        if self._closed:
            return []
        self._closed = final
        now = self._reading(final, whole=final and not cut)
        try:
            out = diffs(self._read, now) if _extends(now, self._read) else []
        except DiffError:
            out = []
        if not out:
            return []  # nothing new, or a reading that would take back what went out: wait for more
        self._read = now
        return [Delta(d.content, d.reasoning, d.tool_index, d.tool_name,
                      self._id(d.tool_index, d.tool_id) if d.tool_index >= 0 and (d.tool_name or d.tool_id) else "",
                      d.tool_arguments) for d in out]

    def _reading(self, final: bool, whole: bool) -> ParsedReply:
        """The reply so far as it may go out (``final``: no more text comes): its calls up to the first one not read
        to its end (``whole``: the model ended the reply, and a call whose arguments are whole JSON stands even so).
        Text past where the reply stops matching the model's format (llama.cpp refuses such a reply) is content,
        after what was read up to there: nothing the model wrote is lost, and a stream that handed out that much is
        never contradicted."""
        read, failed_at = self.prepared.read(self.text, partial=not final, cut=final and not whole)
        if read is not None:
            return _settled(read, whole)
        if failed_at <= 0:
            return ParsedReply(content=self.text)
        head, _ = self.prepared.read(self.text[:failed_at], partial=True)
        if head is None:
            return ParsedReply(content=self.text)
        head = _settled(head, whole=False)
        return ParsedReply(head.content + self.text[failed_at:], head.reasoning, head.tool_calls)

    def finish(self, cut: bool = False) -> tuple[str, str, tuple[ToolCall, ...]]:
        """The whole reply: its content, its reasoning and its tool calls, as its deltas (``deltas(final=True)``,
        read here if not yet) add up."""
        self.deltas(final=True, cut=cut)
        message = self._read
        calls = tuple(ToolCall(self._id(i, c.id), c.name, c.arguments) for i, c in enumerate(message.tool_calls)
                      if c.name)
        return message.content, message.reasoning, calls


def _extends(after: ParsedReply, before: ParsedReply) -> bool:
    """Whether ``after`` only adds to ``before``: its thinking and its answer no shorter (``diffs`` checks that they
    go on from where they were), and before's calls there with their names, ids and arguments so far."""
    if (len(after.content) < len(before.content) or len(after.reasoning) < len(before.reasoning)
            or len(after.tool_calls) < len(before.tool_calls)):
        return False
    return all(new.name == old.name and new.id == old.id and new.arguments.startswith(old.arguments)
               for old, new in zip(before.tool_calls, after.tool_calls, strict=False))


def _settled(reply: ParsedReply, whole: bool = False) -> ParsedReply:
    """``reply`` with its tool calls from the first one not read to its end left out: a call goes out once it is
    whole. In a ``whole`` reply a call whose arguments are whole JSON stands even so (gpt-oss ends a call with the
    end of its turn)."""
    calls = []
    for call in reply.tool_calls:
        if not (call.complete or whole and call.name and args_as_json(call.arguments) is not None):
            break
        calls.append(call)
    if len(calls) == len(reply.tool_calls):
        return reply
    return ParsedReply(reply.content, reply.reasoning, calls)


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
