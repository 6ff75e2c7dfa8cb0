"""What llama.cpp put where, read from its own load log.

llama.cpp has no API for the size of the buffers it allocates per device, but it logs each one while
loading (llama-cpp-python 0.3.36, llama.cpp's src/llama-model.cpp, llama-kv-cache.cpp,
llama-context.cpp):

    llama_model_load_from_file_impl: using device Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)) (...) - 2048 MiB free
    load_tensors: layer   7 assigned to device Vulkan0, is_swa = 0      (debug level)
    load_tensors: offloaded 9/17 layers to GPU
    load_tensors:      Vulkan0 model buffer size =    71.12 MiB
    load_tensors:   CPU_Mapped model buffer size =   137.50 MiB
    llama_context: Vulkan_Host  output buffer size =     0.58 MiB
    llama_kv_cache:    Vulkan0 KV buffer size =    14.00 MiB
    sched_reserve:    Vulkan0 compute buffer size =   300.75 MiB
    sched_reserve: Vulkan_Host compute buffer size =    13.01 MiB

Buffer names are a device name ("Vulkan0", "CUDA1", "CPU"), or a device family's host memory
("Vulkan_Host", "CUDA_Host") or a CPU buffer type ("CPU_Mapped", "CPU_REPACK"): everything that is not
a GPU device's own name lives in host memory. The sizes are as precise as the log (1/100 MiB).
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from app.datatypes import DeviceLoad

MiB = 1 << 20
HOST = "CPU"

_USING = re.compile(r"using device (\S+) \((.*)\) \(.*\) - (\d+) MiB free$")
_LAYER = re.compile(r"load_tensors: layer\s+(\d+) assigned to device (\S+),")
_OFFLOADED = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
_BUFFERS = {
    "model": re.compile(r"^load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB"),
    "kv": re.compile(r"^llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB"),
    "kv_rs": re.compile(r"^llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB"),
    "compute": re.compile(r"^sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB"),
    "output": re.compile(r"^llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB"),
}


@dataclass
class LoadLog:
    """The parsed load log: buffers by name and kind, the devices used and the layer placement."""

    buffers: dict[str, dict[str, int]] = field(default_factory=dict)  # "Vulkan0" -> {"model": bytes, ...}
    devices: dict[str, tuple[str, int]] = field(default_factory=dict)  # "Vulkan0" -> (description, free bytes)
    layer_device: dict[int, str] = field(default_factory=dict)  # layer index -> device name
    offloaded: tuple[int, int] | None = None  # (layers on GPUs, offloadable layers), output layer included

    def feed(self, line: str) -> None:
        line = line.rstrip("\n")
        if m := _USING.search(line):
            self.devices[m[1]] = (m[2], int(m[3]) * MiB)
        elif m := _LAYER.search(line):
            self.layer_device[int(m[1])] = m[2]
        elif m := _OFFLOADED.search(line):
            self.offloaded = (int(m[1]), int(m[2]))
        else:
            for kind, pattern in _BUFFERS.items():
                if m := pattern.search(line):
                    kind = "kv" if kind == "kv_rs" else kind
                    sizes = self.buffers.setdefault(m[1], {})
                    sizes[kind] = sizes.get(kind, 0) + round(float(m[2]) * MiB)
                    return

    def device_of_buffer(self, buffer: str) -> str:
        """The device a buffer's memory belongs to: a GPU device's own name, else the host."""
        return buffer if buffer in self.devices else HOST

    def device_loads(self, n_layer: int) -> list[DeviceLoad]:
        """One entry per device that holds something (GPUs first in llama.cpp's order, the host last).
        ``layers`` counts the repeating layers (blocks) assigned to the device; the output layer
        (index ``n_layer``) is reported by ``offloaded``."""
        per: dict[str, dict[str, int]] = {}
        for buffer, sizes in self.buffers.items():
            totals = per.setdefault(self.device_of_buffer(buffer), {})
            for kind, size in sizes.items():
                totals[kind] = totals.get(kind, 0) + size
        layers: dict[str, int] = {}
        for il, device in self.layer_device.items():
            if il < n_layer:
                layers[self.device_of_buffer(device)] = layers.get(self.device_of_buffer(device), 0) + 1
        names = [d for d in self.devices if d in per or d in layers]
        if HOST in per or HOST in layers or not names:
            names.append(HOST)
        loads = []
        for name in names:
            sizes = per.get(name, {})
            description, free = self.devices.get(name, ("", None))
            loads.append(DeviceLoad(name=name, description=description, layers=layers.get(name, 0),
                                    model_bytes=sizes.get("model", 0), kv_bytes=sizes.get("kv", 0),
                                    compute_bytes=sizes.get("compute", 0), output_bytes=sizes.get("output", 0),
                                    free_bytes_before=free))
        return loads


def parse(text: str) -> LoadLog:
    log = LoadLog()
    for line in text.splitlines():
        log.feed(line)
    return log


@contextlib.contextmanager
def capturing(llama_cpp: Any) -> Iterator[LoadLog]:
    """Parse llama.cpp's log while a model loads, still writing every line to stderr (the engine log).

    llama.cpp logs through one process-wide callback (``llama_log_set`` also sets ggml's); afterwards
    llama-cpp-python's own logger is put back."""
    log = LoadLog()
    pending = [""]

    def on_log(_level: int, text: bytes, _data: ctypes.c_void_p) -> None:
        chunk = text.decode("utf-8", "replace")
        sys.stderr.write(chunk)
        pending[0] += chunk
        *lines, pending[0] = pending[0].split("\n")
        for line in lines:
            log.feed(line)

    callback = llama_cpp.llama_log_callback(on_log)  # kept alive until llama-cpp-python's logger is back
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    try:
        yield log
    finally:
        if pending[0]:
            log.feed(pending[0])
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
        sys.stderr.flush()
