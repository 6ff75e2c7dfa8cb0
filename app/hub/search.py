"""Search the Hub, through hub.config's API (HF_ENDPOINT and the token honoured at call time; offline mode
refuses before any connection). One repo's details are app.hub.listing's."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import islice
from typing import Any, Literal, cast

from app.hub import config
from app.hub.formats import format_of_repo

HubSort = Literal["created_at", "downloads", "last_modified", "likes", "trending_score"]  # what HfApi.list_models takes
SORTS: dict[str, HubSort] = {"downloads": "downloads", "likes": "likes", "recent": "last_modified"}
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def search_models(query: str, fmt: str | None = None, sort: str = "downloads", limit: int = 20,
                  offset: int = 0) -> list[ModelSummary]:
    """One page of results: ``offset`` skips earlier pages (the Hub pages with Link headers underneath)."""
    config.require_online("search the Hub")
    if fmt is not None and fmt not in FORMAT_TAGS:
        raise ValueError(f"format must be one of {FORMAT_TAGS}")
    hub_sort = SORTS.get(sort, cast(HubSort, sort))  # else the Hub's own name, passed on as given
    try:
        found = config.api().list_models(search=query or None, filter=fmt, sort=hub_sort, limit=offset + limit)
        models = list(islice(found, offset, offset + limit))
    except config.api_errors() as exc:
        raise config.hub_error(exc, query, "") from None
    return [ModelSummary(repo_id=m.id, downloads=m.downloads, likes=m.likes,
                         last_modified=m.last_modified.isoformat() if m.last_modified else None,
                         tags=list(m.tags or []), gated=bool(m.gated), format=format_of_repo(m.tags, []))
            for m in models]


def quantizations_of(base_repo_id: str, fmt: str = "gguf", limit: int = 100) -> list[ModelSummary]:
    """The repos on the Hub that say they quantize ``base_repo_id`` (their card's ``base_model``, which the Hub turns
    into the tag ``base_model:quantized:OWNER/NAME`` that ``filter`` matches), in ``fmt``, most downloaded first; at
    most ``limit`` of them. The format is read from each repo's tags here: one filter, whatever the Hub makes of
    several."""
    config.require_online(f"look for quantizations of {base_repo_id}")
    if fmt not in FORMAT_TAGS:
        raise ValueError(f"format must be one of {FORMAT_TAGS}")
    try:
        found = config.api().list_models(filter=f"base_model:quantized:{base_repo_id}", sort="downloads", limit=limit)
        models = [m for m in found if format_of_repo(m.tags, []) == fmt]
    except config.api_errors() as exc:
        raise config.hub_error(exc, base_repo_id, "") from None
    return [ModelSummary(repo_id=m.id, downloads=m.downloads, likes=m.likes,
                         last_modified=m.last_modified.isoformat() if m.last_modified else None,
                         tags=list(m.tags or []), gated=bool(m.gated), format=fmt) for m in models]
