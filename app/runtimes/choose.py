"""Which runtime runs a load, and the one sentence that says why.

Automatically: NVIDIA → the CUDA runtime if present, else Vulkan; AMD → ROCm, else Vulkan; Intel →
Vulkan; Apple → Metal; otherwise the CPU runtime. A GPU counts when a runtime that starts sees it
(its probe, app/runtimes/devices.py), so a runtime whose libraries cannot load is never chosen; a
CPU-type Vulkan device (lavapipe) never counts, except in tests (``QUANTDESK_TEST_SOFTWARE_VULKAN``).
A pin (per model or for every model, app/runtimes/pins.py) wins while its runtime starts; one that
cannot start falls back to the automatic choice with a sentence saying why.

``choose`` is pure: it is given the runtimes, a way to probe one, and the GPUs the hardware probes
found (for the sentence when no installed runtime can use them). ``app.runtimes.select`` feeds it
for a load; ``app.models.recommend`` feeds it a saved hardware profile's recorded probes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from app.datatypes import Device
from app.runtimes.devices import Probe

# Per GPU vendor, the runtimes that can run it, best first.
PREFERENCE: dict[str, tuple[str, ...]] = {
    "nvidia": ("cuda", "vulkan"), "amd": ("rocm", "vulkan"), "intel": ("vulkan",), "apple": ("metal",),
    "software": ("vulkan",),
}
BACKEND_WORDS = {"cpu": "CPU", "vulkan": "Vulkan", "cuda": "CUDA", "rocm": "ROCm", "metal": "Metal"}
VENDOR_WORDS = {"nvidia": "NVIDIA", "amd": "AMD", "intel": "Intel", "apple": "Apple"}


class RuntimeLike(Protocol):
    """What choosing reads of a runtime: a catalog.Runtime (frozen) or a profile's RuntimeInfo (read-only here)."""

    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def problem(self) -> str: ...


R = TypeVar("R", bound=RuntimeLike)  # the kind of runtime given, so ``probe`` may take that kind


@dataclass(frozen=True)
class Choice:
    name: str  # "" when no runtime can run llama.cpp at all
    backend: str
    reason: str
    probe: Probe = field(default_factory=Probe)
    fallback_from: str = ""  # a pinned runtime that could not start
    runtime_env: dict[str, str] = field(default_factory=dict)  # Runtime.host_env() of the chosen runtime

    @property
    def env(self) -> dict[str, str]:
        """What the engine host for this choice needs in its environment."""
        return {**self.runtime_env, **self.probe.env}

    @property
    def gpu(self) -> Device | None:
        """The device layers go to (the largest GPU this runtime sees), None for the CPU."""
        gpus = self.probe.gpus() if self.backend != "cpu" else []
        return max(gpus, key=lambda d: d.memory_total) if gpus else None

    def label(self) -> str:
        """"Vulkan · llvmpipe (2.0 GiB)" / "CPU"."""
        words = BACKEND_WORDS.get(self.backend, self.backend)
        return f"{words} · {self.gpu.label()}" if self.gpu else words


def backend_words(backend: str) -> str:
    return BACKEND_WORDS.get(backend, backend)


def choose(runtimes: Sequence[R], probe: Callable[[R], Probe],
           machine_gpus: Sequence[tuple[str, str]] = (), pin: tuple[str, str] | None = None) -> Choice:
    """The runtime for a load. ``machine_gpus``: (vendor, name) of the GPUs the hardware probes found;
    ``pin``: (runtime name, where it is pinned) or None."""
    usable = [r for r in runtimes if not r.problem]
    probes: dict[str, Probe] = {}

    def started(r: R) -> Probe:
        if r.name not in probes:
            probes[r.name] = probe(r)
        return probes[r.name]

    fallback_why = ""
    pinned_name = ""
    if pin is not None:
        name, where = pin
        pinned_name = name
        pinned = next((r for r in runtimes if r.name == name), None)
        if pinned is None:
            fallback_why = f"the runtime {name} pinned {where} is not installed"
        elif pinned.problem:
            fallback_why = f"the runtime {name} pinned {where} is broken: {pinned.problem}"
        elif not started(pinned).ok:
            fallback_why = f"the runtime {name} pinned {where} cannot start ({started(pinned).error})"
        else:
            return Choice(pinned.name, pinned.backend, f"{name} is pinned {where}", started(pinned))
    auto = _automatic(usable, started, machine_gpus, said=pinned_name if fallback_why else "")
    if fallback_why:
        return Choice(auto.name, auto.backend, f"{fallback_why}; {auto.reason[0].lower()}{auto.reason[1:]}",
                      auto.probe, fallback_from=pinned_name)
    return auto


def _automatic(runtimes: Sequence[R], started: Callable[[R], Probe],
               machine_gpus: Sequence[tuple[str, str]], said: str = "") -> Choice:
    """``said``: a runtime whose failure the sentence already gives."""
    best: tuple[tuple[int, int], R, Device] | None = None
    failed: list[str] = []
    for runtime in runtimes:
        if runtime.backend == "cpu":
            continue
        probe = started(runtime)
        if not probe.ok:
            if runtime.name != said:
                failed.append(f"the {runtime.name} runtime cannot start ({probe.error})")
            continue
        for gpu in probe.gpus():
            order = PREFERENCE.get(gpu.vendor, ())
            if runtime.backend in order:
                rank = (order.index(runtime.backend), -gpu.memory_total)
                if best is None or rank < best[0]:
                    best = (rank, runtime, gpu)
    if best is not None:
        _, runtime, gpu = best
        reason = f"{gpu.description or gpu.name} runs on the {backend_words(runtime.backend)} runtime"
        better = PREFERENCE.get(gpu.vendor, ())[:best[0][0]]
        if better:
            reason += (f" (no {backend_words(better[0])} runtime is installed: `quantdesk runtime build "
                       f"{better[0]}` is usually faster)")
        elif gpu.software:
            reason += " (a software Vulkan device, allowed for tests only)"
        return Choice(runtime.name, runtime.backend, reason, started(runtime))

    cpu = next((r for r in runtimes if r.backend == "cpu" and started(r).ok), None)
    cpu = cpu or next((r for r in runtimes if started(r).ok), None)
    if cpu is None:
        why = "; ".join(failed) or "no llama.cpp runtime is installed"
        return Choice("", "", f"No llama.cpp runtime can run here: {why}.")
    if machine_gpus:
        vendor, gpu_name = machine_gpus[0]
        wanted = PREFERENCE.get(vendor, ("vulkan",))
        reason = (f"{gpu_name} is present, but no installed runtime can use it, so the CPU runs the model: "
                  f"build one with `quantdesk runtime build {wanted[-1] if len(wanted) > 1 else wanted[0]}`"
                  + (f" or `{wanted[0]}`" if len(wanted) > 1 else ""))
    else:
        reason = "No GPU was found, so the CPU runs the model"
    if failed:
        reason += "; " + "; ".join(failed)
    return Choice(cpu.name, cpu.backend, reason, started(cpu))
