"""The runtime for one load on this machine: discovery, pins, the GPUs present and the runtimes' probes, fed to
``choose``. The machine's part (the GPUs the hardware probes found, each runtime's probe) is handed in:
app/machine.py gives this process's one probe of the machine, so this package never imports app/hardware."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from app.runtimes import catalog, devices, pins
from app.runtimes import overview as overview_rows
from app.runtimes.choose import Choice, choose

RuntimeProbe = Callable[[catalog.Runtime], devices.Probe]


def probe_runtime(runtime: catalog.Runtime) -> devices.Probe:
    """A fresh probe: the runtime started in a child."""
    return devices.probe(runtime.lib_dir)


def for_load(model_path: str | Path | None = None, requested: str | None = None, *,
             gpus: Sequence[tuple[str, str]] = (), probe: RuntimeProbe = probe_runtime) -> Choice:
    """``requested``: a runtime named for this one load (``quantdesk chat --runtime NAME``); else the
    model's pin, the global pin, or the automatic choice. ``gpus``: (vendor, name) of the machine's GPUs, for
    the sentence when no runtime can use them."""
    runtimes = catalog.discover()
    if requested and requested != pins.AUTO:
        pin: tuple[str, str] | None = (requested, "for this run")
    elif requested == pins.AUTO:
        pin = None
    else:
        pin = pins.load().for_model(model_path)
    choice = choose(runtimes, probe, gpus, pin)
    runtime = catalog.find(choice.name, runtimes) if choice.name else None
    return dataclasses.replace(choice, runtime_env=runtime.host_env()) if runtime is not None else choice


def overview(gpus_present: Sequence[tuple[str, str]] = (), probe: RuntimeProbe | None = None
             ) -> overview_rows.Overview:
    """Every runtime, probed, with the choice a load without its own pin gets now (``quantdesk runtime ls``,
    the Hardware page); ``gpus_present``: the machine's GPUs."""
    runtimes = catalog.discover()
    probes = overview_rows.probe_all(runtimes, probe)
    sizes = {r.name: r.size_bytes() for r in runtimes}
    saved = pins.load()
    choice = choose(runtimes, lambda r: probes[r.name], gpus_present, saved.for_model(None))
    rows = [overview_rows.Row(r, probes[r.name], sizes[r.name], r.name == choice.name) for r in runtimes]
    return overview_rows.Overview(rows, choice, dict(saved.models), saved.problem)
