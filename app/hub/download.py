"""Resumable, verified downloads from the Hub (Qt-free).

huggingface_hub 2.4 gives us the URLs (``hf_hub_url``), the metadata (``model_info(files_metadata=True)``:
sizes, LFS sha256, the commit), auth headers and its shared httpx2 session; the transfer is ours, because its
own downloader restarts from zero in every new process, has no cancel and checks only the size.

How a pull runs:
1. Names are checked before any request (``check_relative_name``): ``../``, absolute, drive and UNC paths and
   backslashes are refused.
2. The revision is resolved to a commit hash once; every file is fetched from that commit (pinned), also when a
   pull resumes after a restart: the job's sidecar (``job.json`` in its staging folder) remembers it.
3. Free disk is checked against what is still missing.
4. Each file streams into ``<staging>/files/<path>.part``. A partial left by a pause, a crash or Ctrl-C resumes
   with ``Range: bytes=N-`` (after hashing the N bytes already there); a reply that is not a matching 206 starts
   the file over. Network errors, 5xx and stalls (no byte for ``stall_timeout`` s) retry with exponential
   backoff; 429 waits for its Retry-After. Cancel is a flag checked between chunks, and it also shuts the socket
   down so a blocked read returns at once.
5. Every file is verified: LFS files by the Hub's sha256, small files by their git blob id (sha1 of
   ``blob <size>\\0<content>``, the Hub's ETag for them), both hashed while writing.
6. Only when every file of the set is verified are they moved into the models folder (one ``os.replace`` of the
   staging folder when the target does not exist yet) and registered in the library.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import queue
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path

from app.settings import models_dir
from app.hub import config
from app.hub.errors import (AccessDenied, DownloadError, DownloadPaused, HubError, IntegrityError,
                            NotEnoughDiskSpace, UnsafeFileName)
from app.hub.formats import exl_branches, exl_quant_of, is_bare_bit_rate, quant_from_name
from app.hub.listing import RemoteFile, RepoListing

CHUNK_SIZE = 4 * 1024 * 1024
STAGING_DIR_NAME = ".downloads"


@dataclass(frozen=True)
class DownloadRequest:
    repo_id: str
    revision: str = "main"
    quant: str | None = None
    files: tuple[str, ...] = ()

    def key(self) -> str:
        text = "|".join([self.repo_id, self.revision, (self.quant or "").upper(), ",".join(sorted(self.files))])
        owner_name = self.repo_id.replace("/", "--")
        return f"{owner_name}--{hashlib.sha1(text.encode()).hexdigest()[:12]}"


@dataclass
class Plan:
    request: DownloadRequest
    commit: str
    files: list[RemoteFile]
    repo_format: str = "gguf"
    revision: str = ""  # the branch the files come from: the request's, or the one an EXL --quant names

    def __post_init__(self) -> None:
        self.revision = self.revision or self.request.revision

    def to_json(self) -> dict:
        return {"request": asdict(self.request), "commit": self.commit, "repo_format": self.repo_format,
                "revision": self.revision, "files": [asdict(f) for f in self.files]}

    @classmethod
    def from_json(cls, data: dict) -> Plan:
        req = data["request"]
        request = DownloadRequest(repo_id=req["repo_id"], revision=req["revision"], quant=req.get("quant"),
                                  files=tuple(req.get("files") or ()))
        return cls(request=request, commit=data["commit"], repo_format=data.get("repo_format", "gguf"),
                   revision=data.get("revision", ""), files=[RemoteFile(**f) for f in data["files"]])

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class Progress:
    state: str  # resolving | downloading | retrying | verifying | installing | done | paused | failed
    repo_id: str
    file: str = ""
    done: int = 0
    total: int = 0
    speed: float = 0.0  # bytes per second, smoothed
    eta: float | None = None  # seconds
    message: str = ""

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


@dataclass
class DownloadResult:
    repo_id: str
    commit: str
    files: list[RemoteFile]
    path: Path  # the model: the GGUF (first shard) or the folder
    folder: Path
    resumed_bytes: int = 0  # bytes that were already on disk from an earlier run


@dataclass
class Settings:
    stall_timeout: float = 30.0  # seconds without a byte before the connection is dropped and retried
    connect_timeout: float = 15.0
    max_retries: int = 8  # consecutive failures without progress
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    max_retry_after: float = 300.0
    integrity_retries: int = 1  # a file that fails its hash is fetched again this often before giving up
    disk_reserve: int = 64 * 1024 * 1024  # kept free beyond the download
    progress_interval: float = 0.1


ProgressCallback = Callable[[Progress], None]

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


def _inside(root: Path, name: str) -> Path:
    target = (root / name).resolve()
    if not target.is_relative_to(root.resolve()):
        raise UnsafeFileName(f"Refused the file name {name!r}: it resolves outside {root}.",
                             "nothing was downloaded")
    return target


def model_folder(repo_id: str, revision: str = "main") -> Path:
    owner, _, name = repo_id.partition("/")
    folder = models_dir() / check_relative_name(owner) / check_relative_name(name)
    if revision not in ("main", "") and not re.fullmatch(r"[0-9a-f]{40}", revision):
        folder = folder.with_name(f"{folder.name}@{revision.replace('/', '_')}")
    return folder


# ----------------------------------------------------------------------------------------------- planning

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
    return Plan(request=request, commit=commit, files=chosen, repo_format=listing.format, revision=revision)


def exl_branch_for(request: DownloadRequest, branches: list[str], exl_hint: str = "") -> str:
    """The branch holding the bit rate ``request.quant`` names: EXL2/EXL3 repos keep one quant per branch. An
    exact branch name wins; otherwise the bits (and head bits, when given) must match one branch alone. Branches
    named by a bare number (``6_5``) count where ``exl_hint`` (from ``exl_format_hint``) says the repo is EXL."""
    quants = exl_branches(request.repo_id, branches, exl_hint, bare_numbers=bool(exl_hint))
    wanted = exl_quant_of(request.quant or "", "", bare_numbers=True)
    matches = [b for b in quants if b.lower() == (request.quant or "").lower()] or [
        b for b, q in quants.items() if q.bits_per_weight == wanted.bits_per_weight
        and wanted.head_bits in (None, q.head_bits)]
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
    ggufs = [f for f in listing if f.path.lower().endswith(".gguf")]
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


# ---------------------------------------------------------------------------------------------- transfer

class _Retry(Exception):
    def __init__(self, reason: str, *, progressed: bool = False, retry_after: float | None = None,
                 restart: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.progressed = progressed
        self.retry_after = retry_after
        self.restart = restart  # the partial is unusable: start the file over


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class _Verifier:
    """Hashes what is written: sha256 for LFS files, the git blob sha1 for small ones."""

    def __init__(self, remote: RemoteFile) -> None:
        self.remote = remote
        self.length = 0
        if remote.sha256:
            self._hash = hashlib.sha256()
        else:
            self._hash = hashlib.sha1(b"blob %d\0" % remote.size)

    def update(self, data) -> None:
        self._hash.update(data)
        self.length += len(data)

    def problem(self) -> str | None:
        if self.length != self.remote.size:
            return f"has {self.length:,} bytes, the Hub says {self.remote.size:,}"
        expected = self.remote.sha256 or self.remote.blob_id
        if expected and self._hash.hexdigest() != expected.lower():
            kind = "sha256" if self.remote.sha256 else "git blob id"
            return f"{kind} {self._hash.hexdigest()[:16]}… does not match the Hub's {expected[:16]}…"
        return None


class _Sink:
    """Writes and hashes chunks on a second thread, so hashing overlaps with the network read (hashlib and file
    writes release the GIL)."""

    def __init__(self, fh, verifier: _Verifier) -> None:
        self._fh = fh
        self._verifier = verifier
        self._queue: queue.Queue = queue.Queue(maxsize=8)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="download-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._fh.write(chunk)
                    self._verifier.update(chunk)
                except BaseException as exc:  # noqa: BLE001 - handed back to the reading thread
                    self._error = exc

    def put(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(chunk)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._fh.flush()
        if self._error is not None:
            raise self._error


class _Meter:
    def __init__(self, total: int, done: int) -> None:
        self.total = total
        self.done = done
        self._window: list[tuple[float, int]] = [(time.monotonic(), done)]

    def add(self, n: int) -> None:
        self.done += n

    def speed(self) -> float:
        now = time.monotonic()
        self._window.append((now, self.done))
        while len(self._window) > 2 and now - self._window[0][0] > 3.0:
            self._window.pop(0)
        t0, d0 = self._window[0]
        return (self.done - d0) / (now - t0) if now > t0 else 0.0


class Downloader:
    """Runs one request to the end: a verified model in the library, or an exception. ``cancel()`` /
    ``pause()`` may be called from any thread."""

    def __init__(self, request: DownloadRequest, on_progress: ProgressCallback | None = None,
                 settings: Settings | None = None, listing: RepoListing | None = None) -> None:
        self.request = request
        self.settings = settings or Settings()
        self._listing = listing  # the repo, when the caller listed it already
        self._on_progress = on_progress
        self._stop = threading.Event()
        self._discard = False
        self._sock_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._state, self._file = "queued", ""
        self._emit_lock = threading.RLock()
        self._meter: _Meter | None = None
        self.staging = models_dir() / STAGING_DIR_NAME / request.key()

    # -- control -----------------------------------------------------------------------------------------
    def pause(self) -> None:
        self._stop.set()
        self._interrupt_socket()

    def cancel(self) -> None:
        """Stop and throw the partial files away."""
        self._discard = True
        self.pause()

    def _interrupt_socket(self) -> None:
        with self._sock_lock:
            if self._sock is not None:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on a stalled server
                except OSError:
                    pass

    def _check_stop(self) -> None:
        if self._stop.is_set():
            raise DownloadPaused(
                f"Download of {self.request.repo_id} cancelled." if self._discard else
                f"Download of {self.request.repo_id} paused; the partial files are kept in {self.staging}.",
                "" if self._discard else "run the same pull again to resume where it stopped")

    def _emit(self, state: str, file: str = "", message: str = "") -> None:
        with self._emit_lock:  # the pump thread and the job thread take turns; observers see events in order
            self._state, self._file = state, file
            if self._on_progress is not None:
                self._deliver(state, file, message)

    def _deliver(self, state: str, file: str, message: str) -> None:
        meter = self._meter
        done, total = (meter.done, meter.total) if meter else (0, 0)
        speed = meter.speed() if meter else 0.0
        eta = (total - done) / speed if speed > 0 else None
        self._on_progress(Progress(state=state, repo_id=self.request.repo_id, file=file, done=done, total=total,
                                   speed=speed, eta=eta, message=message))

    # -- the job -----------------------------------------------------------------------------------------
    def _pump(self, finished: threading.Event) -> None:
        """Progress at a steady pace while bytes flow (and while they do not: a stall shows as falling speed)."""
        while not finished.wait(self.settings.progress_interval):
            with self._emit_lock:
                if self._state == "downloading":
                    self._emit("downloading", self._file)

    def run(self) -> DownloadResult:
        finished = threading.Event()
        pump = threading.Thread(target=self._pump, args=(finished,), name="download-progress", daemon=True)
        pump.start()
        try:
            return self._run()
        except DownloadPaused:
            if self._discard:
                shutil.rmtree(self.staging, ignore_errors=True)
            self._emit("paused", message="cancelled" if self._discard else "paused")
            raise
        except BaseException as exc:
            self._emit("failed", message=str(exc))
            raise
        finally:
            finished.set()
            pump.join()

    def _run(self) -> DownloadResult:
        self._emit("resolving")
        plan = self._load_or_make_plan()
        target = model_folder(plan.request.repo_id, plan.revision)
        files_dir = self.staging / "files"
        for remote in plan.files:  # names were checked; this also refuses symlink tricks in the folders
            _inside(target, remote.path)
            _inside(files_dir, remote.path)
        on_disk = {f.path: self._part(f).stat().st_size if self._part(f).exists() else
                   (f.size if (files_dir / f.path).exists() else 0) for f in plan.files}
        resumed = sum(min(v, f.size) for f, v in zip(plan.files, on_disk.values()))
        self._check_disk(plan, resumed)
        self._meter = _Meter(plan.total_bytes, 0)
        for remote in plan.files:
            self._check_stop()
            self._fetch(plan, remote)
        self._emit("installing")
        result = self._install(plan, target, resumed)
        self._emit("done", message=str(result.path))
        return result

    def _load_or_make_plan(self) -> Plan:
        job = self.staging / "job.json"
        if job.exists():
            try:
                plan = Plan.from_json(json.loads(job.read_text(encoding="utf-8")))
                if plan.request == self.request:
                    for remote in plan.files:
                        check_relative_name(remote.path)
                    config.require_online(f"download {self.request.repo_id}")
                    return plan  # pinned to the commit the first run resolved
            except (OSError, ValueError, KeyError, TypeError):
                pass
            shutil.rmtree(self.staging, ignore_errors=True)  # unreadable job: start clean
        plan = plan_download(self.request, self._listing)
        self.staging.mkdir(parents=True, exist_ok=True)
        tmp = job.with_suffix(".tmp")
        tmp.write_text(json.dumps(plan.to_json(), indent=1), encoding="utf-8")
        os.replace(tmp, job)
        return plan

    def _check_disk(self, plan: Plan, already: int) -> None:
        needed = plan.total_bytes - already
        free = shutil.disk_usage(self.staging).free
        if needed + self.settings.disk_reserve > free:
            raise NotEnoughDiskSpace(
                f"Not enough disk space for {plan.request.repo_id}: need {_gb(needed)}, "
                f"{_gb(free)} free on {self.staging.anchor or self.staging}"
                + (f" ({_gb(self.settings.disk_reserve)} kept in reserve)" if self.settings.disk_reserve else "") + ".",
                "free some space (quantdesk rm MODEL) or point QUANTDESK_MODELS_DIR at a bigger disk")

    def _part(self, remote: RemoteFile) -> Path:
        return self.staging / "files" / (remote.path + ".part")

    def _fetch(self, plan: Plan, remote: RemoteFile) -> None:
        final = self.staging / "files" / remote.path
        if final.exists() and final.stat().st_size == remote.size:
            self._meter.add(remote.size)  # verified in an earlier run (only verified files get their name)
            return
        part = self._part(remote)
        part.parent.mkdir(parents=True, exist_ok=True)
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(plan.request.repo_id, remote.path, revision=plan.commit, endpoint=config.endpoint())
        failures = integrity_failures = 0
        verifier: _Verifier | None = None
        counted = 0  # bytes of this file already added to the meter
        while True:
            self._check_stop()
            have = part.stat().st_size if part.exists() else 0
            if have > remote.size:
                part.unlink()
                have = 0
            if verifier is None or verifier.length != have:
                verifier = self._hash_existing(part, remote, have)
            self._meter.add(have - counted)
            counted = have
            try:
                if have < remote.size:
                    self._emit("downloading", remote.path)
                    counted += self._stream(url, part, remote, have, verifier)
            except _Retry as retry:
                if retry.restart:
                    part.unlink(missing_ok=True)
                failures = 0 if retry.progressed else failures + 1
                if failures > self.settings.max_retries:
                    raise DownloadError(f"Gave up on {remote.path} after {failures} failed attempts: {retry.reason}.",
                                        "the partial file is kept; run the same pull again to resume") from None
                delay = retry.retry_after if retry.retry_after is not None else min(
                    self.settings.backoff_max, self.settings.backoff_base * 2 ** max(0, failures - 1))
                delay = min(delay, self.settings.max_retry_after)
                self._emit("retrying", remote.path, f"{retry.reason}; retrying in {delay:.1f} s")
                self._stop.wait(delay)
                continue
            self._emit("verifying", remote.path)
            problem = verifier.problem()
            if problem is None:
                os.replace(part, final)
                return
            part.unlink(missing_ok=True)
            verifier = None
            integrity_failures += 1
            if integrity_failures > self.settings.integrity_retries:
                raise IntegrityError(f"{remote.path} from {plan.request.repo_id} failed verification: {problem}. "
                                     "It was deleted and nothing was installed.",
                                     "the server or a proxy is sending a damaged file; try again later")
            self._emit("retrying", remote.path, f"verification failed ({problem}); downloading again")

    def _hash_existing(self, part: Path, remote: RemoteFile, have: int) -> _Verifier:
        verifier = _Verifier(remote)
        if have:
            self._emit("verifying", remote.path, f"checking the {have:,} bytes already downloaded")
            with open(part, "rb") as fh:
                while chunk := fh.read(CHUNK_SIZE):
                    self._check_stop()
                    verifier.update(chunk)
        return verifier

    def _stream(self, url: str, part: Path, remote: RemoteFile, have: int, verifier: _Verifier) -> int:
        """Fetch bytes ``have``.. into ``part``; returns how many arrived. Raises _Retry on what can heal."""
        import httpx2
        from huggingface_hub.utils import get_session

        headers = config.auth_headers() | {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        timeout = httpx2.Timeout(connect=self.settings.connect_timeout, read=self.settings.stall_timeout,
                                 write=self.settings.stall_timeout, pool=self.settings.connect_timeout)
        received = 0
        try:
            with get_session().stream("GET", url, headers=headers, timeout=timeout) as response:
                self._hold_socket(response)
                self._check_stop()
                self._check_response(response, remote, have)
                with open(part, "ab") as fh:
                    sink = _Sink(fh, verifier)
                    try:
                        for chunk in response.iter_raw():  # no chunk_size: httpx would hold back up to a whole chunk on error
                            if self._stop.is_set():
                                break
                            if have + received + len(chunk) > remote.size:
                                raise _Retry(f"the server sent more than the {remote.size:,} bytes of {remote.path}",
                                             restart=True)
                            sink.put(chunk)
                            received += len(chunk)
                            self._meter.add(len(chunk))
                    finally:
                        sink.close()
        except httpx2.TransportError as exc:
            self._check_stop()
            kind = "stalled" if isinstance(exc, httpx2.ReadTimeout) else "network error"
            raise _Retry(f"{kind} ({type(exc).__name__})", progressed=received > 0) from None
        except OSError as exc:
            self._check_stop()
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                kept = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"The disk is full: {remote.path} stopped at {kept:,} of {remote.size:,} bytes, which are kept.",
                    "free some space, then resume: Resume in Downloads, or the same `quantdesk pull` again") from None
            raise DownloadError(f"Cannot write {part}: {exc}") from None
        finally:
            self._hold_socket(None)
        self._check_stop()
        if have + received < remote.size:
            raise _Retry(f"the connection closed after {have + received:,} of {remote.size:,} bytes",
                         progressed=received > 0)
        return received

    def _hold_socket(self, response) -> None:
        sock = None
        if response is not None:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
        with self._sock_lock:
            self._sock = sock
        if sock is not None and self._stop.is_set():
            self._interrupt_socket()

    def _check_response(self, response, remote: RemoteFile, have: int) -> None:
        status = response.status_code
        if status == 429:
            raise _Retry("the Hub asked us to slow down (429)",
                         retry_after=parse_retry_after(response.headers.get("Retry-After")))
        if status >= 500 or status == 408:
            raise _Retry(f"server error {status}", retry_after=parse_retry_after(response.headers.get("Retry-After")))
        if status in (401, 403):
            raise AccessDenied(f"The Hub refused {remote.path} of {self.request.repo_id} ({status}): the repo is gated "
                               "or private.",
                               "accept the terms on the model page, then set HF_TOKEN or run `quantdesk login`")
        if status == 416:
            raise _Retry("the server refused to resume (416)", restart=True)
        if status >= 400:
            raise HubError(f"The Hub answered {status} for {remote.path} of {self.request.repo_id}.")
        content_type = response.headers.get("Content-Type", "").lower()
        if content_type.startswith("text/html") and not remote.path.lower().endswith((".html", ".htm")):
            raise _Retry("the server sent a web page instead of the file")
        length = response.headers.get("Content-Length")
        if have and status == 200:
            raise _Retry("the server ignored the Range request; starting the file over", restart=True)
        if status == 206:
            match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", response.headers.get("Content-Range", "").strip())
            if not match or int(match.group(1)) != have or match.group(3) not in (str(remote.size), "*"):
                raise _Retry("the server answered a different byte range; starting the file over", restart=True)
        elif status != 200:
            raise HubError(f"Unexpected answer {status} for {remote.path}.")
        if length is not None and length.isdigit() and int(length) != remote.size - have:
            raise _Retry(f"the server offered {int(length):,} bytes where {remote.size - have:,} were due")

    def _install(self, plan: Plan, target: Path, resumed: int) -> DownloadResult:
        files_dir = self.staging / "files"
        for remote in plan.files:  # all verified before anything moves
            if not (files_dir / remote.path).is_file():
                raise DownloadError(f"{remote.path} is missing from the staging folder {files_dir}.")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            os.replace(files_dir, target)  # the whole set appears at once
        else:
            for remote in plan.files:
                dest = target / remote.path
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(files_dir / remote.path, dest)
        from app.hub.library import Library

        library = Library()
        path = library.model_path_for(target, plan)
        library.register_download(plan, target, path)
        shutil.rmtree(self.staging, ignore_errors=True)
        return DownloadResult(repo_id=plan.request.repo_id, commit=plan.commit, files=plan.files, path=path,
                              folder=target, resumed_bytes=resumed)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def download(request: DownloadRequest, on_progress: ProgressCallback | None = None,
             settings: Settings | None = None, listing: RepoListing | None = None) -> DownloadResult:
    return Downloader(request, on_progress, settings, listing).run()


def partial_downloads() -> list[dict]:
    """Paused or interrupted pulls found in the staging folder (for 'resume' lists)."""
    out = []
    root = models_dir() / STAGING_DIR_NAME
    for job in sorted(root.glob("*/job.json")):
        try:
            plan = Plan.from_json(json.loads(job.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        have = sum(p.stat().st_size for p in (job.parent / "files").rglob("*") if p.is_file())
        out.append({"repo_id": plan.request.repo_id, "revision": plan.request.revision, "commit": plan.commit,
                    "quant": plan.request.quant, "files": [f.path for f in plan.files],
                    "have": have, "total": plan.total_bytes, "staging": str(job.parent)})
    return out


# ------------------------------------------------------------------------------------------------- queue

@dataclass
class DownloadTask:
    id: int
    request: DownloadRequest
    state: str = "queued"  # queued | running | paused | done | failed | cancelled
    progress: Progress | None = None
    result: DownloadResult | None = None
    error: BaseException | None = None
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)
    _runner: Downloader | None = field(default=None, repr=False)

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)


class DownloadManager:
    """A queue of downloads run one at a time on a worker thread. Observers get every Progress and every state
    change through ``on_progress(task)`` (called on the worker thread; a GUI adapter forwards it as a signal)."""

    def __init__(self, on_progress: Callable[[DownloadTask], None] | None = None,
                 settings: Settings | None = None) -> None:
        self._on_progress = on_progress
        self._settings = settings
        self._queue: queue.Queue[DownloadTask | None] = queue.Queue()
        self._lock = threading.Lock()
        self._tasks: list[DownloadTask] = []
        self._next_id = 1
        self._worker: threading.Thread | None = None

    @property
    def tasks(self) -> list[DownloadTask]:
        with self._lock:
            return list(self._tasks)

    def enqueue(self, request: DownloadRequest) -> DownloadTask:
        with self._lock:
            task = DownloadTask(id=self._next_id, request=request)
            self._next_id += 1
            self._tasks.append(task)
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="download-queue", daemon=True)
                self._worker.start()
        self._queue.put(task)
        self._notify(task)
        return task

    def pause(self, task: DownloadTask) -> None:
        self._stop(task, discard=False)

    def cancel(self, task: DownloadTask) -> None:
        self._stop(task, discard=True)

    def resume(self, task: DownloadTask) -> DownloadTask:
        """Queue a paused or failed task again (its partial files are picked up)."""
        if task.state in ("paused", "failed"):
            task.state, task.error = "queued", None
            task._finished.clear()
            self._queue.put(task)
            self._notify(task)
        return task

    def _stop(self, task: DownloadTask, discard: bool) -> None:
        with self._lock:
            runner = task._runner
            if task.state == "queued":
                task.state = "cancelled" if discard else "paused"
                task._finished.set()
        if runner is not None:
            runner.cancel() if discard else runner.pause()
        elif discard:
            shutil.rmtree(models_dir() / STAGING_DIR_NAME / task.request.key(), ignore_errors=True)
        self._notify(task)

    def shutdown(self, timeout: float = 5.0) -> None:
        for task in self.tasks:
            if task.state in ("queued", "running"):
                self.pause(task)
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join(timeout)

    def _notify(self, task: DownloadTask) -> None:
        if self._on_progress is not None:
            self._on_progress(task)

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            with self._lock:
                if task.state != "queued":
                    continue
                task.state = "running"
                task._runner = Downloader(task.request, lambda p, t=task: self._progress(t, p), self._settings)
            try:
                task.result = task._runner.run()
                task.state = "done"
            except DownloadPaused as exc:
                task.state = "cancelled" if task._runner._discard else "paused"
                task.error = exc
            except Exception as exc:  # noqa: BLE001 - the task carries the error to the UI
                task.state, task.error = "failed", exc
            finally:
                task._runner = None
                task._finished.set()
                self._notify(task)

    def _progress(self, task: DownloadTask, progress: Progress) -> None:
        task.progress = progress
        self._notify(task)
