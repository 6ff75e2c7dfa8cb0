"""A model as a user names it, read where it is: a local file or folder, a model of the library (what `quantdesk ls`
prints, ``OWNER/REPO`` with ``:QUANT`` where the library holds several quants of it, or a unique prefix: the rule is
``Library.matches``), a Hub repo (``owner/name``: its first quant; ``owner/name@BRANCH``: one EXL2/EXL3 branch) or a
Hub file (``owner/name/file.gguf``). One reading for every face that takes such a name: ``local_model`` the path to
load for ``quantdesk chat``/``serve``/``bench``/``preset``/``docs add --embed-model`` and the MCP server's tools,
``load_metadata`` for ``quantdesk inspect``/``fit`` and the MCP ``fit`` tool, ``candidates`` for ``recommend``, so all
answer the same for the same name. The library is asked before the Hub: a repo the library holds is read from its
files, offline too.

``load_metadata`` reads one model's metadata (header bytes by HTTP Range for a Hub file); ``candidates`` lists every
quant of the names given (a folder's GGUFs and model folders, a repo's quants) for ``models.recommend``;
``draft_suggestions`` names the library's model to draft for a recommendation's local picks.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.models.drafts import DraftSuggestion
    from app.models.metadata import ModelMetadata
    from app.models.recommend import Recommendation


class BadModelArgument(QuantDeskError):
    """MODEL names neither a local file/folder nor a Hub repo we can read."""


def looks_like_repo(text: str) -> bool:
    return text.count("/") >= 1 and not text.startswith((".", "/", "~")) and not Path(text).exists()


def hub_form(text: str) -> bool:
    """Whether ``text`` reads as a Hub repo or file (``owner/name``, ``owner/name@BRANCH``, ``owner/name/file``): a
    library name with ``:QUANT`` does not."""
    return looks_like_repo(text) and ":" not in text


def library_model(name: str, prefixes: bool = True) -> str | None:
    """The path of the library's model ``name`` names (``Library.matches``), None when it names none; a name that
    several models answer to is refused listing them (LibraryError). Copies of one file count as one model. Without
    ``prefixes`` only whole names count (a Hub repo's name is never taken for a longer library name)."""
    from app.hub.library import Library, ambiguous

    found = Library().matches(name, prefixes)
    if len({entry.path for entry in found}) > 1:
        raise ambiguous(name, found)
    return found[0].path if found else None


UNKNOWN_HINT = ("`quantdesk ls` lists the library's models by the names this takes; a Hub repo is downloaded with "
                "`quantdesk pull OWNER/REPO`")


def path_like(name: str) -> bool:
    """Whether ``name`` is written as a path (``/…``, ``./…``, ``~/…``, ``….gguf``) rather than a library name."""
    return name.startswith((".", "/", "~")) or (name.lower().endswith(".gguf") and ":" not in name)


def unknown(name: str, hub: bool = False) -> BadModelArgument:
    """The sentence for a name nothing answers to: a path that is not there, or a name neither here nor in the
    library (nor, with ``hub``, a Hub repo id)."""
    if path_like(name):
        return BadModelArgument(f"No such model file or folder: {name}.", UNKNOWN_HINT)
    return BadModelArgument(f"No model {name!r} here: it is neither a file or folder"
                            + (", nor a model in the library, nor a Hub repo id (owner/name)." if hub else
                               " nor a model in the library."), UNKNOWN_HINT)


def local_model(name: str) -> str:
    """The model to load that ``name`` names: a file or folder here, a remote model (``remote:CONNECTION/MODEL``) or a
    name written as a path that is not there (each as given: the command says what is wrong with it, as for any
    path), else the path of the library's model by that name. Unknown: a BadModelArgument saying so; one name for
    several models: a LibraryError listing them."""
    if name.startswith("remote:") or path_like(name) or Path(name).expanduser().exists():  # app/remote's prefix
        return name
    found = library_model(name)
    if found is None:
        raise unknown(name)
    return found


def load_metadata(model: str) -> ModelMetadata:
    """A local file/folder, ``owner/repo/file.gguf``, ``owner/repo`` (its first GGUF or bit-rate branch) or
    ``owner/repo@branch`` on the Hub."""
    from app.models.metadata import read_model
    from app.models.vision import with_projector

    if Path(model).exists():
        return with_projector(read_model(model))
    if (path := library_model(model, prefixes=not hub_form(model))) is not None:
        return with_projector(read_model(path))
    if looks_like_repo(model):
        parts = model.split("/")
        repo_id, rest = "/".join(parts[:2]), "/".join(parts[2:])
        repo_id, _, revision = repo_id.partition("@")  # owner/repo@4.0bpw: one branch of an EXL repo
        if rest:
            from app.hub.config import require_online
            from app.hub.remote import read_remote_gguf

            require_online(f"read {repo_id} on the Hub")
            return read_remote_gguf(repo_id, rest, revision or None)
        from app.hub.listing import RepoListing

        listing = RepoListing.fetch(repo_id, revision or None)
        models = listing.models()
        if not models:
            raise BadModelArgument(f"{repo_id} has no GGUF, MLX or EXL model files we can read.")
        (_label, meta), = listing.candidates(models[:1])
        if isinstance(meta, Exception):
            raise meta
        return meta
    raise unknown(model, hub=True)


def local_candidates(path: Path) -> list[tuple[str, Any]]:
    """Every model in a local file or folder (a folder's GGUFs, first shards only, and model folders), each with its
    metadata or the error that kept it from being read."""
    from app.models.metadata import read_model
    from app.models.quants import parse_gguf_filename
    from app.models.vision import with_projector

    if path.is_dir() and not (path / "config.json").is_file():
        out: list[tuple[str, Any]] = []
        for gguf in sorted(path.rglob("*.gguf")):
            info = parse_gguf_filename(gguf.name)
            if (info and not info.is_first_shard) or "mmproj" in gguf.name.lower():
                continue
            try:
                out.append((str(gguf), with_projector(read_model(gguf))))
            except QuantDeskError as exc:
                out.append((str(gguf), exc))
        for sub in sorted(p.parent for p in path.rglob("config.json")):
            try:
                out.append((str(sub), read_model(sub)))
            except QuantDeskError as exc:
                out.append((str(sub), exc))
        return out
    try:
        return [(str(path), with_projector(read_model(path)))]
    except QuantDeskError as exc:
        return [(str(path), exc)]


def candidates(names: Iterable[str]) -> list[tuple[str, Any]]:
    """Every quant in the local paths and Hub repos named: the recommender's candidates (label, metadata or error)."""
    from app.hub.listing import RepoListing

    names = list(names)
    found: list[tuple[str, Any]] = []
    for item in names:
        path = Path(item)
        if path.exists():
            found.extend(local_candidates(path))
        elif hub_form(item):  # a repo's every quant on the Hub, as the listing finds them
            found.extend(RepoListing.fetch(item).candidates())
        elif (held := library_model(item)) is not None:
            found.extend(local_candidates(Path(held)))
        else:
            raise unknown(item, hub=True)
    if not found:
        raise BadModelArgument("No model files found among: " + ", ".join(names) + ".")
    return found


def draft_suggestions(report: Recommendation) -> dict[str, DraftSuggestion]:
    """For each format's best pick that is a local model, the library's model to suggest as its draft, if any."""
    from app.hub.library import Library
    from app.models.drafts import suggest_draft

    picks = {fmt: pick for fmt, pick in report.best_per_format.items() if Path(pick.label).exists()}
    if not picks:
        return {}
    library: list[tuple[str, str | Path]] = [(entry.name, entry.path) for entry in Library().entries()]
    found = {fmt: suggest_draft(pick.label, library) for fmt, pick in picks.items()}
    return {fmt: suggestion for fmt, suggestion in found.items() if suggestion is not None}
