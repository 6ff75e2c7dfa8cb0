"""OpenAI's shapes of the server's answers (app/server/app.py's endpoints): a chat completion and a completion,
whole or as the chunks of a stream (``ChatShape``, ``CompletionShape``), ``usage`` with the prompt's tokens reused from
the KV cache, llama.cpp's ``timings``, ``logprobs`` in OpenAI's shapes, tool calls whole and as deltas, an embedding
vector as floats or base64, a server-sent event, and the engine's typed errors as OpenAI's errors
(``engine_api_error``). Pure functions of the engine's events: no routes, no engine, no I/O."""

from __future__ import annotations

import base64
import json
import secrets
import struct
import time
from typing import Any

from app.datatypes import OVERFLOW_POLICIES, Done, GenerationStats, Token, TokenLogprob, ToolCall, ToolCallDelta
from app.errors import EngineCrashed, EngineError
from app.server.engine_queue import QueueFull, RequestCancelled, ServerStopping
from app.server.params import ApiError

_FINISH_REASONS = {"eos": "stop", "stop": "stop", "length": "length", "cancelled": "stop"}


def timings(stats: GenerationStats) -> dict[str, float | int]:
    """llama.cpp server's ``timings``. predicted_per_second is the decode rate the app shows everywhere:
    the first token comes out of prompt processing, so it is (predicted_n - 1) over predicted_ms."""
    predicted = stats.generated_tokens
    return {
        "cache_n": stats.cached_tokens,  # of prompt_n, the tokens reused from the KV cache
        "prompt_n": stats.prompt_tokens,
        "prompt_ms": stats.prompt_ms,
        "prompt_per_token_ms": stats.prompt_ms / stats.prompt_tokens if stats.prompt_tokens else 0.0,
        "prompt_per_second": stats.prompt_tps,
        "predicted_n": predicted,
        "predicted_ms": stats.decode_ms,
        "predicted_per_token_ms": stats.decode_ms / stats.decode_tokens if stats.decode_tokens else 0.0,
        "predicted_per_second": stats.decode_tps,
        "ttft_ms": stats.ttft_ms,
        # speculative decoding (--draft), under llama-server's names
        **({"draft_n": stats.draft_tokens, "draft_n_accepted": stats.accepted_tokens} if stats.verify_passes else {}),
    }


def usage(stats: GenerationStats) -> dict[str, Any]:
    """OpenAI's usage; the prompt's tokens the engine reused from its KV cache (the earlier turns of a conversation)
    as ``prompt_tokens_details.cached_tokens``; the thinking's tokens (part of the completion's) under OpenAI's name
    when there was any."""
    out: dict[str, Any] = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
                           "total_tokens": stats.prompt_tokens + stats.generated_tokens,
                           "prompt_tokens_details": {"cached_tokens": stats.cached_tokens}}
    if stats.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": stats.reasoning_tokens}
    return out


def usage_of(dones: list[Done]) -> dict[str, Any]:
    """The usage of a request's choices: the prompt once (as OpenAI counts it; each choice read the same prompt, the
    later ones mostly from the KV cache), the completions' tokens summed."""
    out = usage(dones[0].stats)
    if len(dones) > 1:
        completion = sum(d.stats.generated_tokens for d in dones)
        reasoning = sum(d.stats.reasoning_tokens for d in dones)
        out.update(completion_tokens=completion, total_tokens=out["prompt_tokens"] + completion)
        if reasoning:
            out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


def engine_api_error(exc: Exception) -> ApiError:
    """The engine's typed errors as OpenAI errors: the request's fault is 400, the engine's 500/503."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, QueueFull):
        return ApiError(503, str(exc), type="server_error", code="queue_full", headers={"Retry-After": "1"})
    if isinstance(exc, RequestCancelled):  # nobody reads this answer; 499 is nginx's "client closed request"
        return ApiError(499, str(exc), code="cancelled")
    if isinstance(exc, ServerStopping):
        return ApiError(503, str(exc), type="server_error", code="server_stopping")
    if isinstance(exc, EngineCrashed):
        return ApiError(503, str(exc), type="server_error", code="engine_crashed")
    if isinstance(exc, EngineError):
        if exc.kind == "context":  # llama-server's words first ("exceeds the available context size")
            return ApiError(400, f"the request exceeds the available context size: {exc.message}; {exc.hint}, or "
                                 f"choose an overflow policy (\"quantdesk\": {{\"overflow\": \"drop-oldest\"}}: "
                                 f"{', '.join(OVERFLOW_POLICIES)})", param="messages",
                            code="context_length_exceeded")
        if exc.kind in ("settings", "request", "template", "image", "vision"):
            return ApiError(400, str(exc), code=exc.kind)
        return ApiError(500, str(exc), type="server_error", code=exc.kind)
    return ApiError(500, f"internal error: {type(exc).__name__}", type="server_error", code="internal")


def encode_vector(vector: list[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


class Shape:
    """The JSON of one endpoint's responses, whole and as chunks; ``index`` names a choice of a request's ``n``."""

    object_whole = ""
    object_chunk = ""
    id_prefix = ""

    def __init__(self, model: str, fingerprint: str = "") -> None:
        self.model = model
        self.id = f"{self.id_prefix}{secrets.token_hex(12)}"
        self.created = int(time.time())
        # The engine's build as llama-server sends it, "b<build>-<commit>" (the llama.cpp backend's details["build"],
        # backends/llama_cpp/load.py build_fingerprint), on every response and chunk; left out where the engine has
        # none to tell (MLX, a remote server), as OpenAI may leave it out.
        self._fingerprint = {"system_fingerprint": fingerprint} if fingerprint else {}

    def _head(self, obj: str) -> dict[str, Any]:
        """What every response and chunk starts with."""
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, **self._fingerprint}

    def _envelope(self, obj: str, choice: dict[str, Any], index: int = 0, **extra: Any) -> dict[str, Any]:
        return {**self._head(obj), "choices": [{"index": index, **choice}], **extra}

    def whole(self, done: Done) -> dict[str, Any]:
        return self.whole_choices([done], None)

    def whole_choices(self, dones: list[Done], logprobs: list[list[TokenLogprob]] | None) -> dict[str, Any]:
        """The whole response of a request's choices; ``logprobs``: each choice's tokens' when asked, else None."""
        choices = [{"index": i, **self.choice(done, logprobs[i] if logprobs is not None else None)}
                   for i, done in enumerate(dones)]
        return {**self._head(self.object_whole), "choices": choices, "usage": usage_of(dones),
                "timings": timings(dones[0].stats)}

    def choice(self, done: Done, logprobs: list[TokenLogprob] | None) -> dict[str, Any]:
        """One choice of the whole response, without its index."""
        raise NotImplementedError

    def opening(self, index: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def piece(self, token: Token, index: int = 0, logprobs: bool = False) -> dict[str, Any] | None:
        """The chunk for one engine event; None when it brings nothing to show (a token still held back).
        ``logprobs``: the request asked for them (a chunk then carries its tokens', an empty list for none)."""
        raise NotImplementedError

    def closing(self, done: Done, index: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def usage_chunk(self, stats: GenerationStats) -> dict[str, Any]:
        return {**self._head(self.object_chunk), "choices": [], "usage": usage(stats)}

    def usage_chunk_of(self, dones: list[Done]) -> dict[str, Any]:
        """The stream's last chunk (``include_usage``): the usage, and llama.cpp's timings as llama-server sends."""
        return {**self.usage_chunk(dones[0].stats), "usage": usage_of(dones), "timings": timings(dones[0].stats)}


def _chat_logprob(entry: TokenLogprob) -> dict[str, Any]:
    """OpenAI's ``logprobs.content[]`` entry of a chat completion."""
    return {"token": entry.token, "logprob": entry.logprob, "bytes": list(entry.bytes),
            "top_logprobs": [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in entry.top]}


def _chat_logprobs(entries: list[TokenLogprob] | tuple[TokenLogprob, ...]) -> dict[str, Any]:
    return {"content": [_chat_logprob(e) for e in entries], "refusal": None}


class ChatShape(Shape):
    object_whole = "chat.completion"
    object_chunk = "chat.completion.chunk"
    id_prefix = "chatcmpl-"

    def choice(self, done: Done, logprobs: list[TokenLogprob] | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": done.text}
        if done.reasoning:  # only when there was thinking, as llama-server
            message["reasoning_content"] = done.reasoning
        if done.tool_calls:
            message["content"] = done.text or None  # as OpenAI answers a reply that only calls tools
            message["tool_calls"] = [_tool_call_json(call) for call in done.tool_calls]
        return {"message": message, "logprobs": _chat_logprobs(logprobs) if logprobs is not None else None,
                "finish_reason": _finish_reason(done)}

    def opening(self, index: int = 0) -> dict[str, Any]:
        return self._chunk({"role": "assistant", "content": ""}, index)

    def _chunk(self, delta: dict[str, Any], index: int = 0, logprobs: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        return self._envelope(self.object_chunk, {"delta": delta, "logprobs": logprobs, "finish_reason": None}, index)

    def piece(self, token: Token, index: int = 0, logprobs: bool = False) -> dict[str, Any] | None:
        delta: dict[str, Any] = {}
        if token.reasoning:
            delta["reasoning_content"] = token.reasoning
        if token.text:
            delta["content"] = token.text
        if token.tool_calls:
            delta["tool_calls"] = _tool_call_deltas(token.tool_calls)
        if logprobs and (delta or token.logprobs):
            return self._chunk(delta, index, _chat_logprobs(token.logprobs))
        return self._chunk(delta, index) if delta else None

    def closing(self, done: Done, index: int = 0) -> dict[str, Any]:
        return self._envelope(self.object_chunk, {"delta": {}, "logprobs": None,
                                                  "finish_reason": _finish_reason(done)}, index,
                              timings=timings(done.stats))


def _tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _tool_call_deltas(deltas: tuple[ToolCallDelta, ...]) -> list[dict[str, Any]]:
    """OpenAI's streamed tool calls: a call's first delta has its index, id, type, name and the arguments so far;
    later ones its index and more arguments. One event's pieces of the same call go out as one."""
    out: list[dict[str, Any]] = []
    for delta in deltas:
        if out and out[-1]["index"] == delta.index and not delta.name:
            out[-1]["function"]["arguments"] += delta.arguments
        elif delta.name:
            out.append({"index": delta.index, "id": delta.id, "type": "function",
                        "function": {"name": delta.name, "arguments": delta.arguments}})
        else:
            out.append({"index": delta.index, "function": {"arguments": delta.arguments}})
    return out


def _finish_reason(done: Done) -> str:
    """tool_calls for a reply that called tools and ended there (one cut off at max_tokens says length), as
    llama-server and OpenAI."""
    if done.tool_calls and done.stats.stop_reason != "length":
        return "tool_calls"
    return _FINISH_REASONS[done.stats.stop_reason]


def _completion_logprobs(entries: list[TokenLogprob] | tuple[TokenLogprob, ...], offset: int = 0) -> dict[str, Any]:
    """The completions API's ``logprobs``: OpenAI's parallel lists (``text_offset`` counted in the completion's text,
    from ``offset``: what a stream sent before), and llama-server's ``content`` list (the chat shape) beside them."""
    offsets = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {"tokens": [e.token for e in entries], "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{t.token: t.logprob for t in e.top} for e in entries], "text_offset": offsets,
            "content": [_chat_logprob(e) for e in entries]}


class CompletionShape(Shape):
    object_whole = "text_completion"
    object_chunk = "text_completion"
    id_prefix = "cmpl-"

    def __init__(self, model: str, fingerprint: str = "") -> None:
        super().__init__(model, fingerprint)
        self._offsets: dict[int, int] = {}  # per choice, the text a stream's logprobs have covered so far

    def _choice(self, text: str, finish_reason: str | None, logprobs: dict[str, Any] | None = None
                ) -> dict[str, Any]:
        return {"text": text, "logprobs": logprobs, "finish_reason": finish_reason}

    def choice(self, done: Done, logprobs: list[TokenLogprob] | None) -> dict[str, Any]:
        return self._choice(done.text, _FINISH_REASONS[done.stats.stop_reason],
                            _completion_logprobs(logprobs) if logprobs is not None else None)

    def opening(self, index: int = 0) -> dict[str, Any]:
        return self._envelope(self.object_chunk, self._choice("", None), index)

    def piece(self, token: Token, index: int = 0, logprobs: bool = False) -> dict[str, Any] | None:
        if logprobs and (token.text or token.logprobs):
            offset = self._offsets.get(index, 0)
            self._offsets[index] = offset + sum(len(e.token) for e in token.logprobs)
            return self._envelope(self.object_chunk,
                                  self._choice(token.text, None, _completion_logprobs(token.logprobs, offset)), index)
        return self._envelope(self.object_chunk, self._choice(token.text, None), index) if token.text else None

    def closing(self, done: Done, index: int = 0) -> dict[str, Any]:
        return self._envelope(self.object_chunk, self._choice("", _FINISH_REASONS[done.stats.stop_reason]), index,
                              timings=timings(done.stats))
