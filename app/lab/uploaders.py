"""The same quant of one model from several uploaders, side by side: files of one quant name differ by uploader (their
quantizer's version, the importance matrix, which tensors stay in more bits), by up to 4× in KLD.

``find(base, quants)`` asks the Hub for every repo that says it quantizes ``base`` (app/hub/search: the card's
``base_model``), lists each repo's files once (app/hub/listing) and reads each chosen file's GGUF header by Range
(app/hub/remote) to check that it is the same model: its architecture and its vocabulary (every token, BOS and EOS)
are the reference's, else it is listed with the sentence why and left out. ``fetch`` brings the chosen files into the
lab's own cache (verified downloads through app/hub/download; a file the library already holds, the same bytes by
its sha256, is used where it is), and ``clean_up`` removes what a bench fetched unless it is to be kept: kept files
stay in the cache, and the next bench finds them there (checked by their sha256 again). Qt-free and blocking: the
GUI runs it on a worker thread.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import paths
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.hub.download import Progress
    from app.hub.listing import RepoListing
    from app.models.drafts import Vocabulary
    from app.models.metadata import GgufHeaderBytes

MAX_REPOS = 50  # the most downloaded quantizations of a model the lab lists; popular models have hundreds


def cache_root() -> Path:
    """Where the lab keeps the files it fetched: not the library (they are measured, not chatted with)."""
    return paths.cache_dir() / "lab" / "downloads"


@dataclass(frozen=True)
class Candidate:
    """One repo's file of the quant asked for."""

    repo_id: str
    quant: str
    files: tuple[str, ...]  # its files in the repo (a split model's shards), the first names it
    size: int
    commit: str  # the revision listed: a fetch is pinned to it
    sha256: str | None  # the first file's, as the Hub lists it
    downloads: int | None = None
    likes: int | None = None
    architecture: str = ""  # from its GGUF header ("" until read)
    n_vocab: int = 0
    problem: str = ""  # why it cannot be compared with the reference ("" when it can)

    @property
    def label(self) -> str:
        """As the recommender names a Hub model ("owner/repo/file.gguf"): a bench's VariantResult.origin."""
        return f"{self.repo_id}/{self.files[0]}"

    @property
    def name(self) -> str:
        """As a bench's table names it: the repo and the file, without .gguf."""
        return f"{self.repo_id}/{Path(self.files[0]).stem}"


@dataclass
class Found:
    base: str
    quants: tuple[str, ...]
    candidates: list[Candidate] = field(default_factory=list)  # every file found, those with a problem too
    skipped: list[str] = field(default_factory=list)  # repos without the quant (or unreadable), a sentence each
    precise: Candidate | None = None  # the highest-precision GGUF among the repos: a reference when none is named
    checked_against: str = ""  # what the architecture and the vocabulary were compared with

    @property
    def comparable(self) -> list[Candidate]:
        return [c for c in self.candidates if not c.problem]


@dataclass(frozen=True)
class _Facts:
    """What must be the same for two files to be compared on one token stream."""

    architecture: str
    vocabulary: Vocabulary
    n_vocab: int


def listed(listing: RepoListing, quant: str, downloads: int | None = None,
           likes: int | None = None) -> Candidate | None:
    """The file of ``quant`` in one repo's listing (app.hub.listing.RepoListing), or None where it has none."""
    from app.models.quants import canonical_gguf_quant

    wanted = canonical_gguf_quant(quant)
    group = next((g for g in listing.gguf_groups() if g.quant == wanted), None)
    if group is None:
        return None
    first = sorted(group.files)[0]
    sha = next((f.sha256 for f in listing.files if f.path == first), None)
    return Candidate(listing.repo_id, group.quant, tuple(sorted(group.files)), group.size, listing.commit, sha,
                     downloads, likes)


def _facts_of_header(header: GgufHeaderBytes, name: str) -> _Facts:
    from app.models.drafts import Vocabulary

    vocabulary = Vocabulary.of_header(header.values, name)
    return _Facts(header.text("general.architecture") or "?", vocabulary, vocabulary.n_tokens)


def _remote_facts(candidate: Candidate) -> _Facts:
    from app.hub import remote

    return _facts_of_header(remote.read_remote_gguf_bytes(candidate.repo_id, candidate.files[0], candidate.commit),
                            candidate.label)


def reference_facts(reference: str | Path) -> _Facts | None:
    """What a local reference model is (a GGUF's header), None for one whose header says no such thing here (a model
    folder, a reference file): then the highest-precision file found stands in for it."""
    from app.models.metadata import read_gguf_header_bytes

    path = Path(reference)
    if not path.is_file() or path.suffix.lower() != ".gguf":
        return None
    return _facts_of_header(read_gguf_header_bytes(path), path.name)


def mismatch(reference: _Facts, facts: _Facts) -> str:
    """Why a file of ``facts`` cannot be compared with the reference, in words; "" when it can."""
    from app.models.drafts import vocabulary_mismatch

    if facts.architecture != reference.architecture:
        return f"its architecture is {facts.architecture}, the reference's {reference.architecture}"
    return vocabulary_mismatch(reference.vocabulary, facts.vocabulary, "the reference's")


def find(base: str, quants: Sequence[str], reference: str | Path | None = None, *, limit: int = MAX_REPOS,
         on_progress: Callable[[str], None] | None = None) -> Found:
    """Every GGUF repo on the Hub that quantizes ``base``, with its file of each of ``quants``, checked against
    ``reference`` (a local GGUF) or, without one, against the highest-precision GGUF the repos have (F32, BF16, F16,
    then the largest quant). Raises HubError in words when the Hub cannot be asked; a repo that cannot be read is
    listed in ``skipped``."""
    from app.hub.listing import RepoListing
    from app.hub.search import quantizations_of
    from app.models.quants import canonical_gguf_quant, gguf_bits_per_weight

    found = Found(base, tuple(canonical_gguf_quant(q) for q in quants))
    say = on_progress or (lambda _message: None)
    say(f"asking the Hub for quantizations of {base}")
    repos = quantizations_of(base, "gguf", limit)
    if not repos:
        raise QuantDeskError(f"the Hub lists no GGUF quantizations of {base}",
                             "check the base model's name (owner/name, as on its page); the repos found are those "
                             "whose model card names it as base_model")
    best_bits = -1.0
    for n, summary in enumerate(repos, start=1):
        say(f"listing {summary.repo_id} ({n}/{len(repos)})")
        try:
            listing = RepoListing.fetch(summary.repo_id, branches=False)
        except QuantDeskError as exc:
            found.skipped.append(f"{summary.repo_id}: {exc}")
            continue
        mine = [c for q in found.quants
                if (c := listed(listing, q, summary.downloads, summary.likes)) is not None]
        if not mine:
            have = ", ".join(sorted(g.quant for g in listing.gguf_groups())) or "no GGUF files"
            found.skipped.append(f"{summary.repo_id} has no {' or '.join(found.quants)} (it has: {have})")
        found.candidates += mine
        for group in listing.gguf_groups():
            bits = gguf_bits_per_weight(group.quant) or 0.0
            if bits > best_bits:
                best_bits = bits
                found.precise = listed(listing, group.quant, summary.downloads, summary.likes)
    standard = reference_facts(reference) if reference is not None else None
    found.checked_against = Path(reference).name if standard is not None and reference is not None else ""
    if standard is None and found.precise is not None:
        say(f"reading the header of {found.precise.label}")
        try:
            standard = _remote_facts(found.precise)
            found.checked_against = found.precise.label
        except QuantDeskError as exc:
            found.skipped.append(f"{found.precise.label}: its header could not be read ({exc})")
    checked = []
    for n, candidate in enumerate(found.candidates, start=1):
        say(f"reading the header of {candidate.label} ({n}/{len(found.candidates)})")
        try:
            facts = _remote_facts(candidate)
        except QuantDeskError as exc:
            checked.append(_with(candidate, problem=f"its header could not be read: {exc}"))
            continue
        problem = mismatch(standard, facts) if standard is not None else ""
        checked.append(_with(candidate, architecture=facts.architecture, n_vocab=facts.n_vocab, problem=problem))
    found.candidates = checked
    return found


def found_text(found: Found, precise_is_reference: bool) -> str:
    """What ``find`` found, in lines: each file with its size and downloads, or why it is left out; the repos
    without the quant; the reference."""
    against = f" (architecture and vocabulary checked against {found.checked_against})" if found.checked_against \
        else " (no reference header to check them against)"
    lines = [f"{len(found.candidates)} GGUF file(s) of {' or '.join(found.quants)} among the Hub's quantizations of "
             f"{found.base}{against}:"]
    for c in found.candidates:
        about = f"{c.size / 1e9:.2f} GB" + (f", {c.downloads:,} downloads" if c.downloads is not None else "")
        lines.append(f"  {'left out' if c.problem else 'compared'}: {c.label} — {about}"
                     + (f": {c.problem}" if c.problem else ""))
    lines += [f"  not compared: {why}" for why in found.skipped]
    if precise_is_reference and found.precise is not None:
        lines.append(f"reference: {found.precise.label} ({found.precise.quant}, the highest precision found; fetched "
                     "too)")
    return "\n".join(lines)


def _with(candidate: Candidate, **changes: Any) -> Candidate:
    import dataclasses

    return dataclasses.replace(candidate, **changes)


# --- fetching into the lab's cache ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    path: str
    label: str  # as the bench's table names it
    origin: str  # the Hub model it is (Candidate.label)
    downloaded_now: bool  # fetched for this bench: removed after it unless kept
    files: tuple[str, ...] = ()  # every file it fetched (a split model's shards)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _in_library(candidate: Candidate) -> str | None:
    """The library's copy of the candidate's file, the same bytes by the Hub's sha256, if it holds one."""
    from app.hub.library import Library

    for entry in Library().entries(refresh=False):
        if entry.repo_id != candidate.repo_id or len(candidate.files) != 1:
            continue
        for record in entry.files:
            if record.get("path") == candidate.files[0] and candidate.sha256 and record.get("sha256") == \
                    candidate.sha256 and Path(entry.path).is_file():
                return entry.path
    return None


def cached_path(candidate: Candidate) -> Path:
    from app.hub.download import model_folder

    return model_folder(candidate.repo_id, "main", cache_root()) / candidate.files[0]


def _kept(candidate: Candidate) -> bool:
    """Whether an earlier bench kept this very file in the cache (every shard there, the first the Hub's bytes)."""
    first = cached_path(candidate)
    shards = [first.parent / Path(f).name for f in candidate.files]
    return all(p.is_file() for p in shards) and bool(candidate.sha256) and _sha256(first) == candidate.sha256


def fetch(candidates: Sequence[Candidate], *, on_progress: Callable[[str, float | None], None] | None = None,
          cancel: threading.Event | None = None) -> list[Fetched]:
    """Each candidate's files, verified: the library's copy where it has the same bytes, a copy an earlier bench kept,
    else downloaded into the lab's cache (pinned to the commit listed). ``cancel`` stops a download between chunks
    (the partial files go); LabCancelled then, with what was fetched before removed."""
    from app.hub.errors import DownloadPaused
    from app.lab.runner import LabCancelled

    say = on_progress or (lambda _message, _fraction: None)
    fetched: list[Fetched] = []
    try:
        for candidate in candidates:
            own = _in_library(candidate)
            if own is not None:
                say(f"{candidate.name}: the library's copy", None)
                fetched.append(Fetched(own, candidate.name, candidate.label, False))
                continue
            if _kept(candidate):
                say(f"{candidate.name}: kept from an earlier bench", None)
                fetched.append(Fetched(str(cached_path(candidate)), candidate.name, candidate.label, False))
                continue
            say(f"fetching {candidate.name} ({candidate.size / 1e9:.2f} GB)", 0.0)
            fetched.append(_download(candidate, say, cancel))
    except DownloadPaused:
        clean_up(fetched, keep=False)
        raise LabCancelled("the bench was stopped while fetching its files") from None
    except BaseException:
        clean_up(fetched, keep=False)
        raise
    return fetched


def _download(candidate: Candidate, say: Callable[[str, float | None], None],
              cancel: threading.Event | None) -> Fetched:
    """One candidate downloaded into the lab's cache, pinned to the commit listed, verified by the Hub's hashes."""
    from app.hub.download import Downloader
    from app.hub.plan import DownloadRequest

    def progress(p: Progress) -> None:
        if cancel is not None and cancel.is_set():
            downloader.cancel()
        elif p.state == "downloading":
            say(f"fetching {candidate.name}: {p.done / 1e6:,.0f} of {p.total / 1e6:,.0f} MB", p.fraction)

    downloader = Downloader(DownloadRequest(candidate.repo_id, revision=candidate.commit, files=candidate.files),
                            progress, root=cache_root())
    result = downloader.run()
    return Fetched(str(result.path), candidate.name, candidate.label, True,
                   tuple(str(result.folder / f.path) for f in result.files))


def clean_up(fetched: Sequence[Fetched], keep: bool) -> list[str]:
    """Remove what a bench downloaded (a file the library holds, or one kept before, stays), unless ``keep``; returns
    a sentence per removal."""
    said: list[str] = []
    if keep:
        return said
    root = cache_root().resolve()
    for f in fetched:
        if not f.downloaded_now:
            continue
        size = 0
        for name in f.files:
            path = Path(name).resolve()
            if path.is_relative_to(root) and path.is_file():  # only ever the lab's own cache
                size += path.stat().st_size
                path.unlink()
                folder = path.parent
                while folder != root and folder.is_relative_to(root) and not any(folder.iterdir()):
                    folder.rmdir()  # the repo's folder and its owner's, once empty
                    folder = folder.parent
        said.append(f"removed {f.label} ({size / 1e9:.2f} GB), fetched for this bench (--keep-downloads keeps it)")
    return said
