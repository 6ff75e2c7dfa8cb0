"""The local model library: what is installed, where it came from, and how big it is. Works offline.

Models we own live in ``app.settings.models_dir()`` as ``<owner>/<repo>/<files>`` (``local/<name>`` for imports);
models in the Hugging Face cache and in folders the user points at are used by reference. The manifest is a
SQLite file inside the models folder (it travels with the folder): one row per model with the repo, the
commit, the file list with sizes and sha256, format, quant, architecture and path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import time
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict

from app.errors import ModelFileError
from app.hub import config
from app.hub.errors import LibraryError
from app.hub.formats import EXL_FORMATS, describe_folder, describe_gguf, exl_branches, quant_from_name
from app.hub.listing import RemoteFile, is_projector
from app.settings import models_dir

MANIFEST_NAME = "library.sqlite3"
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    repo_id TEXT,
    revision TEXT,
    commit_hash TEXT,
    format TEXT NOT NULL,
    quant TEXT,
    architecture TEXT,
    path TEXT NOT NULL,
    files TEXT NOT NULL,
    size INTEGER NOT NULL,
    source TEXT NOT NULL,
    owned INTEGER NOT NULL,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS folders (path TEXT PRIMARY KEY, added_at REAL NOT NULL);
"""


class _Request(Protocol):
    @property
    def repo_id(self) -> str: ...
    @property
    def update_of(self) -> str: ...


class DownloadedPlan(Protocol):
    """What the library reads of a finished download's plan: an app.hub.plan.Plan, whose module imports this one
    (to plan an update), so it is named by what it has."""

    @property
    def request(self) -> _Request: ...
    @property
    def commit(self) -> str: ...
    @property
    def repo_format(self) -> str: ...
    @property
    def revision(self) -> str: ...
    @property
    def model_files(self) -> list[RemoteFile]: ...


class LibraryFile(TypedDict):
    """One file of a library model, as the models table keeps it (JSON in the ``files`` column)."""

    path: str  # relative to the model's folder
    size: int
    sha256: str | None  # None: not hashed (referenced files, small files of a download)


@dataclass
class LibraryEntry:
    id: str
    name: str
    format: str
    path: str
    files: list[LibraryFile]
    size: int
    source: str  # download | import | reference | hf-cache | folder
    owned: bool  # True: the files are ours to delete
    added_at: float
    repo_id: str | None = None
    revision: str | None = None
    commit_hash: str | None = None
    quant: str | None = None
    architecture: str | None = None

    @property
    def projector(self) -> str | None:
        """The vision projector kept with the model (its path relative to the model's folder), if any."""
        return next((f["path"] for f in self.files if is_projector(f["path"])), None)

    @property
    def pooling(self) -> str:
        """The pooling its GGUF declares (``app.models.metadata.model_pooling``): "rank" a reranker, "mean" / "cls" /
        "last" an embedding model, "" a chat model (or no GGUF)."""
        from app.models.metadata import model_pooling

        return model_pooling(self.path) if self.format == "gguf" else ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"projector": self.projector, "pooling": self.pooling or None}


def _projector_beside(model: Path) -> list[str]:
    """The projector lying beside a GGUF that pairs with it, as a file of the model (app.models.vision)."""
    from app.models import vision

    try:
        found = vision.find_projector(model)
    except ModelFileError:  # a model whose header cannot be read is listed without one; loading it says why
        return []
    return [found.name] if found else []


def entry_folder(entry: LibraryEntry) -> Path:
    """The folder the entry's ``files`` are relative to."""
    model = Path(entry.path)
    return model.parent if model.is_file() or entry.format == "gguf" else model


def bundled_models_dir() -> Path | None:
    """Models shipped inside an offline package (packaging/build_linux.sh --model) sit in ``models/``
    beside the frozen app binary; they are listed by reference, like a watched folder."""
    if not getattr(sys, "frozen", False):
        return None
    return Path(sys.executable).resolve().parent / "models"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(4 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _git_blob_id(path: Path) -> str:
    """The git blob sha1 of a small file, as the Hub names non-LFS files."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def matches_remote(folder: Path, record: LibraryFile, remote: RemoteFile) -> bool:
    """Whether the installed file ``record`` (a LibraryEntry.files item) in ``folder`` is the Hub's ``remote``
    (a RemoteFile): an LFS file by the sha256 verified when it was downloaded, a small file by its git blob id,
    hashed now (the download recorded no sha256 for it)."""
    path = folder / record["path"]
    if record.get("size") != remote.size or not path.is_file():
        return False
    if remote.sha256:
        return (record.get("sha256") or _file_sha256(path)) == remote.sha256
    return remote.blob_id is None or _git_blob_id(path) == remote.blob_id


def _names(entry: LibraryEntry) -> set[str]:
    """What a user may call a library model by, casefolded: its id (what `quantdesk ls` prints), name, repo and
    ``REPO:QUANT``."""
    names = {entry.id, entry.name}
    if entry.repo_id:
        names.add(entry.repo_id)
        if entry.quant:
            names.add(f"{entry.repo_id}:{entry.quant}")
    return {name.casefold() for name in names}


def _named(entries: list[LibraryEntry], key: str, prefixes: bool = True) -> list[LibraryEntry]:
    """The entries ``key`` names exactly (a name, or the path), else (with ``prefixes``) those it is a prefix of a
    name of."""
    if not key.strip():
        return []
    wanted = key.casefold()
    resolved = str(Path(key).expanduser().resolve())
    exact = [e for e in entries if wanted in _names(e) or e.path == resolved]
    if exact or not prefixes:
        return exact
    return [e for e in entries if any(name.startswith(wanted) for name in _names(e))]


def ambiguous(key: str, found: list[LibraryEntry]) -> LibraryError:
    """The refusal of a name several library models answer to, listing them as `quantdesk ls` prints them."""
    return LibraryError(f"{key!r} names {len(found)} models in the library: {', '.join(e.id for e in found)}.",
                        "name one of them as `quantdesk ls` prints it")


class Library:
    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root else models_dir()

    # -- storage -----------------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.root / MANIFEST_NAME, timeout=10)
        conn.row_factory = sqlite3.Row
        with conn:
            conn.executescript(_SCHEMA)
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return conn

    def _put(self, entry: LibraryEntry) -> LibraryEntry:
        row = asdict(entry) | {"files": json.dumps(entry.files), "owned": int(entry.owned)}
        with closing(self._connect()) as conn, conn:
            conn.execute(f"INSERT OR REPLACE INTO models ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                         tuple(row.values()))
        return entry

    @staticmethod
    def _entry(row: sqlite3.Row) -> LibraryEntry:
        data = dict(row)
        data["files"] = json.loads(data["files"])
        data["owned"] = bool(data["owned"])
        return LibraryEntry(**data)

    # -- adding ------------------------------------------------------------------------------------------
    def model_path_for(self, folder: Path, plan: DownloadedPlan) -> Path:
        ggufs = sorted(f.path for f in plan.model_files
                       if f.path.lower().endswith(".gguf") and not is_projector(f.path))
        return folder / ggufs[0] if ggufs else folder

    def installed_as(self, entry_id: str, remote_files: list[RemoteFile]) -> set[str]:
        """Which of ``remote_files`` (RemoteFile) the entry has installed exactly as they are: what an update of
        it keeps rather than fetches."""
        entry = self.find(entry_id)
        folder = entry_folder(entry)
        records = {f["path"]: f for f in entry.files}
        return {r.path for r in remote_files if r.path in records and matches_remote(folder, records[r.path], r)}

    def register_download(self, plan: DownloadedPlan, folder: Path, path: Path) -> LibraryEntry:
        """Record a finished download. An update (``plan.request.update_of``) rewrites its entry, last, after its
        new files were moved in, and then deletes the files the model no longer has."""
        files: list[LibraryFile] = [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in plan.model_files]
        request = plan.request
        old = self.find(request.update_of) if request.update_of else None
        if path.is_file():
            quant, arch = describe_gguf(path)
            fmt = "gguf"
            entry_id = f"{request.repo_id}:{quant or path.name}"
        else:
            fmt, quant, arch = describe_folder(path)
            if fmt not in EXL_FORMATS and plan.repo_format in EXL_FORMATS:
                fmt = plan.repo_format  # an EXL2 from before exllamav2 wrote quantization_config into config.json
            if fmt in EXL_FORMATS and quant is None:
                branch_quant = exl_branches(request.repo_id, [plan.revision], fmt, bare_numbers=True)
                quant = branch_quant[plan.revision].quant if branch_quant else None
            entry_id = request.repo_id if plan.revision == "main" else f"{request.repo_id}@{plan.revision}"
        entry = self._put(LibraryEntry(
            id=old.id if old else entry_id, name=old.name if old else entry_id, format=fmt, path=str(path),
            files=files, size=sum(f["size"] for f in files), source="download", owned=True,
            added_at=old.added_at if old else time.time(), repo_id=request.repo_id, revision=plan.revision,
            commit_hash=plan.commit, quant=quant, architecture=arch))
        if old is not None:
            current = {f["path"] for f in files}
            for gone in (f["path"] for f in old.files if f["path"] not in current):
                target = folder / gone
                if target.is_file() and target.resolve().is_relative_to(self.root.resolve()):
                    target.unlink()
        return entry

    def import_path(self, source: str | Path, copy: bool = True) -> list[LibraryEntry]:
        """Bring in a GGUF file or a model folder, e.g. from a USB stick: copied into the library (hashed while
        copying) or, with ``copy=False``, used where it is."""
        source = Path(source).expanduser().resolve()
        if not source.exists():
            raise LibraryError(f"{source} does not exist.", "check the path")
        found = self._models_in(source)
        if not found:
            raise LibraryError(f"No model found in {source}.",
                               "import a .gguf file or a folder with config.json and *.safetensors")
        entries = []
        for fmt, path, rel_files in found:
            if copy:
                entries.append(self._copy_in(fmt, path, rel_files))
            else:
                entries.append(self._reference(fmt, path, rel_files, source="reference"))
        return entries

    def _models_in(self, source: Path) -> list[tuple[str, Path, list[str]]]:
        """(format, model path, files relative to the model's folder) for each model at ``source``."""
        if source.is_file():
            if source.suffix.lower() != ".gguf":
                raise LibraryError(f"{source.name} is not a model file QuantDesk can import.",
                                   "import a .gguf file or a model folder")
            return [("gguf", source, [source.name, *_projector_beside(source)])]
        found = []
        if (source / "config.json").exists() and any(source.glob("*.safetensors")):
            files = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
            found.append(("folder", source, files))
            return found
        ggufs = sorted(p for p in source.glob("*.gguf") if p.is_file() and not is_projector(p.name))
        groups: dict[str, list[Path]] = {}
        for p in ggufs:
            from app.models.quants import gguf_shard_names

            groups.setdefault(gguf_shard_names(str(p))[0], []).append(p)
        for first, members in groups.items():
            model = Path(first) if Path(first).exists() else members[0]
            found.append(("gguf", model, sorted(m.name for m in members) + _projector_beside(model)))
        for sub in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")):
            found.extend(self._models_in(sub))
        return found

    def _describe(self, fmt: str, path: Path) -> tuple[str, str | None, str | None]:
        if fmt == "gguf":
            quant, arch = describe_gguf(path)
            return "gguf", quant, arch
        return describe_folder(path)

    def _copy_in(self, fmt: str, path: Path, rel_files: list[str]) -> LibraryEntry:
        src_folder = path.parent if fmt == "gguf" else path
        dest_folder = self.root / "local" / (path.stem if fmt == "gguf" else path.name)
        tmp = dest_folder.with_name(dest_folder.name + ".importing")
        shutil.rmtree(tmp, ignore_errors=True)
        needed = sum((src_folder / f).stat().st_size for f in rel_files)
        self.root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.root).free
        if needed > free:
            from app.hub.errors import NotEnoughDiskSpace

            raise NotEnoughDiskSpace(f"Not enough disk space to import {path.name}: need {needed / 1e9:.2f} GB, "
                                     f"{free / 1e9:.2f} GB free.", "import by reference instead (--link)")
        files: list[LibraryFile] = []
        for rel in rel_files:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with open(src_folder / rel, "rb") as src, open(target, "wb") as dst:
                while chunk := src.read(4 * 1024 * 1024):
                    dst.write(chunk)
                    digest.update(chunk)
            files.append({"path": rel, "size": target.stat().st_size, "sha256": digest.hexdigest()})
        if dest_folder.exists():
            raise LibraryError(f"{dest_folder} already exists in the library.", "remove it first (quantdesk rm)")
        os.replace(tmp, dest_folder)
        model_path = dest_folder / path.name if fmt == "gguf" else dest_folder
        fmt, quant, arch = self._describe(fmt, model_path)
        return self._put(LibraryEntry(
            id=f"local:{dest_folder.name}", name=dest_folder.name, format=fmt, path=str(model_path), files=files,
            size=sum(f["size"] for f in files), source="import", owned=True, added_at=time.time(),
            quant=quant, architecture=arch))

    def _reference(self, fmt: str, path: Path, rel_files: list[str], source: str, repo_id: str | None = None,
                   commit: str | None = None, entry_id: str | None = None) -> LibraryEntry:
        folder = path.parent if fmt == "gguf" else path
        files: list[LibraryFile] = [{"path": rel, "size": (folder / rel).stat().st_size, "sha256": None}
                                    for rel in rel_files]
        fmt, quant, arch = self._describe(fmt, path)
        name = path.stem if path.is_file() else path.name
        return self._put(LibraryEntry(
            id=entry_id or f"{source}:{path}", name=name, format=fmt, path=str(path), files=files,
            size=sum(f["size"] for f in files), source=source, owned=False, added_at=time.time(),
            repo_id=repo_id, commit_hash=commit, quant=quant, architecture=arch))

    def add_folder(self, folder: str | Path) -> list[LibraryEntry]:
        """Watch a folder of models (used by reference) and list what is in it now."""
        folder = Path(folder).expanduser().resolve()
        if not folder.is_dir():
            raise LibraryError(f"{folder} is not a folder.")
        with closing(self._connect()) as conn, conn:
            conn.execute("INSERT OR REPLACE INTO folders VALUES (?, ?)", (str(folder), time.time()))
        return [self._reference(fmt, p, files, source="folder") for fmt, p, files in self._models_in(folder)]

    # -- scanning ----------------------------------------------------------------------------------------
    def scan(self) -> None:
        """Refresh references: the HF cache, the watched folders; forget references whose files are gone."""
        self._scan_hf_cache()
        with closing(self._connect()) as conn:
            folders = [Path(r["path"]) for r in conn.execute("SELECT path FROM folders")]
        for folder in folders:
            if folder.is_dir():
                for fmt, p, files in self._models_in(folder):
                    self._reference(fmt, p, files, source="folder")
        bundled = bundled_models_dir()
        if bundled is not None and bundled.is_dir():
            for fmt, p, files in self._models_in(bundled):
                self._reference(fmt, p, files, source="bundled")
        with closing(self._connect()) as conn, conn:
            for row in conn.execute("SELECT id, path, owned FROM models").fetchall():
                if not Path(row["path"]).exists() and not row["owned"]:
                    conn.execute("DELETE FROM models WHERE id = ?", (row["id"],))

    def _scan_hf_cache(self) -> None:
        cache = config.hf_hub_cache()
        if not cache.is_dir():
            return
        from huggingface_hub import scan_cache_dir

        try:
            info = scan_cache_dir(cache)
        except Exception:  # noqa: BLE001 - a cache we cannot read is not an error of the library
            return
        for repo in info.repos:
            if repo.repo_type != "model":
                continue
            for revision in repo.revisions:
                snapshot = Path(revision.snapshot_path)
                for fmt, p, files in self._models_in(snapshot):
                    quant = quant_from_name(p.name) if fmt == "gguf" else None
                    entry_id = f"hf-cache:{repo.repo_id}" + (f":{quant or p.name}" if fmt == "gguf" else "")
                    self._reference(fmt, p, files, source="hf-cache", repo_id=repo.repo_id,
                                    commit=revision.commit_hash, entry_id=entry_id)

    # -- reading -----------------------------------------------------------------------------------------
    def entries(self, refresh: bool = True) -> list[LibraryEntry]:
        if refresh:
            self.scan()
        with closing(self._connect()) as conn:
            return [self._entry(r) for r in conn.execute("SELECT * FROM models ORDER BY added_at, id")]

    def matches(self, key: str, prefixes: bool = True) -> list[LibraryEntry]:
        """The models ``key`` may name, as a user names one (the one rule for every command that takes a MODEL):
        what `quantdesk ls` prints (its id), its name, ``OWNER/REPO`` (with ``:QUANT`` where the library holds several
        quants of that repo) or its path; else a prefix of its id, name or repo. An id is matched as written, the
        others without regard to case. The exact names first: one that several models share (a repo with several
        quants) lists them all; only then prefixes (unless ``prefixes`` is False). A name no model has is looked up
        again after a scan (the HF cache, the watched folders), as `quantdesk ls` scans before listing."""
        for refresh in (False, True):
            entries = self.entries(refresh=refresh)
            found = [e for e in entries if e.id == key] or _named(entries, key, prefixes)
            if found:
                return found
        return []

    def find(self, key: str) -> LibraryEntry:
        found = self.matches(key)
        if len(found) == 1:
            return found[0]
        if found:
            raise ambiguous(key, found)
        raise LibraryError(f"No model {key!r} in the library.", "see the list with `quantdesk ls`")

    def remove(self, key: str) -> tuple[LibraryEntry, int]:
        """Remove a model; returns it and the bytes freed (0 for a reference: its files stay where they are)."""
        entry = self.find(key)
        freed = 0
        if entry.owned:
            folder = entry_folder(entry)
            for f in entry.files:
                target = folder / f["path"]
                if target.is_file() and target.resolve().is_relative_to(self.root.resolve()):
                    freed += target.stat().st_size
                    target.unlink()
            self._prune_empty(folder)
        with closing(self._connect()) as conn, conn:
            conn.execute("DELETE FROM models WHERE id = ?", (entry.id,))
        return entry, freed

    def _prune_empty(self, folder: Path) -> None:
        root = self.root.resolve()
        current = folder.resolve()
        while current != root and current.is_relative_to(root) and current.is_dir():
            if any(current.iterdir()):
                break
            current.rmdir()
            current = current.parent

    def disk_usage(self) -> dict[str, Any]:
        entries = self.entries(refresh=False)
        self.root.mkdir(parents=True, exist_ok=True)
        usage = shutil.disk_usage(self.root)
        return {"models_dir": str(self.root),
                "owned_bytes": sum(e.size for e in entries if e.owned),
                "referenced_bytes": sum(e.size for e in entries if not e.owned),
                "free_bytes": usage.free, "total_bytes": usage.total, "models": len(entries)}
