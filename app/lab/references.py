"""The lab's KL references (backends.scoring): one file per reference model, corpus, window and chunk count,
kept under the cache folder so a later run compares new quants without loading the reference model again (a laptop
that cannot hold the 16-bit model measures against a reference made elsewhere). A reference comes from a run, from
a file the lab exported, or from ``llama-perplexity --kl-divergence-base`` (converted once, kept the same way).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import paths
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from backends.scoring import Reference  # imported where a reference is opened

SUFFIX = ".qdref"


class ReferenceFileError(QuantDeskError):
    """A reference file that cannot be used."""


def root() -> Path:
    return paths.cache_dir() / "lab" / "references"


def model_identity(path: str | Path) -> dict[str, Any]:
    """What names a model file for the cache: where it is, its size and when it last changed (hashing a
    16 GB file for every run would cost a minute)."""
    path = Path(path).resolve()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return {"path": str(path), "size": sum(p.stat().st_size for p in files),
            "mtime_ns": max(p.stat().st_mtime_ns for p in files)}


def key(parts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def cached(parts: dict[str, Any]) -> Path:
    """Where the reference named by ``parts`` (model identity, corpus, window, chunks, tail) lives."""
    return root() / f"{key(parts)}{SUFFIX}"


def open_reference(path: str | Path) -> Reference:
    """The reference file at ``path``, opened (backends.scoring.Reference); ReferenceFileError in words."""
    from backends import scoring

    try:
        return scoring.Reference(path)
    except scoring.ReferenceError as exc:
        raise ReferenceFileError(str(exc), "make it again, or import llama-perplexity's --kl-divergence-base "
                                           "file") from None
    except FileNotFoundError:
        raise ReferenceFileError(f"no reference file at {path}") from None


def usable(path: Path) -> bool:
    """Whether a cached reference is there and whole (a damaged one is removed, so it is made again)."""
    if not path.is_file():
        return False
    try:
        open_reference(path).close()
    except ReferenceFileError:
        path.unlink(missing_ok=True)
        return False
    return True


def import_file(source: str | Path, *, tail: float, max_tokens: int,
                on_progress: Callable[[float], None] | None = None) -> Path:
    """A reference file to use: the lab's own as it is (checked), or llama-perplexity's --kl-divergence-base file
    converted into the cache (once: the same file again finds the conversion)."""
    from backends import scoring

    source = Path(source).expanduser()
    if not source.is_file():
        raise ReferenceFileError(f"no reference file at {source}")
    with open(source, "rb") as f:
        magic = f.read(8)
    if magic != scoring.LLAMA_PERPLEXITY_MAGIC:
        open_reference(source).close()
        return source
    target = cached({"llama_perplexity": model_identity(source), "tail": tail, "max_tokens": max_tokens})
    if usable(target):
        return target
    try:
        base = scoring.LlamaPerplexityBase.open(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        header = {"model": {"label": source.stem, "path": str(source.resolve())},
                  "producer": "llama-perplexity --kl-divergence-base, converted by QuantDesk"}
        return base.convert(target, header, tail=tail, max_tokens=max_tokens, on_progress=on_progress)
    except scoring.ReferenceError as exc:
        raise ReferenceFileError(str(exc), "make it again with llama-perplexity --kl-divergence-base") from None


def export(source: Path, target: str | Path) -> Path:
    """A copy of a reference to share (a reference is read-only once written: a copy is all it takes)."""
    target = Path(target).expanduser()
    if target.is_dir():
        target = target / source.name
    shutil.copyfile(source, target)
    return target


def describe(reference: Reference) -> dict[str, Any]:
    """A reference as a result keeps it: where, what made it, its windows, and how much probability it keeps."""
    header = reference.header
    return {"path": str(reference.path), "model": header.get("model", {}), "producer": header.get("producer", ""),
            "created": header.get("created", ""), "corpus": header.get("corpus", {}), "n_ctx": reference.n_ctx,
            "chunks": reference.n_chunks, "positions": reference.positions, "n_vocab": reference.n_vocab,
            "tail": header.get("tail"), "max_tokens": header.get("max_tokens"),
            "bytes": Path(reference.path).stat().st_size, **reference.coverage()}
