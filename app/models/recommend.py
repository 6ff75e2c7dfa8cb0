"""Will it fit, and which quant to pick: verdicts per candidate on a HardwareProfile.

Verdicts: "full GPU", "MoE split: experts of N of M layers in RAM", "partial: N of M layers" (", experts in
RAM" when a MoE model's experts all stay in RAM as well), "CPU only", "unified memory", "does not fit",
"unknown" (with the reason). Predicted decode speed is memory bandwidth ÷ bytes read per token
(active weights; MoE reads only the used experts), per device, added up: experts kept in RAM are read at
the RAM's bandwidth, everything else on the GPU at the GPU's.

A mixture-of-experts GGUF that does not fit the GPU whole keeps every layer on the GPU and moves the experts
of the fewest leading layers to system RAM (llama.cpp's --n-cpu-moe N); only when even all experts in RAM
leave too little VRAM do whole layers move to the CPU as well.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.hardware.profile import GpuInfo, HardwareProfile
from app.models.estimate import (
    CTX_PAD,
    DeviceUse,
    Estimate,
    LlamaCppSettings,
    UnknownModel,
    estimate_exl,
    estimate_llama_cpp,
    estimate_mlx,
    pad,
    ubatch_for,
)
from app.models.metadata import ModelMetadata
from app.runtimes.choose import Choice, choose
from app.runtimes.devices import Probe

GiB = 1 << 30
ASSUMED_RAM_BANDWIDTH_GBPS = 40.0  # dual-channel DDR4/DDR5 desktop, used only when nothing was measured
RAM_SHARE_WHEN_AVAILABLE_UNKNOWN = 0.85
UNIFIED_SHARE_WITHOUT_LIMIT = 0.70  # Metal's default working-set limit is ~65-75 % of RAM
VERDICT_RANK = {"full GPU": 0, "unified memory": 0, "MoE split": 1, "partial": 1, "CPU only": 2, "does not fit": 3,
                "unknown": 4}


@dataclass
class FitResult:
    label: str
    format: str
    quant: str
    verdict: str
    reason: str
    estimate: Estimate | None = None
    decode_tok_s: float | None = None
    max_ctx: int | None = None
    file_bytes: int = 0
    bits_per_weight: float | None = None
    notes: list[str] = field(default_factory=list)
    runtime: str = ""  # GGUF: the llama.cpp runtime planned for, e.g. "Vulkan · RTX 4070 (8.0 GiB)"

    @property
    def rank(self) -> int:
        return VERDICT_RANK[self.verdict.split(":", 1)[0]]

    @property
    def fits(self) -> bool:
        return self.rank <= 2

    @property
    def memory_bytes(self) -> int | None:
        """Every device added up; None when it could not be worked out."""
        return sum(d.total_bytes for d in self.estimate.devices) if self.estimate and self.estimate.devices else None

    def to_json(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "label": self.label, "format": self.format, "quant": self.quant, "verdict": self.verdict,
            "reason": self.reason, "devices": [d.to_dict() for d in est.devices] if est else [],
            "gpu_layers": est.gpu_layers if est else None, "n_layers": est.n_layers if est else None,
            "cpu_moe": est.cpu_moe if est else None,
            "n_ctx": est.n_ctx if est else None, "kv_type": est.kv_type if est else None,
            "max_ctx": self.max_ctx, "decode_tok_s": None if self.decode_tok_s is None else round(self.decode_tok_s, 1),
            "file_bytes": self.file_bytes,
            "bits_per_weight": None if self.bits_per_weight is None else round(self.bits_per_weight, 2),
            "notes": self.notes + (est.notes if est else []), "runtime": self.runtime,
            "image_tokens": est.image_tokens if est else 0,
        }


# ----------------------------------------------------------------------------------------- hardware views

def main_gpu(hw: HardwareProfile) -> GpuInfo | None:
    gpus = [g for g in hw.gpus if g.vram_total_bytes or g.unified]
    return max(gpus, key=lambda g: g.vram_total_bytes or 0) if gpus else None


def is_apple(hw: HardwareProfile) -> bool:
    return any(g.vendor == "apple" for g in hw.gpus) or (hw.os == "darwin" and hw.arch in ("arm64", "aarch64"))


def ram_budget(hw: HardwareProfile) -> int | None:
    if hw.ram_available_bytes:
        return hw.ram_available_bytes
    return int(hw.ram_total_bytes * RAM_SHARE_WHEN_AVAILABLE_UNKNOWN) if hw.ram_total_bytes else None


def vram_budget(gpu: GpuInfo) -> int:
    if gpu.unified:
        if gpu.working_set_limit_bytes:
            return gpu.working_set_limit_bytes
        return int((gpu.vram_total_bytes or 0) * UNIFIED_SHARE_WITHOUT_LIMIT)
    return gpu.vram_free_bytes or gpu.vram_total_bytes or 0


def backend_available(hw: HardwareProfile, name: str) -> bool:
    return any(b.name == name and b.available for b in hw.backends)


def _gpu_label(gpu: GpuInfo) -> str:
    return f"GPU{gpu.index} ({gpu.name})" if gpu.name else f"GPU{gpu.index}"


def runtime_choice(hw: HardwareProfile, pin: tuple[str, str] | None = None) -> Choice | None:
    """The llama.cpp runtime a load would get on this profile (its recorded runtime probes), or None
    when the profile has none (a saved or hand-made one): then any GPU counts as usable, as before."""
    if hw.runtimes is None:
        return None
    probes = {r.name: Probe(tuple(r.devices), r.error, dict(r.env)) for r in hw.runtimes}
    return choose(hw.runtimes, lambda r: probes[r.name], [(g.vendor, g.name) for g in hw.gpus], pin)


def _runtime_gpu(choice: Choice, hw: HardwareProfile) -> tuple[GpuInfo | None, str]:
    """The GPU a runtime offloads to, as the estimator plans it, and its label ("Vulkan0 (RTX 4070)")."""
    device = choice.gpu
    if device is None:
        return None, ""
    if choice.backend == "metal":  # Metal's budget is the working-set limit the hardware probe read
        apple = main_gpu(hw)
        if apple is not None and apple.unified:
            return apple, "unified"
    twin = next((g for g in hw.gpus if g.name and g.name in device.description), None)
    gpu = GpuInfo(index=int("".join(c for c in device.name if c.isdigit()) or 0), vendor=device.vendor,
                  name=device.description or device.name, vram_total_bytes=device.memory_total,
                  vram_free_bytes=device.memory_free, bandwidth_gbps=twin.bandwidth_gbps if twin else None)
    return gpu, f"{device.name} ({device.description})" if device.description else device.name


def _tok_s(est: Estimate, hw: HardwareProfile, gpu: GpuInfo | None) -> float | None:
    seconds = 0.0
    if est.bytes_per_token_cpu:
        seconds += est.bytes_per_token_cpu / ((hw.ram_bandwidth_gbps or ASSUMED_RAM_BANDWIDTH_GBPS) * 1e9)
    if est.bytes_per_token_gpu:
        bandwidth = gpu.bandwidth_gbps if gpu else None
        if gpu is None and est.format == "mlx":
            bandwidth = hw.ram_bandwidth_gbps or ASSUMED_RAM_BANDWIDTH_GBPS
        if not bandwidth:
            return None
        seconds += est.bytes_per_token_gpu / (bandwidth * 1e9)
    return 1 / seconds if seconds else None


# ----------------------------------------------------------------------------------------- fitting

def _fits(est: Estimate, ram: int | None, vram: int | None) -> bool:
    for dev in est.devices:
        budget = ram if dev.name == "CPU" else vram
        if budget is not None and dev.total_bytes > budget:
            return False
    return True


def _merge_unified(est: Estimate) -> Estimate:
    """On unified memory the CPU and GPU buffers come out of one pool."""
    pool = DeviceUse("unified")
    for dev in est.devices:
        pool.weights_bytes += dev.weights_bytes
        pool.kv_bytes += dev.kv_bytes
        pool.compute_bytes += dev.compute_bytes
        pool.other_bytes += dev.other_bytes
        pool.state_bytes += dev.state_bytes
        pool.output_bytes += dev.output_bytes
    est.devices = [pool]
    return est


def _largest_ctx(fits_at: _FitsAt) -> int | None:
    """Largest n_ctx (a multiple of 256, up to the trained length) for which fits_at(n_ctx) holds."""
    lo, hi = CTX_PAD, None
    if not fits_at(lo):
        return None
    return hi if hi else _bisect(fits_at, lo)


def _bisect(fits_at: _FitsAt, lo: int) -> int:
    hi = fits_at.limit
    if fits_at(hi):
        return hi
    lo_k, hi_k = lo // CTX_PAD, hi // CTX_PAD
    while hi_k - lo_k > 1:
        mid = (lo_k + hi_k) // 2
        if fits_at(mid * CTX_PAD):
            lo_k = mid
        else:
            hi_k = mid
    return lo_k * CTX_PAD


class _FitsAt:
    def __init__(self, fn: Callable[[int], bool], limit: int) -> None:
        self.fn, self.limit = fn, max(CTX_PAD, pad(limit, CTX_PAD))

    def __call__(self, n_ctx: int) -> bool:
        return self.fn(n_ctx)


def fit_gguf(meta: ModelMetadata, hw: HardwareProfile, n_ctx: int = 8192, gpu_layers: int | str = "auto",
             kv_type: str = "f16", label: str = "", cpu_moe: int | None = None,
             pin: tuple[str, str] | None = None, n_seq: int = 1) -> FitResult:
    """``cpu_moe``: experts of the first N layers in RAM, -1 all; None lets a MoE model's split be chosen.
    ``pin``: a runtime pinned for this model (app/runtimes/pins.py); the plan is for the runtime a load would get,
    on the device it would use. ``n_seq``: the sequences decoded together (``LoadSettings.parallel``)."""
    label = label or meta.source
    quant = meta.quant.quant if meta.quant else (meta.file_type or "?")
    base: dict[str, Any] = dict(label=label, format="gguf", quant=quant, file_bytes=meta.weights_bytes,
                                bits_per_weight=meta.bits_per_weight)
    choice = runtime_choice(hw, pin)
    if choice is None:
        gpu = main_gpu(hw)
        offload_ok = gpu is not None and (gpu.unified or gpu.vendor in ("nvidia", "amd", "intel"))
        gpu_name = "unified" if gpu and gpu.unified else (_gpu_label(gpu) if gpu else "GPU0")
    else:
        gpu, gpu_name = _runtime_gpu(choice, hw)
        offload_ok = gpu is not None
        gpu_name = gpu_name or "GPU0"
        base["runtime"] = choice.label()
    ram, vram = ram_budget(hw), (vram_budget(gpu) if gpu else None)

    device = choice.gpu if choice is not None else None
    on_gpu_runtime: dict[str, Any] = dict(
        gpu_runtime=True, gpu_max_tensor_bytes=device.max_tensor_bytes, gpu_chunk_bytes=device.max_buffer_bytes,
        host_chunk_bytes=device.host_max_buffer_bytes) if device else {}

    def estimate(ngl: int, ctx: int, moe: int = 0) -> Estimate:
        settings = LlamaCppSettings(n_ctx=ctx, gpu_layers=ngl, kv_type=kv_type, cpu_moe=moe,
                                    n_ubatch=ubatch_for(meta, ctx), n_seq=n_seq, **on_gpu_runtime)
        est = estimate_llama_cpp(meta, settings, gpu_name)
        return _merge_unified(est) if gpu and gpu.unified else est

    def fits(est: Estimate) -> bool:
        if gpu and gpu.unified:
            return _fits(est, None, vram) and (ram is None or est.devices[0].total_bytes <= (hw.ram_total_bytes or ram))
        return _fits(est, ram, vram)

    def first_fitting(candidates: Iterable[tuple[int, int]]) -> tuple[int, int] | None:
        return next(((k, m) for k, m in candidates if fits(estimate(k, n_ctx, m))), None)

    try:
        n_all = meta.block_count + 1
        if gpu_layers == "auto" and offload_ok:
            if cpu_moe is not None:
                chosen = first_fitting((k, cpu_moe) for k in range(n_all, -1, -1))
            else:
                # On unified memory the experts would only move within the same pool.
                splittable = bool(meta.expert_count) and gpu is not None and not gpu.unified
                chosen = first_fitting([(n_all, 0)]) or (
                    _moe_split(meta, n_all, lambda m: fits(estimate(n_all, n_ctx, m))) if splittable else None) or (
                    first_fitting((k, -1) for k in range(n_all - 1, 0, -1)) if splittable else None) or (
                    first_fitting((k, 0) for k in range(n_all - 1, -1, -1)))
            ngl, moe = chosen or (n_all, cpu_moe or 0)
        else:
            ngl = 0 if not offload_ok else (0 if gpu_layers == "auto" else int(gpu_layers))
            moe = cpu_moe or 0
            if gpu_layers not in ("auto", 0) and not offload_ok:
                base.setdefault("notes", []).append("no GPU to offload to: layers stay on the CPU")
            chosen = (ngl, moe) if fits(estimate(ngl, n_ctx, moe)) else None
        est = estimate(ngl, n_ctx, moe)
    except UnknownModel as why:
        return FitResult(verdict="unknown", reason=str(why), **base)
    est.gpu_layers = min(est.gpu_layers, n_all)
    limit = meta.context_length or n_ctx
    max_ctx = _largest_ctx(_FitsAt(lambda c: fits(estimate(ngl, c, moe)), limit))
    result = FitResult(estimate=est, max_ctx=max_ctx, decode_tok_s=_tok_s(est, hw, gpu), verdict="", reason="",
                       **base)
    result.verdict, result.reason = _verdict(meta, hw, est, fitted=chosen is not None, ngl=ngl, gpu=gpu,
                                             gpu_name=gpu_name, ram=ram, vram=vram, choice=choice,
                                             offload_ok=offload_ok)
    return result


def _verdict(meta: ModelMetadata, hw: HardwareProfile, est: Estimate, *, fitted: bool, ngl: int, gpu: GpuInfo | None,
             gpu_name: str, ram: int | None, vram: int | None, choice: Choice | None,
             offload_ok: bool) -> tuple[str, str]:
    """The plan's verdict ("full GPU", "partial: 20 of 33 layers", "MoE split: …", "CPU only", "does not fit") and
    the sentence that says why."""
    n_all = meta.block_count + 1
    n_expert_layers = meta.block_count - meta.nextn_layers
    if not fitted:
        total = sum(d.total_bytes for d in est.devices)
        return "does not fit", f"needs {total / GiB:.1f} GiB at {est.n_ctx} tokens; {_budget_text(gpu, ram, vram)}"
    if gpu and gpu.unified:
        return "unified memory", (f"all {n_all} layers in unified memory: {est.devices[0].total_bytes / GiB:.1f} of "
                                  f"{(vram or 0) / GiB:.1f} GiB")
    if ngl >= n_all and est.cpu_moe:
        return (f"MoE split: experts of {est.cpu_moe} of {n_expert_layers} layers in RAM",
                f"every layer on {gpu_name} ({est.devices[-1].total_bytes / GiB:.1f} of "
                f"{(vram or 0) / GiB:.1f} GiB), the experts of {_first_layers(est.cpu_moe, n_expert_layers)} "
                f"in system RAM ({est.devices[0].total_bytes / GiB:.1f} GiB): only the experts each token "
                f"uses are read from RAM")
    if ngl >= n_all:
        return "full GPU", (f"all {n_all} layers on {gpu_name}: {est.devices[-1].total_bytes / GiB:.1f} of "
                            f"{(vram or 0) / GiB:.1f} GiB")
    if ngl > 0:
        return (f"partial: {ngl} of {n_all} layers" + (", experts in RAM" if est.cpu_moe else ""),
                f"{ngl} of {n_all} layers fit on {gpu_name}; the rest run on the CPU"
                + (f", and the experts of {_first_layers(est.cpu_moe, n_expert_layers)} stay in system RAM"
                   if est.cpu_moe else ""))
    cause = "no GPU to offload to" if choice is None or choice.gpu is not None or not hw.gpus else choice.reason
    return "CPU only", ((cause if not offload_ok else "no layer fits on the GPU")
                        + f"; {est.devices[0].total_bytes / GiB:.1f} GiB of RAM")


def _moe_split(meta: ModelMetadata, n_all: int, fits_with: Callable[[int], bool]) -> tuple[int, int] | None:
    """Every layer on the GPU and the experts of the fewest leading layers in RAM: (n_all, N), or None when even
    all experts in RAM do not fit. VRAM falls as N grows, so the smallest N is found by bisection."""
    n_layers = meta.block_count - meta.nextn_layers
    if not fits_with(n_layers):
        return None
    lo, hi = 0, n_layers  # fits_with(lo) is false (the whole model did not fit), fits_with(hi) holds
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits_with(mid) else (mid, hi)
    return n_all, (-1 if hi == n_layers else hi)


def _first_layers(n: int, n_layers: int) -> str:
    return f"all {n_layers} layers" if n >= n_layers else f"the first {n} of {n_layers} layers"


def load_cpu_moe(est: Estimate, meta: ModelMetadata) -> int:
    """``LoadSettings.cpu_moe`` for an estimate: -1 when every layer's experts stay in RAM."""
    return -1 if est.cpu_moe and est.cpu_moe >= meta.block_count - meta.nextn_layers else est.cpu_moe


def _budget_text(gpu: GpuInfo | None, ram: int | None, vram: int | None) -> str:
    parts = []
    if gpu and vram is not None:
        parts.append(f"{'unified memory limit' if gpu.unified else 'VRAM'} {vram / GiB:.1f} GiB")
    if ram is not None and not (gpu and gpu.unified):
        parts.append(f"RAM {ram / GiB:.1f} GiB")
    return "available: " + ", ".join(parts) if parts else "memory size unknown"


def fit_mlx(meta: ModelMetadata, hw: HardwareProfile, n_ctx: int = 8192, label: str = "", n_seq: int = 1) -> FitResult:
    gpu = main_gpu(hw)
    quant = meta.quant.quant if meta.quant else "?"
    base: dict[str, Any] = dict(label=label or meta.source, format="mlx", quant=quant,
                                file_bytes=meta.weights_bytes, bits_per_weight=meta.bits_per_weight)
    apple = gpu is not None and gpu.unified and is_apple(hw)
    try:
        est = estimate_mlx(meta, n_ctx, "unified" if apple else "CPU", n_seq)
    except UnknownModel as why:
        return FitResult(verdict="unknown", reason=str(why), **base)
    budget = vram_budget(gpu) if apple and gpu else ram_budget(hw)
    limit = meta.context_length or n_ctx
    max_ctx = _largest_ctx(_FitsAt(
        lambda c: budget is None or estimate_mlx(meta, c, n_seq=n_seq).devices[0].total_bytes <= budget, limit))
    total = est.devices[0].total_bytes
    result = FitResult(estimate=est, max_ctx=max_ctx, decode_tok_s=_tok_s(est, hw, gpu if apple else None),
                       verdict="", reason="", **base)
    if budget is not None and total > budget:
        result.verdict = "does not fit"
        limit_name = "Metal working-set limit" if apple else "RAM"
        result.reason = f"needs {total / GiB:.1f} GiB; {limit_name} {budget / GiB:.1f} GiB"
    elif apple:
        result.verdict = "unified memory"
        result.reason = f"{total / GiB:.1f} of {(budget or 0) / GiB:.1f} GiB Metal working set"
    else:
        result.verdict, result.reason = "CPU only", "MLX runs on the CPU here (no Apple GPU)"
    return result


def fit_exl(meta: ModelMetadata, hw: HardwareProfile, n_ctx: int = 8192, kv_type: str = "f16",
            label: str = "") -> FitResult:
    gpu = main_gpu(hw)
    quant = meta.quant.quant if meta.quant else "?"
    base: dict[str, Any] = dict(label=label or meta.source, format=meta.format, quant=quant,
                                file_bytes=meta.weights_bytes,
                                bits_per_weight=meta.quant.bits_per_weight if meta.quant else None)
    if gpu is None or gpu.vendor != "nvidia":
        return FitResult(verdict="does not fit", reason=f"{meta.format.upper()} needs an NVIDIA GPU with CUDA", **base)
    if meta.format == "exl3" and gpu.compute_capability and float(gpu.compute_capability) < 8.0:
        return FitResult(verdict="does not fit", reason="EXL3 needs an NVIDIA GPU of the Ampere generation or newer",
                         **base)
    try:
        est = estimate_exl(meta, n_ctx, kv_type, _gpu_label(gpu))
    except UnknownModel as why:
        return FitResult(verdict="unknown", reason=str(why), **base)
    vram = vram_budget(gpu)
    limit = meta.context_length or n_ctx
    max_ctx = _largest_ctx(_FitsAt(lambda c: estimate_exl(meta, c, kv_type).devices[0].total_bytes <= vram, limit))
    total = est.devices[0].total_bytes
    result = FitResult(estimate=est, max_ctx=max_ctx, decode_tok_s=_tok_s(est, hw, gpu), verdict="", reason="",
                       **base)
    if total > vram:
        result.verdict = "does not fit"
        result.reason = f"needs {total / GiB:.1f} GiB of VRAM, {vram / GiB:.1f} GiB available"
    else:
        result.verdict, result.reason = "full GPU", f"{total / GiB:.1f} of {vram / GiB:.1f} GiB VRAM"
    return result


def fit_model(meta: ModelMetadata, hw: HardwareProfile, n_ctx: int = 8192, gpu_layers: int | str = "auto",
              kv_type: str = "f16", label: str = "", cpu_moe: int | None = None,
              pin: tuple[str, str] | None = None, n_seq: int = 1) -> FitResult:
    if meta.format == "gguf":
        return fit_gguf(meta, hw, n_ctx, gpu_layers, kv_type, label, cpu_moe, pin, n_seq)
    if meta.format in ("mlx", "safetensors"):
        result = fit_mlx(meta, hw, n_ctx, label, n_seq)
        result.format = meta.format
        return result
    if meta.format in ("exl2", "exl3"):
        return fit_exl(meta, hw, n_ctx, kv_type, label)
    return FitResult(label=label or meta.source, format=meta.format, quant="?", verdict="unknown",
                     reason=f"the {meta.format} format is not modelled")


# ----------------------------------------------------------------------------------------- recommending

def preferred_formats(hw: HardwareProfile, results: list[FitResult]) -> tuple[list[str], str]:
    """The order of formats for this machine, and the sentence that says why."""
    if is_apple(hw):
        return ["mlx", "gguf"], "Apple Silicon: MLX runs natively on Metal; GGUF through llama.cpp is the alternative"
    gpu = main_gpu(hw)
    if gpu and gpu.vendor == "nvidia":
        exl_ready = [f for f in ("exl3", "exl2") if backend_available(hw, f"exllamav{f[-1]}")]
        whole = [r for r in results if r.format in exl_ready and r.verdict == "full GPU"]
        if whole:
            return exl_ready + ["gguf"], ("NVIDIA GPU holds the whole model and ExLlama is installed: EXL is fastest "
                                          "there")
        if exl_ready:
            return ["gguf"] + exl_ready, ("no EXL quant fits entirely in VRAM, so GGUF (which can split layers) comes "
                                          "first")
        return ["gguf"], "ExLlama is not available here, so GGUF through llama.cpp"
    return ["gguf"], "GGUF through llama.cpp runs on this hardware (CPU and any supported GPU)"


@dataclass(frozen=True)
class Pick:
    """The best quant of one format, and the sentence that says why."""

    label: str
    format: str
    quant: str
    verdict: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "quant": self.quant, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class SuggestedLoad:
    """What to load the best pick with (the recommender's figures; app/models/planner.py plans an actual load)."""

    gpu_layers: int
    max_ctx: int | None
    n_ctx: int
    cpu_moe: int = 0  # MoE experts of the first N layers kept in RAM (LoadSettings.cpu_moe)

    def to_json(self) -> dict[str, Any]:
        return {"gpu_layers": self.gpu_layers, "max_ctx": self.max_ctx, "n_ctx": self.n_ctx, "cpu_moe": self.cpu_moe}


@dataclass
class Recommendation:
    n_ctx: int
    format_preference: list[str]
    format_reason: str
    candidates: list[FitResult]
    best_per_format: dict[str, Pick]
    best: Pick | None
    load_settings: SuggestedLoad | None

    def candidate(self, label: str) -> FitResult:
        return next(r for r in self.candidates if r.label == label)

    def to_json(self) -> dict[str, Any]:
        """What ``quantdesk recommend --json`` prints."""
        return {"n_ctx": self.n_ctx, "format_preference": self.format_preference, "format_reason": self.format_reason,
                "candidates": [r.to_json() for r in self.candidates],
                "best_per_format": {fmt: pick.to_json() for fmt, pick in self.best_per_format.items()},
                "best": self.best.to_json() | {"format": self.best.format} if self.best else None,
                "load_settings": self.load_settings.to_json() if self.load_settings else None}


def best_per_format(results: list[FitResult]) -> dict[str, Pick]:
    picks: dict[str, Pick] = {}
    for fmt in sorted({r.format for r in results}):
        fitting = [r for r in results if r.format == fmt and r.fits]
        if not fitting:
            continue
        top_rank = min(r.rank for r in fitting)
        tier = [r for r in fitting if r.rank == top_rank]
        best = max(tier, key=lambda r: (r.bits_per_weight or 0, r.file_bytes))
        where = {0: "entirely in GPU memory" if best.verdict == "full GPU" else "in unified memory",
                 1: "with part of its layers on the GPU", 2: "in RAM on the CPU"}[top_rank]
        if best.verdict.startswith("MoE split") and best.estimate is not None:
            where = f"on the GPU with the experts of {best.estimate.cpu_moe} layers in system RAM"
        speed = f", about {best.decode_tok_s:.0f} tok/s" if best.decode_tok_s else ""
        n_ctx = best.estimate.n_ctx if best.estimate else 0
        picks[fmt] = Pick(label=best.label, format=fmt, quant=best.quant, verdict=best.verdict,
                          reason=f"{best.quant} is the highest-precision {fmt.upper()} quant that fits {where} "
                                 f"at {n_ctx} tokens{speed}.")
    return picks


def recommend(metas: list[tuple[str, ModelMetadata | Exception]], hw: HardwareProfile, n_ctx: int = 8192,
              kv_type: str = "f16") -> Recommendation:
    results: list[FitResult] = []
    for label, meta in metas:
        if isinstance(meta, Exception):
            results.append(FitResult(label=label, format="?", quant="?", verdict="unknown", reason=str(meta)))
        else:
            results.append(fit_model(meta, hw, n_ctx, "auto", kv_type, label))
    order, why = preferred_formats(hw, results)
    picks = best_per_format(results)
    best = next((picks[f] for f in order if f in picks), next(iter(picks.values()), None))
    load = None
    if best:
        chosen = next(r for r in results if r.label == best.label)
        if chosen.estimate:
            load = SuggestedLoad(gpu_layers=chosen.estimate.gpu_layers, max_ctx=chosen.max_ctx,
                                 n_ctx=chosen.estimate.n_ctx, cpu_moe=chosen.estimate.cpu_moe)
    return Recommendation(n_ctx=n_ctx, format_preference=order, format_reason=why, candidates=results,
                          best_per_format=picks, best=best, load_settings=load)
