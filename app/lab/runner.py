"""Run the quant lab: measure each variant of a model through the engine host the chat uses.

Speed, per repetition and variant (the variant order rotates each repetition, so drift in the
machine's state — thermals, page cache, other load — spreads over every variant instead of
favouring the first):
  a fresh engine host; load (timed in the host); a warm-up request that also calibrates the prompt to
  ``prompt_tokens`` for this variant's tokenizer; then one measured request: the calibrated prompt and
  ``gen_tokens`` generated tokens. Prompt tok/s, TTFT and generation tok/s come from the host's own
  GenerationStats, peak memory from the host process (a fresh one per run, so nothing else counts).

Quality, once per variant in its own fresh host: perplexity on the bundled text (its first
``ppl_tokens`` tokens, the variant's own tokenizer), and KL divergence and top-1 agreement against the
reference on the fixed prompt set — each variant scores the reference's token ids, over the shared
vocabulary. The reference goes through the same path, so its own row is a check: KL 0, top-1 1.0.

Qt-free and blocking: the GUI runs ``run_bench`` on a worker thread, passes ``on_progress`` and sets
``cancel`` (checked between steps).
"""

from __future__ import annotations

import json
import secrets
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app import __version__
from app.errors import BackendUnavailable, EngineCrashed, EngineError, ModelFileError, QuantDeskError
from app.lab import corpus
from app.lab.metrics import (DivergenceSummary, Spread, VocabularyMismatch, kl_and_top1, perplexity,
                             shared_vocabulary_size)
from app.lab.results import SPEED_METRICS, BenchResult, BenchSettings, RunSample, VariantResult
from backends.base import Done, LoadSettings, Message, SamplingSettings

KL_METRICS = ("kl_mean", "kl_median", "kl_p99", "kl_max", "top1_agreement")
REMOTE_NO_DISTRIBUTIONS = ("an OpenAI-compatible endpoint returns at most the top few log-probabilities of tokens it "
                           "chose itself, never whole next-token distributions over the reference's tokens")
# What an engine can do wrong to one variant without the whole bench failing.
VARIANT_FAILURES = (EngineError, EngineCrashed, BackendUnavailable, ModelFileError)
CALIBRATION_TOLERANCE = 0.02  # the measured prompt lands within 2 % of --prompt-tokens
CALIBRATION_TRIES = 3


class LabCancelled(QuantDeskError):
    """The user stopped the bench."""


@dataclass(frozen=True)
class LabProgress:
    phase: str  # "speed" | "quality"
    step: int  # 1-based
    total: int
    variant: str
    message: str


# --- variants ----------------------------------------------------------------------------------------


def describe_variant(path: str | Path) -> VariantResult:
    """What a model file or folder is (format, quant, bits per weight, size) before anything is loaded."""
    from app.models.detect import detect_model
    from app.models.metadata import read_model
    from app.remote import connections

    if connections.is_remote_ref(path):  # its files are on the server: only its name is known here
        connections.Connections().endpoint_for(str(path))  # an unknown connection is refused now, in words
        return VariantResult(label=connections.display_name(str(path)), path=str(path), format="remote",
                             quant="remote", bits_per_weight=None, size_bytes=0)

    ref = detect_model(path)
    meta = read_model(ref.path)
    quant = meta.quant.quant if meta.quant else (meta.file_type or "?")
    # The nominal bits of the quant type rank variants; the figure from the tensors is the fallback.
    bpw = (meta.quant.bits_per_weight if meta.quant else None) or meta.bits_per_weight
    files = [p for p in ref.path.rglob("*") if p.is_file()] if ref.path.is_dir() else [ref.path]
    label = ref.path.stem if ref.path.is_file() else ref.path.name
    return VariantResult(label=label, path=str(ref.path), format=ref.format, quant=quant,
                         bits_per_weight=round(bpw, 3) if bpw else None,
                         size_bytes=sum(p.stat().st_size for p in files))


def plan_variants(models: Sequence[str | Path], reference: str | Path | None = None) -> list[VariantResult]:
    """Describe every model once (the reference joins the list if it is not in it), with unique labels,
    the reference first: explicitly named, else the highest bits per weight (the first given on a tie)."""
    from app.remote.connections import is_remote_ref

    paths: list[Path | str] = []
    for model in [*models, *([reference] if reference is not None else [])]:
        resolved = model if is_remote_ref(model) else Path(model).expanduser().resolve()
        if resolved not in paths:
            paths.append(resolved)
    if not paths:
        raise QuantDeskError("name at least one model to benchmark")
    variants = [describe_variant(p) for p in paths]
    seen: dict[str, int] = {}
    for v in variants:
        if v.label in seen:  # two files of one name in different folders
            seen[v.label] += 1
            v.label = f"{Path(v.path).parent.name}/{v.label}"
        else:
            seen[v.label] = 1
    if reference is not None:
        named = reference if is_remote_ref(reference) else Path(reference).expanduser().resolve()
        chosen = variants[paths.index(named)]
        if chosen.format == "remote":
            raise QuantDeskError(f"{chosen.label} cannot be the reference: {REMOTE_NO_DISTRIBUTIONS}",
                                 "name a local model as --reference; the remote one is compared against it")
    else:
        chosen = max(variants, key=lambda v: v.bits_per_weight or -1.0)
    chosen.is_reference = True
    return [chosen, *(v for v in variants if v is not chosen)]


def _load_settings(settings: BenchSettings, n_ctx: int) -> LoadSettings:
    return LoadSettings(n_ctx=n_ctx, gpu_layers=settings.gpu_layers, threads=settings.threads)


def _finish(stream) -> Done:
    done = None
    for event in stream:
        if isinstance(event, Done):
            done = event
    return done


# --- the bench ---------------------------------------------------------------------------------------


class _Bench:
    def __init__(self, variants: list[VariantResult], settings: BenchSettings, client_factory: Callable,
                 on_progress: Callable[[LabProgress], None] | None, cancel: threading.Event | None) -> None:
        self.variants = variants
        self.settings = settings
        self.client_factory = client_factory
        self.on_progress = on_progress
        self.cancel = cancel or threading.Event()
        self.prompt_chars: dict[str, int] = {}  # per variant: characters that make prompt_tokens tokens
        self.total = settings.reps * len(variants) + (len(variants) if settings.quality else 0)
        self.step = 0

    def progress(self, phase: str, variant: VariantResult, message: str) -> None:
        if self.cancel.is_set():
            raise LabCancelled("the bench was stopped")
        self.step += 1
        if self.on_progress:
            self.on_progress(LabProgress(phase, self.step, self.total, variant.label, message))

    # --- speed ---

    def speed(self) -> None:
        for rep in range(self.settings.reps):
            shift = rep % len(self.variants)
            order = self.variants[shift:] + self.variants[:shift]
            for position, variant in enumerate(order):
                self.progress("speed", variant, f"repetition {rep + 1}/{self.settings.reps}: {variant.label}")
                if variant.error:
                    continue  # it failed once (a crash, out of memory): do not repeat that
                try:
                    variant.runs.append(self.measure(variant, rep, position))
                except VARIANT_FAILURES as exc:
                    variant.error = str(exc)

    def measure(self, variant: VariantResult, rep: int, position: int) -> RunSample:
        s = self.settings
        with self.client_factory() as client:
            loaded = client.load(variant.path, _load_settings(s, s.speed_context))
            variant.backend = loaded.backend
            self.warm_up(client, variant)
            prompt = corpus.prompt_text(self.prompt_chars[variant.label], f"run {rep + 1}.{position + 1}")
            done = _finish(client.generate([Message("user", prompt)],
                                           SamplingSettings(max_tokens=s.gen_tokens, seed=s.seed)))
        stats = done.stats
        return RunSample(rep=rep, position=position, load_ms=loaded.load_ms, prompt_tokens=stats.prompt_tokens,
                         prompt_ms=stats.prompt_ms, prompt_tps=stats.prompt_tps, ttft_ms=stats.ttft_ms,
                         generated_tokens=stats.generated_tokens,
                         decode_tps=stats.decode_tps if stats.decode_tokens > 0 else None,
                         stop_reason=stats.stop_reason, peak_memory_bytes=stats.peak_memory_bytes,
                         memory_after_load=dict(loaded.memory_bytes))

    def warm_up(self, client, variant: VariantResult) -> None:
        """Run the code paths once before timing them; on the first run of a variant, also find how many
        characters of the text make ``prompt_tokens`` tokens with its tokenizer and chat template."""
        target = self.settings.prompt_tokens
        chars = self.prompt_chars.get(variant.label)
        tries = 1 if chars else CALIBRATION_TRIES
        chars = chars or target  # a token is at least one character for every tokenizer we run
        for _ in range(tries):
            done = _finish(client.generate([Message("user", corpus.prompt_text(chars, "warm-up"))],
                                           SamplingSettings(max_tokens=2, seed=self.settings.seed)))
            got = done.stats.prompt_tokens
            if not got:  # a remote server that reports no usage: its prompt cannot be calibrated
                variant.notes.append("the prompt length could not be calibrated: the engine reported no prompt "
                                     "token count")
                break
            if abs(got - target) <= CALIBRATION_TOLERANCE * target:
                break
            chars = max(int(chars * target / got), 1)
        self.prompt_chars[variant.label] = chars

    def summarise_speed(self) -> None:
        for v in self.variants:
            for metric in SPEED_METRICS:
                v.speed[metric] = Spread.of([getattr(r, metric) for r in v.runs if getattr(r, metric) is not None])
            if v.runs and v.speed["decode_tps"] is None:
                v.unavailable["decode_tps"] = ("n/a: generation reached end-of-sequence after its first token "
                                               "in every run")
            if any(dev != "cpu" for r in v.runs for dev in r.memory_after_load):
                v.notes.append("peak memory is the engine process's RAM peak; GPU memory is in each run's "
                               "memory_after_load")

    # --- quality ---

    def quality(self, work: Path) -> None:
        reference = self.variants[0]
        reference_scores: list[tuple[list[int], str]] = []
        reference_vocabulary: list[str] | None = None
        for index, variant in enumerate(self.variants):
            self.progress("quality", variant, f"perplexity and KL divergence: {variant.label}")
            if variant.error:
                continue
            try:
                with self.client_factory() as client:
                    client.load(variant.path, _load_settings(self.settings, self.settings.quality_context))
                    if variant.format == "remote":
                        self.mark(variant, KL_METRICS, REMOTE_NO_DISTRIBUTIONS)
                    try:
                        scored = client.score(text=corpus.perplexity_text(), max_tokens=self.settings.ppl_tokens)
                    except EngineError as exc:
                        if exc.kind != "unavailable":
                            raise
                        self.mark(variant, ("perplexity", *KL_METRICS) if variant.format != "remote"
                                  else ("perplexity",), exc.message)
                        continue
                    variant.perplexity = perplexity(scored.token_logprobs)
                    variant.ppl_tokens = len(scored.token_logprobs) + 1  # the first token has no log-probability
                    if variant.format == "remote":
                        continue
                    if variant is reference:
                        for i, prompt in enumerate(corpus.kl_prompts()):
                            s = client.score(text=prompt, logprobs_path=work / f"reference-{i}.npy",
                                             vocabulary_path=work / "reference-vocabulary.json" if i == 0 else "")
                            reference_scores.append((s.tokens, s.logprobs_path))
                        reference_vocabulary = json.loads((work / "reference-vocabulary.json").read_text("utf-8"))
                    if not reference_scores:
                        self.mark(variant, KL_METRICS,
                                  f"n/a: the reference {reference.label} could not be scored "
                                  f"({reference.unavailable.get('perplexity') or reference.error})")
                        continue
                    self.divergence(client, variant, index, reference, reference_scores, reference_vocabulary, work)
            except VARIANT_FAILURES as exc:
                if not variant.runs:
                    variant.error = str(exc)
                self.mark(variant, ("perplexity", *KL_METRICS) if variant.perplexity is None else KL_METRICS,
                          f"n/a: scoring failed: {exc}")

    def divergence(self, client, variant: VariantResult, index: int, reference: VariantResult,
                   reference_scores: list[tuple[list[int], str]], reference_vocabulary: list[str],
                   work: Path) -> None:
        import numpy as np

        kl: list[float] = []
        agree: list[bool] = []
        width = 0
        for i, (tokens, reference_path) in enumerate(reference_scores):
            path = work / f"variant-{index}-{i}.npy"
            vocabulary_path = work / f"variant-{index}-vocabulary.json"
            try:
                client.score(tokens=tokens, logprobs_path=path, vocabulary_path=vocabulary_path if i == 0 else "")
            except EngineError as exc:
                if exc.kind not in ("vocabulary", "unavailable"):
                    raise
                self.mark(variant, KL_METRICS, f"n/a: {exc.message}")
                self.note_other_tokenizer(variant)
                return
            if i == 0:
                try:
                    width = shared_vocabulary_size(
                        reference_vocabulary, json.loads(vocabulary_path.read_text("utf-8")),
                        reference_name=reference.label, variant_name=variant.label)
                except VocabularyMismatch as exc:
                    self.mark(variant, KL_METRICS, f"n/a: {exc}")
                    self.note_other_tokenizer(variant)
                    return
            position_kl, position_agree = kl_and_top1(np.load(reference_path), np.load(path), width)
            path.unlink()
            kl += position_kl
            agree += position_agree
        summary = DivergenceSummary.of(kl, agree)
        variant.kl_mean, variant.kl_median = summary.kl_mean, summary.kl_median
        variant.kl_p99, variant.kl_max = summary.kl_p99, summary.kl_max
        variant.top1_agreement, variant.kl_positions = summary.top1_agreement, summary.positions

    @staticmethod
    def mark(variant: VariantResult, metrics: Sequence[str], reason: str) -> None:
        reason = reason if reason.startswith("n/a") else f"n/a: {reason}"
        for metric in metrics:
            variant.unavailable[metric] = reason

    @staticmethod
    def note_other_tokenizer(variant: VariantResult) -> None:
        if variant.perplexity is not None:
            variant.notes.append("perplexity counts this variant's own tokens: another tokenizer than the "
                                 "reference's, so the two perplexities are not directly comparable")


def run_bench(models: Sequence[str | Path], settings: BenchSettings | None = None, *,
              reference: str | Path | None = None, hardware=None,
              on_progress: Callable[[LabProgress], None] | None = None, cancel: threading.Event | None = None,
              client_factory: Callable | None = None) -> BenchResult:
    """Measure every model (and the reference) and return the result; it is not saved here (ResultStore).

    Raises ValueError for bad settings, ModelFileError for a path that is no model, LabCancelled when
    ``cancel`` is set. A variant that fails (load error, engine crash) keeps its error and the rest go on.
    ``hardware`` is a HardwareProfile (default: this machine, detected now).
    """
    from app.engine.client import EngineClient

    settings = settings or BenchSettings()
    settings.validate()
    variants = plan_variants(models, reference)
    if hardware is None:
        from app.hardware import detect

        hardware = detect()
    bench = _Bench(variants, settings, client_factory or EngineClient, on_progress, cancel)
    bench.speed()
    bench.summarise_speed()
    if settings.quality:
        with tempfile.TemporaryDirectory(prefix="quantdesk-lab-") as work:
            bench.quality(Path(work))
    else:
        for v in variants:
            bench.mark(v, ("perplexity", *KL_METRICS), "n/a: the quality pass was skipped (--no-quality)")
    created = datetime.now(UTC)
    return BenchResult(
        id=f"{created:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}", created_at=created.isoformat(timespec="seconds"),
        quantdesk_version=__version__, settings=settings, hardware=hardware.to_dict(),
        reference=variants[0].label, variants=variants, corpus=corpus.describe(),
        notes=[f"speed: median of {settings.reps} run(s) per variant, each in a fresh engine host after a "
               f"warm-up, variant order rotated per repetition",
               "quality: KL(reference || variant) in nats per token over the reference's tokens of the "
               "fixed prompt set; perplexity over each variant's own tokens of the bundled text"],
    )
