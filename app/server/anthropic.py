"""Anthropic's Messages API (``POST /v1/messages``) over the same engine queue as the OpenAI endpoints, so that
clients written for Anthropic's SDK work locally: system prompt, text and tool_use / tool_result blocks, tools with
``input_schema``, ``tool_choice`` (auto, any, tool, none), streamed as Anthropic's named server-sent events or not.

Requests become the same ``GenerationRequest`` an OpenAI chat request does (tools in OpenAI's form, which is what
chat templates read); replies are read back with the same tool-call parser. Errors answer in Anthropic's shape,
``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from app.server.params import (ApiError, GenerationRequest, _flag, _sampling, bad_param, check_model, json_arguments,
                               parse_tools, with_tools)
from app.server.replies import ReplyStream
from backends.base import Done, GenerationStats, Message
from backends.chat_format.tool_calls import Reply, ToolCall

_STOP_REASONS = {"eos": "end_turn", "stop": "stop_sequence", "length": "max_tokens", "cancelled": "end_turn"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


def error_body(error: ApiError) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(error.status, "api_error")
    where = f" ({error.param})" if error.param else ""
    return {"type": "error", "error": {"type": kind, "message": f"{error.message}{where}"}}


def _text(content: Any, where: str) -> str:
    """A content that may only hold text: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                         and isinstance(b.get("text"), str) for b in content):
        return "".join(b["text"] for b in content)
    raise bad_param(where, "only text content is supported here", "unsupported_content")


def _turns(message: Any, i: int) -> list[Message]:
    """One Anthropic message as the chat turns templates read: tool results become tool turns, tool uses an
    assistant turn's tool calls."""
    where = f"messages[{i}]"
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise bad_param(f"{where}.role", 'each message is an object with role "user" or "assistant"', "invalid_type")
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return [Message(role, content)]
    if not isinstance(content, list) or not content:
        raise bad_param(f"{where}.content", "content must be a string or a non-empty list of blocks", "invalid_type")
    texts, calls, results = [], [], []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        at = f"{where}.content[{j}]"
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise bad_param(at, "a tool_use block needs an id and a name", "invalid_type")
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": json_arguments(block.get("input"),
                                                                                          f"{at}.input")}})
        elif kind == "tool_result" and role == "user":
            if not isinstance(block.get("tool_use_id"), str):
                raise bad_param(at, "a tool_result block needs the tool_use_id it answers", "invalid_type")
            result = _text(block.get("content", ""), f"{at}.content")
            if block.get("is_error"):
                result = f"Error: {result}"
            results.append(Message("tool", result, tool_call_id=block["tool_use_id"]))
        elif kind == "thinking":
            continue  # earlier reasoning: not sent back to the model, as chat templates drop it too
        else:
            raise bad_param(at, f"{str(kind)[:40]!r} blocks are not supported in a {role} message",
                            "unsupported_content")
    if role == "assistant":
        return [Message("assistant", "".join(texts), tool_calls=tuple(calls))]
    return [*results, *([Message("user", "".join(texts))] if texts or not results else [])]


def _tools(body: dict) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise bad_param("tools", "tools must be a list", "invalid_type")
    as_openai = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            raise bad_param(f"tools[{i}]", "only client tools (name, description, input_schema) are supported",
                            "unsupported_parameter")
        function = {"name": tool.get("name"), "parameters": tool.get("input_schema")}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        as_openai.append({"type": "function", "function": function})
    return parse_tools(as_openai)


def _tool_choice(body: dict, tools: list[dict[str, Any]]) -> str | None:
    """As params._tool_choice: "none", "auto", "" for any tool, or a tool's name."""
    choice = body.get("tool_choice")
    if choice is None:
        return "auto"
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("auto", "none"):
        return kind
    if kind == "any":
        return ""
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or name not in {t["function"]["name"] for t in tools}:
            raise bad_param("tool_choice.name", f"tool_choice names {str(name)[:64]!r}, which is not among the tools")
        return name
    raise bad_param("tool_choice", 'tool_choice type must be "auto", "any", "tool" or "none"')


def parse_messages(body: dict, *, served_id: str, n_ctx: int, tool_format: str) -> GenerationRequest:
    check_model(body, served_id)
    if body.get("max_tokens") is None:
        raise bad_param("max_tokens", "max_tokens is required", "missing_parameter")
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and not 0 <= temperature <= 1:
        raise bad_param("temperature", f"temperature must be between 0 and 1, not {temperature}")
    stop = body.get("stop_sequences")
    sampling = _sampling({"max_tokens": body["max_tokens"], "temperature": temperature, "top_p": body.get("top_p"),
                          "top_k": body.get("top_k"), "stop": stop}, n_ctx, n_ctx)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_param("messages", "messages must be a non-empty list", "invalid_type")
    messages = [turn for i, message in enumerate(raw) for turn in _turns(message, i)]
    system = body.get("system")
    if system is not None:
        messages.insert(0, Message("system", _text(system, "system")))
    tools = _tools(body)
    sampling, reads_tools = with_tools(sampling, tools, _tool_choice(body, tools) if tools else None, tool_format)
    return GenerationRequest(messages, sampling, _flag(body, "stream"), False, reads_tools)


def _usage(stats: GenerationStats) -> dict[str, int]:
    return {"input_tokens": stats.prompt_tokens, "output_tokens": stats.generated_tokens}


def _stop_reason(stats: GenerationStats, called_tools: bool) -> str:
    return "tool_use" if called_tools else _STOP_REASONS[stats.stop_reason]


def _stop_sequence(stats: GenerationStats) -> str | None:
    """The stop sequence that ended the reply, as Anthropic reports it (null when none did, or a remote engine's
    server did not say which)."""
    return stats.stop_string or None if stats.stop_reason == "stop" else None


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)}


class MessageShape:
    """A Messages reply, whole or as its stream of events."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = f"msg_{secrets.token_hex(12)}"

    def _message(self, content: list[dict[str, Any]], stop_reason: str | None, usage: dict[str, int],
                 stop_sequence: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}

    def whole(self, reply: Reply, stats: GenerationStats) -> dict[str, Any]:
        content = ([{"type": "text", "text": reply.content}] if reply.content or not reply.tool_calls else [])
        content += [_tool_use(call) for call in reply.tool_calls]
        return self._message(content, _stop_reason(stats, bool(reply.tool_calls)), _usage(stats),
                             _stop_sequence(stats))

    async def stream(self, first: Any, next_event: Callable[[], Awaitable[Any]], tool_format: str
                     ) -> AsyncIterator[bytes]:
        """message_start, a text block with its deltas, a tool_use block per call, message_delta, message_stop."""
        yield _event("message_start", {"type": "message_start",
                                       "message": self._message([], None, {"input_tokens": 0, "output_tokens": 0})})
        reader, index, text_open = ReplyStream(tool_format), 0, False
        event = first
        while True:
            pieces = []
            if isinstance(event, Done):
                rest = reader.finish()
                pieces.append(rest.content)
            elif event.text:
                pieces.append(reader.feed(event.text))
            for text in pieces:
                if text:
                    if not text_open:
                        yield _event("content_block_start", {"type": "content_block_start", "index": index,
                                                             "content_block": {"type": "text", "text": ""}})
                        text_open = True
                    yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                         "delta": {"type": "text_delta", "text": text}})
            if isinstance(event, Done):
                break
            try:
                event = await next_event()
            except ApiError as exc:  # headers are sent: report in the stream, as Anthropic does
                yield _event("error", error_body(exc))
                return
        if text_open:
            yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        for call in rest.tool_calls:
            yield _event("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": {"type": "tool_use", "id": call.id,
                                                                   "name": call.name, "input": {}}})
            yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": {"type": "input_json_delta",
                                                           "partial_json": call.arguments}})
            yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        stats = event.stats
        yield _event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": _stop_reason(stats, bool(rest.tool_calls)),
                                                 "stop_sequence": _stop_sequence(stats)},
                                       "usage": _usage(stats)})
        yield _event("message_stop", {"type": "message_stop"})


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
