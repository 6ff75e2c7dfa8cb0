"""A reply read while it streams: each new piece re-reads the reply so far and hands out only what is new.

The parsers are lenient (backends/chat_format/peg.py), so the reply so far reads as a message that later pieces only
extend: more reasoning, more content, a tool call's name, then more of its arguments. ``ReplyStream.update`` returns
those extensions as ``Delta``s — llama.cpp's ``common_chat_msg_diff::compute_diffs`` — which the engine sends as its
reasoning, content and tool-call events.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.chat_format.builder import ParsedCall, ParsedReply


class DiffError(ValueError):
    """A parse of a longer reply that does not extend the parse of a shorter one (a parser bug, never the model's)."""


@dataclass(frozen=True)
class Delta:
    content: str = ""
    reasoning: str = ""
    tool_index: int = -1  # the tool call this delta extends, -1 for none
    tool_name: str = ""
    tool_id: str = ""
    tool_arguments: str = ""


def _extension(last: str, current: str) -> str:
    if not last:
        return current
    if not current.startswith(last):
        if last.startswith(current):  # a stop word's beginning that turned out to be a stop word: taken back
            return ""
        raise DiffError(f"{current[:80]!r} does not extend {last[:80]!r}")
    return current[len(last):]


def diffs(before: ParsedReply, after: ParsedReply) -> list[Delta]:
    """What ``after`` adds to ``before``."""
    out: list[Delta] = []
    if before.reasoning != after.reasoning:
        out.append(Delta(reasoning=_extension(before.reasoning, after.reasoning)))
    if before.content != after.content:
        out.append(Delta(content=_extension(before.content, after.content)))
    if len(after.tool_calls) < len(before.tool_calls):
        raise DiffError(f"{len(after.tool_calls)} tool calls after {len(before.tool_calls)}")
    if before.tool_calls:
        index = len(before.tool_calls) - 1
        old, new = before.tool_calls[index], after.tool_calls[index]
        if old.name != new.name and old.name and new.name and not new.name.startswith(old.name):
            raise DiffError(f"tool call {index} changed from {old.name!r} to {new.name!r}")
        arguments = _extension(old.arguments, new.arguments)
        if arguments or old.id != new.id or old.name != new.name:
            renamed = old.id != new.id or old.name != new.name
            out.append(Delta(tool_index=index, tool_name=new.name if renamed else "",
                             tool_id=new.id if renamed else "", tool_arguments=arguments))
    for index in range(len(before.tool_calls), len(after.tool_calls)):
        call = after.tool_calls[index]
        out.append(Delta(tool_index=index, tool_name=call.name, tool_id=call.id, tool_arguments=call.arguments))
    return out


def accumulate(message: ParsedReply, deltas: list[Delta]) -> None:
    """Apply ``deltas`` to ``message`` as a client of the stream would."""
    for delta in deltas:
        message.reasoning += delta.reasoning
        message.content += delta.content
        if delta.tool_index >= 0:
            while len(message.tool_calls) <= delta.tool_index:
                message.tool_calls.append(ParsedCall())
            call = message.tool_calls[delta.tool_index]
            if delta.tool_name:
                call.name = delta.tool_name
            if delta.tool_id:
                call.id = delta.tool_id
            call.arguments += delta.tool_arguments
