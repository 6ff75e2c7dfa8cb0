"""``detect()``: run every probe at once, each in its own thread with one shared deadline, and put
what they found into a HardwareProfile. A probe that fails or hangs leaves its part absent with the
reason; it never raises and never holds the command up past the deadline."""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.hardware import bandwidth, gpus, hints
from app.hardware.cpu import parse_sysctl, probe_cpu
from app.hardware.profile import BackendSupport, GpuInfo, HardwareProfile, RuntimeInfo, runtime_info_from_dict
from app.hardware.sources import Sources

PROBE_TIMEOUT_S = 3.0
Probe = Callable[[Sources], Any]


def probe_memory(src: Sources) -> tuple[int, int | None]:
    try:
        return src.virtual_memory()
    except ImportError:  # no psutil: the platform's own total still tells the fit estimator enough
        if src.system == "Darwin":
            return int(parse_sysctl(src.run(["sysctl", "hw.memsize"]))["hw.memsize"]), None
        raise


def probe_disk(src: Sources) -> tuple[str, int]:
    """Free bytes where models are stored (or will be: the nearest folder that exists)."""
    path = os.path.abspath(src.models_dir())
    while not src.path_exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path, src.disk_free(path)


def probe_backends(src: Sources) -> list[BackendSupport]:
    assert src.backend_statuses is not None  # detect() runs this probe only where the sources can answer it
    return [BackendSupport(s.name, s.availability.available, s.availability.reason, s.availability.hint)
            for s in src.backend_statuses()]


def probe_llama_cpp(src: Sources) -> list[str] | None:
    assert src.llama_cpp_lib_files is not None
    files = src.llama_cpp_lib_files()
    if files is None:
        raise gpus.ProbeAbsent("llama-cpp-python is not installed")
    found = hints.llama_gpu_backends(files)
    if found is None:
        raise gpus.ProbeAbsent("the llama.cpp build has no separate ggml libraries, so its GPU support cannot be read")
    return found


def probe_runtimes(src: Sources) -> list[RuntimeInfo] | None:
    """The llama.cpp runtimes and what each one's ggml sees (None: not known, as in older recordings)."""
    assert src.runtimes is not None
    records = src.runtimes()
    return None if records is None else [runtime_info_from_dict(r) for r in records]


def _metal_cache_file() -> Path:
    from app import paths

    return paths.cache_dir() / "metal.json"


def probe_apple(src: Sources) -> list[GpuInfo]:
    """Apple GPU, with Metal's figures cached between runs (they cost a child process to ask)."""
    file = _metal_cache_file()
    try:
        cache = json.loads(file.read_text(encoding="utf-8"))
        cache = cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        cache = {}
    before = dict(cache)
    found = gpus.probe_apple(src, cache)
    if cache != before:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(cache), encoding="utf-8")
        except OSError:  # a read-only cache only costs the next run a child process
            pass
    return found


# The probes that need an answer the hardware sources do not have by default (Sources: None): skipped then.
ASKED_ABOVE = {"backends": "backend_statuses", "llama_cpp": "llama_cpp_lib_files", "runtimes": "runtimes"}
GPU_PARTS = ("nvidia", "amd", "apple")
MEMORY_PARTS = ("memory", *GPU_PARTS)  # what free memory is read from

PROBES: dict[str, Probe] = {
    "cpu": probe_cpu,
    "memory": probe_memory,
    "nvidia": gpus.probe_nvidia,
    "amd": gpus.probe_amd,
    "apple": probe_apple,
    "disk": probe_disk,
    "backends": probe_backends,
    "llama_cpp": probe_llama_cpp,
    "runtimes": probe_runtimes,
}


def run_probes(probes: dict[str, Callable[[], Any]], timeout_s: float) -> tuple[dict[str, Any], dict[str, str]]:
    """Run every probe in a daemon thread (a hung one cannot keep the process alive); wait for all
    of them until one shared deadline. Returns (results, absent reasons)."""
    results: dict[str, Any] = {}
    absent: dict[str, str] = {}
    lock = threading.Lock()

    def body(name: str, probe: Callable[[], Any]) -> None:
        try:
            value, reason = probe(), None
        except gpus.ProbeAbsent as exc:
            value, reason = None, str(exc)
        except Exception as exc:  # fail soft: one broken probe must not take the others down
            value, reason = None, f"the {name} probe failed: {type(exc).__name__}: {exc}"
        with lock:
            if reason is None:
                results[name] = value
            else:
                absent[name] = reason

    threads = {name: threading.Thread(target=body, args=(name, probe), name=f"hw-probe-{name}", daemon=True)
               for name, probe in probes.items()}
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        for name, thread in threads.items():
            if thread.is_alive():
                absent[name] = f"the {name} probe did not answer within {timeout_s:g} s"
        return dict(results), dict(absent)


def detect(sources: Sources | None = None, *, probes: dict[str, Probe] | None = None,
           timeout_s: float = PROBE_TIMEOUT_S, measure_bandwidth: bool = False,
           parts: tuple[str, ...] | None = None) -> HardwareProfile:
    """The machine ``sources`` read. ``parts``: only these probes (``MEMORY_PARTS``: a fresh reading of free
    memory), else all of them. The engines and llama.cpp runtimes are probed only where the sources say how
    (app/machine.py composes them; this package imports neither)."""
    src = sources or Sources()
    chosen = {**PROBES, **(probes or {})}
    chosen = {name: probe for name, probe in chosen.items()
              if (parts is None or name in parts)
              and (name not in ASKED_ABOVE or getattr(src, ASKED_ABOVE[name]) is not None or name in (probes or {}))}
    results, absent = run_probes({name: functools.partial(probe, src) for name, probe in chosen.items()}, timeout_s)

    profile = HardwareProfile(os=src.system.lower(), arch=src.machine, absent=absent)
    if "cpu" in results:
        profile.cpu = results["cpu"]
    else:
        profile.cpu.arch = src.machine
    if "memory" in results:
        profile.ram_total_bytes, profile.ram_available_bytes = results["memory"]
    for vendor in ("nvidia", "amd", "apple"):
        profile.gpus += results.get(vendor, [])
    for gpu in profile.gpus:
        if gpu.vendor == "apple" and gpu.working_set_limit_bytes and profile.ram_available_bytes is not None:
            gpu.vram_free_bytes = min(profile.ram_available_bytes, gpu.working_set_limit_bytes)
    if "disk" in results:
        profile.disk_path, profile.disk_free_bytes = results["disk"]
    profile.backends = results.get("backends", [])
    profile.llama_cpp_gpu_backends = results.get("llama_cpp")
    profile.runtimes = results.get("runtimes")

    if measure_bandwidth:
        profile.ram_bandwidth_gbps = bandwidth.measure_and_cache(profile.cpu.model, profile.ram_total_bytes)
    else:
        profile.ram_bandwidth_gbps = bandwidth.cached(profile.cpu.model, profile.ram_total_bytes)
    profile.hints = hints.build_hints(profile)
    return profile
