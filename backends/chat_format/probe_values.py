"""Probe values: JSON data that records what a chat template does with it, as llama.cpp's ``caps.cpp`` reads its
engine's usage statistics.

``probe_value`` wraps a probe conversation's strings, lists and dicts so that reading, comparing, iterating, indexing
or testing them (``is string``) is recorded as a (path, operation) pair (``("messages.0.content", "used")``) in
``USES`` while a probe runs; ``USES`` is None outside one, so an ordinary render records nothing. The renderer
(``template.py``) calls ``note`` and ``note_deep`` wherever the sandbox touches a value; ``template.probe`` renders
with them and gives back a ``Probe``; ``capabilities.py`` asks.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

USES: contextvars.ContextVar[set[tuple[str, str]] | None] = contextvars.ContextVar("chat_template_uses",
                                                                                   default=None)


def note_path(path: str, op: str = "used") -> None:
    uses = USES.get()
    if uses is not None:
        uses.add((path, op))


def note(value: Any, op: str = "used") -> None:
    """Record ``op`` on ``value`` if it is a probe value (and a probe is running)."""
    uses = USES.get()
    if uses is not None and isinstance(value, (_ProbeStr, _ProbeList, _ProbeDict)):
        uses.add((value._qd_path, "used"))
        uses.add((value._qd_path, op))


def note_deep(value: Any) -> None:
    """``value`` and everything in it used, as llama.cpp's ``tojson`` and ``string`` mark it."""
    if USES.get() is None:
        return
    stack = [value]
    while stack:
        item = stack.pop()
        note(item)
        if isinstance(item, dict):
            for key, child in dict.items(item):
                if isinstance(item, _ProbeDict):
                    note_path(f"{item._qd_path}.{key}")
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(list.__iter__(item))


class _ProbeStr(str):
    """A probe's string: reading, comparing, iterating or indexing it is recorded."""

    _qd_path: str

    def __new__(cls, text: str, path: str) -> _ProbeStr:
        value = super().__new__(cls, text)
        value._qd_path = path
        return value

    def __eq__(self, other: object) -> bool:
        note(self)
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        note(self)
        return str.__ne__(self, other)

    def __hash__(self) -> int:
        note(self)
        return str.__hash__(self)

    def __len__(self) -> int:
        note(self)
        return str.__len__(self)

    def __contains__(self, item: object) -> bool:
        note(self)
        return str.__contains__(self, item)  # type: ignore[operator]

    def __iter__(self) -> Iterator[str]:
        note(self, "array_access")
        return str.__iter__(self)

    def __getitem__(self, key: Any) -> str:
        note(self, "array_access" if isinstance(key, int) else "used")
        return str.__getitem__(self, key)


class _ProbeList(list[Any]):
    """A probe's list: iterating or indexing it is recorded."""

    _qd_path: str

    def __init__(self, items: Sequence[Any], path: str) -> None:
        super().__init__(items)
        self._qd_path = path

    def __iter__(self) -> Iterator[Any]:
        note(self, "array_access")
        return list.__iter__(self)

    def __len__(self) -> int:
        note(self)
        return list.__len__(self)

    def __getitem__(self, key: Any) -> Any:
        note(self, "array_access" if isinstance(key, int) else "used")
        return list.__getitem__(self, key)


class _ProbeDict(dict[str, Any]):
    """A probe's mapping: each value read out of it (by key, ``get``, ``items()``, ``tojson``) is recorded as used."""

    _qd_path: str

    def __init__(self, items: Mapping[str, Any], path: str) -> None:
        super().__init__(items)
        self._qd_path = path

    def _read(self, key: str) -> None:
        note(self, "object_access")
        note_path(f"{self._qd_path}.{key}")

    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        self._read(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default

    def items(self) -> Any:
        for key in dict.keys(self):
            self._read(key)
        return dict.items(self)

    def values(self) -> Any:
        for key in dict.keys(self):
            self._read(key)
        return dict.values(self)


def probe_value(value: Any, path: str) -> Any:
    """``value`` (JSON data) made of probe values, each named by its path (``messages.0.content``)."""
    if isinstance(value, str):
        return _ProbeStr(value, path)
    if isinstance(value, list):
        return _ProbeList([probe_value(v, f"{path}.{i}") for i, v in enumerate(value)], path)
    if isinstance(value, dict):
        return _ProbeDict({k: probe_value(v, f"{path}.{k}") for k, v in value.items()}, path)
    return value


@dataclass(frozen=True)
class Probe:
    """One probe render: whether it rendered, its text, and what the template did with the probe's values:
    (path, operation) pairs such as ("messages.0.content", "used"), ("messages.0.content", "test_is_string")."""

    ok: bool
    text: str
    uses: frozenset[tuple[str, str]]

    def used(self, path: str, op: str = "used") -> bool:
        return (path, op) in self.uses
