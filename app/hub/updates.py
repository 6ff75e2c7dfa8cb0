"""Update checks for downloaded models (Qt-free): has the repo a model came from changed the model's files since
the commit it was pulled at, and how?

- One check asks the Hub once per repo (and branch): one ``model_info`` through ``RepoListing.fetch(...,
  branches=False)``, whose file list carries each file's sha256 (LFS) or git blob id. Each downloaded entry of that
  repo is compared with it file by file: the files the model has now (its GGUF quant's files, or the whole folder
  of an MLX / safetensors / EXL model) against the files it was installed with.
- A changed GGUF's header is read by Range (app.hub.remote) and compared, key by key, with the local header
  (app.models.metadata): differing only in ``tokenizer.chat_template`` is "chat template changed", anything else
  "file replaced". A folder's ``tokenizer_config.json`` differing only in ``chat_template``, or its
  ``chat_template.jinja``, is a template change too. README, licence and image files are not the model: their
  changes are told in a detail line, never as an update.
- Checks run only when online and when switched on (Settings: "Check for model updates"); by themselves at most
  once a day per repo, on demand any time (``quantdesk ls --check-updates``). Results, with when they were
  made, are kept in ``updates.json`` beside the library's manifest; a check that failed (no network, the Hub
  down) is not kept, so it does not count towards the day.
- ``update_request`` turns an available update into a download request (app.hub.plan): the files that differ
  are fetched, verified and swapped in by app.hub.download, the others kept (see plan's ``kept``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app import settings
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.hub import config
from app.hub.errors import HubError, OfflineError
from app.hub.library import Library, LibraryEntry, entry_folder, matches_remote
from app.hub.listing import RemoteFile, RepoListing
from app.hub.plan import DownloadRequest, whole_set
from app.records import known_fields

CHECK_INTERVAL_S = 24 * 3600
STATE_NAME = "updates.json"
KIND_WORDS = {"template": "chat template changed", "replaced": "file replaced", "added": "file added",
              "removed": "file removed"}
_NOT_MODEL_SUFFIXES = (".md", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg", ".pdf")
_NOT_MODEL_NAMES = ("license", "licence", "notice", "use_policy", ".gitattributes")
_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class UpdateChecksOff(QuantDeskError):
    """The user switched update checks off."""


@dataclass(frozen=True)
class FileChange:
    path: str
    kind: str  # template | replaced | added | removed
    of_model: bool = True  # False: README, licence, images: not part of the model

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind]


@dataclass
class UpdateStatus:
    """What one check found for one library entry."""

    entry_id: str
    repo_id: str
    revision: str
    local_commit: str  # the entry's commit when checked
    remote_commit: str
    checked_at: float
    changes: list[FileChange] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the model's files at remote_commit: what an update installs
    note: str = ""  # what the check could not compare, in words

    @property
    def available(self) -> bool:
        return any(c.of_model for c in self.changes)

    @property
    def reasons(self) -> list[str]:
        """What changed in the model, each kind once, in KIND_WORDS' order: "chat template changed", ..."""
        kinds = {c.kind for c in self.changes if c.of_model}
        return [words for kind, words in KIND_WORDS.items() if kind in kinds]

    @property
    def headline(self) -> str:
        return "update available: " + ", ".join(self.reasons) if self.available else "up to date"

    def details(self) -> list[str]:
        """One line per changed file of the model, then one for the rest of the repo."""
        lines = [f"{c.path}: {c.words}" for c in self.changes if c.of_model]
        others = [c.path for c in self.changes if not c.of_model]
        if others:
            lines.append(f"also changed in the repo, not part of the model (no update needed): {', '.join(others)}")
        elif not self.available and self.remote_commit not in ("", self.local_commit):
            lines.append(f"the repo moved on to commit {self.remote_commit[:12]}, but none of this model's files "
                         "changed (other files of the repo, such as its README, are not part of the model)")
        if self.note:
            lines.append(self.note)
        return lines

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"available": self.available, "headline": self.headline}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UpdateStatus:
        known = known_fields(cls, data)
        known["changes"] = [FileChange(**c) for c in data.get("changes", [])]
        return cls(**known)


@dataclass
class CheckReport:
    statuses: dict[str, UpdateStatus]  # by entry id: every checkable entry with a result (fresh or kept)
    asked: list[str] = field(default_factory=list)  # the repos asked this time
    failures: list[str] = field(default_factory=list)  # sentences: repos that could not be checked

    @property
    def available(self) -> list[UpdateStatus]:
        return [s for s in self.statuses.values() if s.available]


def checkable(entry: LibraryEntry) -> bool:
    """Downloaded from a repo at a branch (a pull pinned to a commit never changes)."""
    return (entry.source == "download" and bool(entry.repo_id) and bool(entry.commit_hash)
            and not _COMMIT.fullmatch(entry.revision or ""))


def enabled() -> bool:
    return settings.load().check_updates


def is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return not (name.endswith(_NOT_MODEL_SUFFIXES) or name.startswith(_NOT_MODEL_NAMES))


# -- the kept results ----------------------------------------------------------------------------------------

def _state_path(library: Library) -> Path:
    return library.root / STATE_NAME


def _load(library: Library) -> dict[str, UpdateStatus]:
    try:
        data = json.loads(_state_path(library).read_text(encoding="utf-8"))
        return {k: UpdateStatus.from_json(v) for k, v in data.get("statuses", {}).items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return {}  # a damaged file only costs one check; it is rewritten whole by the next


def remember(library: Library, statuses: dict[str, UpdateStatus]) -> None:
    """Keep these results (replacing what was kept), written atomically beside the library's manifest."""
    write_text_atomic(_state_path(library),
                      json.dumps({"statuses": {k: asdict(v) for k, v in statuses.items()}}, indent=1))


def known_updates(library: Library | None = None,
                  entries: Iterable[LibraryEntry] | None = None) -> dict[str, UpdateStatus]:
    """The last check's result for each entry it still describes (an entry updated since is left out). No
    network."""
    library = library or Library()
    entries = library.entries(refresh=False) if entries is None else entries
    kept = _load(library)
    return {e.id: kept[e.id] for e in entries
            if e.id in kept and checkable(e) and kept[e.id].local_commit == e.commit_hash}


def _due(kept: dict[str, UpdateStatus], group: list[LibraryEntry], now: float) -> bool:
    """Whether a repo's entries were not all checked within the day (an entry updated since counts as checked:
    the update fetched the repo's state, and the next daily check confirms it)."""
    return any(e.id not in kept or now - kept[e.id].checked_at >= CHECK_INTERVAL_S for e in group)


# -- checking ------------------------------------------------------------------------------------------------

def check_updates(library: Library | None = None, *, force: bool = False, now: float | None = None,
                  only: str | None = None) -> CheckReport:
    """Check every downloaded model whose repo is due (``force``: all of them; ``only``: that entry id alone).
    Raises UpdateChecksOff when the user switched checks off and OfflineError in offline mode, before any
    request; a repo that cannot be reached is named in ``failures`` and asked again next time."""
    if not enabled():
        raise UpdateChecksOff("Update checks are off (Settings: Check for model updates).",
                              "switch them on in the app's Settings, or set \"check_updates\": true in "
                              f"{settings.settings_path()}")
    library = library or Library()
    now = time.time() if now is None else now
    downloaded = [e for e in library.entries(refresh=False) if checkable(e)]
    entries = [e for e in downloaded if only in (None, e.id)]
    statuses = known_updates(library, entries)
    groups: dict[tuple[str, str], list[LibraryEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.repo_id or "", entry.revision or "main"), []).append(entry)
    kept = _load(library)
    due = {key: group for key, group in groups.items() if force or _due(kept, group, now)}
    report = CheckReport(statuses)
    if not due:
        return report
    if settings.is_offline():
        raise config.offline_error("check for model updates")
    for (repo_id, revision), group in due.items():
        report.asked.append(repo_id)
        try:
            listing = RepoListing.fetch(repo_id, revision, branches=False)
        except QuantDeskError as exc:  # no network, the Hub down, the repo gone: not a check; asked again next time
            report.failures.append(f"{repo_id}: {exc}")
            continue
        for entry in group:
            statuses[entry.id] = compare(entry, listing, now)
    ids = {e.id for e in downloaded}  # the results of models removed since are dropped
    remember(library, {k: v for k, v in {**kept, **statuses}.items() if k in ids})
    return report


def check_if_due(library: Library | None = None) -> CheckReport | None:
    """The automatic daily check (the app at start): None when checks are off or offline, without asking."""
    if not enabled() or settings.is_offline():
        return None
    try:
        return check_updates(library)
    except OfflineError:  # the Hub cannot be reached now: the next start tries again
        return None


def model_files_now(entry: LibraryEntry, listing: RepoListing) -> list[RemoteFile]:
    """The files the entry's model has in ``listing``: its GGUF quant's files (every shard), or the whole
    folder (MLX, safetensors, an EXL branch)."""
    if entry.format != "gguf":
        return whole_set(listing.files)
    local = {f["path"] for f in entry.files}
    groups = listing.gguf_groups()
    group = next((g for g in groups if local & set(g.files)), None)
    if group is None and entry.quant:
        group = next((g for g in groups if g.quant.upper() == entry.quant.upper()), None)
    by_path = {f.path: f for f in listing.files}
    return [by_path[p] for p in group.files] if group else []


def compare(entry: LibraryEntry, listing: RepoListing, now: float | None = None) -> UpdateStatus:
    """How the installed ``entry`` differs from its repo as ``listing`` has it."""
    folder = entry_folder(entry)
    wanted = {f.path: f for f in model_files_now(entry, listing)}
    records = {f["path"]: f for f in entry.files}
    changes = []
    for path in sorted(records.keys() | wanted.keys()):
        remote, record = wanted.get(path), records.get(path)
        if remote is None:
            changes.append(FileChange(path, "removed", is_model_file(path)))
        elif record is None:
            changes.append(FileChange(path, "added", is_model_file(path)))
        elif not matches_remote(folder, record, remote):
            kind = _how_changed(listing, folder / path, remote) if is_model_file(path) else "replaced"
            changes.append(FileChange(path, kind, is_model_file(path)))
    note = "" if wanted else f"{listing.repo_id} no longer has this model's files"
    return UpdateStatus(entry.id, listing.repo_id, entry.revision or "main", entry.commit_hash or "", listing.commit,
                        time.time() if now is None else now, changes, sorted(wanted), note)


def _how_changed(listing: RepoListing, local: Path, remote: RemoteFile) -> str:
    """"template" when only the chat template differs, else "replaced"."""
    from app.hub import remote as hub_remote

    name = remote.path.rsplit("/", 1)[-1]
    if name in _TEMPLATE_FILES:
        return "template"
    try:
        if name.lower().endswith(".gguf") and local.is_file():
            from app.models.metadata import read_gguf_header_bytes

            ours = read_gguf_header_bytes(local)
            theirs = hub_remote.read_remote_gguf_bytes(listing.repo_id, remote.path, listing.commit)
            return "template" if ours.only_chat_template_differs(theirs, local.stat().st_size, remote.size) \
                else "replaced"
        if name == "tokenizer_config.json" and local.is_file():
            ours_json = json.loads(local.read_text(encoding="utf-8"))
            theirs_json = hub_remote.read_remote_json(listing.repo_id, remote.path, listing.commit)
            if isinstance(ours_json, dict) and ours_json.get("chat_template") != theirs_json.get("chat_template"):
                ours_json.pop("chat_template", None)
                theirs_json.pop("chat_template", None)
                return "template" if ours_json == theirs_json else "replaced"
    except (QuantDeskError, OSError, ValueError):
        pass  # a header that cannot be read or compared: the file differs, which is all we can say
    return "replaced"


def update_request(entry: LibraryEntry, status: UpdateStatus) -> DownloadRequest:
    """The download that updates ``entry`` in place: every file the model has now, of which only those that
    differ from the installed ones are fetched (app.hub.plan)."""
    if not status.available:
        raise HubError(f"{entry.name} is up to date.")
    return DownloadRequest(entry.repo_id or "", entry.revision or "main", files=tuple(status.files),
                           update_of=entry.id)
