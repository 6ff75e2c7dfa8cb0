"""Anthropic's Messages API (``POST /v1/messages``) over the same engine queue as the OpenAI endpoints, so that
clients written for Anthropic's SDK work locally: system prompt, text, thinking, tool_use / tool_result blocks, tools
with ``input_schema``, ``tool_choice`` (auto, any, tool, none; ``disable_parallel_tool_use``), ``thinking`` (enabled
with a budget, adaptive, disabled), streamed as Anthropic's named server-sent events or not; and
``POST /v1/messages/count_tokens``, the same body's prompt counted by the model's own tokenizer.

Requests become the same ``GenerationRequest`` an OpenAI chat request does (tools in OpenAI's form, which is what
chat templates read); the engine reads the reply into its thinking, text and tool calls, which become thinking,
text and tool_use blocks, in that order, as llama-server's Anthropic endpoint answers. A local model's thinking has no
signature: its blocks carry an empty one. Errors answer in Anthropic's shape, ``{"type": "error", "error": {"type",
"message"}}``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from app.server.params import (ApiError, GenerationRequest, _flag, _sampling, bad_param, check_model, json_arguments,
                               overflow_choice, documents_choice, parse_tools, thinking_budget,
                               with_tools)
from app.datatypes import Done, GenerationStats, Message, ModelSampling, SamplingSettings, Token
from app.datatypes import ToolCall

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


# Claude Code (2.1.x) puts a billing line first in its system prompt, ``x-anthropic-billing-header: cc_version=…;
# cc_entrypoint=…; cch=…;``, whose ``cch`` changes on every request: as the prompt's first tokens it defeats the reuse
# of the KV cache for everything after it, turning seconds-long follow-ups into full re-reads of a long prompt. The
# line means nothing to a model (Anthropic's API reads it as metadata), so it is left out before the prompt is built,
# as upstream servers do: llama.cpp (ggml-org/llama.cpp#20623, which drops such system blocks, and #21793, which
# fixed prefix caching for the same cause), vLLM (vllm-project/vllm#36829); the client's side is
# anthropics/claude-code#68900. Only a whole line that starts with the header's name goes.
BILLING_HEADER = re.compile(r"^x-anthropic-billing-header:[^\n]*(?:\n|$)", re.MULTILINE)


def without_billing_header(text: str) -> str:
    """``text`` without its lines that are Claude Code's per-request billing header (BILLING_HEADER)."""
    return BILLING_HEADER.sub("", text) if "x-anthropic-billing-header:" in text else text


def _system(system: Any) -> str:
    """The system prompt's text, each block without Claude Code's per-request billing line."""
    if isinstance(system, list):
        _text(system, "system")  # checked as text blocks first
        return "".join(without_billing_header(b["text"]) for b in system)
    return without_billing_header(_text(system, "system"))


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
    texts, calls, results, thoughts = [], [], [], []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        at = f"{where}.content[{j}]"
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and role == "assistant":
            if not isinstance(block.get("thinking"), str):
                raise bad_param(at, "a thinking block needs its thinking as a string", "invalid_type")
            thoughts.append(block["thinking"])  # the template decides whether the model sees it again
        elif kind == "redacted_thinking" and role == "assistant":
            continue  # encrypted by Anthropic for its own models: nothing a local model can read
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
        else:
            raise bad_param(at, f"{str(kind)[:40]!r} blocks are not supported in a {role} message",
                            "unsupported_content")
    if role == "assistant":
        return [Message("assistant", "".join(texts), tool_calls=tuple(calls), reasoning="".join(thoughts))]
    return [*results, *([Message("user", "".join(texts))] if texts or not results else [])]


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
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


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str:
    """As params._tool_choice: "auto", "none", "required" (Anthropic's "any"), or a tool's name."""
    choice = body.get("tool_choice")
    if choice is None:
        return "auto"
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("auto", "none"):
        return str(kind)
    if kind == "any":
        return "required"
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or name not in {t["function"]["name"] for t in tools}:
            raise bad_param("tool_choice.name", f"tool_choice names {str(name)[:64]!r}, which is not among the tools")
        return name
    raise bad_param("tool_choice", 'tool_choice type must be "auto", "any", "tool" or "none"')


def _parallel_tool_use(body: dict[str, Any]) -> bool:
    """Whether the reply may call several tools: not when ``tool_choice`` says ``disable_parallel_tool_use``."""
    choice = body.get("tool_choice")
    disable = choice.get("disable_parallel_tool_use") if isinstance(choice, dict) else None
    if disable is None:
        return True
    if not isinstance(disable, bool):
        raise bad_param("tool_choice.disable_parallel_tool_use", "disable_parallel_tool_use must be true or false",
                        "invalid_type")
    return not disable


def _thinking(body: dict[str, Any], sampling: SamplingSettings, counting: bool = False) -> SamplingSettings:
    """``thinking``: {"type": "enabled", "budget_tokens": N} thinks at most N tokens, {"type": "adaptive"} as long as
    the model wants, {"type": "disabled"} not at all; absent, the model's template decides (as llama-server)."""
    thinking = body.get("thinking")
    if thinking is None:
        return sampling
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive", "disabled"):
        raise bad_param("thinking", 'thinking must be {"type": "enabled", "budget_tokens": N}, {"type": "adaptive"} '
                                    'or {"type": "disabled"}', "invalid_type")
    if thinking.get("display") not in (None, "summarized"):  # "omitted" would send the blocks without their text
        raise bad_param("thinking.display", 'only display "summarized" is supported: this server sends the '
                                            "thinking as the model wrote it", "unsupported_parameter")
    if kind == "disabled":
        return dataclasses.replace(sampling, enable_thinking=False, reasoning_budget=0)
    if kind == "adaptive":
        return dataclasses.replace(sampling, enable_thinking=True)
    # Anthropic's own API wants at least 1,024; a local model may be asked for less.
    budget = thinking_budget(thinking.get("budget_tokens"), "thinking.budget_tokens", least=1)
    if budget >= sampling.max_tokens and not counting:  # a count has no max_tokens: nothing to check it against
        raise bad_param("thinking.budget_tokens", f"max_tokens ({sampling.max_tokens}) must be greater than "
                                                  f"thinking.budget_tokens ({budget}): the answer comes after it")
    return dataclasses.replace(sampling, enable_thinking=True, reasoning_budget=budget)


def parse_messages(body: dict[str, Any], *, served_id: str, n_ctx: int, takes_tools: bool,
                   counting: bool = False, recommended: ModelSampling | None = None,
                   preset: dict[str, Any] | None = None) -> GenerationRequest:
    """``takes_tools``: the served model's chat template has tool support. ``counting``: the body of
    ``/v1/messages/count_tokens``, the same without ``max_tokens`` (and its sampling values read but unused).
    ``recommended``: the sampling the model's files recommend (a value the request does not give)."""
    check_model(body, served_id)
    if body.get("max_tokens") is None and not counting:
        raise bad_param("max_tokens", "max_tokens is required", "missing_parameter")
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and not 0 <= temperature <= 1:
        raise bad_param("temperature", f"temperature must be between 0 and 1, not {temperature}")
    stop = body.get("stop_sequences")
    sampling = _sampling({"max_tokens": n_ctx if counting else body["max_tokens"], "temperature": temperature,
                          "top_p": body.get("top_p"), "top_k": body.get("top_k"), "stop": stop}, n_ctx, n_ctx,
                         recommended, preset)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad_param("messages", "messages must be a non-empty list", "invalid_type")
    messages = [turn for i, message in enumerate(raw) for turn in _turns(message, i)]
    system = body.get("system")
    if system is not None:
        text = _system(system)
        if text or not _text(system, "system"):  # a system prompt that was only the billing line is none
            messages.insert(0, Message("system", text))
    tools = _tools(body)
    sampling = with_tools(sampling, tools, _tool_choice(body, tools) if tools else "auto", takes_tools)
    sampling = dataclasses.replace(sampling, parallel_tool_calls=_parallel_tool_use(body))
    return GenerationRequest(messages, _thinking(body, sampling, counting), not counting and _flag(body, "stream"),
                             False, overflow=None if counting else overflow_choice(body),
                             documents=() if counting else documents_choice(body))


def _usage(prompt_tokens: int, cached_tokens: int, output_tokens: int) -> dict[str, int]:
    """Anthropic's usage, as llama-server gives it: ``input_tokens`` are the prompt's tokens the engine evaluated,
    ``cache_read_input_tokens`` those it reused from its KV cache (the earlier turns of a conversation); their sum is
    the prompt, which count_tokens counts."""
    cached_tokens = min(cached_tokens, prompt_tokens)  # a remote server's figures are its own: never below 0 here
    return {"input_tokens": prompt_tokens - cached_tokens, "cache_read_input_tokens": cached_tokens,
            "output_tokens": output_tokens}


def _final_usage(stats: GenerationStats) -> dict[str, int]:
    return _usage(stats.prompt_tokens, stats.cached_tokens, stats.generated_tokens)


def _stop_reason(stats: GenerationStats, called_tools: bool) -> str:
    """tool_use for a reply that called tools and ended there (one cut off at max_tokens says so), as llama-server."""
    return "tool_use" if called_tools and stats.stop_reason != "length" else _STOP_REASONS[stats.stop_reason]


def _stop_sequence(stats: GenerationStats) -> str | None:
    """The stop sequence that ended the reply, as Anthropic reports it (null when none did, or a remote engine's
    server did not say which)."""
    return stats.stop_string or None if stats.stop_reason == "stop" else None


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as a tool_use block's input: an object; arguments that are not one (a call cut off at
    max_tokens) give an empty one, as llama-server does."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _tool_use(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}


def _thinking_block(thinking: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": ""}


class MessageShape:
    """A Messages reply, whole or as its stream of events."""

    def __init__(self, model: str, quantdesk: dict[str, Any] | None = None) -> None:
        self.model = model
        self.id = f"msg_{secrets.token_hex(12)}"
        self.quantdesk = quantdesk  # a stream's message_start carries it (the whole reply's is added by app.py)

    def _message(self, content: list[dict[str, Any]], stop_reason: str | None, usage: dict[str, int],
                 stop_sequence: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage}

    def whole(self, done: Done) -> dict[str, Any]:
        """The thinking, the text and the tool calls, each a block, in that order (an empty reply: one empty text)."""
        content = [_thinking_block(done.reasoning)] if done.reasoning else []
        if done.text or not (done.reasoning or done.tool_calls):
            content.append({"type": "text", "text": done.text})
        content += [_tool_use(call) for call in done.tool_calls]
        return self._message(content, _stop_reason(done.stats, bool(done.tool_calls)), _final_usage(done.stats),
                             _stop_sequence(done.stats))

    async def stream(self, first: Token | Done, next_event: Callable[[], Awaitable[Token | Done]]
                     ) -> AsyncIterator[bytes]:
        """message_start; the blocks as the engine's events bring them, each started, extended by its deltas and
        stopped before the next starts (a thinking block with its signature_delta last); message_delta, message_stop."""
        # The engine's first event carries the prompt's figures (a remote engine's only its Done: 0 until then).
        opening = _usage(first.prompt_tokens, first.cached_tokens, 0) if isinstance(first, Token) \
            else _usage(first.stats.prompt_tokens, first.stats.cached_tokens, 0)
        started = self._message([], None, opening)
        yield _event("message_start", {"type": "message_start", "message": {**started, "quantdesk": self.quantdesk}
                                       if self.quantdesk else started})
        blocks = _Blocks()
        event = first
        while isinstance(event, Token):
            for payload in blocks.feed(event):
                yield _event(payload["type"], payload)
            try:
                event = await next_event()
            except ApiError as exc:  # headers are sent: report in the stream, as Anthropic does
                yield _event("error", error_body(exc))
                return
        for payload in blocks.close():
            yield _event(payload["type"], payload)
        stats = event.stats
        yield _event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": _stop_reason(stats, bool(event.tool_calls)),
                                                 "stop_sequence": _stop_sequence(stats)},
                                       "usage": _final_usage(stats)})
        yield _event("message_stop", {"type": "message_stop"})


class _Blocks:
    """The content blocks of a streamed message: the open one, and which block each tool call is."""

    def __init__(self) -> None:
        self.count = 0  # blocks started
        self.open: str | None = None  # the open block's kind: thinking, text, tool_use
        self.calls: dict[int, int] = {}  # tool call index -> its block's index

    def _start(self, kind: str, block: dict[str, Any]) -> list[dict[str, Any]]:
        out = self.close()
        out.append({"type": "content_block_start", "index": self.count, "content_block": block})
        self.open = kind
        self.count += 1
        return out

    def close(self) -> list[dict[str, Any]]:
        if self.open is None:
            return []
        index = self.count - 1
        out = []
        if self.open == "thinking":  # Anthropic's clients expect each thinking block signed before it stops
            out.append(_delta(index, {"type": "signature_delta", "signature": ""}))
        out.append({"type": "content_block_stop", "index": index})
        self.open = None
        return out

    def feed(self, token: Token) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if token.reasoning:
            if self.open != "thinking":
                out += self._start("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(_delta(self.count - 1, {"type": "thinking_delta", "thinking": token.reasoning}))
        if token.text:
            if self.open != "text":
                out += self._start("text", {"type": "text", "text": ""})
            out.append(_delta(self.count - 1, {"type": "text_delta", "text": token.text}))
        for call in token.tool_calls:
            if call.index not in self.calls:  # a call's first delta has its id and name
                out += self._start("tool_use", {"type": "tool_use", "id": call.id, "name": call.name, "input": {}})
                self.calls[call.index] = self.count - 1
            if call.arguments:
                out.append(_delta(self.calls[call.index], {"type": "input_json_delta",
                                                           "partial_json": call.arguments}))
        return out


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()
