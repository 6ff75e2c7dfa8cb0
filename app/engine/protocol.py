"""The parent <-> engine-host wire format: one JSON object per line.

Requests are small dicts with an ``op``; events are the typed dataclasses of backends.base, sent as
``dataclasses.asdict`` (each carries its ``type``) and rebuilt here into the same types.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from backends.base import DeviceLoad, Done, ErrorEvent, Event, GenerationStats, Loaded, Progress, Scored, Token

_EVENT_TYPES: dict[str, type] = {cls.type: cls for cls in (Loaded, Progress, Token, Done, ErrorEvent, Scored)}


def encode(obj: Any) -> bytes:
    """A request dict or an event dataclass as one line of JSON."""
    payload = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def decode_event(line: bytes) -> Event:
    data = json.loads(line)
    cls = _EVENT_TYPES.get(data.get("type"))
    if cls is None:
        raise ValueError(f"unknown engine event: {line[:200]!r}")
    if cls is Done:
        data["stats"] = GenerationStats(**data["stats"])
    elif cls is Loaded:
        data["devices"] = tuple(DeviceLoad(**d) for d in data.get("devices", ()))
    return cls(**data)


def settings_to_dict(settings: Any) -> dict[str, Any]:
    return dataclasses.asdict(settings)


def settings_from_dict(cls: type, data: dict[str, Any]):
    known = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in data.items() if k in known}
    if "stop" in values:
        values["stop"] = tuple(values["stop"])
    return cls(**values)
