"""The parent <-> engine-host wire format: one JSON object per line, typed at both ends.

Requests are the frozen dataclasses below, each tagged with its ``op``; events are the typed dataclasses
of backends.base (each tagged with its ``type``) plus the two the protocol itself needs, ``Hello`` and
``Unloaded``. Both cross as ``dataclasses.asdict`` and are rebuilt here into the same types.

The host serves the requests it reads one at a time, in order, and ends each with exactly one final
event (``Loaded``, ``Done``, ``Scored``, ``Embedded``, ``Reranked``, ``Counted``, ``StateSaved``, ``StateRestored``,
``Unloaded`` or an ``ErrorEvent``); every event
in between belongs to the request it serves. ``cancel`` is the exception: the host acts on it as it reads it and
answers nothing. The host's first line is a ``Hello`` with its ``PROTOCOL_VERSION``: a client and host
from different releases refuse each other with a sentence instead of misreading each other.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from app.records import known_fields
from app.datatypes import (Counted, DeviceLoad, Done, Embedded, ErrorEvent, Event, GenerationStats, Loaded,
                           LoadSettings, Message, Progress, Prompt, Reranked, SamplingSettings, Scored, StateRestored,
                           StateSaved, Token, TokenLogprob, ToolCallDelta, TopLogprob, WindowScoring)
from app.datatypes import ToolCall

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# 2: replies read through the chat format (Token.reasoning and tool_calls, Done's); scoring by windows (ScoreRequest)
# 3: counting a prompt's tokens (CountRequest, Counted); the prompt's and reused tokens on a reply's first Token
# 4: log-probabilities of a reply's tokens when asked (SamplingSettings.logprobs, Token.logprobs)
# 5: a conversation's state saved to and restored from disk (SaveStateRequest, RestoreStateRequest; StateSaved,
#    StateRestored)
# 6: passages scored for a question by a reranker (RerankRequest, Reranked)
# 7: llama.cpp's extra buffer types turned off on request (LoadSettings.extra_buffer_types); a load ends with a
#    warm-up decode, so a crashing kernel crashes the load (the crash guard, app/engine/guard.py)
# 8: the thinking's figures so far on every Token (reasoning_tokens, reasoning_ms, first_answer_ms)
PROTOCOL_VERSION = 8


# --- requests (parent -> host)


@dataclass(frozen=True)
class LoadRequest:
    id: str
    backend: str
    model_path: str
    settings: LoadSettings
    # Backend-specific construction options, e.g. the remote backend's endpoint with its key: they travel
    # over the host's private pipe, never through argv or the environment, which other processes can read.
    backend_options: dict[str, Any] = field(default_factory=dict)
    op: Literal["load"] = "load"


@dataclass(frozen=True)
class GenerateRequest:
    id: str
    prompt: Prompt  # messages go through the model's chat template; a string goes to the model as it is
    sampling: SamplingSettings
    # How often the host hands out the reply's tokens (None: the backend's own window, Backend.COALESCE_S). The
    # server asks for its stream's window: one event per SSE chunk, not one per token.
    events_every_s: float | None = None
    op: Literal["generate"] = "generate"


@dataclass(frozen=True)
class ScoreRequest:
    id: str
    text: str | None = None
    tokens: list[int] | None = None
    max_tokens: int | None = None
    windows: WindowScoring | None = None  # llama-perplexity's windows, writing or reading a reference (the lab)
    op: Literal["score"] = "score"


@dataclass(frozen=True)
class EmbedRequest:
    id: str
    texts: list[str]  # embedded together, as one batch where the context allows
    op: Literal["embed"] = "embed"


@dataclass(frozen=True)
class RerankRequest:
    """Each of ``texts`` scored for ``query`` by a loaded reranker (rank pooling), answered with a ``Reranked``."""

    id: str
    query: str
    texts: list[str]
    op: Literal["rerank"] = "rerank"


@dataclass(frozen=True)
class CountRequest:
    """How many tokens ``prompt`` is as a generation with ``sampling`` would render it (its tools, its thinking
    switch), answered with a ``Counted``; nothing is generated and the KV cache is left as it is."""

    id: str
    prompt: Prompt
    sampling: SamplingSettings
    op: Literal["count"] = "count"


@dataclass(frozen=True)
class SaveStateRequest:
    """Write the KV cache's state and the tokens it holds to ``path`` (a file the parent's state cache named),
    answered with a ``StateSaved``. In its turn: what the cache holds after the requests sent before."""

    id: str
    path: str
    op: Literal["save_state"] = "save_state"


@dataclass(frozen=True)
class RestoreStateRequest:
    """Of the saved states at ``paths``, bring back the one whose tokens share the longest prefix with ``prompt`` as
    a generation with ``sampling`` would tokenize it, if that beats the KV cache's own; answered with a
    ``StateRestored`` (which names the files refused, and why). Nothing is generated."""

    id: str
    paths: list[str]
    prompt: Prompt
    sampling: SamplingSettings
    op: Literal["restore_state"] = "restore_state"


@dataclass(frozen=True)
class CancelRequest:
    id: str  # a generation's id, running or not started yet; "*" for whichever runs now
    op: Literal["cancel"] = "cancel"


@dataclass(frozen=True)
class UnloadRequest:
    id: str
    op: Literal["unload"] = "unload"


@dataclass(frozen=True)
class ShutdownRequest:
    op: Literal["shutdown"] = "shutdown"


Request = (LoadRequest | GenerateRequest | ScoreRequest | EmbedRequest | RerankRequest | CountRequest
           | SaveStateRequest | RestoreStateRequest | CancelRequest | UnloadRequest | ShutdownRequest)
_REQUEST_TYPES: dict[str, type] = {cls.op: cls for cls in (LoadRequest, GenerateRequest, ScoreRequest, EmbedRequest,
                                                            RerankRequest, CountRequest, SaveStateRequest,
                                                            RestoreStateRequest, CancelRequest, UnloadRequest,
                                                            ShutdownRequest)}


# --- events of the protocol itself (host -> parent)


@dataclass(frozen=True)
class Hello:
    """The host's first line: which protocol it speaks, and its process id."""

    protocol: int
    pid: int
    type: Literal["hello"] = "hello"


@dataclass(frozen=True)
class Unloaded:
    request_id: str
    type: Literal["unloaded"] = "unloaded"


_EVENT_TYPES: dict[str, type] = {cls.type: cls for cls in (Loaded, Progress, Token, Done, ErrorEvent, Scored, Embedded,
                                                          Reranked, Counted, StateSaved, StateRestored, Hello,
                                                          Unloaded)}
# each request ends with exactly one of these
FINAL_EVENTS = (Loaded, Done, Scored, Embedded, Reranked, Counted, StateSaved, StateRestored, Unloaded, ErrorEvent)


class ProtocolMismatch(ValueError):
    """The other side speaks another protocol version."""


def encode(obj: Any) -> bytes:
    """A request or an event as one line of JSON."""
    payload = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else obj
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def wire(request: Request) -> dict[str, Any]:
    """A request as the plain dict that goes on the wire."""
    return dataclasses.asdict(request)


def decode_event(line: bytes) -> Event | Hello | Unloaded:
    data = json.loads(line)
    cls = _EVENT_TYPES.get(data.get("type"))
    if cls is None:
        raise ValueError(f"unknown engine event: {line[:200]!r}")
    if cls is Done:
        data["stats"] = GenerationStats(**data["stats"])
        data["tool_calls"] = tuple(ToolCall(**c) for c in data.get("tool_calls") or ())
    elif cls is Token:
        data["tool_calls"] = tuple(ToolCallDelta(**c) for c in data.get("tool_calls") or ())
        if data.get("logprobs"):
            data["logprobs"] = tuple(_token_logprob(e) for e in data["logprobs"])
    elif cls is Loaded:
        data["devices"] = tuple(DeviceLoad(**d) for d in data.get("devices", ()))
    elif cls is StateRestored:
        data["discarded"] = tuple((str(p), str(r)) for p, r in data.get("discarded") or ())
    event: Event | Hello | Unloaded = cls(**data)
    return event


def _token_logprob(entry: dict[str, Any]) -> TokenLogprob:
    top = tuple(TopLogprob(t["id"], t["token"], t["logprob"], tuple(t["bytes"])) for t in entry.get("top") or ())
    return TokenLogprob(entry["id"], entry["token"], entry["logprob"], tuple(entry["bytes"]), top)


def decode_request(line: bytes) -> Request:
    """One request line, typed; ValueError with the reason for a line that is not one."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"unreadable request {line[:200]!r}: {exc}") from None
    try:
        op = data.get("op") if isinstance(data, dict) else None
        cls = _REQUEST_TYPES.get(op) if isinstance(op, str) else None
        if cls is None:
            raise ValueError(f"unknown request {line[:200]!r}")
        values = known_fields(cls, data)
        if cls is LoadRequest:
            values["settings"] = settings_from_dict(LoadSettings, values.get("settings") or {})
        elif cls is GenerateRequest or cls is CountRequest or cls is RestoreStateRequest:
            values["sampling"] = settings_from_dict(SamplingSettings, values.get("sampling") or {})
            prompt: Any = values.get("prompt")  # JSON off the wire
            if not isinstance(prompt, str):
                values["prompt"] = [Message(m["role"], m["content"], tuple(m.get("images") or ()),
                                            tuple(m.get("tool_calls") or ()), m.get("tool_call_id", ""),
                                            m.get("name", ""), m.get("reasoning", "")) for m in prompt]
        elif cls is ScoreRequest and values.get("windows") is not None:
            values["windows"] = settings_from_dict(WindowScoring, values["windows"])
        request: Request = cls(**values)
        return request
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"unreadable request {line[:200]!r}: {type(exc).__name__}: {exc}") from None


def check_hello(event: Hello) -> Hello:
    """The host's Hello, if it speaks this protocol; ProtocolMismatch with the sentence if not."""
    if event.protocol != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"the engine host speaks protocol version {event.protocol}, "
                               f"this QuantDesk speaks version {PROTOCOL_VERSION}")
    return event


Settings = TypeVar("Settings", bound="DataclassInstance")


def settings_from_dict(cls: type[Settings], data: dict[str, Any]) -> Settings:
    values = known_fields(cls, data)
    for name in ("stop", "tools"):
        if name in values:
            values[name] = tuple(values[name])
    if "chat_template_kwargs" in values and not isinstance(values["chat_template_kwargs"], dict):
        raise TypeError("chat_template_kwargs must be an object")
    return cls(**values)
