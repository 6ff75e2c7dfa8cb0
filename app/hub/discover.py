"""What the Discover page and the first run show, worked out without Qt (so it runs in a worker thread and is
easy to test): the curated starting list, and for one Hub repo every quant with its fit on this machine, the
memory it needs, its predicted speed, its download size and the request that fetches it. The repo is listed once
(app.hub.listing) and each quant's header read once; app.models sizes them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

from app.hardware.profile import HardwareProfile
from app.hub.listing import ListedModel, RepoListing
from app.hub.plan import DownloadRequest

DEFAULT_N_CTX = 8192


TIERS = ("small", "laptop", "16 GB", "24 GB+")  # the machines the starting list covers


@dataclass(frozen=True)
class StarterModel:
    repo_id: str
    format: str  # gguf | mlx
    architecture: str  # llama.cpp's general.architecture for GGUF, config.json model_type for MLX
    tier: str  # one of TIERS: the smallest machine it is picked for
    modality: str  # text | vision (reads images where the engine supports it) | embedding (documents' search)
    params_b: float
    approx_q4_bytes: int
    why: str


@dataclass(frozen=True)
class StarterList:
    about: str
    updated: str
    models: list[StarterModel]


def starter_list() -> StarterList:
    """The curated first screen (resources/catalog/starter_models.json): a starting list, said to be one."""
    text = resources.files("resources").joinpath("catalog", "starter_models.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return StarterList(about=data["about"], updated=data["updated"],
                       models=[StarterModel(**entry) for entry in data["models"]])


def starters_for(hw: HardwareProfile | None, starters: StarterList) -> list[tuple[StarterModel, bool]]:
    """The starting list ordered for this machine: (model, likely fits) with MLX first on Apple Silicon and
    last elsewhere, the ones that likely fit before those that do not. "Likely" is a rough size check; the
    exact fit of every quant is worked out when a model is opened. The memory it is held to is the one budget of
    app.models.budget, the fit check's: available RAM plus a discrete GPU's free memory (llama.cpp splits a model
    between them), unified memory counted once."""
    from app.models.budget import free_memory_bytes
    from app.models.recommend import is_apple

    apple = hw is not None and is_apple(hw)
    budget = free_memory_bytes(hw) if hw is not None else None

    def likely(model: StarterModel) -> bool:
        # weights plus ~30 % for the context cache and compute buffers at a few thousand tokens
        return budget is None or model.approx_q4_bytes * 1.3 <= budget

    ranked = [(m, likely(m)) for m in starters.models if apple or m.format != "mlx"]
    ranked += [(m, likely(m)) for m in starters.models if not apple and m.format == "mlx"]
    return sorted(ranked, key=lambda pair: (not pair[1], (pair[0].format == "mlx") != apple))


BADGES = {"full GPU": "Full GPU", "unified memory": "Unified memory", "CPU only": "CPU",
          "does not fit": "Too large", "unknown": "Unknown"}


def badge(verdict: str) -> str:
    """The short fit badge: Full GPU / GPU + experts in RAM / Partial: N of M layers on GPU / CPU / Unified memory /
    Too large."""
    if verdict.startswith("MoE split"):
        return "GPU + experts in RAM"
    if verdict.startswith("partial"):
        layers, _, experts = verdict.split(":", 1)[1].strip().partition(", ")
        return f"Partial: {layers} on GPU" + (f", {experts}" if experts else "")
    return BADGES.get(verdict, verdict)


@dataclass
class QuantChoice:
    label: str  # as the recommender names it: owner/repo/file.gguf, owner/repo@branch or owner/repo
    quant: str
    format: str
    verdict: str
    reason: str
    request: DownloadRequest
    download_bytes: int
    memory_bytes: int | None  # every device added up at DEFAULT_N_CTX; None when it could not be worked out
    decode_tok_s: float | None
    best: bool = False
    projector: str = ""  # the vision projector a download fetches with it ("" for a text-only model)

    @property
    def badge(self) -> str:
        return badge(self.verdict)

    @property
    def fits(self) -> bool:
        return self.verdict not in ("does not fit", "unknown")


@dataclass
class ModelChoices:
    repo_id: str
    format: str
    summary: str
    choices: list[QuantChoice] = field(default_factory=list)
    best_reason: str = ""  # one sentence: why the best pick is the best
    format_reason: str = ""

    @property
    def best(self) -> QuantChoice | None:
        return next((c for c in self.choices if c.best), None)

    @property
    def fit_badge(self) -> str:
        """The model's badge in a list, from the recommender's best pick: "Fits on GPU", "Fits on GPU + RAM" (some
        layers or experts in RAM), "Fits in unified memory", "Fits in RAM" (CPU), "Too large" (no quant fits);
        "" for a repo with nothing QuantDesk can run."""
        if not self.choices:
            return ""
        best = self.best
        if best is None or not best.fits:
            return "Too large"
        if best.verdict == "full GPU":
            return "Fits on GPU"
        if best.verdict.startswith(("partial", "MoE split")):
            return "Fits on GPU + RAM"
        return {"unified memory": "Fits in unified memory", "CPU only": "Fits in RAM"}.get(best.verdict, best.badge)


def model_choices(repo_id: str, hw: HardwareProfile, n_ctx: int = DEFAULT_N_CTX) -> ModelChoices:
    """Every quant of ``repo_id`` fitted to ``hw``. The Hub first (the listing, then each quant's header), then
    the fit math on what was read."""
    from app.models.recommend import recommend

    listing = RepoListing.fetch(repo_id)
    models = listing.models()
    candidates = listing.candidates(models)
    downloads = {m.label: (download_request(repo_id, m, listing), listing.download_size(m)) for m in models}
    projector_sizes = {f.path: f.size for f in listing.projectors}
    out = ModelChoices(repo_id=listing.repo_id, format=listing.format, summary=listing.summary())

    report = recommend(candidates, hw, n_ctx)
    out.best_reason = report.best.reason if report.best else ""
    out.format_reason = report.format_reason
    for fit in report.candidates:
        request, size = downloads[fit.label]
        projector = request.projector or ""
        out.choices.append(QuantChoice(
            label=fit.label, quant=fit.quant, format=fit.format, verdict=fit.verdict, reason=fit.reason,
            request=request, download_bytes=size + projector_sizes.get(projector, 0), memory_bytes=fit.memory_bytes,
            decode_tok_s=None if fit.decode_tok_s is None else round(fit.decode_tok_s, 1),
            best=report.best is not None and fit.label == report.best.label, projector=projector))
    out.choices.sort(key=lambda c: (c.format, c.download_bytes))
    return out


def download_request(repo_id: str, model: ListedModel, listing: RepoListing | None = None) -> DownloadRequest:
    """The download that fetches ``model``: a GGUF's files (every shard) and its default vision projector, a bit-rate
    branch, or the whole repo."""
    if model.kind == "gguf":
        projectors = listing.projectors_for(model.files[0]) if listing is not None else []
        return DownloadRequest(repo_id, files=model.files, projector=projectors[0].path if projectors else None)
    if model.kind == "branch":
        return DownloadRequest(repo_id, revision=model.revision or "main")
    return DownloadRequest(repo_id)
