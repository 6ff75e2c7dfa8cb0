"""What a llama.cpp load used, in words: the model bar and ``quantdesk chat`` say the same thing.

    Vulkan · llvmpipe (LLVM 15.0.6, 256 bits) (2.0 GiB) · 9/17 layers
    Vulkan0: model 71.1 MiB, KV 14.0 MiB, compute 300.8 MiB (estimated 392.0 MiB)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.runtimes.choose import backend_words
from app.datatypes import DeviceLoad, Loaded

MiB = 1 << 20
GiB = 1 << 30
HOST = "CPU"


def _backend_of(loaded: Loaded) -> str:
    """The backend that ran the load, from its GPU device's name (else the runtime's name)."""
    gpu = next((d for d in loaded.devices if d.name != HOST), None)
    if gpu is not None:
        for prefix, backend in (("Vulkan", "vulkan"), ("CUDA", "cuda"), ("ROCm", "rocm"), ("HIP", "rocm"),
                                ("Metal", "metal"), ("MTL", "metal")):
            if gpu.name.startswith(prefix):
                return backend
    return loaded.runtime or "cpu"


def placement(loaded: Loaded) -> str:
    """"Vulkan · llvmpipe (2.0 GiB) · 9/17 layers": runtime, the GPU layers went to, and how many."""
    gpu = next((d for d in loaded.devices if d.name != HOST and d.layers), None) or \
        next((d for d in loaded.devices if d.name != HOST), None)
    parts = [backend_words(_backend_of(loaded))]
    if gpu is not None:
        memory = f" ({gpu.free_bytes_before / GiB:.1f} GiB)" if gpu.free_bytes_before else ""
        parts.append(f"{gpu.description or gpu.name}{memory}")
    if gpu is None or not loaded.offloaded_layers or not loaded.offloadable_layers:
        parts.append("all layers on the CPU")
    else:
        parts.append(f"{loaded.offloaded_layers}/{loaded.offloadable_layers} layers")
    return " · ".join(parts)


def mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n < 10 * GiB else f"{n / GiB:.1f} GiB"


def device_line(device: DeviceLoad, estimated: int | None = None) -> str:
    """"Vulkan0: 8 layers, model 71.1 MiB, KV 14.0 MiB, compute 300.8 MiB (estimated 392.0 MiB)"."""
    parts = [f"model {mib(device.model_bytes)}", f"KV {mib(device.kv_bytes)}", f"compute {mib(device.compute_bytes)}"]
    if device.output_bytes:
        parts.append(f"output {mib(device.output_bytes)}")
    layers = f"{device.layers} layers, " if device.layers else ""
    total = f" = {mib(device.total_bytes)}"
    estimate = f" (estimated {mib(estimated)})" if estimated is not None else ""
    return f"{device.name}: {layers}{', '.join(parts)}{total}{estimate}"


def device_lines(loaded: Loaded, estimated: dict[str, int] | None = None) -> list[str]:
    """One line per device; ``estimated``: predicted buffer bytes per device name ("Vulkan0", "CPU")."""
    estimated = estimated or {}
    return [device_line(d, estimated.get(d.name)) for d in loaded.devices]


class EstimatedDevice(Protocol):
    """What is read of an Estimate's device (app/models/estimate.py DeviceUse)."""

    @property
    def name(self) -> str: ...
    @property
    def buffer_bytes(self) -> int: ...


def estimated_buffers(devices: Sequence[EstimatedDevice]) -> dict[str, int]:
    """Predicted llama.cpp buffers per device name from an Estimate's devices (app/models/estimate.py):
    weights + KV + compute, without the runtime overhead that llama.cpp does not log."""
    return {d.name.split(" ", 1)[0]: d.buffer_bytes for d in devices}
