"""Find backends by name or by model format, importing each one only when it is asked for.

Built-in backends are listed here; third-party ones register under the ``quantdesk.backends``
entry-point group (``name = "package.module:BackendClass"``). A backend whose module or dependency
is missing shows up as unavailable with the reason; it never breaks an import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points

from backends.base import Availability, Backend

ENTRY_POINT_GROUP = "quantdesk.backends"

BUILTIN: dict[str, str] = {
    "llama.cpp": "backends.llama_cpp:LlamaCppBackend",
    "mlx": "backends.mlx:MlxBackend",
    "exllamav2": "backends.exllamav2:ExLlamaV2Backend",
    "exllamav3": "backends.exllamav3:ExLlamaV3Backend",
    "remote": "backends.remote:RemoteBackend",
}

# Which backend runs a format by default, best first.
FORMAT_BACKENDS: dict[str, tuple[str, ...]] = {
    "gguf": ("llama.cpp",),
    "mlx": ("mlx",),
    "safetensors": ("mlx",),
    "exl2": ("exllamav2",),
    "exl3": ("exllamav3",),
    "remote": ("remote",),
}


class UnknownBackend(LookupError):
    pass


@dataclass(frozen=True)
class BackendStatus:
    name: str
    formats: tuple[str, ...]
    availability: Availability


def _targets() -> dict[str, str]:
    targets = dict(BUILTIN)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        targets.setdefault(ep.name, ep.value)
    return targets


def names() -> list[str]:
    return list(_targets())


def backend_class(name: str) -> type[Backend]:
    try:
        target = _targets()[name]
    except KeyError:
        raise UnknownBackend(f"no backend named {name!r}; known: {', '.join(names())}") from None
    module_name, _, class_name = target.partition(":")
    found: type[Backend] = getattr(importlib.import_module(module_name), class_name)
    return found


def status(name: str) -> BackendStatus:
    """Probe one backend; a module that fails to import is reported, not raised."""
    try:
        cls = backend_class(name)
    except ImportError as exc:
        return BackendStatus(name, (), Availability.no(f"its module could not be imported: {exc}"))
    try:
        availability = cls.probe()
    except Exception as exc:  # a third-party probe must not take the app down
        availability = Availability.no(f"its probe failed: {exc!r}")
    return BackendStatus(name, tuple(cls.formats), availability)


def statuses() -> list[BackendStatus]:
    return [status(name) for name in names()]


def backend_for_format(fmt: str) -> str:
    """The backend that runs ``fmt`` by default (its availability is checked when it loads)."""
    candidates = FORMAT_BACKENDS.get(fmt, ())
    if not candidates:
        raise UnknownBackend(f"no backend runs the {fmt!r} format")
    return candidates[0]
