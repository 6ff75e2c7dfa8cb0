"""The hardware profile: what the fit estimator and the recommender plan with.

It round-trips through JSON (``quantdesk hw --json`` writes it, ``--hardware FILE`` reads it back),
so users can save and edit a profile to plan for another machine. Byte counts are ints; anything a
probe could not find is None, with the reason in ``absent``.

GPU memory, per vendor:
- NVIDIA / AMD discrete: ``vram_total_bytes`` is the card's own memory.
- Apple Silicon: ``unified`` is true, ``vram_total_bytes`` is the whole unified memory, and
  ``working_set_limit_bytes`` is what Metal lets the GPU wire (plan with ``usable_bytes()``).
- AMD APUs: ``unified`` is true, ``vram_total_bytes`` is the BIOS carve-out and
  ``shared_bytes`` the system memory the driver may map for the GPU (GTT).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.datatypes import Device
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance  # what dataclasses.fields() takes; exists for type checkers only

SCHEMA_VERSION = 1


class HardwareProfileError(QuantDeskError):
    """A saved hardware profile is missing, unreadable or not a profile."""


@dataclass
class CpuInfo:
    model: str = ""
    arch: str = ""  # x86_64 | arm64 | aarch64 ...
    physical_cores: int | None = None
    logical_cores: int | None = None
    flags: list[str] = field(default_factory=list)  # normalised: avx, avx2, avx512f, neon, ...
    vendor: str = ""  # GenuineIntel | AuthenticAMD | Apple | ARM implementer ...

    def has(self, flag: str) -> bool:
        return flag in self.flags


@dataclass
class GpuInfo:
    index: int  # the device's index within its vendor's API (NVML / sysfs card order / Metal)
    vendor: str  # nvidia | amd | apple | intel
    name: str
    vram_total_bytes: int | None = None
    vram_free_bytes: int | None = None
    unified: bool = False  # memory shared with the CPU (Apple Silicon, APUs)
    driver: str | None = None
    compute_capability: str | None = None  # NVIDIA, e.g. "8.9"
    bandwidth_gbps: float | None = None  # GB/s
    working_set_limit_bytes: int | None = None  # Apple: Metal's recommended max working set
    bandwidth_source: str | None = None  # "nvml" (bus width x memory clock) | "table" (known chip)
    shared_bytes: int | None = None  # AMD APU: system memory the GPU may also map (GTT)
    working_set_source: str | None = None  # Apple: "metal" | "iogpu.wired_limit_mb" | "default rule"

    def usable_bytes(self) -> int | None:
        """Memory a model may occupy on this GPU: Metal's limit on Apple, else the VRAM."""
        if self.working_set_limit_bytes is not None:
            return self.working_set_limit_bytes
        return self.vram_total_bytes


@dataclass
class RuntimeInfo:
    """One llama.cpp runtime (app/runtimes) and what it saw when it was started for the probe."""

    name: str
    backend: str  # cpu | vulkan | cuda | rocm | metal
    origin: str = ""  # environment | bundled | user
    version: str = ""
    problem: str = ""  # why the folder is not a usable runtime
    error: str = ""  # why it could not start, if it could not
    devices: list[Device] = field(default_factory=list)  # as its probe saw them (app/runtimes/devices.py)
    env: dict[str, str] = field(default_factory=dict)  # what its engine host needs set (tests' lavapipe)
    size_bytes: int = 0  # on disk
    built_at: str = ""  # user-built ones


@dataclass
class BackendSupport:
    name: str
    available: bool
    reason: str = ""
    hint: str = ""


@dataclass
class HardwareProfile:
    os: str = ""  # platform.system() in lower case: linux | darwin | windows
    arch: str = ""  # platform.machine(): x86_64 | AMD64 | arm64 | aarch64
    cpu: CpuInfo = field(default_factory=CpuInfo)
    ram_total_bytes: int | None = None
    ram_available_bytes: int | None = None
    gpus: list[GpuInfo] = field(default_factory=list)
    disk_free_bytes: int | None = None  # where models are stored
    ram_bandwidth_gbps: float | None = None  # measured, when the user asked for it
    backends: list[BackendSupport] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # mismatches worth telling the user
    absent: dict[str, str] = field(default_factory=dict)  # part -> why it is unknown
    schema_version: int = SCHEMA_VERSION
    disk_path: str | None = None  # the folder disk_free_bytes was measured for
    llama_cpp_gpu_backends: list[str] | None = None  # ggml GPU libraries the llama.cpp build ships
    runtimes: list[RuntimeInfo] | None = None  # None: not probed (a saved or recorded profile)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        """Build a profile from parsed JSON; unknown keys are ignored (newer files load in older
        versions), a value of the wrong type raises ValueError naming the field."""
        if not isinstance(data, dict):
            raise ValueError("a hardware profile is a JSON object")
        return _build(cls, data, "profile")

    @classmethod
    def from_json(cls, text: str) -> HardwareProfile:
        return cls.from_dict(json.loads(text))

    def gpu_memory_bytes(self) -> int:
        """GPU memory a model may use across every GPU (0 without a GPU)."""
        return sum(g.usable_bytes() or 0 for g in self.gpus)


_T = TypeVar("_T", bound="DataclassInstance")

# (class, field) -> the dataclass its object (or list of objects) is made of.
_NESTED: dict[tuple[type, str], type] = {
    (HardwareProfile, "cpu"): CpuInfo, (HardwareProfile, "gpus"): GpuInfo,
    (HardwareProfile, "backends"): BackendSupport,
    (HardwareProfile, "runtimes"): RuntimeInfo, (RuntimeInfo, "devices"): Device,
}


def _build(cls: type[_T], data: dict[str, Any], where: str) -> _T:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{where}.{f.name} is missing")
            continue
        value = data[f.name]
        path = f"{where}.{f.name}"
        nested = _NESTED.get((cls, f.name))
        if nested is not None and f.name == "cpu":
            if not isinstance(value, dict):
                raise ValueError(f"{path} must be an object")
            value = _build(nested, value, path)
        elif nested is not None and value is None and f.default is None:
            pass  # an optional list that was not probed
        elif nested is not None:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise ValueError(f"{path} must be a list of objects")
            value = [_build(nested, v, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            _check_type(value, hints[f.name], path)
        kwargs[f.name] = value
    return cls(**kwargs)


def _check_type(value: Any, annotation: Any, path: str) -> None:
    """Accept ``value`` if it fits the field's annotation (int, float, str, bool, None, list[str], dict[str, str])."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for option in options:
        origin = typing.get_origin(option) or option
        if option is type(None) and value is None:
            return
        if origin is bool and isinstance(value, bool):
            return
        if origin is int and isinstance(value, int) and not isinstance(value, bool):
            return
        if origin is float and isinstance(value, int | float) and not isinstance(value, bool):
            return
        if origin is str and isinstance(value, str):
            return
        if origin is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return
        if origin is dict and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return
    expected = " or ".join(getattr(o, "__name__", str(o)).replace("NoneType", "null") for o in options)
    raise ValueError(f"{path} must be {expected}, not {value!r}")


def runtime_info_from_dict(data: dict[str, Any]) -> RuntimeInfo:
    """A runtime record (app/runtimes/overview.py as_records) as the profile keeps it."""
    return _build(RuntimeInfo, data, "runtime")


def load_profile(path: str | Path) -> HardwareProfile:
    """Read a profile saved from ``quantdesk hw --json`` (what every ``--hardware FILE`` option takes)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HardwareProfileError(f"hardware profile {path} does not exist",
                                   "save one with: quantdesk hw --json > machine.json") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HardwareProfileError(f"cannot read hardware profile {path}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HardwareProfileError(f"hardware profile {path} is not valid JSON: {exc}",
                                   "the file format is the output of quantdesk hw --json") from None
    try:
        profile = HardwareProfile.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise HardwareProfileError(f"hardware profile {path} is malformed: {exc}",
                                   "the file format is the output of quantdesk hw --json") from None
    if profile.schema_version > SCHEMA_VERSION:
        raise HardwareProfileError(
            f"hardware profile {path} has schema version {profile.schema_version}; "
            f"this QuantDesk reads up to {SCHEMA_VERSION}", "upgrade QuantDesk or save the profile again")
    return profile
