"""The chat template of the model a GGUF was made from, read from the Hub, for a GGUF that carries none.

A GGUF names where it came from in its header (``general.base_model.N.repo_url`` / ``.organization`` + ``.name``,
``general.source.repo_url`` / ``general.source.huggingface.repository``); the library knows the repo it was
downloaded from, whose card names its base model (``base_model``: a GGUF repo's is the model it quantizes). Each repo
is asked once (``model_info``: its files and card) and its template read from ``chat_template.jinja``, else
``tokenizer_config.json``'s ``chat_template``. The answer is a record the engine's side keeps beside the model file
(``backends/chat_format/bundled.py`` reads it there; ``app/engine/client.py`` writes it): the engine host never
reaches the Hub.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.errors import QuantDeskError
from app.hub import config

MAX_TEMPLATE_BYTES = 1 << 20
_HUB_URL = re.compile(r"^https?://(?:www\.)?huggingface\.co/([\w.-]+/[\w.-]+?)/?$")
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")


def repo_of(value: Any) -> str:
    """``owner/name`` from a Hub URL or an ``owner/name`` text, "" for anything else."""
    if not isinstance(value, str):
        return ""
    text = value.strip()
    found = _HUB_URL.match(text)
    if found:
        return found.group(1)
    return text if _REPO.match(text) else ""


def named_repos(metadata: dict[str, Any]) -> list[str]:
    """The repos a GGUF's header names as its base models and its source, in that order."""
    repos: list[str] = []
    count = metadata.get("general.base_model.count")
    for i in range(int(count) if isinstance(count, int) and 0 < count < 16 else 0):
        url = repo_of(metadata.get(f"general.base_model.{i}.repo_url"))
        org, name = metadata.get(f"general.base_model.{i}.organization"), metadata.get(f"general.base_model.{i}.name")
        repos.append(url or (repo_of(f"{org}/{name}".replace(" ", "-")) if org and name else ""))
    repos.append(repo_of(metadata.get("general.source.repo_url")))
    repos.append(repo_of(metadata.get("general.source.huggingface.repository")))
    return _unique(repos)


def _unique(repos: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for repo in repos:
        if repo and repo not in seen:
            seen.append(repo)
    return seen


def library_repo(model_path: str | Path) -> str:
    """The repo the library downloaded ``model_path`` from, "" where it has none."""
    from app.hub.errors import LibraryError
    from app.hub.library import Library

    resolved = Path(model_path).expanduser().resolve()
    try:
        entries = Library().entries(refresh=False)
    except (LibraryError, OSError):
        return ""
    for entry in entries:
        if entry.repo_id and Path(entry.path).expanduser().resolve() == resolved:
            return str(entry.repo_id)
    return ""


def _template_of(repo: str, files: set[str]) -> tuple[str, str]:
    """The template in a repo's files and the file it came from, ("", "") for none."""
    from app.hub import remote

    if "chat_template.jinja" in files:
        text = remote.read_remote_text(repo, "chat_template.jinja", limit=MAX_TEMPLATE_BYTES)
        if text.strip():
            return text, "chat_template.jinja"
    if "tokenizer_config.json" in files:
        value = remote.read_remote_json(repo, "tokenizer_config.json").get("chat_template")
        if isinstance(value, list):  # named templates: the default one
            value = next((t.get("template") for t in value if isinstance(t, dict) and t.get("name") == "default"),
                         None)
        if isinstance(value, str) and value.strip():
            return value, "tokenizer_config.json"
    return "", ""


def find(metadata: dict[str, Any], downloaded_from: str = "") -> dict[str, Any]:
    """The base model's template for a GGUF whose header is ``metadata`` (downloaded from ``downloaded_from``):
    ``{"chat_template", "repo", "file"}``, or ``{"chat_template": "", "tried": [...]}`` when no repo it names has
    one. Raises a QuantDeskError when the Hub cannot be asked (offline, unreachable): then nothing is known."""
    queue = named_repos(metadata) + ([downloaded_from] if downloaded_from else [])
    if not queue:  # nothing to ask the Hub about
        return {"chat_template": "", "tried": []}
    config.require_online("read the base model's chat template")
    tried: list[str] = []
    while queue:
        repo = queue.pop(0)
        if repo in tried or len(tried) >= 6:
            continue
        tried.append(repo)
        try:
            info = config.api().model_info(repo)
        except config.api_errors() as exc:
            from huggingface_hub.errors import RepositoryNotFoundError

            if isinstance(exc, RepositoryNotFoundError):  # gone, never was, or gated: the next one
                continue
            raise config.hub_error(exc, repo, "main") from None
        files = {s.rfilename for s in info.siblings or ()}
        try:
            template, file = _template_of(repo, files)
        except QuantDeskError:
            template = file = ""
        if template:
            return {"chat_template": template, "repo": repo, "file": file}
        # huggingface_hub's CardData.to_dict() carries no annotations; it returns the card's YAML header as a dict
        card: dict[str, Any] = info.card_data.to_dict() if info.card_data is not None else {}  # type: ignore[no-untyped-call]
        bases = card.get("base_model") or []
        queue += [b for b in ([bases] if isinstance(bases, str) else bases) if repo_of(b)]
    return {"chat_template": "", "tried": tried}
