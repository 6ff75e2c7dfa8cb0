"""What a quant-lab run produces: per variant the raw runs, their medians with spread, and the quality
figures against the reference, with the hardware profile and the settings they were measured under.

Every figure that could not be measured is ``None`` with a sentence in ``unavailable`` saying why
("n/a: ..."), so a table shows the reason instead of a blank or a made-up zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from app.lab.metrics import Estimate, KldStatistics, Spread
from app.records import known_fields
from app.datatypes import DEFAULT_TAIL

# Speed figures summarised over repetitions, in the order tables show them.
SPEED_METRICS: tuple[str, ...] = ("load_ms", "prompt_tps", "ttft_ms", "decode_tps", "peak_memory_bytes")
# Quality figures against the reference (llama-perplexity's, app/lab/metrics.py), in the order tables show them.
QUALITY_METRICS: tuple[str, ...] = ("perplexity", "ppl_ratio", "kld_mean", "kld_median", "kld_p99", "kld_p99.9",
                                    "kld_max", "same_top_p", "dp_mean", "rms_dp")
SCHEMA_VERSION = 2
KV_TYPES = ("f16", "q8_0", "q4_0")  # the KV-cache types a sweep takes (llama.cpp's, as the Chat's model bar offers)
# Results saved before the lab measured as llama-perplexity does (schema 1): their quality figures are dropped on
# reading, with this reason in their place.
OLD_QUALITY = ("n/a: measured by an earlier QuantDesk on 8 short prompts and every position of one context, not "
               "comparable with llama-perplexity's figures; run the bench again")


@dataclass
class BenchSettings:
    prompt_tokens: int = 512  # the measured prompt's length (calibrated per variant)
    gen_tokens: int = 128  # tokens generated per measured run
    reps: int = 3  # measured runs per variant, interleaved across variants
    ctx: int = 512  # the quality pass's window in tokens (llama-perplexity's -c): the second half of each is scored
    chunks: int = 0  # at most this many windows of the corpus (llama-perplexity's --chunks); 0: all it has
    quality: bool = True  # run the scoring pass (perplexity and KL divergence against the reference)
    speed: bool = True  # run the speed runs
    threads: int | None = None  # None: the engine's default (physical cores)
    gpu_layers: int = -1
    flash_attention: bool | None = None  # None: the engine's default (llama-cpp-python: off)
    seed: int = 1234  # sampling seed of the measured runs
    tail: float = DEFAULT_TAIL  # the probability a reference may leave out per position (backends.scoring)
    kv_types: tuple[str, ...] = ()  # a sweep: every GGUF variant once per KV-cache type (the reference: f16)
    # A sweep: every compared variant once per context length, which sets its quality windows (against the
    # reference's windows of that length) and its speed run (a prompt that fills that context with the generation)
    contexts: tuple[int, ...] = ()

    def validate(self) -> None:
        problems = []
        if not 16 <= self.prompt_tokens <= 32768:
            problems.append(f"--prompt-tokens must be between 16 and 32768, not {self.prompt_tokens}")
        if not 1 <= self.gen_tokens <= 8192:
            problems.append(f"--gen-tokens must be between 1 and 8192, not {self.gen_tokens}")
        if not 1 <= self.reps <= 100:
            problems.append(f"--reps must be between 1 and 100, not {self.reps}")
        if not 16 <= self.ctx <= 131072 or self.ctx % 2:
            problems.append(f"--ctx must be an even number between 16 and 131072, not {self.ctx}")
        if self.chunks < 0:
            problems.append(f"--chunks must be 0 (all) or more, not {self.chunks}")
        if not 0 <= self.tail <= 0.1:
            problems.append(f"--tail must be between 0 and 0.1, not {self.tail}")
        if not (self.speed or self.quality):
            problems.append("--no-speed and --no-quality leave nothing to measure")
        unknown = [kv for kv in self.kv_types if kv not in KV_TYPES]
        if unknown:
            problems.append(f"--kv-types takes {', '.join(KV_TYPES)}, not {', '.join(unknown)}")
        odd = [str(c) for c in self.contexts if not 16 <= c <= 131072 or c % 2]
        if odd:
            problems.append(f"--contexts takes even numbers between 16 and 131072, not {', '.join(odd)}")
        elif self.speed and any(c - self.gen_tokens < 16 for c in self.contexts):
            problems.append(f"--contexts: a context of {min(self.contexts)} tokens leaves no room for a prompt "
                            f"beside the {self.gen_tokens} generated tokens")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def speed_context(self) -> int:
        """Context for the speed runs: the prompt, the reply, and room for the calibration's overshoot."""
        return self.speed_context_for(self.prompt_tokens)

    def speed_context_for(self, prompt_tokens: int) -> int:
        return int((prompt_tokens + self.gen_tokens) * 1.25) + 64

    def prompt_tokens_for(self, context: int) -> int:
        """The measured prompt of a variant swept to ``context`` tokens (0: not swept): the context less the reply."""
        return context - self.gen_tokens if context else self.prompt_tokens


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
    kv_cache_type: str = ""  # a sweep's KV-cache type for this row (llama.cpp: f16, q8_0, q4_0); "" the default
    ctx: int = 0  # a sweep's context length for this row (BenchSettings.contexts); 0: the bench's --ctx
    sweep_of: str = ""  # a sweep's row: the label of the variant it sweeps ("" for a row that is no sweep's)
    # Where the file came from on the Hub, as the recommender names a Hub model ("owner/repo/file.gguf", a folder's
    # "owner/repo" or "owner/repo@branch"); "" when it is not known to come from the Hub
    origin: str = ""
    runs: list[RunSample] = field(default_factory=list)
    speed: dict[str, Spread | None] = field(default_factory=dict)
    perplexity: float | None = None  # PPL(Q) over the scored positions (a remote model: over its own tokens)
    quality: KldStatistics | None = None  # against the reference, llama-perplexity's statistics
    quality_ms: float | None = None  # wall time of the quality pass for this variant: engine start, load, scoring
    quality_peak_bytes: int | None = None  # the engine process's peak RAM by the end of its scoring pass
    quality_loaded_bytes: int | None = None  # its peak RAM right after loading the model, before scoring
    unavailable: dict[str, str] = field(default_factory=dict)  # metric -> "n/a: why"
    notes: list[str] = field(default_factory=list)
    error: str = ""  # the variant could not be measured at all (failed to load, engine died)

    def figure(self, metric: str) -> float | None:
        """A metric's headline value: the median for speed figures, the value for quality figures."""
        if metric in SPEED_METRICS:
            spread = self.speed.get(metric)
            return spread.median if spread else None
        estimate = self.estimate(metric)
        return estimate.value if estimate else None

    def estimate(self, metric: str) -> Estimate | None:
        """A quality figure with its standard error."""
        if metric == "perplexity" and self.quality is None:
            return None if self.perplexity is None else Estimate(self.perplexity)
        return self.quality.estimate(metric) if self.quality else None


@dataclass
class BenchResult:
    id: str
    created_at: str  # ISO 8601, UTC
    quantdesk_version: str
    settings: BenchSettings
    hardware: dict[str, Any]  # HardwareProfile.to_dict() of the machine that ran it
    reference: str  # label of the reference variant
    variants: list[VariantResult]
    corpus: dict[str, Any] = field(default_factory=dict)  # which text, its tokens, windows and positions
    reference_file: dict[str, Any] = field(default_factory=dict)  # the KL reference used: where, how made, coverage
    engines: dict[str, str] = field(default_factory=dict)  # the engine packages that ran, with their versions
    notes: list[str] = field(default_factory=list)
    schema: int = SCHEMA_VERSION

    def window(self, v: VariantResult) -> int:
        """The quality window ``v`` was scored in: its sweep's context length, else the bench's --ctx."""
        return v.ctx or self.settings.ctx

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
        old = data.get("schema", 1) < 2
        settings = data["settings"]
        fields: dict[str, Any] = {k: tuple(v) if k in ("kv_types", "contexts") else v
                                  for k, v in known_fields(BenchSettings, settings).items()}
        data["settings"] = BenchSettings(**fields)
        variants = []
        for raw in data["variants"]:
            raw = known_fields(VariantResult, raw)
            raw["runs"] = [RunSample(**r) for r in raw.get("runs", [])]
            raw["speed"] = {k: (Spread(**v) if v else None) for k, v in raw.get("speed", {}).items()}
            if old:
                raw["perplexity"] = None
                raw["unavailable"] = {k: v for k, v in raw.get("unavailable", {}).items()
                                      if k in SPEED_METRICS} | dict.fromkeys(QUALITY_METRICS, OLD_QUALITY)
            elif raw.get("quality"):
                raw["quality"] = KldStatistics.from_dict(raw["quality"])
            variants.append(VariantResult(**raw))
        data["variants"] = variants
        data["schema"] = SCHEMA_VERSION
        return cls(**data)
