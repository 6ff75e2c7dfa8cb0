"""Resumable, verified downloads from the Hub (Qt-free): one planned request (app.hub.plan) to the end.

huggingface_hub 2.4 gives us the URLs (``hf_hub_url``) and auth headers (both through app.hub.config) and its
shared httpx2 session; the transfer is ours, because its own downloader restarts from zero
in every new process, has no cancel and checks only the size.

How a pull runs, once planned:
1. Free disk is checked against what is still missing.
2. Each file streams into ``<staging>/files/<path>.part``. A partial left by a pause, a crash or Ctrl-C resumes
   with ``Range: bytes=N-`` (after hashing the N bytes already there); a reply that is not a matching 206 starts
   the file over. Network errors, 5xx and stalls (no byte for ``stall_timeout`` s) retry with exponential
   backoff; 429 waits for its Retry-After. Cancel is a flag checked between chunks, and it also shuts the socket
   down so a blocked read returns at once.
3. Every file is verified: LFS files by the Hub's sha256, small files by their git blob id (sha1 of
   ``blob <size>\\0<content>``, the Hub's ETag for them), both hashed while writing.
   An update's GGUF that differs from the installed one only in its chat template is rebuilt from the new header
   (read by Range) and the installed tensor data, then verified the same way.
4. Only when every file of the set is verified are they moved into the models folder (one ``os.replace`` of the
   staging folder when the target does not exist yet, else one per file: an update's files replace the old ones,
   whose inodes stay valid for a model loaded from them) and registered in the library, last.

A queue of them, one at a time on a worker thread, is app.hub.download_queue.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.hub import config
from app.hub.errors import (AccessDenied, DownloadError, DownloadPaused, HubError, IntegrityError, NotEnoughDiskSpace,
                            UnsafeFileName)
from app.hub.listing import RemoteFile, RepoListing
from app.hub.plan import DownloadRequest, Plan, check_relative_name, plan_download
from app.settings import models_dir

if TYPE_CHECKING:
    import httpx2  # huggingface_hub's HTTP client, imported where a download starts

CHUNK_SIZE = 4 * 1024 * 1024
STAGING_DIR_NAME = ".downloads"
SPLICE_MAX_GROWTH = 1 << 20  # a chat template is kilobytes: a GGUF whose size moved more is not a template fix


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
    projector: str = ""  # the vision projector fetched with the model (a path in the repo), "" for none
    other_projectors: tuple[str, ...] = ()  # the repo's other projectors for it: the choice the pull made


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

def _inside(root: Path, name: str) -> Path:
    target = (root / name).resolve()
    if not target.is_relative_to(root.resolve()):
        raise UnsafeFileName(f"Refused the file name {name!r}: it resolves outside {root}.",
                             "nothing was downloaded")
    return target


def model_folder(repo_id: str, revision: str = "main", root: Path | None = None) -> Path:
    """Where a download of ``repo_id`` goes: ``root`` (default: the library's models folder)/owner/name."""
    owner, _, name = repo_id.partition("/")
    folder = (root or models_dir()) / check_relative_name(owner) / check_relative_name(name)
    if revision not in ("main", "") and not re.fullmatch(r"[0-9a-f]{40}", revision):
        folder = folder.with_name(f"{folder.name}@{revision.replace('/', '_')}")
    return folder


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

    def update(self, data: bytes) -> None:
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

    def __init__(self, fh: BinaryIO, verifier: _Verifier) -> None:
        self._fh = fh
        self._verifier = verifier
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=8)  # None: no more chunks
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
    ``pause()`` may be called from any thread. ``root`` puts the verified files in a folder of another home instead
    (the quant lab's cache), where the library neither lists nor registers them."""

    def __init__(self, request: DownloadRequest, on_progress: ProgressCallback | None = None,
                 settings: Settings | None = None, listing: RepoListing | None = None,
                 root: Path | None = None) -> None:
        self.request = request
        self.root = root
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
        # beside the target, on its disk: the verified set moves in with one rename
        self.staging = (root or models_dir()) / STAGING_DIR_NAME / request.key()

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
                self._deliver(self._on_progress, state, file, message)

    def _deliver(self, on_progress: ProgressCallback, state: str, file: str, message: str) -> None:
        meter = self._meter
        done, total = (meter.done, meter.total) if meter else (0, 0)
        speed = meter.speed() if meter else 0.0
        eta = (total - done) / speed if speed > 0 else None
        on_progress(Progress(state=state, repo_id=self.request.repo_id, file=file, done=done, total=total,
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
        target = model_folder(plan.request.repo_id, plan.revision, self.root)
        files_dir = self.staging / "files"
        for remote in plan.files:  # names were checked; this also refuses symlink tricks in the folders
            _inside(target, remote.path)
            _inside(files_dir, remote.path)
        on_disk = {f.path: self._part(f).stat().st_size if self._part(f).exists() else
                   (f.size if (files_dir / f.path).exists() else 0) for f in plan.files}
        resumed = sum(min(v, f.size) for f, v in zip(plan.files, on_disk.values(), strict=True))
        self._check_disk(plan, resumed)
        meter = self._meter = _Meter(plan.total_bytes, 0)
        for remote in plan.files:
            self._check_stop()
            self._fetch(plan, remote, meter)
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
        write_text_atomic(job, json.dumps(plan.to_json(), indent=1))
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

    def _fetch(self, plan: Plan, remote: RemoteFile, meter: _Meter) -> None:
        final = self.staging / "files" / remote.path
        if final.exists() and final.stat().st_size == remote.size:
            meter.add(remote.size)  # verified in an earlier run (only verified files get their name)
            return
        part = self._part(remote)
        part.parent.mkdir(parents=True, exist_ok=True)
        if plan.request.update_of and self._splice_new_header(plan, remote, part, final):
            meter.add(remote.size)
            return
        url = config.file_url(plan.request.repo_id, remote.path, plan.commit)
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
            meter.add(have - counted)
            counted = have
            try:
                if have < remote.size:
                    self._emit("downloading", remote.path)
                    counted += self._stream(url, part, remote, have, verifier, meter)
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

    def _splice_new_header(self, plan: Plan, remote: RemoteFile, part: Path, final: Path) -> bool:
        """An update of a GGUF that differs from the installed one only in its chat template (the usual upstream
        fix) fetches just the new header by Range and puts the installed file's tensor data after it; the result
        is verified by the Hub's sha256 like any download. False (nothing kept) when the file is not such a
        change, or the result does not verify (the weights changed too): then the whole file is fetched."""
        from app.hub import remote as hub_remote
        from app.models.metadata import read_gguf_header_bytes

        installed = model_folder(plan.request.repo_id, plan.revision) / remote.path
        if not remote.sha256 or not remote.path.lower().endswith(".gguf") or not installed.is_file() \
                or abs(remote.size - installed.stat().st_size) > SPLICE_MAX_GROWTH:
            return False
        repo_id = plan.request.repo_id
        try:
            ours = read_gguf_header_bytes(installed)
            theirs = hub_remote.read_remote_gguf_bytes(repo_id, remote.path, plan.commit)
            if not ours.only_chat_template_differs(theirs, installed.stat().st_size, remote.size):
                return False
            self._emit("downloading", remote.path, "the new header only: the weights are the installed ones")
            header = hub_remote.fetch_range(config.file_url(repo_id, remote.path, plan.commit), 0, theirs.data_start)
        except (QuantDeskError, OSError):  # a header that cannot be read: the whole file is fetched, errors told
            return False
        verifier = _Verifier(remote)
        try:
            with open(part, "wb") as out, open(installed, "rb") as old:
                for chunk in self._header_then_data(header, old, ours.data_start):
                    out.write(chunk)
                    verifier.update(chunk)
        except OSError as exc:
            part.unlink(missing_ok=True)
            raise DownloadError(f"Cannot write {part}: {exc.strerror or exc}.",
                                "free some space, then run the update again") from None
        self._emit("verifying", remote.path)
        if verifier.problem() is None:
            os.replace(part, final)
            return True
        part.unlink()
        return False

    def _header_then_data(self, header: bytes, old: BinaryIO, data_start: int) -> Iterator[bytes]:
        yield header
        old.seek(data_start)
        while chunk := old.read(CHUNK_SIZE):
            self._check_stop()
            yield chunk

    def _hash_existing(self, part: Path, remote: RemoteFile, have: int) -> _Verifier:
        verifier = _Verifier(remote)
        if have:
            self._emit("verifying", remote.path, f"checking the {have:,} bytes already downloaded")
            with open(part, "rb") as fh:
                while chunk := fh.read(CHUNK_SIZE):
                    self._check_stop()
                    verifier.update(chunk)
        return verifier

    def _stream(self, url: str, part: Path, remote: RemoteFile, have: int, verifier: _Verifier, meter: _Meter) -> int:
        """Fetch bytes ``have``.. into ``part``; returns how many arrived. Raises _Retry on what can heal."""
        import httpx2
        from huggingface_hub import get_session

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
                        # no chunk_size: httpx would hold back up to a whole chunk on error
                        for chunk in response.iter_raw():
                            if self._stop.is_set():
                                break
                            if have + received + len(chunk) > remote.size:
                                raise _Retry(f"the server sent more than the {remote.size:,} bytes of {remote.path}",
                                             restart=True)
                            sink.put(chunk)
                            received += len(chunk)
                            meter.add(len(chunk))
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

    def _hold_socket(self, response: httpx2.Response | None) -> None:
        sock = None
        if response is not None:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
        with self._sock_lock:
            self._sock = sock
        if sock is not None and self._stop.is_set():
            self._interrupt_socket()

    def _check_response(self, response: httpx2.Response, remote: RemoteFile, have: int) -> None:
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
        if self.root is None:
            library.register_download(plan, target, path)
        shutil.rmtree(self.staging, ignore_errors=True)
        return DownloadResult(repo_id=plan.request.repo_id, commit=plan.commit, files=plan.files, path=path,
                              folder=target, resumed_bytes=resumed, projector=plan.projector,
                              other_projectors=plan.other_projectors)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def download(request: DownloadRequest, on_progress: ProgressCallback | None = None,
             settings: Settings | None = None, listing: RepoListing | None = None,
             root: Path | None = None) -> DownloadResult:
    return Downloader(request, on_progress, settings, listing, root).run()


def partial_downloads() -> list[dict[str, Any]]:
    """Paused or interrupted pulls found in the staging folder (for 'resume' lists)."""
    out: list[dict[str, Any]] = []
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
