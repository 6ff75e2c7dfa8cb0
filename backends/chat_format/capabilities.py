"""What a chat template can render, and the messages made ready for it, as llama.cpp's chat layer does both.

``capabilities(source)`` probes a template the way llama.cpp's ``common/jinja/caps.cpp`` does: it renders a few
fixed conversations and looks at what the template did with them (``template.probe`` records which values it read,
iterated or tested) and what came out. The answer is cached per template source.

``prepare(source, messages)`` is the message normalisation llama.cpp applies before it renders
(``common_chat_templates_apply_jinja`` in ``common/chat.cpp``, its ``workaround::`` functions and
``messages_inp_normalizer``, and the message adjustments of the family handlers in ``common/parsers/``). Engines call
it on the request's messages, then ``template.render``. ``patch_source`` is llama.cpp's two edits of template
sources (``common_chat_templates_init``), applied once when a model loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from backends.chat_format import template

_MARKER = "STRING_MARKER"
_REASONING_MARKER = "<REASONING_CONTENT_PLACEHOLDER>"

_TOOLS = [{"name": "tool", "type": "function", "function": {
    "name": "tool1", "description": "Tool description",
    "parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "Arg description"}},
                   "required": ["arg"]}}}]


def _call_conversation(arguments: Any, calls: int = 1) -> list[dict[str, Any]]:
    """caps.cpp's tool-call probe: a user turn, an assistant turn calling ``tool1`` (``calls`` times), its result,
    an answer and a new user turn."""
    tool_calls = [{"id": f"call0000{i + 1}", "type": "function",
                   "function": {"name": "tool1", "arguments": arguments}} for i in range(calls)]
    return [{"role": "user", "content": "User message"},
            {"role": "assistant", "content": "", "tool_calls": tool_calls},  # some templates want "" with calls
            {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
            {"role": "assistant", "content": "The tool response was 'tool response'"},
            {"role": "user", "content": "User message"}]


@dataclass(frozen=True)
class Capabilities:
    """What a template renders (llama.cpp's ``jinja::caps``, plus whether ``enable_thinking`` changes it)."""

    supports_string_content: bool = True  # a message's content may be a string
    supports_typed_content: bool = False  # ... or a list of typed parts ({"type": "text", "text": ...})
    supports_system_role: bool = True  # a system message's content is read
    supports_tools: bool = True  # the tools' names are read
    supports_tool_calls: bool = True  # an assistant message's tool_calls are read
    supports_parallel_tool_calls: bool = True  # ... the second one too
    supports_object_arguments: bool = False  # a call's arguments are read as an object (else a JSON string)
    supports_preserve_reasoning: bool = False  # an earlier turn's reasoning_content is printed
    supports_reasoning_effort: bool = False  # reasoning_effort is read
    supports_enable_thinking: bool = False  # enable_thinking true and false render different prompts

    def to_dict(self) -> dict[str, bool]:
        return asdict(self)


@lru_cache(maxsize=32)
def capabilities(source: str) -> Capabilities:
    """The capabilities of the template ``source``, probed as caps.cpp's ``caps_get`` probes them."""
    caps: dict[str, bool] = {}
    no_tools: list[dict[str, Any]] = []  # caps.cpp gives its probes without tools an empty list

    # Typed content: a string content that is iterated, indexed or filtered as a list of parts.
    first = template.probe(source, [{"role": "user", "content": _MARKER}], tools=no_tools)
    content = "messages.0.content"
    as_array = first.used(content, "selectattr") or first.used(content, "array_access")
    caps["supports_typed_content"] = as_array
    if not first.ok or (as_array and _MARKER not in first.text):
        caps["supports_string_content"] = False
    if first.used(content, "test_is_string"):  # it tells strings apart: does it take a list too?
        empty = template.probe(source, [{"role": "user", "content": []}], tools=no_tools)
        if empty.ok and (empty.used(content, "selectattr") or empty.used(content, "array_access")):
            caps["supports_typed_content"] = True

    system = template.probe(source, [{"role": "system", "content": "System message"},
                                     {"role": "user", "content": "User message"}], tools=no_tools)
    if not system.used(content):
        caps["supports_system_role"] = False

    # Tools and calls, arguments as an object first.
    calls = "messages.1.tool_calls"
    objects = template.probe(source, _call_conversation({"arg": "value"}), tools=_TOOLS)
    if objects.ok:
        if not objects.used("tools.0.function.name"):
            caps["supports_tools"] = False
        if not objects.used(calls):
            caps["supports_tool_calls"] = False
        elif objects.used(f"{calls}.0.function.arguments.arg"):
            caps["supports_object_arguments"] = True
    if not caps.get("supports_object_arguments"):
        strings = template.probe(source, _call_conversation('{"arg": "value"}'), tools=_TOOLS)
        if not strings.ok:
            caps["supports_tools"] = caps["supports_tool_calls"] = False
        else:
            if not strings.used("tools.0.function.name"):
                caps["supports_tools"] = False
            if not strings.used(calls):
                caps["supports_tool_calls"] = False

    arguments: Any = {"arg": "value"} if caps.get("supports_object_arguments") else '{"arg": "value"}'
    parallel = template.probe(source, _call_conversation(arguments, calls=2), tools=_TOOLS)
    if not parallel.ok or not parallel.used(f"{calls}.1.function"):
        caps["supports_parallel_tool_calls"] = False

    # Reasoning kept in the history: an earlier turn's reasoning_content printed, with thinking on and
    # llama.cpp's preserve switches set.
    history = [{"role": "user", "content": "User message"},
               {"role": "assistant", "content": "Assistant message", "reasoning_content": _REASONING_MARKER},
               {"role": "user", "content": "User message"},
               {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
               {"role": "user", "content": "User message"}]
    preserve = template.probe(source, history, tools=no_tools,
                              variables={"enable_thinking": True, "preserve_thinking": True, "clear_thinking": False,
                                         "truncate_history_thinking": False, "drop_thinking": False})
    caps["supports_preserve_reasoning"] = _REASONING_MARKER in preserve.text

    effort = template.probe(source, [{"role": "user", "content": "User message"}], tools=no_tools,
                            variables={"enable_thinking": True, "reasoning_effort": "low",
                                       "reasoning_strength": "low"})
    # llama.cpp gives both names one value, so reading either counts (muse-glimmer reads reasoning_strength).
    caps["supports_reasoning_effort"] = effort.used("reasoning_effort") or effort.used("reasoning_strength")

    # Not in caps.cpp (llama.cpp learns it from its reply-format analysis): does enable_thinking change anything?
    user = [{"role": "user", "content": "User message"}]
    on = template.probe(source, user, tools=no_tools, variables={"enable_thinking": True})
    off = template.probe(source, user, tools=no_tools, variables={"enable_thinking": False})
    caps["supports_enable_thinking"] = on.ok and off.ok and on.text != off.text
    return Capabilities(**caps)


def patch_source(source: str) -> str:
    """The template as llama.cpp renders it: ``common_chat_templates_init`` edits two templates whose checks
    refuse conversations llama.cpp's own messages make (ggml-org/llama.cpp#15230: gpt-oss refusing a content that
    holds its channel markers; ggml-org/llama.cpp#17713: Mistral refusing an assistant turn with neither content
    nor tool calls)."""
    if "<|channel|>" in source and "in message.content or" in source:
        source = source.replace('{%- if "<|channel|>analysis<|message|>" in message.content or '
                                '"<|channel|>final<|message|>" in message.content %}', "{%- if false %}")
    if "[TOOL_CALLS]" in source and "if (message['content'] is none or" in source:
        source = source.replace("{%- if (message['content'] is none or message['content'] == '' or "
                                "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                                "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
                                "{%- if false %}")
    return source


# --- Messages


def _compact_json(value: Any) -> str:
    """JSON as llama.cpp's nlohmann ``dump()`` writes it: no spaces, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _join_parts(parts: Sequence[Any]) -> str:
    """Typed text parts as one string, as llama.cpp joins them: a newline between texts, none around a media
    marker (``messages_inp_normalizer::concat_content_parts``); other part types are left out."""
    text, last_was_media = "", False
    for part in parts:
        kind = part.get("type", "") if isinstance(part, Mapping) else ""
        if kind == "text":
            newline = not last_was_media and bool(text)
            last_was_media = False
        elif kind == "media_marker":
            newline, last_was_media = False, True
        else:
            continue
        text += ("\n" if newline else "") + str(part.get("text", ""))
    return text


def _canonical(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as llama.cpp hands it to a template (``common_chat_msg::to_json_oaicompat``): content always
    there ("" for none), reasoning_content, name and tool_call_id only when not empty, each tool call as
    ``{"type": "function", "function": {"name", "arguments"}, "id"}`` with its arguments a JSON string. Keys llama.cpp
    does not know are kept after those."""
    out: dict[str, Any] = {"role": message.get("role", "")}
    content = message.get("content")
    out["content"] = content if isinstance(content, (str, list)) and content else ""
    for key in ("reasoning_content", "name", "tool_call_id"):
        if message.get(key):
            out[key] = message[key]
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = []
        for call in calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = _compact_json(arguments if arguments is not None else {})
            canonical: dict[str, Any] = {"type": "function",
                                         "function": {"name": function.get("name", ""), "arguments": arguments}}
            if call.get("id"):
                canonical["id"] = call["id"]
            out["tool_calls"].append(canonical)
    known = {"role", "content", "reasoning_content", "name", "tool_call_id", "tool_calls"}
    out.update({k: v for k, v in message.items() if k not in known and v is not None})
    return out


def prepare(source: str, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (OpenAI's shape) made ready for the template ``source`` as llama.cpp makes them, in its order:

    - StepFun 3.5: contents and reasoning trimmed (ggml-org/llama.cpp#24181: leftover whitespace sends it into
      reasoning loops);
    - each message in llama.cpp's shape (``_canonical``);
    - typed parts joined into a string where the template takes only strings, a string made one text part where it
      takes only parts;
    - ``developer`` becomes ``system``, except for gpt-oss's ``<|channel|>`` templates, which have a developer role;
    - a template without a system role gets the first system message folded into the next message (Gemma 2);
    - a tool-call message gets content "" where it has none, for templates that read tool calls;
    - a call's arguments become an object where the template reads them as one (else they stay a JSON string).

    The changes llama.cpp's family handlers make on top (gpt-oss reading the reasoning as ``thinking``, DeepSeek V4's
    results in call order…) are each family module's (backends/chat_format/families/), as they are each handler's.
    """
    caps = capabilities(source)
    if "You have access to the following functions in JSONSchema format" in source:
        messages = [_trimmed(m) for m in messages]
    out = [_canonical(m) for m in messages]

    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    for message in out:
        content = message["content"]
        if only_string and isinstance(content, list):
            message["content"] = _join_parts(content)
        elif only_typed and isinstance(content, str):
            message["content"] = [{"type": "text", "text": content}]

    if "<|channel|>" not in source:
        for message in out:
            if message["role"] == "developer":
                message["role"] = "system"

    if not caps.supports_system_role and out and out[0]["role"] == "system":
        system = out.pop(0)
        if out:
            out[0]["content"] = content_text(system["content"]) + "\n" + content_text(out[0]["content"])

    if caps.supports_tool_calls:
        for message in out:
            if "tool_calls" in message and message.get("content") is None:
                message["content"] = ""

    if caps.supports_object_arguments:
        for message in out:
            for call in message.get("tool_calls", ()):
                arguments = call["function"]["arguments"]
                if isinstance(arguments, str):
                    try:
                        call["function"]["arguments"] = json.loads(arguments)
                    except ValueError:
                        pass  # llama.cpp refuses the request; a stored conversation should still render
    return out


def content_text(content: Any) -> str:
    """A message's content as one string (typed text parts joined as llama.cpp joins them)."""
    return content if isinstance(content, str) else _join_parts(content) if isinstance(content, list) else ""


def _trimmed(message: Mapping[str, Any]) -> dict[str, Any]:
    """``workaround::trim_all_content``: the content, the reasoning and each text part without surrounding
    whitespace."""
    out = dict(message)
    for key in ("content", "reasoning_content"):
        if isinstance(out.get(key), str):
            out[key] = out[key].strip()
    if isinstance(out.get("content"), list):
        out["content"] = [{**p, "text": p["text"].strip()}
                          if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
                          else p for p in out["content"]]
    return out
