"""Where the probes read the machine from. Everything a probe touches goes through ``Sources``, so
tests replay recorded outputs of other machines (tests/hardware/recordings/) through the same code."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

COMMAND_TIMEOUT_S = 2.0


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def run_command(argv: Sequence[str]) -> str:
    """stdout of a command; raises OSError when it is missing, fails or takes too long."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise OSError(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


def _virtual_memory() -> tuple[int, int]:
    import psutil

    vm = psutil.virtual_memory()
    return vm.total, vm.available


def _cpu_count(logical: bool) -> int | None:
    import psutil

    count: int | None = psutil.cpu_count(logical=logical)  # None where the OS does not say
    return count


def _nvml() -> Any:
    import pynvml  # nvidia-ml-py; only the NVIDIA probe imports it

    return pynvml


def _models_dir() -> str:
    from app import settings

    return str(settings.models_dir())


def _processor_name() -> str:
    """The CPU's marketing name on Windows (the registry), else whatever platform knows."""
    if sys.platform == "win32":  # winreg exists on Windows only (mypy reads this guard too)
        import winreg

        try:
            key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"HARDWARE\DESCRIPTION\System\CentralProcessor\0")
            return str(winreg.QueryValueEx(key, "ProcessorNameString")[0]).strip()
        except OSError:
            pass
    return platform.processor()


def _windows_feature(code: int) -> bool:
    import ctypes

    return bool(ctypes.windll.kernel32.IsProcessorFeaturePresent(code))  # type: ignore[attr-defined]


def _mlx_device_info() -> dict[str, Any]:
    """Metal's own figures through mlx (``mx.device_info()``), asked in a child process: the app
    process never imports an engine library. Raises OSError when mlx is not installed."""
    import json
    from importlib.util import find_spec

    if find_spec("mlx") is None:
        raise OSError("mlx is not installed")
    code = ("import json, mlx.core as mx; f = getattr(mx, 'device_info', None) or mx.metal.device_info; "
            "print(json.dumps({k: v for k, v in f().items() if isinstance(v, (int, float, str))}))")
    info: dict[str, Any] = json.loads(run_command([sys.executable, "-c", code]))  # the object the code prints
    return info


@dataclass
class Sources:
    """The machine as the probes see it. Defaults read this machine; tests pass recordings."""

    system: str = field(default_factory=platform.system)  # Linux | Darwin | Windows
    machine: str = field(default_factory=platform.machine)  # x86_64 | AMD64 | arm64 | aarch64
    processor: Callable[[], str] = _processor_name  # Windows and unknown systems only
    read_text: Callable[[str], str] = read_text
    list_dir: Callable[[str], list[str]] = os.listdir
    run: Callable[[Sequence[str]], str] = run_command
    virtual_memory: Callable[[], tuple[int, int]] = _virtual_memory  # (total, available) bytes
    cpu_count: Callable[[bool], int | None] = _cpu_count
    nvml: Callable[[], Any] = _nvml  # returns a pynvml-like module
    disk_free: Callable[[str], int] = field(default=lambda path: shutil.disk_usage(path).free)
    path_exists: Callable[[str], bool] = os.path.exists
    models_dir: Callable[[], str] = _models_dir
    windows_feature: Callable[[int], bool] = _windows_feature
    mlx_device_info: Callable[[], dict[str, Any]] = _mlx_device_info
    # What the app's engines and llama.cpp runtimes see. Hardware detection knows neither app/runtimes nor the
    # engines, so by default these are not asked (None); app/machine.py fills them in for this machine, and
    # recordings with what they recorded.
    llama_cpp_lib_files: Callable[[], list[str] | None] | None = None  # the function answers None: not installed
    backend_statuses: Callable[[], list[Any]] | None = None
    runtimes: Callable[[], list[dict[str, Any]] | None] | None = None  # answers None: not known (old recordings)
