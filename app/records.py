"""Dataclasses from dicts another version may have written (the settings file, a saved bench result, the engine
protocol, a chat's saved sampling, a connection, an update check's state): keys the dataclass does not know are left
out, not fatal, so a newer file read by an older QuantDesk, or an older one by a newer, still loads.

The one copy of that rule. Ground floor: imports nothing of the project, so the backends use it too.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def field_names(cls: type) -> frozenset[str]:
    """The names of the dataclass ``cls``'s fields."""
    return frozenset(f.name for f in dataclasses.fields(cls))


def known_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that name a field of the dataclass ``cls``, for a caller that converts some before
    building it."""
    names = field_names(cls)
    return {k: v for k, v in data.items() if k in names}


def from_known(cls: type[T], data: Mapping[str, Any]) -> T:
    """``cls`` built from the items of ``data`` that name its fields."""
    return cls(**known_fields(cls, data))
