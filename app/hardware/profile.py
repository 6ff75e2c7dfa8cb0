"""The hardware profile: what the fit estimator and the recommender plan with.

It round-trips through JSON (``quantdesk hw --json`` writes it, ``--hardware FILE`` reads it back),
so users can save and edit a profile to plan for another machine. Byte counts are ints; anything a
probe could not find is None, with the reason in ``absent``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1


@dataclass
class CpuInfo:
    model: str = ""
    arch: str = ""  # x86_64 | arm64 | aarch64 ...
    physical_cores: int | None = None
    logical_cores: int | None = None
    flags: list[str] = field(default_factory=list)  # normalised: avx, avx2, avx512f, neon, ...


@dataclass
class GpuInfo:
    index: int
    vendor: str  # nvidia | amd | apple | intel
    name: str
    vram_total_bytes: int | None = None
    vram_free_bytes: int | None = None
    unified: bool = False  # memory shared with the CPU (Apple Silicon, APUs)
    driver: str | None = None
    compute_capability: str | None = None  # NVIDIA, e.g. "8.9"
    bandwidth_gbps: float | None = None  # GB/s
    working_set_limit_bytes: int | None = None  # Apple: Metal's recommended max working set


@dataclass
class BackendSupport:
    name: str
    available: bool
    reason: str = ""


@dataclass
class HardwareProfile:
    os: str = ""
    arch: str = ""
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareProfile:
        data = dict(data)
        data["cpu"] = CpuInfo(**data.get("cpu", {}))
        data["gpus"] = [GpuInfo(**g) for g in data.get("gpus", [])]
        data["backends"] = [BackendSupport(**b) for b in data.get("backends", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_json(cls, text: str) -> HardwareProfile:
        return cls.from_dict(json.loads(text))
