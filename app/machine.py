"""This machine, probed once per process: the hardware (app/hardware) with the llama.cpp runtimes (app/runtimes)
and the engines (backends/registry) composed on top, so neither of those two packages imports the other.

``profile()`` is the one probe: the fit check, the runtime choice of a load (``runtime_choice``), the Hardware
page and the model bar read it; it is made on first need and kept for the process (``profile(fresh=True)``
probes again, as the Hardware page's refresh does). Each llama.cpp runtime is started in a child once per
process and folder (``runtime_probe``), shared by the profile and every load's choice. The pools' budgets read
free memory through ``free_memory_bytes``: memory and GPUs only, fresh each time (it changes as models load).

``sources()`` is what the probes read for this machine; tests hand ``detect`` recorded ``Sources`` instead.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Any

from app.hardware.detect import GPU_PARTS, MEMORY_PARTS
from app.hardware.detect import detect as detect_hardware
from app.hardware.profile import HardwareProfile, load_profile
from app.hardware.sources import Sources
from app.runtimes import catalog, choose, devices, overview, select

_lock = threading.Lock()
_profile: HardwareProfile | None = None
_probes: dict[tuple[Any, ...], devices.Probe] = {}  # a runtime folder as it stands -> what it showed


def _probe_key(runtime: catalog.Runtime) -> tuple[Any, ...]:
    """A runtime folder as it stands now: rebuilt in place (a new mtime) or asked with another Vulkan setting
    (tests' lavapipe), it is probed again."""
    try:
        mtime = os.stat(runtime.lib_dir).st_mtime_ns
    except OSError:
        mtime = None
    return (str(runtime.lib_dir), mtime, os.environ.get(devices.SOFTWARE_VULKAN_VAR),
            os.environ.get(devices.VISIBLE_VAR))


def runtime_probe(runtime: catalog.Runtime) -> devices.Probe:
    """What ``runtime`` showed when it was started in a child: asked once per process and folder."""
    key = _probe_key(runtime)
    with _lock:
        found = _probes.get(key)
    if found is None:
        found = devices.probe(runtime.lib_dir)
        with _lock:
            found = _probes.setdefault(key, found)
    return found


def _runtime_records() -> list[dict[str, Any]]:
    """Every llama.cpp runtime and the devices it sees (the profile's ``runtimes``)."""
    runtimes = catalog.discover()
    return overview.as_records(runtimes, overview.probe_all(runtimes, runtime_probe))


def _llama_cpp_lib_files() -> list[str] | None:
    """File names in the installed llama_cpp package's lib/ folder (None: not installed), found without
    importing llama_cpp: the app process must not load an engine."""
    package = catalog.environment_package()
    if package is None:
        return None
    names: list[str] = []
    for folder in (package / "lib", package):
        if folder.is_dir():
            names += [p.name for p in folder.iterdir() if not p.is_dir()]
    return sorted(set(names))


def _backend_statuses() -> list[Any]:
    from backends import registry  # each engine module is imported to ask it: only when the machine is probed

    return registry.statuses()


def sources() -> Sources:
    """This machine as the probes read it: the hardware, what the engines say, the llama.cpp runtimes."""
    return Sources(llama_cpp_lib_files=_llama_cpp_lib_files, backend_statuses=_backend_statuses,
                   runtimes=_runtime_records)


def offload_hints(p: HardwareProfile) -> list[str]:
    """A GPU that no installed llama.cpp runtime can use: say which runtime to build. Judged by what each
    runtime's ggml saw (``p.runtimes``), else, for a profile without runtime probes, by the app's own
    llama.cpp build's libraries."""
    if not p.gpus:
        return []
    hints = []
    for runtime in p.runtimes or []:
        if runtime.backend != "cpu" and (runtime.problem or runtime.error):
            hints.append(f"The {runtime.name} runtime cannot start ({runtime.problem or runtime.error}), so loads "
                         f"use another: rebuild it with `quantdesk runtime build {runtime.backend}` or remove it "
                         f"with `quantdesk runtime rm {runtime.name}`.")
    if p.runtimes is not None:
        seen = {(d.vendor, r.backend) for r in p.runtimes if not (r.problem or r.error)
                for d in r.devices if d.type in ("gpu", "igpu") and not d.software}
        backends_for = {vendor: {b for v, b in seen if v == vendor} for vendor in choose.PREFERENCE}
    elif p.llama_cpp_gpu_backends is not None and "llama_cpp" not in p.absent:
        shipped = {"hip": "rocm"}
        libs = {shipped.get(lib, lib) for lib in p.llama_cpp_gpu_backends}
        backends_for = {vendor: libs & set(options) for vendor, options in choose.PREFERENCE.items()}
    else:
        return hints
    for vendor in dict.fromkeys(g.vendor for g in p.gpus):
        if vendor not in choose.PREFERENCE or backends_for.get(vendor):
            continue
        names = ", ".join(dict.fromkeys(g.name for g in p.gpus if g.vendor == vendor))
        options = choose.PREFERENCE[vendor]
        builds = " or ".join(f"`quantdesk runtime build {b}`" for b in reversed(options))
        hints.append(f"{names} is present, but no installed llama.cpp runtime can use it, so GGUF models run on the "
                     f"CPU. Build one with {builds} (or the Build button on the Hardware page; a first Vulkan build "
                     "takes about 15 minutes), and QuantDesk uses it from the next load.")
    return hints


def detect(src: Sources | None = None, **options: Any) -> HardwareProfile:
    """A fresh probe of the machine ``src`` reads (this one by default): the hardware's, with the runtimes'
    hints first. ``options`` go to app.hardware.detect (``measure_bandwidth``, ``timeout_s``, ``probes``)."""
    found = detect_hardware(src or sources(), **options)
    found.hints = offload_hints(found) + found.hints
    return found


def profile(*, fresh: bool = False, measure_bandwidth: bool = False) -> HardwareProfile:
    """This process's probe of this machine (made now if it has none yet, or when ``fresh``; then each runtime
    is started again too)."""
    global _profile
    if fresh or measure_bandwidth:
        with _lock:
            _probes.clear()
    elif _profile is not None:
        return _profile
    found = detect(measure_bandwidth=measure_bandwidth)
    with _lock:
        _profile = found
    return found


def gpus() -> list[tuple[str, str]]:
    """(vendor, name) of this machine's GPUs: the profile's, or where this process has none (``quantdesk runtime
    ls``, a chat planned with ``--hardware FILE``), the GPU probes' alone."""
    with _lock:
        found = _profile
    if found is None:
        found = detect_hardware(sources(), parts=GPU_PARTS)
    return [(g.vendor, g.name) for g in found.gpus]


def runtime_choice(model_path: str | Path | None = None, requested: str | None = None) -> choose.Choice:
    """The llama.cpp runtime for a load (app/runtimes/select.py) on this process's probe of the machine."""
    return select.for_load(model_path, requested, gpus=gpus(), probe=runtime_probe)


def runtime_overview() -> overview.Overview:
    """Every runtime with the choice a load gets now (``quantdesk runtime ls``), on this process's probe."""
    return select.overview(gpus(), runtime_probe)


def free_memory_bytes() -> int | None:
    """What the fit check counts as free now, RAM and GPU memory together (None: unknown): memory and GPUs
    read afresh, the runtimes not started again. What the pools' budgets start from."""
    from app.models.budget import free_memory_bytes as free_on

    return free_on(detect_hardware(sources(), parts=MEMORY_PARTS))


def profile_from_args(args: argparse.Namespace) -> HardwareProfile:
    """The profile named by ``--hardware`` (app.hardware.add_hardware_argument), or this machine's."""
    path = getattr(args, "hardware", None)
    return load_profile(path) if path else profile()
