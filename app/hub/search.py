"""Search the Hub and show a repo's details, through huggingface_hub (HF_ENDPOINT, HF_TOKEN honoured at call
time; HF_HUB_OFFLINE refuses before any connection)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import islice

from app.hub import config
from app.hub.download import _hub_error
from app.hub.formats import format_of_repo, quant_from_name

SORTS = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}
FORMAT_TAGS = ("gguf", "mlx", "exl2", "exl3")


@dataclass
class ModelSummary:
    repo_id: str
    downloads: int | None
    likes: int | None
    last_modified: str | None
    tags: list[str]
    gated: bool
    format: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class QuantGroup:
    quant: str
    files: list[str]
    size: int


@dataclass
class RepoDetails:
    repo_id: str
    commit: str
    last_modified: str | None
    license: str | None
    gated: bool
    format: str
    files: list[dict]  # {"path", "size", "sha256"}
    quants: list[QuantGroup] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)  # EXL2/EXL3 repos keep one bit rate per branch
    summary: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def search_models(query: str, fmt: str | None = None, sort: str = "downloads", limit: int = 20,
                  offset: int = 0) -> list[ModelSummary]:
    """One page of results: ``offset`` skips earlier pages (the Hub pages with Link headers underneath)."""
    config.require_online("search the Hub")
    if fmt is not None and fmt not in FORMAT_TAGS:
        raise ValueError(f"format must be one of {FORMAT_TAGS}")
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    try:
        found = config.api().list_models(search=query or None, filter=fmt, sort=SORTS.get(sort, sort),
                                         limit=offset + limit)
        models = list(islice(found, offset, offset + limit))
    except (HfHubHTTPError, httpx2.HTTPError) as exc:
        raise _hub_error(exc, query, "") from None
    return [ModelSummary(repo_id=m.id, downloads=m.downloads, likes=m.likes,
                         last_modified=m.last_modified.isoformat() if m.last_modified else None,
                         tags=list(m.tags or []), gated=bool(m.gated), format=format_of_repo(m.tags, []))
            for m in models]


def repo_details(repo_id: str, revision: str | None = None, with_summary: bool = True) -> RepoDetails:
    config.require_online(f"look up {repo_id}")
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    api = config.api()
    try:
        info = api.model_info(repo_id, revision=revision, files_metadata=True)
        refs = api.list_repo_refs(repo_id)
    except (HfHubHTTPError, httpx2.HTTPError) as exc:
        raise _hub_error(exc, repo_id, revision or "main") from None
    files = [{"path": s.rfilename, "size": s.size, "sha256": s.lfs.sha256 if s.lfs else None}
             for s in info.siblings or []]
    groups: dict[str, QuantGroup] = {}
    for f in files:
        quant = quant_from_name(f["path"]) if f["path"].endswith(".gguf") else None
        if quant:
            group = groups.setdefault(quant, QuantGroup(quant=quant, files=[], size=0))
            group.files.append(f["path"])
            group.size += f["size"] or 0
    card = info.card_data.to_dict() if info.card_data is not None else {}
    details = RepoDetails(
        repo_id=info.id, commit=info.sha or "", license=card.get("license"), gated=bool(info.gated),
        last_modified=info.last_modified.isoformat() if info.last_modified else None,
        format=format_of_repo(info.tags, [f["path"] for f in files]), files=files,
        quants=sorted(groups.values(), key=lambda g: g.size), branches=[b.name for b in refs.branches])
    if with_summary and any(f["path"] == "README.md" for f in files):
        details.summary = _card_summary(repo_id, info.sha or revision or "main")
    return details


def _card_summary(repo_id: str, revision: str, limit: int = 400) -> str:
    """The first paragraph of the model card after its YAML front matter."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import get_session

    try:
        response = get_session().get(hf_hub_url(repo_id, "README.md", revision=revision, endpoint=config.endpoint()),
                                     headers=config.auth_headers(), timeout=15)
        if response.status_code != 200:
            return ""
        text = response.text
    except Exception:  # noqa: BLE001 - a missing summary must not fail the details
        return ""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        text = text[end + 4:] if end != -1 else text
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip() and not p.strip().startswith("#")]
    return paragraphs[0][:limit] if paragraphs else ""
