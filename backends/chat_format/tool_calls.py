"""Tool calls in a model's own syntax: which syntax a chat template teaches, how to read calls back out of a
reply, and how to force one (a JSON schema with literal text around it, for the engine's grammar).

Pure Python, no inference library: the engine host uses ``template_format`` at load, the server the rest.

The formats, as the models write them (tests/backends/chat_format/test_tool_calls.py holds recorded replies of each):

- ``hermes`` (Hermes, Qwen 2.5 / 3, many fine-tunes): ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>``,
  one block per call, after optional text;
- ``llama3`` (Llama 3.1 / 3.2 / 3.3 JSON tool calling): the whole reply is ``{"name": …, "parameters": {…}}``,
  optionally after ``<|python_tag|>``, several joined by ``;``;
- ``mistral``: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`` (tokenizer v3: Mistral 7B v0.3, Nemo), or
  ``[TOOL_CALLS]name[ARGS]{…}`` per call (tokenizer v11+: Mistral Small 3.2, Magistral, Devstral);
- ``harmony`` (gpt-oss): ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>``, the
  answer itself in ``<|channel|>final<|message|>…``;
- ``generic``: a template that shows the model its tools in a syntax not listed here: replies are read as
  hermes blocks or as bare JSON objects with a ``name``.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass
from typing import Any

FORMATS = ("hermes", "llama3", "mistral", "harmony", "generic")


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI's API carries it


@dataclass(frozen=True)
class Reply:
    """A reply split into the text for the user and the tool calls the model made."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()


def template_format(template: str) -> str:
    """The tool-call syntax ``template`` teaches its model; "" when the template has no tool support."""
    from backends.chat_format.template import declares_tools

    if not template or not declares_tools(template):
        return ""
    if "<|channel|>" in template:
        return "harmony"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3"
    return "generic"


def new_call_id(fmt: str) -> str:
    # Mistral's templates refuse any id that is not 9 letters or digits ("Tool call IDs should be alphanumeric
    # strings with length 9!"); the id comes back to the template when the client sends the call's result.
    if fmt == "mistral":
        return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))
    return f"call_{secrets.token_hex(12)}"


# --- reading calls back ---

_DECODER = json.JSONDecoder()


def _json_at(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value starting at ``start`` (after whitespace) and where it ends, or None."""
    while start < len(text) and text[start].isspace():
        start += 1
    try:
        return _DECODER.raw_decode(text, start)
    except ValueError:
        return None


def _call(fmt: str, name: Any, arguments: Any) -> ToolCall | None:
    if not isinstance(name, str) or not name:
        return None
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI's API does
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(fmt), name, json.dumps(arguments, ensure_ascii=False))


def _named_object(fmt: str, value: Any) -> ToolCall | None:
    if not isinstance(value, dict):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    return _call(fmt, value.get("name"), arguments)


def _parse_hermes(text: str, fmt: str) -> Reply | None:
    first = text.find("<tool_call>")
    if first < 0:
        return None
    calls, content = [], [text[:first]]
    position = first
    while position >= 0:
        found = _json_at(text, position + len("<tool_call>"))
        if found is None:
            return None
        call = _named_object(fmt, found[0])
        if call is None:
            return None
        calls.append(call)
        end = found[1]
        close = text.find("</tool_call>", end)
        if close >= 0 and not text[end:close].strip():
            end = close + len("</tool_call>")
        position = text.find("<tool_call>", end)
        content.append(text[end:position] if position >= 0 else text[end:])
    return Reply("".join(content).strip(), tuple(calls))


def _parse_bare_json(text: str, fmt: str) -> Reply | None:
    """A reply that is nothing but tool calls as JSON objects (Llama 3): ``{…}``, ``{…}; {…}`` or ``[{…}, …]``."""
    body = text.strip()
    if body.startswith("<|python_tag|>"):
        body = body[len("<|python_tag|>"):]
    position, calls = 0, []
    while True:
        found = _json_at(body, position)
        if found is None:
            return None
        values = found[0] if isinstance(found[0], list) else [found[0]]
        for value in values:
            call = _named_object(fmt, value)
            if call is None:
                return None
            calls.append(call)
        position = found[1]
        rest = body[position:].lstrip()
        if not rest:
            return Reply("", tuple(calls)) if calls else None
        if rest[0] not in ";,":
            return None
        position = len(body) - len(rest) + 1


def _parse_mistral(text: str, fmt: str) -> Reply | None:
    first = text.find("[TOOL_CALLS]")
    if first < 0:
        return None
    content, calls = text[:first].strip(), []
    for part in text[first:].split("[TOOL_CALLS]")[1:]:
        if "[ARGS]" in part:  # tokenizer v11+: name[ARGS]{arguments}
            name, _, rest = part.partition("[ARGS]")
            name = name.split("[CALL_ID]")[0].strip()
            found = _json_at(rest, 0)
            call = _call(fmt, name, found[0]) if found else None
            if call is None:
                return None
            calls.append(call)
            continue
        found = _json_at(part, 0)  # tokenizer v3: a JSON array of {"name", "arguments"}
        if found is None:
            return None
        for value in found[0] if isinstance(found[0], list) else [found[0]]:
            call = _named_object(fmt, value)
            if call is None:
                return None
            calls.append(call)
    return Reply(content, tuple(calls))


_HARMONY_CALL = re.compile(r"to=functions\.([^\s<]+)[^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?<\|message\|>")
_HARMONY_FINAL = re.compile(r"<\|channel\|>final<\|message\|>(.*?)(?:<\|end\|>|<\|return\|>|$)", re.S)


def _parse_harmony(text: str, fmt: str) -> Reply | None:
    calls = []
    for match in _HARMONY_CALL.finditer(text):
        found = _json_at(text, match.end())
        call = _call(fmt, match.group(1), found[0]) if found else None
        if call is None:
            return None
        calls.append(call)
    final = _HARMONY_FINAL.search(text)
    if not calls and final is None:
        return None
    return Reply(final.group(1).strip() if final else "", tuple(calls))


def parse(text: str, fmt: str) -> Reply:
    """``text`` split into content and tool calls in ``fmt``; a reply with no (readable) call is all content."""
    parsers = {"hermes": (_parse_hermes,), "llama3": (_parse_bare_json,), "mistral": (_parse_mistral,),
               "harmony": (_parse_harmony,), "generic": (_parse_hermes, _parse_bare_json)}.get(fmt, ())
    for parser in parsers:
        reply = parser(text, fmt)
        if reply is not None:
            return reply
    return Reply(text)


def holds_back(text: str, fmt: str) -> int:
    """Where a reply streamed so far may have started a tool call: the index from which text must be held back
    from a stream until the reply is whole (``len(text)`` when nothing needs holding)."""
    if fmt == "harmony":
        return 0  # channels and calls interleave: read whole
    if fmt in ("llama3", "generic") and text.lstrip()[:1] in ("", "{", "[", "<"):
        return 0  # a reply that is (or may be) bare JSON
    markers = {"hermes": "<tool_call>", "mistral": "[TOOL_CALLS]", "generic": "<tool_call>"}
    marker = markers.get(fmt)
    if marker is None:
        return len(text)
    found = text.find(marker)
    if found >= 0:
        return found
    for n in range(min(len(marker) - 1, len(text)), 0, -1):  # a marker's start at the very end
        if text.endswith(marker[:n]):
            return len(text) - n
    return len(text)


# --- forcing a call ---

class ToolChoiceError(ValueError):
    """A forced tool call that this model's syntax cannot express."""


def _arguments_schema(tool: dict[str, Any]) -> dict[str, Any]:
    parameters = tool["function"].get("parameters")
    return parameters if isinstance(parameters, dict) and parameters else {"type": "object"}


def forced_call(fmt: str, tools: list[dict[str, Any]], name: str | None) -> tuple[dict[str, Any], str, str]:
    """The JSON schema and the literal text before and after it that make the model call a tool in ``fmt``:
    ``name``'s, or (None) any of ``tools``. Raises ToolChoiceError where the syntax cannot say it."""
    chosen = [t for t in tools if name is None or t["function"]["name"] == name]
    if fmt == "harmony":
        if len(chosen) != 1:
            raise ToolChoiceError("gpt-oss names the function before its arguments, so a call can be forced for one "
                                  "named function only (tool_choice {\"type\": \"function\", ...})")
        tool_name = chosen[0]["function"]["name"]
        return (_arguments_schema(chosen[0]),
                f"<|channel|>commentary to=functions.{tool_name} <|constrain|>json<|message|>", "")
    key = "parameters" if fmt == "llama3" else "arguments"
    alternatives = [{"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                                        key: _arguments_schema(t)},
                     "required": ["name", key], "additionalProperties": False} for t in chosen]
    schema = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
    if fmt == "hermes":
        return schema, "<tool_call>\n", "\n</tool_call>"
    if fmt == "mistral":
        return schema, "[TOOL_CALLS][", "]"
    return schema, "", ""  # llama3 and generic: the bare object
