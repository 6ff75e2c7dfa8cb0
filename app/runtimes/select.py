"""The runtime for one load on this machine: discovery, pins, the GPUs present and fresh probes, fed to
``choose``. Called by EngineClient.load for every llama.cpp load (a few hundred ms per GPU runtime:
each is started in a child to prove it still can)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.runtimes import catalog, devices, pins
from app.runtimes import overview as overview_rows
from app.runtimes.choose import Choice, choose


def machine_gpus() -> list[tuple[str, str]]:
    """(vendor, name) of the GPUs the hardware probes find (NVML, sysfs, Apple), quickly and quietly."""
    from app.hardware import gpus
    from app.hardware.detect import probe_apple
    from app.hardware.sources import Sources

    src = Sources()
    found = []
    for probe in (gpus.probe_nvidia, gpus.probe_amd, probe_apple):
        try:
            found += [(g.vendor, g.name) for g in probe(src)]
        except Exception:  # noqa: BLE001 - a missing part only leaves the sentence less specific
            continue
    return found


def probe_runtime(runtime: catalog.Runtime) -> devices.Probe:
    return devices.probe(runtime.lib_dir)


def for_load(model_path: str | Path | None = None, requested: str | None = None) -> Choice:
    """``requested``: a runtime named for this one load (``quantdesk chat --runtime NAME``); else the
    model's pin, the global pin, or the automatic choice."""
    runtimes = catalog.discover()
    if requested and requested != pins.AUTO:
        pin: tuple[str, str] | None = (requested, "for this run")
    elif requested == pins.AUTO:
        pin = None
    else:
        pin = pins.load().for_model(model_path)
    choice = choose(runtimes, probe_runtime, machine_gpus(), pin)
    runtime = catalog.find(choice.name, runtimes) if choice.name else None
    return dataclasses.replace(choice, runtime_env=runtime.host_env()) if runtime is not None else choice


def overview(gpus_present: list[tuple[str, str]] | None = None) -> overview_rows.Overview:
    """Every runtime, probed, with the choice a load without its own pin gets now (``quantdesk runtime ls``,
    the Hardware page); ``gpus_present`` stands in for the machine's GPUs."""
    runtimes = catalog.discover()
    probes = overview_rows.probe_all(runtimes)
    sizes = {r.name: r.size_bytes() for r in runtimes}
    saved = pins.load()
    gpus = machine_gpus() if gpus_present is None else gpus_present
    choice = choose(runtimes, lambda r: probes[r.name], gpus, saved.for_model(None))
    rows = [overview_rows.Row(r, probes[r.name], sizes[r.name], r.name == choice.name) for r in runtimes]
    return overview_rows.Overview(rows, choice, dict(saved.models), saved.problem)
