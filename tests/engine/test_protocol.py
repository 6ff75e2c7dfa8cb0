"""The engine protocol's one table and its wire: every request, answer and event round-trips through the JSON line it
crosses as, the typed reader refuses a value of the wrong kind by its field's name, the host serves the table's plain
requests from the table, and the wire types' fingerprint holds PROTOCOL_VERSION: a field added, removed, renamed or
retyped fails here until the version goes up."""

from __future__ import annotations

import collections.abc
import dataclasses
import hashlib
import io
import json
import types
import typing
from typing import Any, Literal

import pytest

from app.datatypes import Event, GenerationStats, LoadSettings, Message, Reranked, SamplingSettings
from app.engine import protocol
from app.engine.protocol import (CountRequest, EmbedRequest, GenerateRequest, RerankRequest, RestoreStateRequest,
                                 SaveStateRequest)

# Each protocol version's fingerprint of the wire types (`signature()` hashed: every request, event and the
# dataclasses they carry, by name, with their fields' names and annotations). Types that change are a new version:
# raise PROTOCOL_VERSION (with its line in app/engine/protocol.py) and add its line here; a line here is never edited.
FINGERPRINTS = {
    7: "5ef43151874f2c86",
    8: "ac2e4387cfe97c2a",
    9: "e9f2ec8c2a7ca112",
}


def signature() -> str:
    """Each wire type with its fields, one line each: ``Reranked(request_id: str, scores: list[float], ...)``."""
    lines = []
    for cls in sorted(protocol.wire_types(), key=lambda c: c.__name__):
        hints = typing.get_type_hints(cls)
        fields = ", ".join(f"{f.name}: {annotation(hints[f.name])}" for f in dataclasses.fields(cls))
        lines.append(f"{cls.__name__}({fields})")
    return "\n".join(lines)


def annotation(tp: Any) -> str:
    """An annotation in words that no Python version writes differently, its aliases resolved (``Prompt``:
    ``Sequence[Message] | str``)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None) or tp is Any or tp is Ellipsis:
        return {type(None): "None", Any: "Any", Ellipsis: "..."}[tp]
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(map(annotation, args))
    if origin is not None:
        return f"{origin.__name__}[{', '.join(map(annotation, args))}]"
    return tp.__name__


def fingerprint() -> str:
    return hashlib.sha256(signature().encode()).hexdigest()[:16]


# --- examples: a value of every annotation, each field unlike its default


def example(tp: Any, name: str = "x", arm: int = 0) -> Any:
    """A value of the annotation ``tp``; ``arm`` picks a union's member (0: the first that is not None, -1: the last),
    so that two examples of a type cover both sides of ``Prompt`` (messages or a string)."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{f.name: _unlike(example(hints[f.name], f.name, arm), f) for f in dataclasses.fields(tp)})
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {"any": [1, 2.5, "ü", None, True, {"deep": []}]}
    if tp is str:
        return f"{name} “quoted” \"é\"\n"
    if tp is bool:
        return True
    if tp is int:
        return 7
    if tp is float:
        return 2.5
    if tp is type(None):
        return None
    if origin is Literal:
        return args[0]
    if origin is typing.Union or origin is types.UnionType:
        members = [m for m in args if m is not type(None)]
        return example(members[arm], name, arm)
    if origin is dict:
        return {f"{name}-key": example(args[1], name, arm)}
    if origin in (list, collections.abc.Sequence):
        return [example(args[0], name, arm), example(args[0], name, -1 - arm)]
    if origin is tuple and args[1:] == (Ellipsis,):
        return (example(args[0], name, arm),)
    if origin is tuple:
        return tuple(example(a, name, arm) for a in args)
    raise AssertionError(f"no example for {tp!r}: teach example() the new annotation")


def _unlike(value: Any, field: dataclasses.Field) -> Any:
    """``value``, changed where it equals the field's default (a field the reader dropped would pass otherwise)."""
    default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    if value != default or field.name in ("op", "type"):
        return value
    if isinstance(value, bool):
        return not value
    return value + value if isinstance(value, (int, float, str)) else value


def round_trip(obj: Any) -> Any:
    line = protocol.encode(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # one line, whatever the strings hold
    if type(obj) in protocol._REQUEST_TYPES.values():
        return protocol.decode_request(line)
    if type(obj) in protocol._EVENT_TYPES.values():
        return protocol.decode_event(line)
    return protocol.from_wire(type(obj), json.loads(line))


@pytest.mark.parametrize("cls", protocol.wire_types(), ids=lambda cls: cls.__name__)
def test_every_request_answer_and_event_round_trips_through_its_wire_line(cls):
    for arm in (0, -1):
        obj = example(cls, arm=arm)
        assert round_trip(obj) == obj
        assert type(round_trip(obj)) is cls


def test_the_examples_set_every_field_unlike_its_default():
    """The round trip proves each field crosses: none of them is left at a default the reader would also give."""
    for cls in protocol.wire_types():
        obj = example(cls)
        for f in dataclasses.fields(cls):
            if f.name in ("op", "type") or (f.default is dataclasses.MISSING
                                            and f.default_factory is dataclasses.MISSING):
                continue
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            assert getattr(obj, f.name) != default, f"{cls.__name__}.{f.name}"


def test_the_wire_carries_every_request_and_event_of_the_table_and_of_the_events_union():
    names = {cls.__name__ for cls in protocol.wire_types()}
    assert {cls.__name__ for cls in typing.get_args(Event)} <= names
    assert {row.request.__name__ for row in protocol.TABLE} | {"CancelRequest", "ShutdownRequest", "Hello"} <= names
    # nested types are walked to: a message's, a reply's stats, the settings
    assert {"Message", "GenerationStats", "TokenLogprob", "TopLogprob", "LoadSettings", "SamplingSettings",
            "WindowScoring", "DeviceLoad", "ToolCall", "ToolCallDelta"} <= names


def test_the_wire_types_are_those_of_this_protocol_version():
    version, now = protocol.PROTOCOL_VERSION, fingerprint()
    assert max(FINGERPRINTS) <= version, "PROTOCOL_VERSION went down"
    if version not in FINGERPRINTS:
        pytest.fail(f"PROTOCOL_VERSION went up: add {version}: \"{now}\" to FINGERPRINTS")
    assert FINGERPRINTS[version] == now, (
        f"the engine protocol's types changed: raise PROTOCOL_VERSION to {version + 1} (say why beside it, in "
        f"app/engine/protocol.py) and add {version + 1}: \"{now}\" to FINGERPRINTS. The types now:\n{signature()}")


def test_the_fingerprint_changes_with_a_field_added_renamed_or_retyped(monkeypatch):
    before = fingerprint()

    @dataclasses.dataclass(frozen=True)
    class Added:
        request_id: str
        scores: list[float]
        prompt_tokens: int
        rerank_ms: float
        model: str = ""
        type: Literal["reranked"] = "reranked"

    @dataclasses.dataclass(frozen=True)
    class Renamed:
        request_id: str
        score_list: list[float]
        prompt_tokens: int
        rerank_ms: float
        type: Literal["reranked"] = "reranked"

    @dataclasses.dataclass(frozen=True)
    class Retyped:
        request_id: str
        scores: list[int]
        prompt_tokens: int
        rerank_ms: float
        type: Literal["reranked"] = "reranked"

    real = protocol.wire_types
    for changed in (Added, Renamed, Retyped):
        changed.__name__ = "Reranked"
        monkeypatch.setattr(protocol, "wire_types", lambda changed=changed: [
            changed if cls.__name__ == "Reranked" else cls for cls in real()])
        assert fingerprint() != before


# --- the typed reader


def test_a_value_of_the_wrong_kind_is_refused_naming_its_field():
    def line(**data: Any) -> bytes:
        return json.dumps(data).encode()

    with pytest.raises(ValueError, match=r"unreadable request .*RerankRequest\.texts: 'abc' is not a list"):
        protocol.decode_request(line(op="rerank", id="r1", query="q", texts="abc"))
    sampling = {**dataclasses.asdict(SamplingSettings()), "temperature": "hot"}
    with pytest.raises(ValueError, match=r"GenerateRequest\.sampling: SamplingSettings\.temperature: 'hot' is not"):
        protocol.decode_request(line(op="generate", id="g", prompt="hi", sampling=sampling))
    with pytest.raises(ValueError, match=r"chat_template_kwargs: \[\] is not an object"):
        protocol.decode_request(line(op="count", id="c", prompt="hi",
                                     sampling={"chat_template_kwargs": []}))
    with pytest.raises(ValueError, match=r"Message\.content: 3 is not a str"):
        protocol.decode_request(line(op="count", id="c", prompt=[{"role": "user", "content": 3}], sampling={}))
    stats = dataclasses.asdict(GenerationStats(1, 1.0, 1.0, 1, 1.0, "eos", 0)) | {"stop_reason": "exploded"}
    with pytest.raises(ValueError, match=r"unreadable engine event .*stop_reason: 'exploded' is none of 'eos'"):
        protocol.decode_event(line(type="done", request_id="g", text="", stats=stats))
    with pytest.raises(ValueError, match=r"StateRestored\.discarded: .* is not a list of 2"):
        protocol.decode_event(line(type="state_restored", request_id="w", path="", n_tokens=0, ms=1.0,
                                   discarded=[["/a.qdstate"]]))
    with pytest.raises(ValueError, match="unreadable request .*missing 1 required positional argument: 'texts'"):
        protocol.decode_request(line(op="embed", id="e1"))
    with pytest.raises(ValueError, match="unknown request"):
        protocol.decode_request(line(op="teleport", id="t"))
    with pytest.raises(ValueError, match="unknown engine event"):
        protocol.decode_event(line(type="fireworks"))
    with pytest.raises(ValueError, match="unknown engine event"):
        protocol.decode_event(b"[1, 2]")


def test_keys_another_version_wrote_are_left_out_and_missing_ones_take_their_defaults():
    line = json.dumps({"op": "generate", "id": "g1", "from_the_future": 1,
                       "prompt": [{"role": "user", "content": "hi", "mood": "calm"}],
                       "sampling": {"temperature": 0, "stop": ["\n\n"], "also_new": {}}}).encode()
    assert protocol.decode_request(line) == GenerateRequest("g1", [Message("user", "hi")],
                                                            SamplingSettings(temperature=0, stop=("\n\n",)))
    assert protocol.from_wire(LoadSettings, {"n_ctx": 1024, "gpu_split": [1, 2.5]}) == LoadSettings(
        n_ctx=1024, gpu_split=[1, 2.5])


def test_a_string_prompt_stays_a_string_and_messages_come_back_as_messages():
    for prompt in ("Once upon a time", [Message("user", "hi", images=("aGk=",), tool_calls=({"id": "c"},))]):
        request = CountRequest("c1", prompt, SamplingSettings(tools=({"type": "function"},)))
        assert protocol.decode_request(protocol.encode(request)) == request


# --- the table


def test_each_request_has_one_row_and_its_answer_ends_it():
    ops = [row.request.op for row in protocol.TABLE]
    assert len(ops) == len(set(ops))
    for row in protocol.TABLE:
        assert row.answer in protocol.FINAL_EVENTS and row.phase
    assert protocol.answer_of(RerankRequest) is Reranked
    assert protocol.row_of(SaveStateRequest("v1", "/a")).phase == "while saving the chat's state"


def test_the_host_serves_every_row_the_table_leaves_to_it_and_the_rest_from_the_table():
    """In-process, without a model: each plain request reaches its Backend call through the table (and so the
    loaded-model check every Backend call needs), answered with an error of its own id; the host has its own handler
    for each row without one."""
    from app.engine.host import Host

    channel = io.BytesIO()
    host = Host(channel)
    assert set(host.own) == {row.request for row in protocol.TABLE if row.serve is None}
    plain = [row.request for row in protocol.TABLE if row.serve is not None]
    assert {EmbedRequest, RerankRequest, CountRequest, SaveStateRequest, RestoreStateRequest} <= set(plain)
    for cls in plain:
        host._answer(example(cls))
    events = [protocol.decode_event(line) for line in channel.getvalue().splitlines()]
    assert [(e.kind, e.message, e.request_id) for e in events] == [
        ("state", "no model is loaded", example(cls).id) for cls in plain]
