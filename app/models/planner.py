"""The one load planner: how a model loads on a machine, for every face that loads one (the Chat's model bar, the
server's on-demand loads, ``quantdesk chat`` / ``serve``'s fit check).

``plan_load`` starts from the settings a face wants and the names of those the user set for this load (``given``:
a command-line flag), and answers a ``LoadPlan``: the ``LoadSettings`` to load, the fit check's estimate and verdict,
and its notes as data (each face words them). The rules, in order, one behaviour for every face:

1. **Preset**: the model's preset (app/hub/presets.py, handed in as ``preset``) sets its load values over the wanted
   ones, except those ``given`` (``ModelPreset.apply_load``, the one rule of precedence).
2. **Context**: a context nobody held (not given, not the preset's) is the wanted one or the model's trained length,
   the shorter; a held one may pass the trained length (RoPE scaling).
3. **Projector** (GGUF): the named one (given, the preset's or wanted) loads with the model where it is a file;
   otherwise, with ``find_projector``, the one beside the model that pairs with it (``vision.find_projector``). The
   estimate counts it.
4. **Runtime pin**: the estimate is for the runtime the load would get: the one asked for this load (``runtime``),
   else the model's pin, else the global pin (app/runtimes/pins.py), else the automatic choice.
5. **Fit**: GPU layers and the experts kept in RAM as held, else the most the fit check finds room for
   (``recommend.fit_model``).
6. **Sequences**: a load for several replies at once (``LoadSettings.parallel``, not held) that does not fit, where
   fewer do, decodes the most that fit (``ParallelLowered``): MLX gives each running reply a cache of its own, so N
   replies cost N caches (llama.cpp's unified cache barely grows with N).
7. **KV fallback**: a GGUF that does not fit at its context, its KV cache type not held, takes a q8_0 KV cache (and
   flash attention, which a quantized V cache needs) where that keeps the context (``KvQuantized``); else, its
   context not held, the context is lowered to the most that fits (``ContextLowered``).
8. **Free settings from the estimate** (GGUF): GPU layers (-1 for all) and experts in RAM the user did not hold.
9. **A preset that does not fit gives way**: where the plan with the preset does not fit this machine and the plan
   without it does, the plan without it is the answer (``PresetSetAside``); what the user gave never gives way.
10. **Verdict**: ``fits`` (the fit check's "does not fit" is the only no); what a face does with a no is its own (the
   Chat's “Load anyway”, ``--force``, the server's 507). A header that cannot be read is a plan without an estimate
   and its ``problem``: the face leaves the words to the engine, or refuses.

Remote models (``remote:…``) are no files: the faces route them past the planner. Pure: no Qt, no engine, no network;
it reads the model's header, its projector's and the runtime pins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from app.datatypes import LoadSettings
from app.errors import ModelFileError, QuantDeskError
from app.hardware.profile import HardwareProfile
from app.models.budget import too_large
from app.models.metadata import ModelMetadata
from app.models.recommend import FitResult, fit_model, load_cpu_moe

QUANTIZED_KV = "q8_0"  # the KV cache type the fallback takes: half of f16's memory at a small cost in quality


class LoadPreset(Protocol):
    """A model's saved load values (``app.hub.presets.ModelPreset``; the planner sits below app/hub)."""

    @property
    def load(self) -> Mapping[str, Any]: ...

    def apply_load(self, settings: LoadSettings, given: tuple[str, ...] = ()) -> LoadSettings: ...


# --- notes: what the planner decided, as data; each face words them (``words`` is the English of the CLI and logs)

@dataclass(frozen=True)
class PresetApplied:
    """The model's preset set these load values."""

    values: tuple[tuple[str, Any], ...]

    def words(self) -> str:
        return f"this model's preset: {values_words(self.values)}"


@dataclass(frozen=True)
class KvQuantized:
    """A q8_0 KV cache keeps the context at ``n_ctx`` tokens, where an f16 one does not fit."""

    n_ctx: int

    def words(self) -> str:
        return f"a q8_0 KV cache keeps the context at {self.n_ctx} tokens"


@dataclass(frozen=True)
class ContextLowered:
    """The context was lowered from ``wanted`` to ``n_ctx`` tokens, the most that fits."""

    wanted: int
    n_ctx: int

    def words(self) -> str:
        return f"context lowered from {self.wanted} to {self.n_ctx} tokens, the most that fits"


@dataclass(frozen=True)
class ParallelLowered:
    """The replies decoded at once were lowered from ``wanted`` to ``parallel``, the most whose caches fit."""

    wanted: int
    parallel: int

    def words(self) -> str:
        return (f"{self.parallel} replies at once instead of {self.wanted}: each has a KV cache of its own, and "
                f"{self.wanted} do not fit")


@dataclass(frozen=True)
class PresetSetAside:
    """The preset's values do not fit this machine (``reason``: the fit check's); the load goes without them."""

    values: tuple[tuple[str, Any], ...]
    reason: str

    def words(self) -> str:
        return (f"this model's preset ({values_words(self.values)}) does not fit this machine ({self.reason}); it "
                "loads with the fit check's settings")


@dataclass(frozen=True)
class EstimatorNote:
    """A note of the fit check's own (``FitResult.notes``), already a sentence."""

    text: str

    def words(self) -> str:
        return self.text


PlanNote = PresetApplied | KvQuantized | ContextLowered | ParallelLowered | PresetSetAside | EstimatorNote


def values_words(values: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values)


@dataclass(frozen=True)
class LoadPlan:
    """How one model loads on one machine: the settings, the fit check's answer, the notes."""

    path: str
    settings: LoadSettings
    fit: FitResult | None = None  # None: the header could not be read (``problem`` says why)
    notes: tuple[PlanNote, ...] = ()
    problem: str = ""
    pin: tuple[str, str] | None = None  # the runtime planned for, where pinned or asked for: (name, where from)
    format: str = ""  # gguf, mlx, safetensors, exl2, exl3; "" when unread
    moe: bool = False  # a mixture-of-experts GGUF: its experts can stay in RAM
    weights_bytes: int = 0
    preset_values: tuple[tuple[str, Any], ...] = field(default=(), repr=False)  # applied, in the preset's order

    @property
    def estimated_bytes(self) -> int | None:
        """Every device of the estimate added up; None without an estimate."""
        return self.fit.memory_bytes if self.fit is not None else None

    @property
    def estimate_bytes(self) -> int:
        """What a memory budget counts for this load: the estimate, else the weights' size, else 0."""
        return self.estimated_bytes or self.weights_bytes or 0

    @property
    def fits(self) -> bool:
        """False only where the fit check says it does not fit this machine's memory (app/models/budget.too_large)."""
        return self.fit is None or not too_large(self.fit)

    @property
    def expected_gpu_blocks(self) -> int | None:
        """Transformer blocks the estimate puts on the GPU (GGUF: ``-ngl k`` holds the output layer and the last
        k-1 blocks, app/models/estimate.py); None without a GGUF estimate."""
        est = self.fit.estimate if self.fit is not None else None
        if est is None or self.format != "gguf":
            return None
        return max(min(est.gpu_layers, est.n_layers) - 1, 0)


def plan_load(path: str | Path, profile: HardwareProfile, wanted: LoadSettings | None = None, *,
              given: Collection[str] = (), preset: LoadPreset | None = None, find_projector: bool = True,
              runtime: str | None = None) -> LoadPlan:
    """The plan for loading ``path`` on ``profile`` (the module's rules). ``wanted``: the face's settings (its
    context, threads ...); ``given``: the names of the ``LoadSettings`` fields the user set for this load, which the
    plan keeps as they are; ``preset``: the model's preset, None for none; ``find_projector``: look for the projector
    beside a GGUF when none is named; ``runtime``: a llama.cpp runtime asked for this load (else the pins')."""
    from app.models.metadata import read_model
    from app.runtimes import pins

    path = str(path)
    wanted = wanted or LoadSettings()
    pin = (runtime, "for this load") if runtime else pins.load().for_model(path)
    try:
        meta = read_model(path)
    except QuantDeskError as exc:
        settings, applied = _with_preset(wanted, preset, given)
        return LoadPlan(path, settings, notes=_preset_notes(applied), problem=str(exc), pin=pin,
                        preset_values=applied)
    plan = _plan(meta, path, profile, wanted, given, preset, find_projector, pin)
    if plan.preset_values and not plan.fits:
        bare = _plan(meta, path, profile, wanted, given, None, find_projector, pin)
        if bare.fits and plan.fit is not None:
            aside = PresetSetAside(plan.preset_values, plan.fit.reason)
            return dataclasses.replace(bare, notes=(aside, *bare.notes))
    return plan


def _with_preset(wanted: LoadSettings, preset: LoadPreset | None, given: Collection[str]
                 ) -> tuple[LoadSettings, tuple[tuple[str, Any], ...]]:
    settings = dataclasses.replace(wanted)
    if preset is None or not preset.load:
        return settings, ()
    applied = tuple((k, v) for k, v in preset.load.items() if k not in given)
    return preset.apply_load(settings, tuple(given)), applied


def _preset_notes(applied: tuple[tuple[str, Any], ...]) -> tuple[PlanNote, ...]:
    return (PresetApplied(applied),) if applied else ()


def _plan(meta: ModelMetadata, path: str, profile: HardwareProfile, wanted: LoadSettings, given: Collection[str],
          preset: LoadPreset | None, find_projector: bool, pin: tuple[str, str] | None) -> LoadPlan:
    settings, applied = _with_preset(wanted, preset, given)
    held = set(given) | {k for k, _ in applied}
    notes: list[PlanNote] = list(_preset_notes(applied))
    if meta.context_length and "n_ctx" not in held:
        settings.n_ctx = min(settings.n_ctx, meta.context_length)
    gguf = meta.format == "gguf"
    if gguf:
        _pair_projector(meta, path, settings, "mmproj" in given, find_projector)
    layers: int | str = settings.gpu_layers if "gpu_layers" in held and settings.gpu_layers >= 0 else "auto"
    cpu_moe = settings.cpu_moe if "cpu_moe" in held else None

    def fit(n_ctx: int, kv_type: str) -> FitResult:
        return fit_model(meta, profile, n_ctx, layers, kv_type, cpu_moe=cpu_moe, pin=pin, n_seq=settings.parallel)

    result = fit(settings.n_ctx, settings.kv_cache_type)
    if too_large(result) and settings.parallel > 1 and "parallel" not in held:
        wanted_parallel = settings.parallel
        for parallel in range(wanted_parallel - 1, 0, -1):
            settings.parallel = parallel
            fewer = fit(settings.n_ctx, settings.kv_cache_type)
            if fewer.fits:
                result = fewer
                notes.append(ParallelLowered(wanted_parallel, settings.parallel))
                break
        else:
            settings.parallel = wanted_parallel  # one does not fit either: the context's rules below decide
    if gguf and too_large(result) and "kv_cache_type" not in held:
        quantized = fit(settings.n_ctx, QUANTIZED_KV)
        if quantized.fits and quantized.max_ctx is not None and quantized.max_ctx >= settings.n_ctx:
            result = quantized
            settings.kv_cache_type, settings.flash_attention = QUANTIZED_KV, True  # a quantized V cache needs it
            notes.append(KvQuantized(settings.n_ctx))
        elif "n_ctx" not in held and result.max_ctx is not None and result.max_ctx < settings.n_ctx:
            notes.append(ContextLowered(settings.n_ctx, result.max_ctx))
            settings.n_ctx = result.max_ctx
            result = fit(settings.n_ctx, settings.kv_cache_type)
    est = result.estimate
    if gguf and est is not None:
        if "gpu_layers" not in held:
            settings.gpu_layers = -1 if est.gpu_layers >= est.n_layers else est.gpu_layers
        if "cpu_moe" not in held:
            settings.cpu_moe = load_cpu_moe(est, meta)
    notes += [EstimatorNote(text) for text in result.notes]
    return LoadPlan(path, settings, result, tuple(notes), pin=pin, format=meta.format,
                    moe=gguf and bool(meta.expert_count), weights_bytes=meta.weights_bytes or 0,
                    preset_values=applied)


def _pair_projector(meta: ModelMetadata, path: str, settings: LoadSettings, given: bool, find: bool) -> None:
    """Rule 3: ``settings.mmproj`` and ``meta.projector`` for the projector that loads with the model. A named one
    that the user gave is kept even where it is no file or does not pair (the engine's load says so in words)."""
    from app.models import vision

    meta.projector = None
    named = Path(settings.mmproj) if settings.mmproj else None
    if named is not None and (given or named.is_file()):
        chosen: Path | None = named
    else:
        chosen = vision.find_projector(path) if find else None
    settings.mmproj = str(chosen) if chosen is not None else ""
    if chosen is None:
        return
    try:
        info = vision.read_projector(chosen)
        vision.check_pair(meta, info)
    except (ModelFileError, OSError):
        return  # not counted: the engine refuses it with its own sentence
    meta.projector = info
