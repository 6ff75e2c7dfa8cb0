"""Replays a recorded machine (tests/hardware/recordings/<name>/) through the real probes.

Only what cannot exist here is faked: the files are the recorded files, commands answer with the
recorded output, and NVML is a stand-in that returns the recorded values of each pynvml call and
raises pynvml's own errors when a machine has no NVIDIA driver."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

from app.hardware.sources import Sources
from backends.base import Availability
from backends.registry import BackendStatus

RECORDINGS = Path(__file__).parent / "recordings"
MACHINES = sorted(p.name for p in RECORDINGS.iterdir() if (p / "machine.json").is_file())


class RecordedNvml:
    """The subset of pynvml the NVIDIA probe calls, answering from nvml.json."""

    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM

    def __init__(self, data: dict[str, Any] | None) -> None:
        self._data = data

    def nvmlInit(self) -> None:
        if self._data is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._data["nvmlSystemGetDriverVersion"]

    def nvmlDeviceGetCount(self) -> int:
        return len(self._data["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self._data["devices"][index]

    def nvmlDeviceGetName(self, handle: dict[str, Any]) -> str:
        return handle["nvmlDeviceGetName"]

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(**handle["nvmlDeviceGetMemoryInfo"])

    def nvmlDeviceGetCudaComputeCapability(self, handle: dict[str, Any]) -> tuple[int, int]:
        return tuple(handle["nvmlDeviceGetCudaComputeCapability"])

    def nvmlDeviceGetMemoryBusWidth(self, handle: dict[str, Any]) -> int:
        return handle["nvmlDeviceGetMemoryBusWidth"]

    def nvmlDeviceGetMaxClockInfo(self, handle: dict[str, Any], clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_MEM
        return handle["nvmlDeviceGetMaxClockInfo"]["NVML_CLOCK_MEM"]


def _sysctl(text: str):
    """Answers ``sysctl NAME...`` like macOS's sysctl: each name prints its own line or its subtree."""
    lines = text.splitlines()

    def run(argv):
        assert argv[0] == "sysctl", argv
        out = []
        for name in argv[1:]:
            found = [ln for ln in lines if ln.split(": ", 1)[0] == name or ln.startswith(name + ".")]
            if not found:
                raise OSError(f"sysctl: unknown oid '{name}'")
            out += found
        return "\n".join(out) + "\n"

    return run


def recorded_sources(name: str, models_dir: str | None = None) -> Sources:
    root = RECORDINGS / name
    machine = json.loads((root / "machine.json").read_text())
    fs = root / "fs"

    def local(path: str) -> Path:
        return fs / path.lstrip("/")

    def read_text(path: str) -> str:
        return local(path).read_text(encoding="utf-8")

    def list_dir(path: str) -> list[str]:
        return os.listdir(local(path))

    def run(argv):
        if (root / "sysctl.txt").is_file() and argv[0] == "sysctl":
            return _sysctl((root / "sysctl.txt").read_text())(argv)
        raise FileNotFoundError(2, "No such file or directory", argv[0])

    def mlx_device_info():
        file = root / "mlx_device_info.json"
        if not file.is_file():
            raise OSError("mlx is not installed")
        return json.loads(file.read_text())

    nvml_file = root / "nvml.json"
    nvml = RecordedNvml(json.loads(nvml_file.read_text()) if nvml_file.is_file() else None)
    counts = machine.get("cpu_count", {})
    features = {int(k) for k, v in machine.get("windows_features", {}).items() if v}
    vm = machine["virtual_memory"]
    statuses = [BackendStatus(b["name"], (), Availability(b["available"], b["reason"])) for b in machine["backends"]]
    return Sources(
        system=machine["system"], machine=machine["machine"],
        processor=lambda: machine.get("processor", ""),
        read_text=read_text, list_dir=list_dir, run=run,
        virtual_memory=lambda: (vm["total"], vm["available"]),
        cpu_count=lambda logical: counts.get("logical" if logical else "physical"),
        nvml=lambda: nvml,
        disk_free=lambda path: machine["disk_free"],
        models_dir=(lambda: models_dir) if models_dir else Sources.models_dir,
        llama_cpp_lib_files=lambda: machine["llama_cpp_lib_files"],
        backend_statuses=lambda: statuses,
        windows_feature=lambda code: code in features,
        mlx_device_info=mlx_device_info,
        runtimes=lambda: machine.get("runtimes"),
    )
