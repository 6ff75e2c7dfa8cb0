"""GPUs: NVIDIA through NVML, AMD through Linux sysfs, Apple Silicon through sysctl (and Metal via mlx)."""

from __future__ import annotations

import json
from typing import Any

from app.hardware import tables
from app.hardware.cpu import parse_sysctl, to_int
from app.hardware.profile import GpuInfo
from app.hardware.sources import Sources

GIB = 1024**3
MIB = 1024**2


class ProbeAbsent(Exception):
    """The part this probe looks for is not on this machine (or not visible); the message says why."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- NVIDIA --------------------------------------------------------------------------------------

def probe_nvidia(src: Sources) -> list[GpuInfo]:
    try:
        nvml = src.nvml()
    except ImportError as exc:
        raise ProbeAbsent(f"nvidia-ml-py is not installed ({exc})") from None
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / NoPermission ...
        raise ProbeAbsent(f"no NVIDIA driver answered (NVML: {exc})") from None
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        gpus = [_nvidia_gpu(nvml, i, driver) for i in range(nvml.nvmlDeviceGetCount())]
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting NVML down is best effort; the figures are already read
            pass
    if not gpus:
        raise ProbeAbsent("the NVIDIA driver is loaded but reports no GPU")
    return gpus


def _nvidia_gpu(nvml: Any, index: int, driver: str) -> GpuInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    gpu = GpuInfo(index=index, vendor="nvidia", name=_text(nvml.nvmlDeviceGetName(handle)), driver=driver)
    try:
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        gpu.vram_total_bytes, gpu.vram_free_bytes = int(mem.total), int(mem.free)
    except Exception:  # unified-memory parts (GB10, Jetson) answer "Not Supported"
        gpu.unified = True
    try:
        major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
        gpu.compute_capability = f"{major}.{minor}"
    except Exception:  # very old drivers; the rest stands
        pass
    try:
        bus_bits = int(nvml.nvmlDeviceGetMemoryBusWidth(handle))
        mem_mhz = int(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM))
        if bus_bits > 0 and mem_mhz > 0:
            # NVML's memory clock is half the data rate (DDR): bytes/s = bits/8 x MHz x 1e6 x 2.
            gpu.bandwidth_gbps = round(bus_bits / 8 * mem_mhz * 2 / 1000, 1)
            gpu.bandwidth_source = "nvml"
    except Exception:  # a driver that cannot say: the table of known chips below answers instead
        pass
    if gpu.bandwidth_gbps is None:
        for chip, gbps in tables.NVIDIA_BANDWIDTH_GBPS.items():
            if chip in gpu.name:
                gpu.bandwidth_gbps, gpu.bandwidth_source = gbps, "table"
    return gpu


# --- AMD (Linux sysfs, amdgpu driver) ------------------------------------------------------------

DRM = "/sys/class/drm"


def probe_amd(src: Sources) -> list[GpuInfo]:
    if src.system != "Linux":
        raise ProbeAbsent(f"AMD GPUs are read from Linux sysfs; not available on {src.system}")
    try:
        cards = sorted((n for n in src.list_dir(DRM) if n.startswith("card") and n[4:].isdigit()),
                       key=lambda n: int(n[4:]))
    except OSError as exc:
        raise ProbeAbsent(f"no {DRM} ({exc.strerror or exc})") from None
    gpus: list[GpuInfo] = []
    for card in cards:
        dev = f"{DRM}/{card}/device"
        try:
            if src.read_text(f"{dev}/vendor").strip().lower() != "0x1002":
                continue
            total = int(src.read_text(f"{dev}/mem_info_vram_total"))
        except (OSError, ValueError):
            continue  # not AMD, or not driven by amdgpu (radeon exposes no mem_info_*)
        gpus.append(_amd_gpu(src, dev, len(gpus), total))
    if not gpus:
        raise ProbeAbsent("no GPU driven by amdgpu in /sys/class/drm")
    return gpus


def _amd_gpu(src: Sources, dev: str, index: int, total: int) -> GpuInfo:
    def read(name: str) -> str | None:
        try:
            return src.read_text(f"{dev}/{name}").strip()
        except OSError:
            return None

    device_id = int(read("device") or "0", 16)
    known_name, gbps, apu = tables.amd_device(device_id, total)
    used = read("mem_info_vram_used")
    gtt = read("mem_info_gtt_total")
    gpu = GpuInfo(index=index, vendor="amd", name=read("product_name") or known_name or f"AMD GPU 0x{device_id:04x}",
                  vram_total_bytes=total, vram_free_bytes=total - int(used) if used and used.isdigit() else None,
                  driver="amdgpu", unified=apu)
    if apu and gtt and gtt.isdigit():
        gpu.shared_bytes = int(gtt)
    if gbps is not None:
        gpu.bandwidth_gbps, gpu.bandwidth_source = float(gbps), "table"
    return gpu


# --- Apple Silicon -------------------------------------------------------------------------------

def default_working_set(ram_bytes: int) -> int:
    """Metal's default recommendedMaxWorkingSetSize when nothing better is known.

    Observed on macOS 13-15 (llama.cpp's ggml_metal_init log line "recommendedMaxWorkingSetSize"):
    2/3 of RAM up to 32 GiB (8 GiB -> 5461.34 MiB, 16 GiB -> 10922.67 MiB, 32 GiB -> 21845.34 MiB,
    ggml-org/llama.cpp#2048, ollama/ollama#434) and 3/4 above it (64 GiB -> 49152 MiB,
    ggml-org/llama.cpp#1870). Newer macOS versions allow somewhat more on big machines, so Metal's
    own figure (through mlx) wins whenever it can be had."""
    return ram_bytes * 2 // 3 if ram_bytes <= 32 * GIB else ram_bytes * 3 // 4


def probe_apple(src: Sources, cache: dict[str, Any] | None = None) -> list[GpuInfo]:
    """The Apple Silicon GPU. ``cache`` (a dict, saved by the caller) keeps Metal's figures between
    runs: asking mlx costs a child process, the answer only changes with the limit."""
    if src.system != "Darwin":
        raise ProbeAbsent(f"Apple GPUs exist on macOS only, this is {src.system}")
    values = parse_sysctl(src.run(["sysctl", "hw", "machdep.cpu"]))
    brand = values.get("machdep.cpu.brand_string", "")
    if values.get("hw.optional.arm64") != "1" and not brand.startswith("Apple"):
        raise ProbeAbsent(f"an Intel Mac ({brand or 'unknown CPU'}): its GPU is not used by the backends")
    ram = int(values["hw.memsize"])
    chip = tables.apple_chip(brand)
    gpu = GpuInfo(index=0, vendor="apple", name=brand or "Apple Silicon", vram_total_bytes=ram, unified=True,
                  driver="Metal")
    gbps = tables.apple_bandwidth(chip, to_int(values.get("hw.physicalcpu")))
    if gbps is not None:
        gpu.bandwidth_gbps, gpu.bandwidth_source = float(gbps), "table"
    limit_mb = _wired_limit_mb(src)
    key = f"{brand}|{ram}|{limit_mb}"
    metal = (cache or {}).get(key)
    if metal is None:
        try:
            metal = src.mlx_device_info().get("max_recommended_working_set_size")
        except (OSError, ValueError, json.JSONDecodeError):
            metal = None
        if metal and cache is not None:
            cache[key] = metal
    if metal:
        gpu.working_set_limit_bytes, gpu.working_set_source = int(metal), "metal"
    elif limit_mb:
        gpu.working_set_limit_bytes, gpu.working_set_source = limit_mb * MIB, "iogpu.wired_limit_mb"
    else:
        gpu.working_set_limit_bytes, gpu.working_set_source = default_working_set(ram), "default rule"
    return [gpu]


def _wired_limit_mb(src: Sources) -> int:
    """The user's GPU wired-memory limit: ``iogpu.wired_limit_mb`` (macOS 14+), ``debug.iogpu.wired_limit``
    in bytes on macOS 13; 0 means the default."""
    for name, scale in (("iogpu.wired_limit_mb", 1), ("debug.iogpu.wired_limit", MIB)):
        try:
            value = parse_sysctl(src.run(["sysctl", name])).get(name)
        except OSError:
            continue
        if value and value.isdigit() and int(value) > 0:
            return int(value) // scale
    return 0
