"""Every runtime with what it sees, its size and whether loads use it: ``quantdesk runtime ls`` and the
Hardware page show the same rows (built by ``select.overview``). Each runtime is started in its own child,
all at once."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from app.datatypes import Device
from app.runtimes import catalog, choose, devices

GIB = 1 << 30


@dataclass(frozen=True)
class Row:
    runtime: catalog.Runtime
    probe: devices.Probe
    size_bytes: int
    in_use: bool  # what a load without a per-model pin gets now


@dataclass(frozen=True)
class Overview:
    rows: list[Row]
    choice: choose.Choice  # the choice for a model without its own pin
    model_pins: dict[str, str]
    problem: str = ""  # an unreadable pins file


def probe_all(runtimes: list[catalog.Runtime],
              probe: Callable[[catalog.Runtime], devices.Probe] | None = None) -> dict[str, devices.Probe]:
    """Start every runtime in its own child, all at once (``probe``: how one is asked; app/machine.py asks each
    once per process)."""
    ask = probe or (lambda r: devices.probe(r.lib_dir))
    with ThreadPoolExecutor(max_workers=max(len(runtimes), 1)) as pool:
        found = pool.map(lambda r: devices.Probe(error=r.problem) if r.problem else ask(r), runtimes)
        return dict(zip([r.name for r in runtimes], found, strict=True))


def as_records(runtimes: list[catalog.Runtime], probes: dict[str, devices.Probe]) -> list[dict[str, Any]]:
    """Runtimes and their probes as plain data (the hardware profile's ``runtimes``)."""
    return [{"name": r.name, "backend": r.backend, "origin": r.origin, "version": r.version, "problem": r.problem,
             "size_bytes": r.size_bytes(), "built_at": r.built_at, **probes[r.name].to_dict()} for r in runtimes]


def device_text(d: Device) -> str:
    kind = {"gpu": "discrete GPU", "igpu": "integrated GPU", "cpu": "CPU", "accel": "accelerator"}.get(d.type, d.type)
    if d.software:
        kind = "software Vulkan device (a CPU; tests only)"
    memory = f"{d.memory_free / GIB:.1f} of {d.memory_total / GIB:.1f} GiB free" if d.memory_total else "memory unknown"
    return f"{d.name}: {d.description or d.name} ({kind}, {memory})"


def table(view: Overview) -> str:
    lines = []
    for row in view.rows:
        r = row.runtime
        mark = "*" if row.in_use else " "
        origin = catalog.ORIGIN_WORDS[r.origin]
        lines.append(f"{mark} {r.name:<8} {choose.backend_words(r.backend):<7} llama-cpp-python {r.version or '?':<8} "
                     f"{row.size_bytes / (1 << 20):6.0f} MiB  {origin}")
        if r.problem:
            lines.append(f"    broken: {r.problem}")
        elif not row.probe.ok:
            lines.append(f"    cannot start: {row.probe.error}")
        else:
            variant = f", the {row.probe.cpu_variant} CPU variant" if row.probe.cpu_variant else ""  # a portable build
            lines += [f"    {device_text(d)}{variant if d.type == 'cpu' else ''}" for d in row.probe.devices]
        if r.built_at:
            lines.append(f"    built {r.built_at}" + (f", log {r.log}" if r.log else ""))
    if not view.rows:
        lines.append("no llama.cpp runtime is installed (pip install 'quantdesk[llama]')")
    lines.append("")
    lines.append(f"* loads use {view.choice.name or 'nothing'}: {view.choice.reason}")
    for model, name in sorted(view.model_pins.items()):
        lines.append(f"  {name} is pinned for {model}")
    if view.problem:
        lines.append(f"  ({view.problem})")
    return "\n".join(lines)


def to_json(view: Overview) -> dict[str, Any]:
    return {
        "runtimes": [{"name": row.runtime.name, "backend": row.runtime.backend, "origin": row.runtime.origin,
                      "version": row.runtime.version, "folder": str(row.runtime.folder or row.runtime.lib_dir.parent),
                      "size_bytes": row.size_bytes, "in_use": row.in_use, "problem": row.runtime.problem,
                      "built_at": row.runtime.built_at, "cmake_args": row.runtime.cmake_args, "log": row.runtime.log,
                      **row.probe.to_dict()} for row in view.rows],
        "choice": {"name": view.choice.name, "reason": view.choice.reason},
        "model_pins": view.model_pins,
    }
