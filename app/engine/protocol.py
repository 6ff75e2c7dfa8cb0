"""The parent <-> engine-host wire format: one JSON object per line, typed at both ends, and the table of its requests.

Requests are the frozen dataclasses below, each tagged with its ``op``; events are the typed dataclasses of
app/datatypes.py (each tagged with its ``type``) plus the two the protocol itself needs, ``Hello`` and ``Unloaded``.
Both cross as plain dicts (``dataclasses.asdict``'s, made without its copies) and are rebuilt into the same types by
one reader driven by their fields' annotations (``from_wire``): no type has a decoder of its own, keys a type does not
know are left out, and a value of the wrong kind is refused with its field's name.

``TABLE`` names each request that is answered, once: its class (whose ``Asks[...]`` base is the event that answers
it), the client's words for a host that dies under it, and for a plain request the Backend call that serves it. The
host serves the plain requests from the table (app/engine/host.py: load, generate, score and unload are its own), the
client and the pool send them with one generic ``call`` (app/engine/client.py). A new request is its answer event in
app/datatypes.py, its request and its row here, and the Backend method that serves it; PROTOCOL_VERSION goes up
(tests/engine/test_protocol.py round-trips every type and holds the version to the types' fingerprint).

The host serves the requests it reads one at a time, in order, and ends each with exactly one final event (its
answer, or an ``ErrorEvent``); every event in between belongs to the request it serves. ``cancel`` is the exception:
the host acts on it as it reads it and answers nothing, as ``shutdown``. The host's first line is a ``Hello`` with its
``PROTOCOL_VERSION``: a client and host from different releases refuse each other with a sentence instead of
misreading each other.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import json
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from app.datatypes import (Counted, Done, Embedded, ErrorEvent, Event, Loaded, LoadSettings, Progress, Prompt, Reranked,
                           SamplingSettings, Scored, StateRestored, StateSaved, Token, WindowScoring)
from app.records import known_fields

if TYPE_CHECKING:
    from backends.base import Backend

# 2: replies read through the chat format (Token.reasoning and tool_calls, Done's); scoring by windows (ScoreRequest)
# 3: counting a prompt's tokens (CountRequest, Counted); the prompt's and reused tokens on a reply's first Token
# 4: log-probabilities of a reply's tokens when asked (SamplingSettings.logprobs, Token.logprobs)
# 5: a conversation's state saved to and restored from disk (SaveStateRequest, RestoreStateRequest; StateSaved,
#    StateRestored)
# 6: passages scored for a question by a reranker (RerankRequest, Reranked)
# 7: llama.cpp's extra buffer types turned off on request (LoadSettings.extra_buffer_types); a load ends with a
#    warm-up decode, so a crashing kernel crashes the load (the crash guard, app/engine/guard.py)
# 8: the thinking's figures so far on every Token (reasoning_tokens, reasoning_ms, first_answer_ms)
# 9: where a batching engine keeps the state of a sequence another conversation takes (RestoreStateRequest.evict_to)
PROTOCOL_VERSION = 9

A = TypeVar("A")  # the event that answers a request
T = TypeVar("T")


class Asks(Generic[A]):
    """A request the host answers with exactly one ``A`` (or an ``ErrorEvent``), the ``Progress`` of a long one on the
    way; a generation's ``Token`` events come before its ``Done``."""

    id: str
    op: str


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


# --- requests (parent -> host)


@dataclass(frozen=True)
class LoadRequest(Asks[Loaded]):
    id: str
    backend: str
    model_path: str
    settings: LoadSettings
    # Backend-specific construction options, e.g. the remote backend's endpoint with its key: they travel
    # over the host's private pipe, never through argv or the environment, which other processes can read.
    backend_options: dict[str, Any] = field(default_factory=dict)
    op: Literal["load"] = "load"


@dataclass(frozen=True)
class GenerateRequest(Asks[Done]):
    id: str
    prompt: Prompt  # messages go through the model's chat template; a string goes to the model as it is
    sampling: SamplingSettings
    # How often the host hands out the reply's tokens (None: the backend's own window, Backend.COALESCE_S). The
    # server asks for its stream's window: one event per SSE chunk, not one per token.
    events_every_s: float | None = None
    op: Literal["generate"] = "generate"


@dataclass(frozen=True)
class ScoreRequest(Asks[Scored]):
    id: str
    text: str | None = None
    tokens: list[int] | None = None
    max_tokens: int | None = None
    windows: WindowScoring | None = None  # llama-perplexity's windows, writing or reading a reference (the lab)
    op: Literal["score"] = "score"


@dataclass(frozen=True)
class EmbedRequest(Asks[Embedded]):
    id: str
    texts: list[str]  # embedded together, as one batch where the context allows
    op: Literal["embed"] = "embed"


@dataclass(frozen=True)
class RerankRequest(Asks[Reranked]):
    """Each of ``texts`` scored for ``query`` by a loaded reranker (rank pooling), answered with a ``Reranked``."""

    id: str
    query: str
    texts: list[str]
    op: Literal["rerank"] = "rerank"


@dataclass(frozen=True)
class CountRequest(Asks[Counted]):
    """How many tokens ``prompt`` is as a generation with ``sampling`` would render it (its tools, its thinking
    switch), answered with a ``Counted``; nothing is generated and the KV cache is left as it is."""

    id: str
    prompt: Prompt
    sampling: SamplingSettings
    op: Literal["count"] = "count"


@dataclass(frozen=True)
class SaveStateRequest(Asks[StateSaved]):
    """Write the KV cache's state and the tokens it holds to ``path`` (a file the parent's state cache named),
    answered with a ``StateSaved``. In its turn: what the cache holds after the requests sent before."""

    id: str
    path: str
    op: Literal["save_state"] = "save_state"


@dataclass(frozen=True)
class RestoreStateRequest(Asks[StateRestored]):
    """Of the saved states at ``paths``, bring back the one whose tokens share the longest prefix with ``prompt`` as
    a generation with ``sampling`` would tokenize it, if that beats the KV cache's own; answered with a
    ``StateRestored`` (which names the files refused, and why). Nothing is generated. ``evict_to``: the files a
    batching engine saves a sequence's state to from now on, before another conversation takes its cells
    (``Backend.keep_evicted``; empty: none kept)."""

    id: str
    paths: list[str]
    prompt: Prompt
    sampling: SamplingSettings
    evict_to: list[str] = field(default_factory=list)
    op: Literal["restore_state"] = "restore_state"


@dataclass(frozen=True)
class CancelRequest:
    id: str  # a generation's id, running or not started yet; "*" for whichever runs now
    op: Literal["cancel"] = "cancel"


@dataclass(frozen=True)
class UnloadRequest(Asks[Unloaded]):
    id: str
    op: Literal["unload"] = "unload"


@dataclass(frozen=True)
class ShutdownRequest:
    op: Literal["shutdown"] = "shutdown"


Request = Asks[Any] | CancelRequest | ShutdownRequest


# --- the table: each request answered, the event that answers it, and what serves it


R = TypeVar("R", bound=Asks[Any])


def answer_of(request: type[Asks[Any]]) -> type[Any]:
    """The event that answers ``request`` (its ``Asks[...]`` base)."""
    for base in getattr(request, "__orig_bases__", ()):
        if typing.get_origin(base) is Asks:
            answer: type[Any] = typing.get_args(base)[0]
            return answer
    raise TypeError(f"{request.__name__} names no answer: make it an Asks[...]")


@dataclass(frozen=True)
class Row(Generic[R]):
    """One request of the protocol: its class, the client's words for a host that dies while it is served, and for a
    plain request the Backend call that serves it (None: the host serves it itself)."""

    request: type[R]
    phase: str
    serve: Callable[[Backend, R], Any] | None = None

    @property
    def answer(self) -> type[Any]:
        return answer_of(self.request)


def _restore_state(backend: Backend, request: RestoreStateRequest) -> StateRestored:
    backend.keep_evicted(request.evict_to)
    restored = backend.restore_state(request.id, request.paths, request.prompt, request.sampling)
    for path, reason in restored.discarded:  # the engine log says it too; the parent's log and cache act on them
        print(f"[{request.id}] saved state {path} discarded: {reason}", file=sys.stderr, flush=True)
    return restored


TABLE = (
    Row(LoadRequest, "while loading"),  # the host's own: the backend chosen and loaded (Backend.load), its progress
    # the host's own: Backend.generate's Tokens and Done, cancelled between tokens, a thread each where it batches
    Row(GenerateRequest, "during generation"),
    # the host's own: Backend.score, or backends.scoring's windows with their progress, stopped by a cancel
    Row(ScoreRequest, "while scoring"),
    Row(EmbedRequest, "while embedding", lambda backend, r: backend.embed(r.id, r.texts)),
    Row(RerankRequest, "while reranking", lambda backend, r: backend.rerank(r.id, r.query, r.texts)),
    Row(CountRequest, "while counting tokens",
        lambda backend, r: Counted(r.id, backend.count_prompt_tokens(r.prompt, r.sampling))),
    Row(SaveStateRequest, "while saving the chat's state", lambda backend, r: backend.save_state(r.id, r.path)),
    Row(RestoreStateRequest, "while restoring the chat's state", _restore_state),
    Row(UnloadRequest, "while unloading"),  # the host's own: the model let go (Backend.unload)
)
ROWS: dict[type[Asks[Any]], Row[Any]] = {row.request: row for row in TABLE}
UNANSWERED = (CancelRequest, ShutdownRequest)  # acted on as the host reads them: no event answers them
STREAMED = (Progress, Token)  # events on the way to an answer
FINAL_EVENTS: tuple[type[Any], ...] = (*(row.answer for row in TABLE), ErrorEvent)  # each request ends with one
_REQUESTS: list[type[Any]] = [*ROWS, *UNANSWERED]
_EVENTS: list[type[Any]] = [*FINAL_EVENTS, *STREAMED, Hello]
_REQUEST_TYPES: dict[str, type[Any]] = {cls.op: cls for cls in _REQUESTS}
_EVENT_TYPES: dict[str, type[Any]] = {cls.type: cls for cls in _EVENTS}


def row_of(request: Asks[Any]) -> Row[Any]:
    return ROWS[type(request)]


def wire_types() -> list[type[Any]]:
    """Every dataclass that crosses the wire: the requests, the events and the dataclasses their fields carry."""
    found: dict[type[Any], None] = {}
    todo: list[Any] = [*_REQUESTS, *_EVENTS]
    while todo:
        tp = todo.pop(0)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if tp not in found:
                found[tp] = None
                todo += typing.get_type_hints(tp).values()
        else:
            todo += typing.get_args(tp)
    return list(found)


# --- the wire: JSON lines


class ProtocolMismatch(ValueError):
    """The other side speaks another protocol version."""


def encode(obj: Any) -> bytes:
    """A request or an event as one line of JSON."""
    return json.dumps(_plain_value(obj), ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def wire(request: Request) -> dict[str, Any]:
    """A request as the plain dict that goes on the wire."""
    plain: dict[str, Any] = _plain_value(request)
    return plain


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, read once


def _plain_value(value: Any) -> Any:
    """``value`` in JSON's plain terms, as ``dataclasses.asdict`` gives it but without its deep copies: the host sends a
    chunk of tokens 30 times a second, and asdict took two thirds of encoding one (13.5 µs warm, several times that
    after a decode)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is list or kind is tuple:
        return [_plain_value(item) for item in value]
    if kind is dict:
        return {key: _plain_value(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES.get(kind)
        if names is None:
            names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value))
        return {name: _plain_value(getattr(value, name)) for name in names}
    return value  # a str or int subclass (ReasoningText), as json writes it


def decode_event(line: bytes) -> Event | Hello | Unloaded:
    """One event line, typed; ValueError with the reason for a line that is not one."""
    data = json.loads(line)
    tag = data.get("type") if isinstance(data, dict) else None
    cls = _EVENT_TYPES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise ValueError(f"unknown engine event: {line[:200]!r}")
    try:
        event: Event | Hello | Unloaded = from_wire(cls, data)
    except TypeError as exc:
        raise ValueError(f"unreadable engine event {line[:200]!r}: {exc}") from None
    return event


def decode_request(line: bytes) -> Request:
    """One request line, typed; ValueError with the reason for a line that is not one."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"unreadable request {line[:200]!r}: {exc}") from None
    op = data.get("op") if isinstance(data, dict) else None
    cls = _REQUEST_TYPES.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ValueError(f"unknown request {line[:200]!r}")
    try:
        request: Request = from_wire(cls, data)
    except TypeError as exc:
        raise ValueError(f"unreadable request {line[:200]!r}: {exc}") from None
    return request


def check_hello(event: Hello) -> Hello:
    """The host's Hello, if it speaks this protocol; ProtocolMismatch with the sentence if not."""
    if event.protocol != PROTOCOL_VERSION:
        raise ProtocolMismatch(f"the engine host speaks protocol version {event.protocol}, "
                               f"this QuantDesk speaks version {PROTOCOL_VERSION}")
    return event


# --- typed reading: a dataclass from parsed JSON, by its fields' annotations


def from_wire(cls: type[T], data: Any) -> T:
    """``data`` (parsed JSON) as the dataclass ``cls``, each field read as its annotation says (nested dataclasses,
    tuples, lists, dicts, unions, literals); keys ``cls`` does not know are left out (app/records), a value of the
    wrong kind is a TypeError that names its field. A list of plain values (an embedding's floats) is checked as a
    list, not value by value."""
    annotation: Any = cls
    value: T = _reader(annotation)(data)
    return value


_PLAIN: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,),
                                       type(None): (type(None),), Any: (object,)}
_SEQUENCES = (list, tuple, collections.abc.Sequence)


@functools.cache
def _reader(tp: Any) -> Callable[[Any], Any]:
    """How a value of the annotation ``tp`` is read, made once per annotation."""
    if tp is Any:
        return _same
    if tp in _PLAIN:
        return functools.partial(_plain, _PLAIN[tp])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_reader(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return functools.partial(_literal, args)
    if origin is typing.Union or origin is types.UnionType:
        return _union_reader(tp, args)
    if origin is dict:
        return _dict_reader(args[1])
    if origin in _SEQUENCES and (origin is not tuple or args[1:] == (Ellipsis,)):
        return _sequence_reader(tuple if origin is tuple else list, args[0])
    if origin is tuple:  # a fixed pair
        items = [_reader(arg) for arg in args]
        return lambda value: tuple(read(v) for read, v in zip(items, _sized(value, len(items)), strict=True))
    raise TypeError(f"the engine protocol carries no {tp!r}")


def _kinds(tp: Any) -> tuple[type, ...]:
    """The JSON values an annotation takes: for a union, which of its members reads a value."""
    if tp in _PLAIN:
        return _PLAIN[tp]
    origin = typing.get_origin(tp)
    if (isinstance(tp, type) and dataclasses.is_dataclass(tp)) or origin is dict:
        return (dict,)
    if origin in _SEQUENCES:
        return (list,)
    if origin is Literal:
        return tuple({type(arg) for arg in typing.get_args(tp)})
    raise TypeError(f"the engine protocol carries no {tp!r} in a union")


def _same(value: Any) -> Any:
    return value


def _plain(kinds: tuple[type, ...], value: Any) -> Any:
    if not isinstance(value, kinds):
        raise TypeError(f"{value!r:.60} is not a {' or '.join(k.__name__ for k in kinds)}")
    return value


def _literal(allowed: tuple[Any, ...], value: Any) -> Any:
    if value not in allowed:
        raise TypeError(f"{value!r:.60} is none of {', '.join(map(repr, allowed))}")
    return value


def _sized(value: Any, size: int) -> list[Any]:
    if not isinstance(value, list) or len(value) != size:
        raise TypeError(f"{value!r:.60} is not a list of {size}")
    return value


def _union_reader(tp: Any, members: tuple[Any, ...]) -> Callable[[Any], Any]:
    arms = [(_kinds(member), _reader(member)) for member in members]

    def read(value: Any) -> Any:
        for kinds, reader in arms:
            if isinstance(value, kinds):
                return reader(value)
        raise TypeError(f"{value!r:.60} is no {tp}")

    return read


def _dict_reader(values: Any) -> Callable[[Any], Any]:
    item = _reader(values)
    plain = values in _PLAIN

    def read(value: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"{value!r:.60} is not an object")
        return dict(value) if plain else {k: item(v) for k, v in value.items()}

    return read


def _sequence_reader(make: type[Any], items: Any) -> Callable[[Any], Any]:
    item = _reader(items)
    plain = items in _PLAIN

    def read(value: Any) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"{value!r:.60} is not a list")
        return make(value) if plain else make(item(v) for v in value)

    return read


def _dataclass_reader(cls: type[Any]) -> Callable[[Any], Any]:
    hints = typing.get_type_hints(cls)
    # a plain field is checked here (its kinds), the others read by their reader: the hot path (a reply's Token
    # events) makes no call per plain field
    plain = {f.name: _PLAIN[hints[f.name]] for f in dataclasses.fields(cls) if hints[f.name] in _PLAIN}
    readers = {f.name: _reader(hints[f.name]) for f in dataclasses.fields(cls) if f.name not in plain}

    def read(data: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"{cls.__name__} must be an object, not {data!r:.60}")
        values = known_fields(cls, data)
        for name, value in values.items():
            kinds = plain.get(name)
            try:
                if kinds is None:
                    values[name] = readers[name](value)
                elif not isinstance(value, kinds):
                    _plain(kinds, value)
            except TypeError as exc:
                raise TypeError(f"{cls.__name__}.{name}: {exc}") from None
        return cls(**values)

    return read
