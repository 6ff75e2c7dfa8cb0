"""Run the quant lab: measure each variant of a model through the engine host the chat uses.

Speed, per repetition and variant (the variant order rotates each repetition, so drift in the
machine's state — thermals, page cache, other load — spreads over every variant instead of
favouring the first):
  a fresh engine host; load (timed in the host); a warm-up request that also calibrates the prompt to
  ``prompt_tokens`` for this variant's tokenizer; then one measured request: the calibrated prompt and
  ``gen_tokens`` generated tokens. Prompt tok/s, TTFT and generation tok/s come from the host's own
  GenerationStats, peak memory from the host process (a fresh one per run, so nothing else counts).

Quality, as ``llama-perplexity --kl-divergence`` measures it (backends.scoring, app/lab/metrics.py): the reference
scores the corpus in windows of ``ctx`` tokens once and keeps its likeliest tokens per position in a reference file
(app/lab/references: cached, so the next run reuses it without loading the reference model; or a file given, the
lab's own or llama-perplexity's --kl-divergence-base); every other variant then scores the same token ids in the
same windows against it, in its own fresh host, one window in memory at a time. A remote model scores its own
tokens of the text: perplexity only.

Qt-free and blocking: the GUI runs ``run_bench`` on a worker thread, passes ``on_progress`` and sets
``cancel`` (checked between steps, and between windows while scoring).
"""

from __future__ import annotations

import dataclasses
import secrets
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app import __version__
from app.errors import BackendUnavailable, EngineCrashed, EngineError, ModelFileError, QuantDeskError
from app.lab import corpus, references
from app.lab.metrics import KldStatistics, Spread, perplexity
from app.lab.results import QUALITY_METRICS, SPEED_METRICS, BenchResult, BenchSettings, RunSample, VariantResult
from app.datatypes import DEFAULT_MAX_TOKENS, Done, LoadSettings, Message, SamplingSettings, WindowScoring

if TYPE_CHECKING:  # imported where a bench runs: the lab's pages load without an engine client or numpy
    import numpy as np

    from app.datatypes import Token
    from app.engine.client import EngineClient
    from app.hardware.profile import HardwareProfile

KL_METRICS = tuple(m for m in QUALITY_METRICS if m != "perplexity")
REFERENCE_FILE = "reference file"  # a variant's format when the reference is a file, not a model run here
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
    fraction: float | None = None  # how far the step is, where it reports that (scoring, window by window)


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
    origin = hub_origin(ref.path)
    quant = meta.quant.quant if meta.quant else (meta.file_type or "?")
    # The nominal bits of the quant type rank variants; the figure from the tensors is the fallback.
    bpw = (meta.quant.bits_per_weight if meta.quant else None) or meta.bits_per_weight
    files = [p for p in ref.path.rglob("*") if p.is_file()] if ref.path.is_dir() else [ref.path]
    label = ref.path.stem if ref.path.is_file() else ref.path.name
    return VariantResult(label=label, path=str(ref.path), format=ref.format, quant=quant,
                         bits_per_weight=round(bpw, 3) if bpw else None,
                         size_bytes=sum(p.stat().st_size for p in files), origin=origin)


def hub_origin(path: str | Path) -> str:
    """Where the library downloaded ``path`` from, named as the recommender names a Hub model
    ("owner/repo/file.gguf", "owner/repo", "owner/repo@branch"); "" for a file the library did not fetch."""
    from app.hub.library import Library

    resolved = Path(path).resolve()
    try:
        entries = Library().entries(refresh=False)  # what the library recorded; no scan of its folders
    except (OSError, QuantDeskError, sqlite3.Error):  # an unreadable library only means: origin unknown
        return ""
    for entry in entries:
        if not entry.repo_id or Path(entry.path).resolve() != resolved:
            continue
        if resolved.is_file():  # its path in the repo, as the download recorded it (a quant's folder included)
            in_repo = next((f["path"] for f in entry.files if resolved.as_posix().endswith("/" + f["path"])),
                           resolved.name)
            return f"{entry.repo_id}/{in_repo}"
        return entry.repo_id + (f"@{entry.revision}" if entry.revision not in (None, "", "main") else "")
    return ""


def reference_file_variant(path: str | Path) -> VariantResult:
    """The reference row of a bench whose reference is a file (made earlier, elsewhere, or by llama-perplexity)."""
    reference = references.open_reference(path)
    try:
        model = reference.header.get("model") or {}
        return VariantResult(label=str(model.get("label") or Path(path).stem), path=str(path), format=REFERENCE_FILE,
                             quant=str(model.get("quant") or "?"), bits_per_weight=model.get("bits_per_weight"),
                             size_bytes=int(model.get("size_bytes") or 0), is_reference=True)
    finally:
        reference.close()


def plan_variants(models: Sequence[str | Path], reference: str | Path | None = None,
                  reference_file: str | Path | None = None, labels: dict[str, str] | None = None,
                  origins: dict[str, str] | None = None) -> list[VariantResult]:
    """Describe every model once (the reference joins the list if it is not in it), with unique labels (``labels``
    names some by their path: a Hub repo's quants; ``origins`` says which Hub file some are, where the library does
    not know them: the lab's own downloads), the reference first: explicitly named, else the highest bits per weight
    (the first given on a tie); or, with ``reference_file``, that file's model, measured for quality only through the
    file."""
    from app.remote.connections import is_remote_ref

    if reference is not None and reference_file is not None:
        raise QuantDeskError("name the reference as a model or as a file, not both")
    paths: list[Path | str] = []
    for model in [*models, *([reference] if reference is not None else [])]:
        resolved = model if is_remote_ref(model) else Path(model).expanduser().resolve()
        if resolved not in paths:
            paths.append(resolved)
    if not paths:
        raise QuantDeskError("name at least one model to benchmark")
    variants = [describe_variant(p) for p in paths]
    given = {str(Path(path).expanduser().resolve()): label for path, label in (labels or {}).items()}
    from_hub = {str(Path(path).expanduser().resolve()): origin for path, origin in (origins or {}).items()}
    for v in variants:
        v.label = given.get(v.path, v.label)
        v.origin = from_hub.get(v.path, v.origin)
    seen: dict[str, int] = {}
    for v in variants:
        if v.label in seen:  # two files of one name in different folders
            seen[v.label] += 1
            v.label = f"{Path(v.path).parent.name}/{v.label}"
        else:
            seen[v.label] = 1
    if reference_file is not None:
        return [reference_file_variant(reference_file), *variants]
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


def _load_settings(settings: BenchSettings, n_ctx: int, kv_cache_type: str = "") -> LoadSettings:
    quantized = kv_cache_type not in ("", "f16")  # llama.cpp quantizes a V cache only with flash attention
    return LoadSettings(n_ctx=n_ctx, gpu_layers=settings.gpu_layers, threads=settings.threads,
                        kv_cache_type=kv_cache_type or "f16",
                        flash_attention=True if quantized and settings.flash_attention is None
                        else settings.flash_attention)


def sweep(variants: list[VariantResult], kv_types: Sequence[str] = (), contexts: Sequence[int] = ()
          ) -> list[VariantResult]:
    """Every variant but the reference once per KV-cache type (GGUF variants only: the other engines have no such
    setting) and once per context length, labelled with them ("Q4_K_M · KV q8_0 · ctx 2048"); the reference keeps
    f16 and the bench's --ctx: it is what the others are measured against (at each context length, through its
    windows of that length)."""
    if not kv_types and not contexts:
        return variants
    swept = [variants[0]]
    for v in variants[1:]:
        caches = kv_types if v.format == "gguf" and kv_types else ("",)
        for kv in caches:
            for ctx in contexts or (0,):
                label = v.label + (f" · KV {kv}" if kv else "") + (f" · ctx {ctx}" if ctx else "")
                swept.append(dataclasses.replace(v, label=label, kv_cache_type=kv, ctx=ctx, sweep_of=v.label, runs=[],
                                                 speed={}, unavailable={}, notes=[]))
    return swept


def _finish(stream: Iterable[Token | Done]) -> Done:
    done = None
    for event in stream:
        if isinstance(event, Done):
            done = event
    assert done is not None, "a generation's events end with one Done (EngineClient.generate), or it raises"
    return done


# --- the bench ---------------------------------------------------------------------------------------


class _Bench:
    def __init__(self, variants: list[VariantResult], settings: BenchSettings,
                 client_factory: Callable[[], EngineClient], on_progress: Callable[[LabProgress], None] | None,
                 cancel: threading.Event | None) -> None:
        self.variants = variants
        self.settings = settings
        self.client_factory = client_factory
        self.on_progress = on_progress
        self.cancel = cancel or threading.Event()
        self.prompt_chars: dict[str, int] = {}  # per variant: characters that make prompt_tokens tokens
        self.timed = [v for v in variants if v.format != REFERENCE_FILE]  # a reference file has no speed
        self.total = (settings.reps * len(self.timed) if settings.speed else 0) \
            + (len(variants) if settings.quality else 0)
        self.step = 0
        self.reference_info: dict[str, Any] = {}
        self.references: dict[int, Path] = {}  # the reference's file per window length (a context sweep has several)

    def progress(self, phase: str, variant: VariantResult, message: str) -> None:
        if self.cancel.is_set():
            raise LabCancelled("the bench was stopped")
        self.step += 1
        if self.on_progress:
            self.on_progress(LabProgress(phase, self.step, self.total, variant.label, message))

    def scoring_progress(self, client: EngineClient, variant: VariantResult, what: str) -> Callable[[float], None]:
        """Progress within a scoring pass, with the time left; a cancel stops the engine between windows."""
        started = time.monotonic()

        def report(fraction: float) -> None:
            if self.cancel.is_set():
                client.cancel()
                return
            elapsed = time.monotonic() - started
            left = f", about {elapsed * (1 - fraction) / fraction:.0f} s left" if 0 < fraction < 1 else ""
            if self.on_progress:
                self.on_progress(LabProgress("quality", self.step, self.total, variant.label,
                                             f"{what}: {variant.label}, {fraction:.0%}{left}", fraction))
        return report

    # --- speed ---

    def speed(self) -> None:
        for rep in range(self.settings.reps):
            shift = rep % len(self.timed)
            order = self.timed[shift:] + self.timed[:shift]
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
        context = s.speed_context_for(s.prompt_tokens_for(variant.ctx))
        with self.client_factory() as client:
            loaded = client.load(variant.path, _load_settings(s, context, variant.kv_cache_type))
            variant.backend = loaded.backend
            self.warm_up(client, variant)
            prompt = corpus.prompt_text(self.prompt_chars[variant.label], f"run {rep + 1}.{position + 1}")
            done = _finish(client.generate([Message("user", prompt)],
                                           SamplingSettings(max_tokens=s.gen_tokens, seed=s.seed)))
            self.note_guard(variant, client)
        stats = done.stats
        return RunSample(rep=rep, position=position, load_ms=loaded.load_ms, prompt_tokens=stats.prompt_tokens,
                         prompt_ms=stats.prompt_ms, prompt_tps=stats.prompt_tps, ttft_ms=stats.ttft_ms,
                         generated_tokens=stats.generated_tokens,
                         decode_tps=stats.decode_tps if stats.decode_tokens > 0 else None,
                         stop_reason=stats.stop_reason, peak_memory_bytes=stats.peak_memory_bytes,
                         memory_after_load=dict(loaded.memory_bytes))

    def warm_up(self, client: EngineClient, variant: VariantResult) -> None:
        """Run the code paths once before timing them; on the first run of a variant, also find how many
        characters of the text make ``prompt_tokens`` tokens with its tokenizer and chat template."""
        target = self.settings.prompt_tokens_for(variant.ctx)
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

    def quality(self, work: Path, scored: corpus.Corpus, description: dict[str, Any],
                reference_file: Path | None) -> None:
        reference = self.variants[0]
        self.progress("quality", reference, f"reference: {reference.label}")
        try:
            path = reference_file or self.reference_run(reference, scored, description, work)
        except VARIANT_FAILURES as exc:
            reason = f"n/a: the reference {reference.label} could not be scored: {str(exc).removeprefix('n/a: ')}"
            for v in self.variants:
                self.mark(v, QUALITY_METRICS if v is reference else KL_METRICS, reason)
            path = None
        if path is not None:
            self.references[self.settings.ctx] = path
            opened = references.open_reference(path)
            try:
                self.reference_info = references.describe(opened)
                self.summarise(reference, opened.own_positions())
            finally:
                opened.close()
        for variant in self.variants[1:]:
            self.progress("quality", variant, f"perplexity and KL divergence: {variant.label}")
            if variant.error:
                continue
            try:
                if variant.format == "remote":
                    self.remote_perplexity(variant, scored.text, variant.ctx or self.settings.ctx)
                elif path is not None:
                    self.compare(variant, self.reference_for(variant.ctx or self.settings.ctx, scored, description,
                                                             work), work)
            except VARIANT_FAILURES as exc:
                if isinstance(exc, EngineError) and exc.kind == "cancelled":
                    raise LabCancelled("the bench was stopped") from None
                if not variant.runs:
                    variant.error = str(exc)
                self.mark(variant, QUALITY_METRICS, f"n/a: scoring failed: {str(exc).removeprefix('n/a: ')}")

    def reference_for(self, ctx: int, scored: corpus.Corpus, description: dict[str, Any], work: Path) -> Path:
        """The reference's file for windows of ``ctx`` tokens (a context sweep's row): the one scored for --ctx, or
        one scored for that length now (or found in the cache)."""
        if ctx not in self.references:
            self.references[ctx] = self.reference_run(self.variants[0], scored, description, work, ctx)
        return self.references[ctx]

    def reference_run(self, reference: VariantResult, scored: corpus.Corpus, description: dict[str, Any], work: Path,
                      ctx: int | None = None) -> Path:
        """The reference's file for windows of ``ctx`` tokens (default --ctx): from the cache when this model, text
        and windowing made one before, else scored now into the cache. Only the --ctx run is the reference row's
        own: its load, time and memory."""
        s = self.settings
        own = ctx is None or ctx == s.ctx
        ctx = s.ctx if ctx is None else ctx
        target = references.cached({"model": references.model_identity(reference.path), "corpus": description,
                                    "ctx": ctx, "chunks": s.chunks, "tail": s.tail, "max_tokens": DEFAULT_MAX_TOKENS})
        if references.usable(target):
            reference.notes.append(f"reference{'' if own else f' for windows of {ctx} tokens'} reused from {target}")
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with self.client_factory() as client:
            loaded = client.load(reference.path, _load_settings(s, ctx))
            if own:
                reference.backend, reference.quality_loaded_bytes = loaded.backend, loaded.memory_bytes.get("cpu")
            model = {"label": reference.label, "path": reference.path, "quant": reference.quant,
                     "format": reference.format, "bits_per_weight": reference.bits_per_weight,
                     "size_bytes": reference.size_bytes}
            windows = WindowScoring(n_ctx=ctx, chunks=s.chunks, reference_out=str(target),
                                    positions_out=str(work / f"reference-{ctx}.npy"), tail=s.tail,
                                    special=scored.special, description={"model": model, "corpus": description,
                                                                         "producer": f"QuantDesk {__version__}"})
            what = "reference" if own else f"reference, windows of {ctx} tokens"
            try:
                answer = client.score(text=scored.text, windows=windows,
                                      on_progress=self.scoring_progress(client, reference, what))
            except EngineError as exc:
                if exc.kind == "cancelled":
                    raise LabCancelled("the bench was stopped") from None
                raise
            self.note_guard(reference, client)
        (work / f"reference-{ctx}.npy").unlink(missing_ok=True)  # the reference's own figures: read from the file
        if own:
            reference.quality_ms = (time.perf_counter() - started) * 1000
            reference.quality_peak_bytes = answer.peak_memory_bytes
        return target

    def compare(self, variant: VariantResult, reference_path: Path, work: Path) -> None:
        s = self.settings
        ctx = variant.ctx or s.ctx
        started = time.perf_counter()
        positions = work / f"variant-{self.variants.index(variant)}.npy"
        with self.client_factory() as client:
            loaded = client.load(variant.path, _load_settings(s, ctx, variant.kv_cache_type))
            variant.backend, variant.quality_loaded_bytes = loaded.backend, loaded.memory_bytes.get("cpu")
            try:
                scored = client.score(windows=WindowScoring(n_ctx=ctx, reference_path=str(reference_path),
                                                            positions_out=str(positions)),
                                      on_progress=self.scoring_progress(client, variant, "KL divergence"))
            except EngineError as exc:
                if exc.kind not in ("vocabulary", "unavailable"):
                    raise
                self.mark(variant, QUALITY_METRICS, f"n/a: {exc.message}")
                return
            self.note_guard(variant, client)
        variant.quality_ms = (time.perf_counter() - started) * 1000
        variant.quality_peak_bytes = scored.peak_memory_bytes
        self.summarise(variant, _load_positions(positions))

    def summarise(self, variant: VariantResult, positions: np.ndarray) -> None:
        variant.quality = KldStatistics.of(positions)
        variant.perplexity = variant.quality.ppl.value

    def remote_perplexity(self, variant: VariantResult, text: str, ctx: int) -> None:
        """A remote server scores its own tokens (it tokenizes the text itself): perplexity over every position of
        its first window, no KL divergence."""
        self.mark(variant, KL_METRICS, REMOTE_NO_DISTRIBUTIONS)
        with self.client_factory() as client:
            client.load(variant.path, _load_settings(self.settings, ctx))
            try:
                scored = client.score(text=text, max_tokens=ctx)
            except EngineError as exc:
                if exc.kind != "unavailable":
                    raise
                self.mark(variant, ("perplexity",), exc.message)
                return
        variant.perplexity = perplexity(scored.token_logprobs)
        variant.notes.append(f"perplexity over the server's own {len(scored.token_logprobs) + 1} tokens of the text, "
                             "every position: not comparable with the windowed figures")

    @staticmethod
    def note_guard(variant: VariantResult, client: Any) -> None:
        """The crash guard's sentence (the engine crashed under this variant and went on in a safer configuration, or
        a configuration learned after a crash was used) among the variant's notes, once."""
        loaded = client.loaded
        if loaded is not None and loaded.notice and loaded.notice not in variant.notes:
            variant.notes.append(loaded.notice)

    @staticmethod
    def mark(variant: VariantResult, metrics: Sequence[str], reason: str) -> None:
        reason = reason if reason.startswith("n/a") else f"n/a: {reason}"
        for metric in metrics:
            variant.unavailable[metric] = reason


# The package behind each backend, whose version a result records (read from its metadata: nothing is imported).
ENGINE_PACKAGES = {"llama.cpp": "llama-cpp-python", "mlx": "mlx-lm", "exllamav2": "exllamav2",
                   "exllamav3": "exllamav3"}


def engine_versions(variants: Sequence[VariantResult]) -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for package in dict.fromkeys(ENGINE_PACKAGES[v.backend] for v in variants if v.backend in ENGINE_PACKAGES):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "?"
    return versions


def _load_positions(path: Path) -> np.ndarray:
    import numpy as np

    try:
        positions: np.ndarray = np.load(path)  # a .npy file holds one array
        return positions
    finally:
        path.unlink(missing_ok=True)


def run_bench(models: Sequence[str | Path], settings: BenchSettings | None = None, *,
              reference: str | Path | None = None, reference_file: str | Path | None = None,
              corpus_text: corpus.Corpus | str | None = None, labels: dict[str, str] | None = None,
              origins: dict[str, str] | None = None, hardware: HardwareProfile | None = None,
              on_progress: Callable[[LabProgress], None] | None = None, cancel: threading.Event | None = None,
              client_factory: Callable[[], EngineClient] | None = None) -> BenchResult:
    """Measure every model (and the reference) and return the result; it is not saved here (ResultStore).

    ``reference_file`` is a KL reference made earlier (the lab's, or llama-perplexity's --kl-divergence-base file):
    then no reference model runs, and its tokens are scored. ``corpus_text`` is the text to score (default: the
    bundled prose), or --corpus's words for it: a bundled set's name, a file, a folder, or ``chats`` (conversations
    are rendered with the reference's template). Raises ValueError for bad settings, ModelFileError for a path that
    is no model, ReferenceFileError for a reference file that cannot be used, LabCancelled when ``cancel`` is set. A
    variant that fails (load error, engine crash) keeps its error and the rest go on. ``hardware`` is a
    HardwareProfile (default: this machine, detected now).
    """
    from app.engine.client import EngineClient

    settings = settings or BenchSettings()
    settings.validate()
    if reference_file is not None and settings.contexts:
        raise QuantDeskError("a context sweep needs the reference model: a reference file holds windows of one "
                             "length", "name the reference model instead of the file")
    notes = []
    if reference_file is not None:
        reference_file = references.import_file(reference_file, tail=settings.tail, max_tokens=DEFAULT_MAX_TOKENS)
        opened = references.open_reference(reference_file)
        if opened.n_ctx != settings.ctx:  # the file's windows decide: its tokens were scored in them
            notes.append(f"windows of {opened.n_ctx} tokens, as the reference file's (not --ctx {settings.ctx})")
            settings = dataclasses.replace(settings, ctx=opened.n_ctx)
        file_corpus = opened.header.get("corpus") or {"name": f"the tokens in {Path(reference_file).name}",
                                                       "source": opened.header.get("producer", "")}
        opened.close()
    variants = sweep(plan_variants(models, reference, reference_file, labels, origins), settings.kv_types,
                     settings.contexts)
    if reference_file is not None and corpus_text is not None:
        raise QuantDeskError("a reference file decides the text: its tokens are what every variant scores",
                             "leave the text out, or compare against a reference model with that text")
    if isinstance(corpus_text, str):
        corpus_text = corpus.resolve(corpus_text, variants[0].path)
    scored = corpus_text or corpus.bundled()
    description = scored.describe()
    if reference_file is not None:  # its tokens are what is scored
        description = file_corpus
    if hardware is None:
        from app import machine

        hardware = machine.profile()
    bench = _Bench(variants, settings, client_factory or EngineClient, on_progress, cancel)
    if settings.speed:
        bench.speed()
        bench.summarise_speed()
    else:
        for v in variants:
            bench.mark(v, SPEED_METRICS, "n/a: the speed runs were skipped (--no-speed)")
    if settings.quality:
        with tempfile.TemporaryDirectory(prefix="quantdesk-lab-") as work:
            bench.quality(Path(work), scored, description, Path(reference_file) if reference_file else None)
    else:
        for v in variants:
            bench.mark(v, QUALITY_METRICS, "n/a: the quality pass was skipped (--no-quality)")
    created = datetime.now(UTC)
    windows = f"windows of {settings.ctx} tokens" + (f", at most {settings.chunks}" if settings.chunks else "")
    if settings.contexts:
        windows += (" (the swept rows: windows of their context length, against the reference's windows of that "
                    "length; their speed with a prompt that fills it)")
    return BenchResult(
        id=f"{created:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}", created_at=created.isoformat(timespec="seconds"),
        quantdesk_version=__version__, settings=settings, hardware=hardware.to_dict(),
        reference=variants[0].label, variants=variants, corpus=description,
        reference_file=bench.reference_info, engines=engine_versions(variants),
        notes=[*notes, f"speed: median of {settings.reps} run(s) per variant, each in a fresh engine host after a "
               f"warm-up, variant order rotated per repetition",
               f"quality: as llama-perplexity --kl-divergence measures it, {windows}, the second half of each scored; "
               "KL(reference || variant) in nats over the reference's token ids; ± one standard error"],
    )
