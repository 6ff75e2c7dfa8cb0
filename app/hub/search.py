"""Search the Hub and show a repo's details, through huggingface_hub (HF_ENDPOINT, HF_TOKEN honoured at call
time; HF_HUB_OFFLINE refuses before any connection)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from itertools import islice

from app.hub import config
from app.hub.download import _hub_error
from app.hub.formats import EXL_FORMATS, exl_branches, exl_format_hint, format_of_repo, quant_from_name
from app.models.quants import parse_exl_config, parse_exl_name

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
    revision: str | None = None  # the branch holding it (EXL2/EXL3); None: the revision shown


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
        files = _file_rows(info)
        paths = [f["path"] for f in files]
        fmt = format_of_repo(info.tags, paths)
        repo_config = None
        if fmt == "safetensors" and "config.json" in paths:  # the tags did not tell: one small read settles it
            repo_config = _read_config(repo_id, info.sha or revision)
            fmt = format_of_repo(info.tags, paths, repo_config)
        quants = _gguf_quants(files)
        if fmt in EXL_FORMATS or fmt == "safetensors":
            fmt, quants = _exl_quants(api, repo_id, info, refs, fmt, repo_config)
    except (HfHubHTTPError, httpx2.HTTPError) as exc:
        raise _hub_error(exc, repo_id, revision or "main") from None
    card = info.card_data.to_dict() if info.card_data is not None else {}
    details = RepoDetails(
        repo_id=info.id, commit=info.sha or "", license=card.get("license"), gated=bool(info.gated),
        last_modified=info.last_modified.isoformat() if info.last_modified else None,
        format=fmt, files=files, quants=sorted(quants, key=lambda g: g.size),
        branches=[b.name for b in refs.branches])
    if with_summary and "README.md" in paths:
        details.summary = _card_summary(repo_id, info.sha or revision or "main")
    return details


def _file_rows(info) -> list[dict]:
    return [{"path": s.rfilename, "size": s.size, "sha256": s.lfs.sha256 if s.lfs else None}
            for s in info.siblings or []]


def _gguf_quants(files: list[dict]) -> list[QuantGroup]:
    groups: dict[str, QuantGroup] = {}
    for f in files:
        quant = quant_from_name(f["path"]) if f["path"].endswith(".gguf") else None
        if quant:
            group = groups.setdefault(quant, QuantGroup(quant=quant, files=[], size=0))
            group.files.append(f["path"])
            group.size += f["size"] or 0
    return list(groups.values())


def _exl_quants(api, repo_id: str, info, refs, fmt: str, repo_config: dict | None) -> tuple[str, list[QuantGroup]]:
    """(format, quants) of an EXL2/EXL3 repo, or of a repo that may be one: each branch named for a bit rate is a
    quant (one model_info per branch, sized by its safetensors), and so is the shown revision when it holds
    weights itself. An untagged repo whose own config did not tell is settled by a branch's config.json. Branches
    named by a bare number (``6_5``, as bartowski names them) count once the repo is known to be EXL: by its tags,
    its name or its measurement.json (``exl_format_hint``), or by a branch named ``…bpw``."""
    others = [b.name for b in refs.branches if b.target_commit != info.sha]  # the shown revision is listed as itself
    own_names = [s.rfilename for s in info.siblings or []]
    hint = fmt if fmt in EXL_FORMATS else exl_format_hint(repo_id, info.tags, own_names)
    branch_infos = _branch_infos(api, repo_id, exl_branches(repo_id, others, hint, bare_numbers=bool(hint)))
    if fmt not in EXL_FORMATS:
        if not branch_infos:
            return fmt, []
        first, first_info = next(iter(branch_infos.items()))
        has_config = any(s.rfilename == "config.json" for s in first_info.siblings or [])
        fmt = format_of_repo(None, [], _read_config(repo_id, first_info.sha) if has_config else None)
        if fmt not in EXL_FORMATS:  # an EXL2 from before exllamav2 wrote quantization_config: the name tells
            fmt = exl_branches(repo_id, [first], hint, bare_numbers=bool(hint))[first].format
        more = [b for b in exl_branches(repo_id, others, fmt, bare_numbers=True) if b not in branch_infos]
        branch_infos |= _branch_infos(api, repo_id, more)
    quants = exl_branches(repo_id, branch_infos, fmt, bare_numbers=True)
    groups = [_exl_group(quants[b].quant, b, _file_rows(i)) for b, i in branch_infos.items()]
    own_files = _file_rows(info)
    if any(f["path"].endswith(".safetensors") for f in own_files):
        paths = [f["path"] for f in own_files]
        if repo_config is None and "config.json" in paths:
            repo_config = _read_config(repo_id, info.sha)
        own = (parse_exl_config(repo_config, repo_id) if repo_config else None) or parse_exl_name(repo_id, fmt)
        if own is not None:
            revision = next((b.name for b in refs.branches if b.target_commit == info.sha), info.sha)
            groups.append(_exl_group(own.quant, revision, own_files))
    return fmt, groups


def _branch_infos(api, repo_id: str, branches) -> dict:
    """model_info with file sizes for each branch, fetched side by side (repos keep up to a dozen bit rates)."""
    names = list(branches)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        found = pool.map(lambda b: api.model_info(repo_id, revision=b, files_metadata=True), names)
        return dict(zip(names, found))


def _exl_group(quant: str, revision: str, files: list[dict]) -> QuantGroup:
    """A branch is downloaded as a whole; its size is its weights (the safetensors), as a GGUF quant's is."""
    kept = [f for f in files if f["path"] != ".gitattributes"]
    return QuantGroup(quant=quant, files=[f["path"] for f in kept], revision=revision,
                      size=sum(f["size"] or 0 for f in kept if f["path"].endswith(".safetensors")))


def _read_config(repo_id: str, revision: str | None) -> dict | None:
    """config.json of a revision (a few kB, one request); None when it cannot be read: the format then stays
    what the tags and file names say."""
    from app.errors import QuantDeskError
    from app.models.remote import read_remote_json

    try:
        return read_remote_json(repo_id, "config.json", revision)
    except QuantDeskError:
        return None


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
