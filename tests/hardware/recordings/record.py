"""Capture this machine as a recording the replay understands: ``python tests/hardware/recordings/record.py NAME``.

Writes tests/hardware/recordings/NAME/ (see README.md for the files). Review it before committing: it
holds the CPU's /proc/cpuinfo, GPU names and sizes, and no user data."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from app.hardware.sources import Sources  # noqa: E402


def _copy(src: str, root: Path) -> None:
    try:
        data = Path(src).read_bytes()
    except OSError:
        return
    dest = root / "fs" / src.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def record_nvml() -> dict | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVIDIA driver (or no pynvml) on the machine recorded: nothing to record
        return None
    devices = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        devices.append({
            "nvmlDeviceGetName": pynvml.nvmlDeviceGetName(h),
            "nvmlDeviceGetMemoryInfo": {"total": mem.total, "free": mem.free, "used": mem.used},
            "nvmlDeviceGetCudaComputeCapability": list(pynvml.nvmlDeviceGetCudaComputeCapability(h)),
            "nvmlDeviceGetMemoryBusWidth": pynvml.nvmlDeviceGetMemoryBusWidth(h),
            "nvmlDeviceGetMaxClockInfo": {"NVML_CLOCK_MEM": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)},
        })
    data = {"nvmlSystemGetDriverVersion": pynvml.nvmlSystemGetDriverVersion(), "devices": devices}
    pynvml.nvmlShutdown()
    return data


def main(name: str) -> None:
    import psutil

    root = Path(__file__).parent / name
    root.mkdir(parents=True, exist_ok=True)
    src = Sources()
    for path in ("/proc/cpuinfo", "/proc/device-tree/model"):
        _copy(path, root)
    drm = "/sys/class/drm"
    if os.path.isdir(drm):
        for entry in os.listdir(drm):
            (root / "fs" / drm.lstrip("/") / entry).mkdir(parents=True, exist_ok=True)
            for f in ("vendor", "device", "revision", "subsystem_vendor", "subsystem_device", "product_name",
                      "mem_info_vram_total", "mem_info_vram_used", "mem_info_vis_vram_total", "mem_info_gtt_total",
                      "mem_info_gtt_used"):
                _copy(f"{drm}/{entry}/device/{f}", root)
    if platform.system() == "Darwin":
        out = subprocess.run(["sysctl", "hw", "machdep.cpu", "iogpu"], capture_output=True, text=True).stdout
        (root / "sysctl.txt").write_text(out)
        try:
            (root / "mlx_device_info.json").write_text(json.dumps(src.mlx_device_info(), indent=2))
        except OSError:
            pass
    nvml = record_nvml()
    if nvml:
        (root / "nvml.json").write_text(json.dumps(nvml, indent=2) + "\n")
    vm = psutil.virtual_memory()
    machine = {
        "description": f"captured with record.py on {platform.platform()}",
        "system": platform.system(), "machine": platform.machine(), "processor": src.processor(),
        "cpu_count": {"logical": psutil.cpu_count(True), "physical": psutil.cpu_count(False)},
        "virtual_memory": {"total": vm.total, "available": vm.available},
        "disk_free": shutil.disk_usage(os.path.expanduser("~")).free,
        "llama_cpp_lib_files": src.llama_cpp_lib_files(),
        "runtimes": src.runtimes(),
        "backends": [{"name": s.name, "available": s.availability.available, "reason": s.availability.reason}
                     for s in src.backend_statuses()],
    }
    if platform.system() == "Windows":
        from app.hardware.cpu import WINDOWS_FEATURES

        machine["windows_features"] = {str(c): src.windows_feature(c) for c in WINDOWS_FEATURES}
    (root / "machine.json").write_text(json.dumps(machine, indent=2) + "\n")
    print(f"recorded {root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else platform.node())
