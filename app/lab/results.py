"""What a quant-lab run produces: per variant the raw runs, their medians with spread, and the quality
figures against the reference, with the hardware profile and the settings they were measured under.

Every figure that could not be measured is ``None`` with a sentence in ``unavailable`` saying why
("n/a: ..."), so a table shows the reason instead of a blank or a made-up zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from app.lab.metrics import Spread

# Speed figures summarised over repetitions, in the order tables show them.
SPEED_METRICS: tuple[str, ...] = ("load_ms", "prompt_tps", "ttft_ms", "decode_tps", "peak_memory_bytes")
QUALITY_METRICS: tuple[str, ...] = ("perplexity", "kl_mean", "kl_p99", "kl_max", "top1_agreement")
SCHEMA_VERSION = 1


@dataclass
class BenchSettings:
    prompt_tokens: int = 512  # the measured prompt's length (calibrated per variant)
    gen_tokens: int = 128  # tokens generated per measured run
    reps: int = 3  # measured runs per variant, interleaved across variants
    ppl_tokens: int = 512  # tokens of the bundled text scored for perplexity
    quality: bool = True  # run the scoring pass (perplexity, KL, top-1)
    threads: int | None = None  # None: the engine's default (physical cores)
    gpu_layers: int = -1
    seed: int = 1234  # sampling seed of the measured runs

    def validate(self) -> None:
        problems = []
        if not 16 <= self.prompt_tokens <= 32768:
            problems.append(f"--prompt-tokens must be between 16 and 32768, not {self.prompt_tokens}")
        if not 1 <= self.gen_tokens <= 8192:
            problems.append(f"--gen-tokens must be between 1 and 8192, not {self.gen_tokens}")
        if not 1 <= self.reps <= 100:
            problems.append(f"--reps must be between 1 and 100, not {self.reps}")
        if not 16 <= self.ppl_tokens <= 32768:
            problems.append(f"--ppl-tokens must be between 16 and 32768, not {self.ppl_tokens}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def speed_context(self) -> int:
        """Context for the speed runs: the prompt, the reply, and room for the calibration's overshoot."""
        return int((self.prompt_tokens + self.gen_tokens) * 1.25) + 64

    @property
    def quality_context(self) -> int:
        return self.ppl_tokens + 64


@dataclass
class RunSample:
    """One measured run of one variant: a fresh engine host, load, warm-up, then the measured request."""

    rep: int  # 0-based repetition
    position: int  # where in this repetition's order the variant ran (the order rotates per repetition)
    load_ms: float
    prompt_tokens: int
    prompt_ms: float
    prompt_tps: float
    ttft_ms: float
    generated_tokens: int
    decode_tps: float | None  # None when generation ended after one token
    stop_reason: str
    peak_memory_bytes: int
    memory_after_load: dict[str, int] = field(default_factory=dict)


@dataclass
class VariantResult:
    label: str
    path: str
    format: str
    quant: str
    bits_per_weight: float | None
    size_bytes: int
    backend: str = ""
    is_reference: bool = False
    runs: list[RunSample] = field(default_factory=list)
    speed: dict[str, Spread | None] = field(default_factory=dict)
    perplexity: float | None = None
    ppl_tokens: int = 0
    kl_mean: float | None = None
    kl_median: float | None = None
    kl_p99: float | None = None
    kl_max: float | None = None
    top1_agreement: float | None = None
    kl_positions: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> "n/a: why"
    notes: list[str] = field(default_factory=list)
    error: str = ""  # the variant could not be measured at all (failed to load, engine died)

    def figure(self, metric: str) -> float | None:
        """A metric's headline value: the median for speed figures, the value for quality figures."""
        if metric in SPEED_METRICS:
            spread = self.speed.get(metric)
            return spread.median if spread else None
        return getattr(self, metric)


@dataclass
class BenchResult:
    id: str
    created_at: str  # ISO 8601, UTC
    quantdesk_version: str
    settings: BenchSettings
    hardware: dict[str, Any]  # HardwareProfile.to_dict() of the machine that ran it
    reference: str  # label of the reference variant
    variants: list[VariantResult]
    corpus: dict[str, Any] = field(default_factory=dict)  # which texts, how many prompts
    notes: list[str] = field(default_factory=list)
    schema: int = SCHEMA_VERSION

    def variant(self, label: str) -> VariantResult:
        for v in self.variants:
            if v.label == label:
                return v
        raise KeyError(label)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        data = dict(data)
        data["settings"] = BenchSettings(**data["settings"])
        variants = []
        for raw in data["variants"]:
            raw = dict(raw)
            raw["runs"] = [RunSample(**r) for r in raw.get("runs", [])]
            raw["speed"] = {k: (Spread(**v) if v else None) for k, v in raw.get("speed", {}).items()}
            variants.append(VariantResult(**raw))
        data["variants"] = variants
        return cls(**data)
