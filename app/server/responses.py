"""OpenAI's Responses API (``POST /v1/responses``, ``GET`` and ``DELETE /v1/responses/{id}``) over the same router,
queue and engines as chat completions, so that clients written for it (the OpenAI Agents SDK, coding agents) work
locally.

A request becomes the same ``GenerationRequest`` a chat completion does, through the checks of app/server/params.py:
``input`` (a string, or input items: messages with ``input_text`` / ``input_image`` parts, earlier assistant messages,
``function_call`` and ``function_call_output`` items, ``reasoning`` items) and ``instructions`` become chat turns, as
llama-server converts them (tools/server/server-chat.cpp); function ``tools`` become chat tools, ``text.format``
a JSON schema held by the grammar (a strict schema the grammar cannot hold whole is refused, as for
``response_format``), ``max_output_tokens`` the reply's limit, ``reasoning.effort`` the thinking controls (``none``
turns thinking off; ``minimal`` reads as low and ``xhigh`` as high, the template's nearest), and llama-server's
sampling and thinking extras (``top_k``, ``min_p``, ``seed``, ``stop``, ``reasoning_budget_tokens``, ...) as they are
read for chat. A tool's ``strict`` is taken as chat's tools are: a forced call is held to its schema by the grammar,
an unforced one is read as the model wrote it.

The engine's reply (its thinking, answer and tool calls, read in the engine host) becomes output items, in that
order: a ``reasoning`` item (the thinking as ``reasoning_text``; a local model has no summary and no encrypted
content), a ``message`` with one ``output_text``, a ``function_call`` per call. A reply cut off at
``max_output_tokens`` is ``incomplete``. Streamed, it is OpenAI's sequence of named events, each with its
``sequence_number``: ``response.created``, ``response.in_progress``, then per item ``output_item.added``, its content
part, its deltas (``output_text.delta``, ``reasoning_text.delta``, ``function_call_arguments.delta``), their
``.done`` events and ``output_item.done``, and ``response.completed`` (or ``response.incomplete``; a failure after
the headers is ``response.failed``).

With ``store`` (the default) the response and the conversation it closes are kept (app/server/response_store.py),
so that ``previous_response_id`` goes on from it; one that is not there is a 404 in words. Errors are OpenAI's
``{"error": {...}}`` shape, as for every route here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.datatypes import Done, GenerationStats, Message, ModelSampling, SamplingSettings, Token, ToolCallDelta
from app.server.params import (MAX_IMAGES, MAX_MESSAGES, REASONING_EFFORTS, ApiError, GenerationRequest, _flag,
                               _image, _integer, _refuse_unsupported, _sampling, _shown, _thinking,
                               bad_param, check_model, checked_schema, documents_choice, json_arguments,
                               overflow_choice, parse_tools, with_tools)
from app.server.response_store import ResponseStore, StoredResponse
from app.server.transport import _closer, _EventStream, read_body
from app.server.turns import defaults, quantdesk_field

if TYPE_CHECKING:
    from app.engine.turn import ModelDefaults
    from app.server.documents import Cited
    from app.server.turns import Overflow
    from app.server.engine_queue import Job
    from app.server.router import Lease


class Serving(Protocol):
    """What these routes use of app/server/app.py's ``OpenAIServer`` (which registers them, so this module names it
    by what it does, not by import): a request's engine leased, a generation started, its next event."""

    async def _engine_for(self, body: dict[str, Any]) -> Lease: ...

    async def start_job(self, request: Request, lease: Lease, parsed: GenerationRequest
                        ) -> tuple[Job, Token | Done, asyncio.Task[None]]: ...

    async def next_event(self, job: Job) -> Token | Done: ...

    async def turn(self, request: Request, lease: Lease, parsed: GenerationRequest, model: ModelDefaults,
                   overflow: str | None = None) -> tuple[GenerationRequest, Overflow | None, Cited | None]: ...

# OpenAI's efforts beyond the ones chat templates read, as the nearest of those
_EFFORTS = {**{e: e for e in REASONING_EFFORTS}, "minimal": "low", "xhigh": "high"}
_INPUT_ROLES = {"user": "user", "system": "system", "developer": "system"}
# llama-server's extras a Responses body may carry, read as chat completions read them
_SAMPLING_EXTRAS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "seed", "stop")
_THINKING_EXTRAS = ("chat_template_kwargs", "reasoning_format", "reasoning_budget_tokens", "thinking_budget_tokens",
                    "reasoning_budget_message")


@dataclass(frozen=True)
class ResponsesRequest:
    """A Responses request, checked: what the engine is asked, and what the response repeats and keeps."""

    generation: GenerationRequest
    conversation: tuple[Message, ...]  # the turns before the reply, without the instructions: what a store keeps
    echo: dict[str, Any]  # the request's settings as the response object repeats them
    store: bool


# --- the request ---


def _input_content(content: Any, where: str, sees_images: bool) -> tuple[str, tuple[str, ...]]:
    """An input message's text and images: a string, or ``input_text`` and ``input_image`` parts."""
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise bad_param(f"{where}.content", "content must be a string or a list of input_text and input_image parts",
                        "invalid_type")
    texts, found = [], []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "input_image":
            if not sees_images:  # said before any decoding
                raise bad_param(at, "the model served here does not see images (it was loaded without a vision "
                                    "projector)", "model_without_vision")
            if part.get("image_url") is None:
                raise bad_param(at, "this server keeps no files: send the image itself in image_url as a data: URL "
                                    "(data:image/png;base64,...)", "unsupported_image_url")
            found.append(_image(part, at))
        elif kind == "input_file":
            raise bad_param(at, "input_file parts are not supported here: send the file's text as input_text",
                            "unsupported_content")
        else:
            raise bad_param(at, "content parts must be input_text or input_image parts", "unsupported_content")
    return "".join(texts), tuple(found)


def _output_content(content: Any, where: str) -> str:
    """An earlier assistant message's text: a string, or ``output_text`` (or ``input_text``) and ``refusal`` parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_param(f"{where}.content", "an assistant message's content must be a string or a list of "
                                            "output_text parts", "invalid_type")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("output_text", "input_text") and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise bad_param(f"{where}.content[{j}]", "an assistant message's parts must be output_text or refusal "
                                                     "parts", "unsupported_content")
    return "".join(texts)


def _onto_assistant(turns: list[Message], *, text: str = "", call: dict[str, Any] | None = None,
                    reasoning: str = "") -> None:
    """Add to the assistant turn that ends ``turns``, or start one: a reply's reasoning, message and calls are
    separate items in the Responses API and one turn in a chat template (as llama-server merges them)."""
    if not turns or turns[-1].role != "assistant":
        turns.append(Message("assistant", ""))
    last = turns[-1]
    turns[-1] = dataclasses.replace(last, content=last.content + text, reasoning=last.reasoning + reasoning,
                                    tool_calls=last.tool_calls + ((call,) if call else ()))


def _string_field(item: dict[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise bad_param(f"{where}.{name}", f"a {item.get('type')} item needs its {name} as a string", "invalid_type")
    return value


def _call_name(turns: list[Message], call_id: str) -> str | None:
    """The function of the call ``call_id`` among the turns so far; None when no turn made that call."""
    for turn in reversed(turns):
        for call in turn.tool_calls:
            if call.get("id") == call_id:
                return str(call["function"]["name"])
    return None


def _add_item(turns: list[Message], item: Any, where: str, sees_images: bool) -> None:
    if not isinstance(item, dict):
        raise bad_param(where, "each input item must be an object", "invalid_type")
    kind = item.get("type", "message")  # an easy input message ({"role", "content"}) has no type
    if kind == "message":
        role = item.get("role")
        if role == "assistant":
            _onto_assistant(turns, text=_output_content(item.get("content"), where))
        elif isinstance(role, str) and role in _INPUT_ROLES:
            text, found = _input_content(item.get("content"), where, sees_images)
            turns.append(Message(_INPUT_ROLES[role], text, found))
        else:
            raise bad_param(f"{where}.role", f"role must be user, system, developer or assistant, not "
                                             f"{_shown(role)}")
    elif kind == "function_call":
        arguments = json_arguments(item.get("arguments", ""), f"{where}.arguments")
        _onto_assistant(turns, call={"id": _string_field(item, "call_id", where), "type": "function",
                                     "function": {"name": _string_field(item, "name", where),
                                                  "arguments": arguments}})
    elif kind == "function_call_output":
        call_id = _string_field(item, "call_id", where)
        called = _call_name(turns, call_id)
        if called is None:  # OpenAI refuses it too: a template cannot place an answer to no call
            raise bad_param(f"{where}.call_id", f"no function_call with call_id {call_id[:64]!r} comes before this "
                                                "output (in the input, or the previous response)")
        output = item.get("output")
        if isinstance(output, list):
            if not all(isinstance(p, dict) and p.get("type") == "input_text" and isinstance(p.get("text"), str)
                       for p in output):
                raise bad_param(f"{where}.output", "a function's output must be a string or input_text parts",
                                "unsupported_content")
            output = "".join(p["text"] for p in output)
        if not isinstance(output, str):
            raise bad_param(f"{where}.output", "a function_call_output needs its output as a string", "invalid_type")
        turns.append(Message("tool", output, tool_call_id=call_id, name=called))
    elif kind == "reasoning":
        parts = item.get("content") or item.get("summary") or []  # the text itself, else its summary
        if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str)
                                                  for p in parts):
            raise bad_param(where, "a reasoning item's content and summary are lists of parts with text",
                            "invalid_type")
        if any(p["text"] for p in parts):  # an empty one (encrypted content only) adds no turn
            _onto_assistant(turns, reasoning="".join(p["text"] for p in parts))
    elif kind == "item_reference":
        raise bad_param(f"{where}.type", "item references are not supported here: send the item itself, or go on "
                                         "from a stored response with previous_response_id", "unsupported_content")
    else:
        raise bad_param(f"{where}.type", f"{_shown(kind)} input items are not supported here (message, "
                                         "function_call, function_call_output and reasoning are)",
                        "unsupported_content")


def input_turns(value: Any, sees_images: bool, before: tuple[Message, ...] = ()) -> list[Message]:
    """``input`` as chat turns after ``before`` (a previous response's conversation)."""
    turns = list(before)
    if isinstance(value, str):
        turns.append(Message("user", value))
        return turns
    if not isinstance(value, list) or not value:
        raise bad_param("input", "input must be a string or a non-empty list of input items", "invalid_type")
    if len(value) > MAX_MESSAGES:
        raise bad_param("input", f"at most {MAX_MESSAGES} input items are accepted")
    for i, item in enumerate(value):
        _add_item(turns, item, f"input[{i}]", sees_images)
    return turns


def _tools(body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The function tools, as chat takes them and as the response repeats them."""
    tools = body.get("tools")
    if tools is None:
        return [], []
    if not isinstance(tools, list):
        raise bad_param("tools", "tools must be a list", "invalid_type")
    as_chat, echoed = [], []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or kind != "function":
            raise bad_param(f"tools[{i}]", f"only function tools ({{\"type\": \"function\", \"name\", \"parameters\"}})"
                                           f" are supported here, not {_shown(kind)}: OpenAI's hosted tools run on "
                                           "OpenAI's servers", "unsupported_parameter")
        strict = _flag(tool, "strict", True)  # the Responses API's default, as llama-server takes it
        function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
        as_chat.append({"type": "function", "function": function})
        echoed.append({"type": "function", **function, "strict": strict})
    try:
        return parse_tools(as_chat), echoed
    except ApiError as exc:  # its names are chat's (tools[0].function.name): say the Responses API's
        exc.param = exc.param.replace(".function", "") if exc.param else exc.param
        raise


def _tool_choice(body: dict[str, Any], tools: list[dict[str, Any]]) -> str:
    """"auto", "none", "required", or the name of the one function to call (``{"type": "function", "name"}``)."""
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":  # comparisons only: a list or an object is never hashed
        return "auto"
    if choice in ("none", "required"):
        return str(choice)
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = choice.get("name")
        if not isinstance(name, str) or name not in {t["function"]["name"] for t in tools}:
            raise bad_param("tool_choice", f"tool_choice names {str(name)[:64]!r}, which is not among the tools")
        return name
    raise bad_param("tool_choice", 'tool_choice must be "none", "auto", "required" or '
                                   '{"type": "function", "name": ...}')


def _text_format(body: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The JSON schema ``text.format`` asks for (None for text), and the format as the response repeats it."""
    text = body.get("text")
    if text is None:
        return None, {"type": "text"}
    if not isinstance(text, dict):
        raise bad_param("text", "text must be an object", "invalid_type")
    fmt = text.get("format")
    if fmt is None:
        return None, {"type": "text"}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None, {"type": "text"}
    if kind == "json_object":
        return {"type": "object"}, {"type": "json_object"}
    if kind == "json_schema":
        if "schema" not in fmt:
            raise bad_param("text.format.schema", "a json_schema format needs its schema", "missing_parameter")
        strict = _flag(fmt, "strict", False)
        schema = checked_schema(fmt["schema"], "text.format.schema", strict=strict)
        return schema, {**fmt, "strict": strict}
    raise bad_param("text.format", 'text.format type must be "text", "json_object" or "json_schema"')


def _reasoning(body: dict[str, Any], sampling: SamplingSettings) -> tuple[SamplingSettings, dict[str, Any] | None]:
    """``reasoning.effort`` and llama-server's thinking extras through chat's thinking controls."""
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, dict):
        raise bad_param("reasoning", "reasoning must be an object", "invalid_type")
    effort = (reasoning or {}).get("effort")
    if effort is not None and (not isinstance(effort, str) or effort not in _EFFORTS):
        raise bad_param("reasoning.effort", f"reasoning.effort must be one of {', '.join(_EFFORTS)}, not "
                                            f"{_shown(effort)}")
    summary = (reasoning or {}).get("summary")
    if summary not in (None, "auto", "concise", "detailed"):  # comparisons only: a list is never hashed
        raise bad_param("reasoning.summary", f'reasoning.summary must be "auto", "concise" or "detailed", not '
                                             f"{_shown(summary)} (a local model's reasoning comes whole, as "
                                             "reasoning_text, not summed up)")
    chat = {name: body[name] for name in _THINKING_EXTRAS if name in body}
    if effort is not None:
        chat["reasoning_effort"] = _EFFORTS[effort]
    echoed = {"effort": effort, "summary": summary} if reasoning is not None else None
    return _thinking(chat, sampling), echoed


def _max_output_tokens(body: dict[str, Any], n_ctx: int) -> int | None:
    value = _integer(body, "max_output_tokens", None)
    if value is not None and not 1 <= value <= n_ctx:
        raise bad_param("max_output_tokens", f"max_output_tokens must be between 1 and {n_ctx} (the context "
                                             f"length), not {value}")
    return value


def _metadata(body: dict[str, Any]) -> dict[str, str] | None:
    metadata = body.get("metadata")
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or len(metadata) > 16 or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512 for k, v in metadata.items()):
        raise bad_param("metadata", "metadata is at most 16 string keys (up to 64 characters) with string values "
                                    "(up to 512)", "invalid_type")
    return metadata


def previous_response_id(body: dict[str, Any]) -> str | None:
    value = body.get("previous_response_id")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise bad_param("previous_response_id", "previous_response_id must be a response's id (resp_...)",
                        "invalid_type")
    return value


def parse_responses(body: dict[str, Any], *, served_id: str, n_ctx: int, sees_images: bool = False,
                    takes_tools: bool = False, recommended: ModelSampling | None = None,
                    preset: dict[str, Any] | None = None, previous: StoredResponse | None = None
                    ) -> ResponsesRequest:
    """``sees_images``, ``takes_tools``, ``recommended``, ``preset``: as for ``params.parse_chat``; ``previous``: the
    stored response ``previous_response_id`` names (looked up by the caller). ``truncation: "auto"`` is OpenAI's
    dropping of the oldest items: the overflow policy drop-oldest."""
    check_model(body, served_id)
    _refuse_unsupported(body, {"background": False, "conversation": None, "prompt": None, "top_logprobs": 0})
    truncation = body.get("truncation")
    if truncation not in (None, "disabled", "auto"):
        raise bad_param("truncation", 'truncation is "disabled" (an input longer than the context is refused, unless '
                                      'the request or the server names an overflow policy) or "auto" (the oldest '
                                      "items are left out)", "invalid_value")
    if "input" not in body:
        raise bad_param("input", "input is required", "missing_parameter")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_param("instructions", "instructions must be a string", "invalid_type")
    conversation = input_turns(body["input"], sees_images, previous.conversation if previous else ())
    messages = ([Message("system", instructions)] if instructions else []) + conversation
    n_images = 0
    for message in messages:
        n_images += len(message.images)
        if n_images > MAX_IMAGES:
            raise bad_param("input", f"at most {MAX_IMAGES} images are accepted in one request", "too_many_images")
    max_output = _max_output_tokens(body, n_ctx)
    store = _flag(body, "store", True)
    stream = _flag(body, "stream")
    parallel = _flag(body, "parallel_tool_calls", True)
    schema, text_format = _text_format(body)
    sampling = _sampling({**{name: body.get(name) for name in _SAMPLING_EXTRAS}, "max_tokens": max_output or n_ctx},
                         n_ctx, n_ctx, recommended, preset)
    sampling = dataclasses.replace(sampling, json_schema=schema, parallel_tool_calls=parallel)
    tools, echoed_tools = _tools(body)
    choice = _tool_choice(body, tools)  # checked with no tools too: the response repeats it
    sampling = with_tools(sampling, tools, choice if tools else "auto", takes_tools)
    sampling, reasoning = _reasoning(body, sampling)
    echo = {"instructions": instructions, "max_output_tokens": max_output, "metadata": _metadata(body),
            "parallel_tool_calls": parallel, "previous_response_id": previous_response_id(body),
            "reasoning": reasoning, "store": store, "temperature": sampling.temperature,
            "text": {"format": text_format}, "tool_choice": body.get("tool_choice") or "auto",
            "tools": echoed_tools, "top_p": sampling.top_p, "truncation": truncation or "disabled",
            "user": body.get("user") if isinstance(body.get("user"), str) else None}
    overflow = "drop-oldest" if truncation == "auto" else overflow_choice(body)
    return ResponsesRequest(GenerationRequest(messages, sampling, stream, False, overflow=overflow,
                                              documents=documents_choice(body)), tuple(conversation), echo, store)


# --- the response ---


def response_usage(stats: GenerationStats) -> dict[str, Any]:
    """The Responses API's usage: input tokens with those reused from the KV cache among them, output tokens with
    the thinking's among them."""
    return {"input_tokens": stats.prompt_tokens,
            "input_tokens_details": {"cached_tokens": min(stats.cached_tokens, stats.prompt_tokens)},
            "output_tokens": stats.generated_tokens,
            "output_tokens_details": {"reasoning_tokens": stats.reasoning_tokens},
            "total_tokens": stats.prompt_tokens + stats.generated_tokens}


def _arguments_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object a chat template takes back; arguments that are none (a call cut off at
    max_output_tokens) give an empty one."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def reply_turn(done: Done) -> Message:
    """The reply as the assistant turn a later request goes on from."""
    calls = tuple({"id": call.id, "type": "function",
                   "function": {"name": call.name, "arguments": _arguments_object(call.arguments)}}
                  for call in done.tool_calls)
    return Message("assistant", done.text, tool_calls=calls, reasoning=done.reasoning)


class _Item:
    """One output item as it is streamed: its kind, its place in ``output`` and what it holds so far."""

    def __init__(self, kind: str, index: int, item_id: str, call: ToolCallDelta | None = None) -> None:
        self.kind, self.index, self.id = kind, index, item_id
        self.text = ""  # the message's text, the reasoning, or the call's arguments
        self.call_id = call.id if call else ""
        self.name = call.name if call else ""

    def json(self, status: str) -> dict[str, Any]:
        if self.kind == "reasoning":
            content = [{"type": "reasoning_text", "text": self.text}] if status != "in_progress" else []
            return {"id": self.id, "type": "reasoning", "summary": [], "content": content, "status": status}
        if self.kind == "message":
            content = [_output_text(self.text)] if status != "in_progress" else []
            return {"id": self.id, "type": "message", "role": "assistant", "status": status, "content": content}
        return {"id": self.id, "type": "function_call", "call_id": self.call_id, "name": self.name,
                "arguments": self.text if status != "in_progress" else "", "status": status}


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


class ResponseShape:
    """A response, whole or as its stream of events: one machine for both, so that a stream's items are the whole
    response's, ids included."""

    def __init__(self, model: str, request: ResponsesRequest) -> None:
        self.model = model
        self.echo = request.echo
        self.id = f"resp_{secrets.token_hex(24)}"
        self.created_at = int(time.time())
        self.items: list[_Item] = []
        self.open: _Item | None = None
        self.calls: dict[int, _Item] = {}  # an engine tool call's index -> its item
        self.sequence = 0

    def response(self, status: str, usage: dict[str, Any] | None = None,
                 error: dict[str, Any] | None = None) -> dict[str, Any]:
        finished = status in ("completed", "incomplete")
        output = [item.json("incomplete" if status == "incomplete" and item is self.items[-1] else "completed")
                  for item in self.items] if finished else []
        return {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
                "completed_at": int(time.time()) if finished else None, "model": self.model, "output": output,
                "error": error, "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete"
                else None, "usage": usage, **self.echo}

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _start(self, kind: str, item_id: str, call: ToolCallDelta | None = None) -> list[dict[str, Any]]:
        out = self._close()
        item = _Item(kind, len(self.items), item_id, call)
        self.items.append(item)
        self.open = item
        out.append(self._event("response.output_item.added", output_index=item.index, item=item.json("in_progress")))
        if kind == "message":
            out.append(self._event("response.content_part.added", item_id=item.id, output_index=item.index,
                                   content_index=0, part=_output_text("")))
        elif kind == "reasoning":
            out.append(self._event("response.content_part.added", item_id=item.id, output_index=item.index,
                                   content_index=0, part={"type": "reasoning_text", "text": ""}))
        return out

    def _close(self, status: str = "completed") -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if item is None:
            return []
        where = {"item_id": item.id, "output_index": item.index}
        if item.kind == "message":
            out = [self._event("response.output_text.done", **where, content_index=0, text=item.text, logprobs=[]),
                   self._event("response.content_part.done", **where, content_index=0, part=_output_text(item.text))]
        elif item.kind == "reasoning":
            part = {"type": "reasoning_text", "text": item.text}
            out = [self._event("response.reasoning_text.done", **where, content_index=0, text=item.text),
                   self._event("response.content_part.done", **where, content_index=0, part=part)]
        else:
            out = [self._event("response.function_call_arguments.done", **where, name=item.name,
                               arguments=item.text)]
        out.append(self._event("response.output_item.done", output_index=item.index, item=item.json(status)))
        return out

    def feed(self, token: Token) -> list[dict[str, Any]]:
        """The events for one engine event."""
        out: list[dict[str, Any]] = []
        if token.reasoning:
            if self.open is None or self.open.kind != "reasoning":
                out += self._start("reasoning", f"rs_{secrets.token_hex(24)}")
            assert self.open is not None
            self.open.text += token.reasoning
            out.append(self._event("response.reasoning_text.delta", item_id=self.open.id,
                                   output_index=self.open.index, content_index=0, delta=token.reasoning))
        if token.text:
            if self.open is None or self.open.kind != "message":
                out += self._start("message", f"msg_{secrets.token_hex(24)}")
            assert self.open is not None
            self.open.text += token.text
            out.append(self._event("response.output_text.delta", item_id=self.open.id, output_index=self.open.index,
                                   content_index=0, delta=token.text, logprobs=[]))
        for delta in token.tool_calls:
            if delta.index not in self.calls:  # a call's first delta has its id and name
                out += self._start("function_call", f"fc_{delta.id.removeprefix('call_')}", delta)
                assert self.open is not None
                self.calls[delta.index] = self.open
            item = self.calls[delta.index]
            item.text += delta.arguments
            if delta.arguments and item is self.open:
                out.append(self._event("response.function_call_arguments.delta", item_id=item.id,
                                       output_index=item.index, delta=delta.arguments))
        return out

    def finish(self, done: Done) -> list[dict[str, Any]]:
        """The events that close the reply: what the engine's tokens did not bring (a call only its Done has), the
        open item's end, an empty message for a reply with nothing at all, and response.completed (or incomplete)."""
        out: list[dict[str, Any]] = []
        # The engine's tokens add up to its Done; a remote engine's may not have brought every piece.
        streamed = {kind: "".join(i.text for i in self.items if i.kind == kind) for kind in ("reasoning", "message")}
        rest = {kind: whole[len(streamed[kind]):] if whole.startswith(streamed[kind]) else ""
                for kind, whole in (("reasoning", done.reasoning), ("message", done.text))}
        if rest["reasoning"] or rest["message"]:
            out += self.feed(Token(done.request_id, rest["message"], 0.0, count=0, reasoning=rest["reasoning"]))
        for i, call in enumerate(done.tool_calls):
            if i not in self.calls:
                out += self.feed(Token(done.request_id, "", 0.0, count=0, tool_calls=(
                    ToolCallDelta(i, call.id, call.name, call.arguments),)))
            self.calls[i].text = call.arguments  # the engine's reading of the whole call is the one kept
        if not self.items:
            out += self._start("message", f"msg_{secrets.token_hex(24)}")
        status = "incomplete" if done.stats.stop_reason == "length" else "completed"
        out += self._close(status)  # the item cut off is the last one
        out.append(self._event(f"response.{status}", response=self.response(status, response_usage(done.stats))))
        return out

    def whole(self, done: Done) -> dict[str, Any]:
        response: dict[str, Any] = self.finish(done)[-1]["response"]
        return response

    async def stream(self, first: Token | Done, next_event: Callable[[], Awaitable[Token | Done]],
                     on_done: Callable[[dict[str, Any], Done], Awaitable[None]]) -> AsyncIterator[bytes]:
        """The events as the engine's events come; ``on_done`` is given the finished response (to store it)."""
        yield _sse(self._event("response.created", response=self.response("in_progress")))
        yield _sse(self._event("response.in_progress", response=self.response("in_progress")))
        event = first
        while isinstance(event, Token):
            for payload in self.feed(event):
                yield _sse(payload)
            try:
                event = await next_event()
            except ApiError as exc:  # headers are sent: the response fails in the stream, as OpenAI's does
                yield _sse(self._event("response.failed", response=self.response(
                    "failed", error={"code": "server_error", "message": exc.message})))
                return
        closing = self.finish(event)
        await on_done(closing[-1]["response"], event)  # stored before the client hears it is over
        for payload in closing:
            yield _sse(payload)


def _sse(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


# --- the routes ---

log = logging.getLogger(__name__)


def _store_error(exc: Exception) -> ApiError:
    return ApiError(500, f"the stored responses cannot be read or written here ({exc}): requests with store: false "
                         "and without previous_response_id still work", type="server_error", code="store_unavailable")


class ResponsesApi:
    """The routes, over ``server``'s router and queues; ``store`` made at its first use when not given (the user
    data folder, the retention period of the app's settings)."""

    def __init__(self, server: Serving, store: ResponseStore | None = None) -> None:
        self.server = server
        self._store = store
        self._owned = store is None  # a store it opened itself it closes with the server; a given one is the giver's
        self._lock = asyncio.Lock()

    async def store(self) -> ResponseStore:
        async with self._lock:
            if self._store is None:
                from app import settings
                retention = settings.load().responses_retention_days
                try:
                    self._store = await asyncio.to_thread(lambda: ResponseStore(retention_days=retention))
                except (sqlite3.Error, OSError) as exc:
                    raise _store_error(exc) from None
            return self._store

    def close(self) -> None:
        if self._owned and self._store is not None:
            self._store.close()
            self._store = None

    async def _stored(self, response_id: str, param: str | None = None) -> StoredResponse:
        store = await self.store()
        try:
            found = await asyncio.to_thread(store.get, response_id)
        except sqlite3.Error as exc:
            raise _store_error(exc) from None
        if found is None:
            days = round(store.retention_s / 86_400)
            raise ApiError(404, f"there is no stored response {response_id[:80]!r} here: it was deleted, made with "
                                f"store: false, is older than {days} days, or never existed", param=param,
                           code="response_not_found")
        return found

    async def create(self, request: Request) -> Response:
        body = await read_body(request)
        previous_id = previous_response_id(body)
        previous = await self._stored(previous_id, "previous_response_id") if previous_id else None
        server = self.server
        lease = await server._engine_for(body)
        try:
            details = lease.loaded.details
            model = await defaults(lease)
            # In a worker thread, as chat's: images are decoded.
            parsed = await asyncio.to_thread(lambda: parse_responses(
                body, served_id=lease.served, n_ctx=lease.loaded.n_ctx, sees_images="vision" in details,
                takes_tools=bool(details.get("tool_format")), recommended=model.recommended,
                preset=model.preset_sampling, previous=previous))
            # As a chat completion's turn: the preset's system prompt, the overflow policy and the documents' passages
            # in what the engine reads (the stored conversation keeps the input as sent); what they did in every
            # response object's quantdesk field (a stream's first) and the headers
            generation, report, cited = await server.turn(request, lease, parsed.generation, model)
            extra = quantdesk_field(report, cited)
            parsed = dataclasses.replace(parsed, generation=generation,
                                         echo={**parsed.echo, "quantdesk": extra} if extra else parsed.echo)
            job, first, watcher = await server.start_job(request, lease, parsed.generation)
        except BaseException:
            lease.release()
            raise
        shape = ResponseShape(lease.served, parsed)

        async def keep(response: dict[str, Any], done: Done) -> None:
            if not parsed.store:
                return
            try:
                store = await self.store()
                await asyncio.to_thread(store.put, response["id"], response,
                                        [*parsed.conversation, reply_turn(done)])
            except (ApiError, sqlite3.Error, OSError) as exc:  # the answer is made: it goes out all the same
                log.warning("the response %s was answered but not stored: %s", response["id"], exc)

        if parsed.generation.stream:
            return _EventStream(shape.stream(first, lambda: server.next_event(job), keep),
                                _closer(watcher, job, lease), report.headers() if report else None)
        try:
            event = first
            while not isinstance(event, Done):
                event = await server.next_event(job)
        finally:
            watcher.cancel()
            job.cancel()
            lease.release()
        response = shape.whole(event)
        await keep(response, event)
        return JSONResponse(response, headers=report.headers() if report else None)

    async def retrieve(self, request: Request) -> Response:
        return JSONResponse((await self._stored(request.path_params["response_id"])).response)

    async def delete(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        store = await self.store()
        try:
            deleted = await asyncio.to_thread(store.delete, response_id)
        except sqlite3.Error as exc:
            raise _store_error(exc) from None
        if not deleted:
            await self._stored(response_id)  # the 404, in its words
        return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})
