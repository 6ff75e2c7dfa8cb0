"""What a pull fetches, decided before any byte moves (Qt-free): the request, resolved against the repo's listing
(app.hub.listing) into a Plan: the commit it is pinned to and the files with their sizes and hashes.

1. Names are checked before anything else is read from the repo (``check_relative_name``): ``../``, absolute,
   drive and UNC paths and backslashes are refused.
2. The revision is resolved to a commit hash once; every file is fetched from that commit (pinned), also when a
   pull resumes after a restart (the job's ``job.json`` keeps the plan: app.hub.download).
3. ``--quant`` names a GGUF quant (its files, every shard) or an EXL2/EXL3 bit rate (the whole branch holding it,
   among the branches the listing counts as bit rates); a repo's own folder is fetched whole.
4. An update (``update_of`` names the library entry; ``files`` every file the model has at the new commit, see
   app.hub.updates) fetches only the files that differ from the installed ones: the rest are ``kept``.
5. A GGUF with vision projectors beside it in the repo comes with one (the request's, else the first of
   ``RepoListing.projectors_for``: F16 by default), checked against the model from the two headers (read by
   Range) before any byte moves: a pair that cannot work is refused here, not after the download.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from app.hub import config
from app.hub.errors import HubError, UnsafeFileName
from app.hub.formats import exl_branches, exl_quant_of, is_bare_bit_rate, quant_from_name
from app.hub.listing import RemoteFile, RepoListing, is_projector


@dataclass(frozen=True)
class DownloadRequest:
    repo_id: str
    revision: str = "main"
    quant: str | None = None
    files: tuple[str, ...] = ()
    update_of: str = ""  # the library entry this request updates in place (its unchanged files are kept)
    projector: str | None = None  # the vision projector to fetch with a GGUF: None the default one, "" none

    def key(self) -> str:
        parts = [self.repo_id, self.revision, (self.quant or "").upper(), ",".join(sorted(self.files))]
        if self.projector is not None:  # keeps the keys of requests made before projectors were fetched
            parts.append(f"projector={self.projector}")
        text = "|".join(parts)
        text += f"|update of {self.update_of}" if self.update_of else ""
        owner_name = self.repo_id.replace("/", "--")
        return f"{owner_name}--{hashlib.sha1(text.encode()).hexdigest()[:12]}"


@dataclass
class Plan:
    request: DownloadRequest
    commit: str
    files: list[RemoteFile]
    repo_format: str = "gguf"
    revision: str = ""  # the branch the files come from: the request's, or the one an EXL --quant names
    kept: list[RemoteFile] = field(default_factory=list)  # an update's files already installed as they are now
    projector: str = ""  # the vision projector among ``files`` ("" for none)
    other_projectors: tuple[str, ...] = ()  # the ones it could have been (shown with the choice)

    def __post_init__(self) -> None:
        self.revision = self.revision or self.request.revision

    def to_json(self) -> dict[str, Any]:
        return {"request": asdict(self.request), "commit": self.commit, "repo_format": self.repo_format,
                "revision": self.revision, "files": [asdict(f) for f in self.files],
                "kept": [asdict(f) for f in self.kept], "projector": self.projector,
                "other_projectors": list(self.other_projectors)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        req = data["request"]
        request = DownloadRequest(repo_id=req["repo_id"], revision=req["revision"], quant=req.get("quant"),
                                  files=tuple(req.get("files") or ()), update_of=req.get("update_of") or "",
                                  projector=req.get("projector"))
        return cls(request=request, commit=data["commit"], repo_format=data.get("repo_format", "gguf"),
                   revision=data.get("revision", ""), files=[RemoteFile(**f) for f in data["files"]],
                   kept=[RemoteFile(**f) for f in data.get("kept", [])], projector=data.get("projector", ""),
                   other_projectors=tuple(data.get("other_projectors") or ()))

    @property
    def total_bytes(self) -> int:
        """What the download fetches (an update's kept files are not fetched)."""
        return sum(f.size for f in self.files)

    @property
    def model_files(self) -> list[RemoteFile]:
        """Every file of the model once installed: the fetched ones and an update's kept ones."""
        return sorted(self.files + self.kept, key=lambda f: f.path)


_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def check_relative_name(name: str) -> str:
    """Return ``name`` when it is a plain relative POSIX path; raise UnsafeFileName otherwise."""
    reason = None
    if not name or "\x00" in name:
        reason = "is empty or holds a NUL character"
    elif "\\" in name:
        reason = "contains a backslash"
    elif name.startswith("/"):
        reason = "is an absolute path"
    elif _DRIVE_RE.match(name) or ":" in name:
        reason = "names a drive or holds a colon"
    elif any(part in ("", ".", "..") for part in name.split("/")):
        reason = "has '..', '.' or empty parts"
    if reason:
        raise UnsafeFileName(f"Refused the file name {name!r}: it {reason} and could land outside the models folder.",
                             "nothing was downloaded; report the repo to its owner")
    return name


def plan_download(request: DownloadRequest, listing: RepoListing | None = None) -> Plan:
    """Resolve the request against the Hub: the commit, and the files with sizes and hashes. ``listing`` (the
    repo at ``request.revision``, fetched already) saves asking the Hub again."""
    for name in request.files:
        check_relative_name(name)
    check_relative_name(request.repo_id.partition("/")[0] or "?")
    config.require_online(f"download {request.repo_id}")
    if listing is None or (listing.repo_id, listing.revision or "main") != (request.repo_id, request.revision):
        listing = RepoListing.fetch(request.repo_id, request.revision)
    exl_quant = exl_quant_of(request.quant, "", bare_numbers=True) if request.quant and not request.files else None
    if exl_quant is not None and is_bare_bit_rate(request.quant or "") and not listing.bit_rates:
        exl_quant = None  # "4_0" where no branch holds a bit rate: a GGUF quant name, for select_files
    if exl_quant is not None:
        revision = exl_branch_for(request, list(listing.bit_rates), listing.format)
        commit, chosen = listing.branch_commit(revision), whole_set(listing.branch_files(revision))
    else:
        revision, commit, chosen = request.revision, listing.commit, select_files(request, listing.files)
    for remote in chosen:  # before anything else is read from the repo
        check_relative_name(remote.path)
    if not request.files and not any(f.path.endswith((".safetensors", ".gguf")) for f in chosen):
        _refuse_weightless(request, revision, listing)
    plan = Plan(request=request, commit=commit, files=chosen, repo_format=listing.format, revision=revision)
    if exl_quant is None and (not request.files or request.projector):  # named files: only the projector named
        _add_projector(plan, listing)
    if request.update_of:
        from app.hub.library import Library

        installed = Library().installed_as(request.update_of, plan.files)
        plan.kept = [f for f in plan.files if f.path in installed]
        plan.files = [f for f in plan.files if f.path not in installed]
    return plan


def _add_projector(plan: Plan, listing: RepoListing) -> None:
    """Fetch a GGUF's vision projector with it: the one asked for, else the first in its folder that pairs with the
    model, checked from the two headers (read by Range) before any byte moves."""
    from app.hub import remote
    from app.models import vision

    models = [f for f in plan.files if f.path.lower().endswith(".gguf") and not is_projector(f.path)]
    wanted = plan.request.projector
    if not models or wanted == "":
        return
    candidates = listing.projectors_for(models[0].path)
    if wanted is not None:
        by_path = {f.path: f for f in listing.projectors}
        if wanted not in by_path:
            raise HubError(f"{plan.request.repo_id} has no vision projector {wanted!r}.",
                           f"available: {', '.join(by_path) or 'none'}")
        candidates = [by_path[wanted]]
    if not candidates:
        return
    model = remote.read_remote_gguf(plan.request.repo_id, models[0].path, plan.commit)
    refusals = []
    for projector in candidates:
        check_relative_name(projector.path)
        try:
            vision.check_pair(model, remote.read_remote_projector(plan.request.repo_id, projector.path, plan.commit))
        except vision.ProjectorError as exc:
            refusals.append(exc)
            continue
        plan.files.append(projector)
        plan.projector = projector.path
        plan.other_projectors = tuple(f.path for f in listing.projectors_for(models[0].path) if f != projector)
        return
    raise refusals[0]


def exl_branch_for(request: DownloadRequest, branches: list[str], exl_hint: str = "") -> str:
    """The branch holding the bit rate ``request.quant`` names: EXL2/EXL3 repos keep one quant per branch. An
    exact branch name wins; otherwise the bits (and head bits, when given) must match one branch alone. Branches
    named by a bare number (``6_5``) count where ``exl_hint`` (from ``exl_format_hint``) says the repo is EXL."""
    quants = exl_branches(request.repo_id, branches, exl_hint, bare_numbers=bool(exl_hint))
    wanted = exl_quant_of(request.quant or "", "", bare_numbers=True)
    matches = [b for b in quants if b.lower() == (request.quant or "").lower()] or [
        b for b, q in quants.items() if wanted is not None and q.bits_per_weight == wanted.bits_per_weight
        and wanted.head_bits in (None, q.head_bits)]  # a quant that names no bit rate matches by branch name alone
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise HubError(f"{request.repo_id} has several {request.quant} branches: {', '.join(matches)}.",
                       "name one exactly with --quant BRANCH")
    raise HubError(f"{request.repo_id} has no {request.quant} branch.",
                   f"available: {', '.join(quants)}" if quants else
                   "it keeps no bit rates in branches; pull it without --quant, or with --revision")


def _refuse_weightless(request: DownloadRequest, revision: str, listing: RepoListing) -> None:
    """The main branch of an EXL repo holds only the card (and measurement.json): installing that as a model
    would leave nothing to load, so say where the quants are."""
    quants = listing.bit_rates
    if quants:
        raise HubError(f"{request.repo_id}@{revision} holds no model weights: its quants are kept in branches.",
                       f"pull one with --quant: {', '.join(q.quant for q in quants.values())}")


def select_files(request: DownloadRequest, listing: list[RemoteFile]) -> list[RemoteFile]:
    by_path = {f.path: f for f in listing}
    if request.files:
        missing = [name for name in request.files if name not in by_path]
        if missing:
            raise HubError(f"{request.repo_id} has no file {missing[0]!r}.",
                           "see the file list with `quantdesk search` or on the model page")
        return [by_path[name] for name in request.files]
    ggufs = [f for f in listing if f.path.lower().endswith(".gguf") and not is_projector(f.path)]
    quants = sorted({q for f in ggufs if (q := quant_from_name(f.path))})
    if request.quant:
        wanted = request.quant.upper()
        chosen = [f for f in ggufs if (quant_from_name(f.path) or "").upper() == wanted]
        if not chosen:
            raise HubError(f"{request.repo_id} has no {request.quant} file.",
                           f"available: {', '.join(quants) or 'no GGUF quants'}")
        return chosen
    if ggufs:
        if len(ggufs) == 1 or len(quants) == 1:
            return ggufs
        raise HubError(f"{request.repo_id} has several quants; pick one.",
                       f"use --quant with one of: {', '.join(quants)}")
    return whole_set(listing)


def whole_set(listing: list[RemoteFile]) -> list[RemoteFile]:
    """A model folder (MLX, safetensors, an EXL branch) is fetched as a whole."""
    return [f for f in listing if f.path != ".gitattributes"]
