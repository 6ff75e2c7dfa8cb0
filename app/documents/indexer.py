"""Indexing a collection: its folder scanned, new and changed files extracted, chunked and stored, deleted files'
chunks removed, and vectors for every chunk without one; in the background for the app (``Indexer``: one daemon
thread, Qt-free, like app/hub/download_queue.py), in the foreground for ``quantdesk docs index``
(``index_collection``).

Incremental: a file whose size and modification time are what the store has is not read again; one whose figures
changed but whose content hash did not only has its figures updated; each is counted (``IndexProgress``'s
``added``, ``changed``, ``unchanged``, ``removed``). File by file with bounded memory: one file's chunks at a time
(a file is at most ``max_bytes``, Settings' ``documents_max_file_mb``), vectors in batches. Never a stuck index: a
file that cannot be read (``extract.ExtractError``, deleted mid-index, anything else it raises) is a report line
and the index goes on; the scan's skipped files (too large, a symlink loop, past the file limit) are report lines.

Pause and resume: a pause is kept in the database, so a paused collection stays paused after a restart; a resumed
one goes on where it stopped, because what is stored is stored (the files indexed are unchanged the next time).

A watched folder is scanned again every ``watch_every_s`` seconds (polling): the same code on every platform and no
new dependency, network drives included (file-system notifications miss those, and Linux's inotify needs one watch
per folder, 8,192 by default on many systems, less than a large tree has); a scan of an unchanged folder is only
``stat`` calls.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.documents import chunk as chunking
from app.documents import extract
from app.documents.passages import DocumentsError, Embedder, Section
from app.documents.scan import FoundFile, Skipped, scan
from app.documents.store import DocumentStore, FileRow, ReportLine
from app.errors import QuantDeskError

log = logging.getLogger(__name__)

EMBED_BATCH = 32  # chunks embedded between two looks at a pause (one engine request of the embedder's)
PROGRESS_EVERY_S = 0.25  # at most this often a progress callback between files (the last one always)
SIZE_EVERY_S = 5.0  # the size on disk is a query over every chunk: asked again at most this often
DELETED = "deleted while it was being indexed"
DEFAULT_MAX_FILES = 100_000

ProgressCallback = Callable[["IndexProgress"], None]


@dataclass(frozen=True)
class IndexProgress:
    collection: str
    state: str  # "scanning" | "indexing" | "embedding" | "paused" | "done" | "failed"
    files_done: int = 0  # of files_total: unchanged files count as done (a resumed index starts where it stopped)
    files_total: int = 0
    pages: int = 0  # pages (PDF) read in this run
    chunks: int = 0  # chunks stored in this run
    failed: int = 0  # files of the collection that are report lines
    eta_s: float | None = None  # time left, from this run's rate (files' bytes, then chunks embedded); None: unknown
    current: str = ""  # the file being read
    size_bytes: int = 0  # the collection's size in the database
    bytes_done: int = 0
    bytes_total: int = 0
    embedded: int = 0  # chunks with a vector of the collection's model
    to_embed: int = 0  # chunks of the collection (what ``embedded`` counts towards)
    added: int = 0  # files read for the first time in this run
    changed: int = 0  # files read again because they changed
    unchanged: int = 0  # files not read: size and time (or content) as stored
    removed: int = 0  # files gone from the folder, their chunks removed
    problem: str = ""  # a sentence: why the index stopped (failed), or why there are no vectors (embedding model)

    @property
    def fraction(self) -> float:
        """How far along, 0..1: the files' bytes, then the chunks' vectors."""
        files = self.bytes_done / self.bytes_total if self.bytes_total else (
            self.files_done / self.files_total if self.files_total else 1.0)
        if not self.to_embed:
            return files
        return 0.7 * files + 0.3 * (self.embedded / self.to_embed)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Run:
    """One index of one collection: its figures and the progress callback's pace."""

    def __init__(self, store: DocumentStore, name: str, on_progress: ProgressCallback | None) -> None:
        self.store = store
        self.progress = IndexProgress(name, "scanning")
        self._on_progress = on_progress
        self._last_emit = 0.0
        self._last_size = -SIZE_EVERY_S
        self.started = time.monotonic()
        self.embed_after = 0  # the chunk id the vectors' pass got to
        self.waiting = 0  # chunks stored and not embedded yet in this run

    def emit(self, force: bool = False, *, throttle: bool = False, **changes: Any) -> None:
        """The progress changed: the listener hears of it (at most every PROGRESS_EVERY_S when ``throttle``: the
        scan's counts); the size on disk asked again when ``force`` or after SIZE_EVERY_S."""
        self.progress = replace(self.progress, **changes)
        now = time.monotonic()
        if now - self._last_size >= SIZE_EVERY_S or force:
            self._last_size = now
            try:
                self.progress = replace(self.progress, size_bytes=self.store.size_on_disk(self.progress.collection))
            except DocumentsError:
                pass  # the collection was removed meanwhile: the run ends at its next store call
        if self._on_progress is not None and (force or not throttle or now - self._last_emit >= PROGRESS_EVERY_S):
            self._last_emit = now
            try:
                self._on_progress(self.progress)
            except Exception:  # a listener's bug never stops the index
                log.exception("a documents progress listener failed")


def index_collection(store: DocumentStore, name: str, embedder: Embedder | None, *,
                     on_progress: ProgressCallback | None = None, should_stop: Callable[[], bool] = lambda: False,
                     max_bytes: int = extract.DEFAULT_MAX_BYTES, max_files: int = DEFAULT_MAX_FILES,
                     embedding: bool = True) -> IndexProgress:
    """Index ``name`` now, in this thread: scan, then each new or changed file read and stored, deleted files
    removed, then vectors for the chunks without one (``embedder``'s model must be the collection's). Stops between
    files or batches once ``should_stop()`` says so (state "paused"). Returns the last progress. Raises only what the
    store raises (``DocumentsError``: the database cannot be written, the collection is gone)."""
    run = _Run(store, name, on_progress)
    run.emit(force=True)
    collection = store.collection(name)
    known = store.files(name)

    # 1. the scan: what is there now (bounded: max_files, and each file's size)
    scanned = _scan(run, store, name, should_stop, max_files, max_bytes)
    if scanned is None:
        return _stopped(run)
    found, unreachable = scanned

    # 2. deleted files go; unchanged files are done already
    gone = [path for path in known if path not in found
            and not any(path == root or path.startswith(root.rstrip("/\\") + _sep(root)) for root in unreachable)]
    store.remove_files(name, gone)
    todo: list[tuple[FoundFile, FileRow | None]] = []
    unchanged_bytes = 0
    for path, item in found.items():
        row = known.get(path)
        if row is not None and row.state != "pending" and (row.size, row.mtime_ns) == (item.size, item.mtime_ns):
            unchanged_bytes += item.size
        else:
            todo.append((item, row))
    store.put_pending(name, [(str(f.path), f.size, f.mtime_ns) for f, row in todo if row is None])
    unchanged = len(found) - len(todo)
    bytes_total = sum(f.size for f in found.values())
    counts = store.collection(name)
    run.emit(force=True, state="indexing", files_total=len(found), files_done=unchanged, unchanged=unchanged,
             removed=len(gone), bytes_total=bytes_total, bytes_done=unchanged_bytes, failed=counts.failed,
             embedded=counts.embedded, to_embed=counts.chunks if collection.embed_model and embedding else 0)

    # 3. each new or changed file, one at a time
    model = collection.embed_model if embedding else None
    if embedder is not None and model is not None and embedder.model != model:
        run.emit(problem=f"the embedding model given ({Path(embedder.model).name}) is not the collection's "
                         f"({Path(model).name}): no vectors this time")
        embedder = None
    run_bytes = 0
    for item, row in todo:
        if should_stop():
            return _stopped(run)
        path = str(item.path)
        run.emit(current=path)
        done = _index_file(store, name, item, row, max_bytes, should_stop)
        if done is None:  # paused in the middle of a long file: it is read again from its start next time
            return _stopped(run)
        run_bytes += item.size
        stored = _file_done(run, item, row, done, run_bytes, bytes_total, embedding=model is not None)
        run.waiting += stored
        if embedder is not None and model is not None and run.waiting >= EMBED_BATCH:
            if not _embed(run, store, name, embedder, model, should_stop, final=False):
                if should_stop():
                    return _stopped(run)
                embedder = None  # the model failed: the text is indexed on, the vectors wait for the next run

    # 4. vectors for every chunk still without one (a new embedding model: all of them)
    if embedder is not None and model is not None:
        if not _embed(run, store, name, embedder, model, should_stop, final=True) and should_stop():
            return _stopped(run)
    elif model is not None and embedding and not run.progress.problem:
        counts = store.collection(name)
        if counts.embedded < counts.chunks:
            run.emit(problem=f"the embedding model {Path(model).name} is not available: text search only for now")
    counts = store.collection(name)
    run.emit(force=True, state="done", current="", eta_s=0.0, failed=counts.failed, embedded=counts.embedded,
             to_embed=counts.chunks if model else 0)
    return run.progress


def _scan(run: _Run, store: DocumentStore, name: str, should_stop: Callable[[], bool], max_files: int,
          max_bytes: int) -> tuple[dict[str, FoundFile], list[str]] | None:
    """The collection's files as they are now, by path, and its roots that cannot be read (their files are kept,
    not removed); what is skipped is stored with its reason. None when ``should_stop()`` said so meanwhile."""
    found: dict[str, FoundFile] = {}
    skipped: list[ReportLine] = []
    unreachable: list[str] = []  # roots that cannot be read: their files are kept, not removed
    for root in store.roots(name):
        for item in scan(root, max_files=max_files, max_bytes=max_bytes):
            if isinstance(item, Skipped):
                if item.path == root and not root.exists():  # an unplugged drive, a folder moved: kept until back
                    unreachable.append(str(root))
                    item = Skipped(root, f"{item.reason}: what was indexed from it is kept until it is back or "
                                         "removed from the collection")
                skipped.append(ReportLine(str(item.path), item.reason))
            else:
                found.setdefault(str(item.path), item)
            if should_stop():
                return None
            if len(found) % 500 == 0:
                run.emit(throttle=True, files_total=len(found), current=str(item.path))
    store.set_skipped(name, skipped)
    return found, unreachable


def _file_done(run: _Run, item: FoundFile, row: FileRow | None, done: tuple[int, int, int, bool], run_bytes: int,
               bytes_total: int, *, embedding: bool) -> int:
    """The progress after one file was indexed (``done``: its pages, chunks stored, failures and whether it was
    the same as before), with the time left at this run's pace; returns the chunks stored."""
    pages, stored, failed, same = done
    p = run.progress
    elapsed = time.monotonic() - run.started
    left = bytes_total - p.bytes_done - item.size
    eta = elapsed / run_bytes * left if run_bytes and elapsed > 0 else None
    was_failed = row is not None and row.state == "failed"  # counted in ``failed`` from the start
    run.emit(files_done=p.files_done + 1, bytes_done=p.bytes_done + item.size, pages=p.pages + pages,
             chunks=p.chunks + stored, failed=p.failed + failed - was_failed,
             added=p.added + (row is None or row.size < 0), changed=p.changed + (row is not None and row.size >= 0
                                                                                   and not same),
             unchanged=p.unchanged + same, eta_s=eta, to_embed=p.to_embed + stored if embedding else 0)
    return stored


def _sep(root: str) -> str:
    return "\\" if "\\" in root and "/" not in root else "/"


def _stopped(run: _Run) -> IndexProgress:
    run.emit(force=True, state="paused", current="", eta_s=None)
    return run.progress


class _Stopped(Exception):
    """A pause asked for while a file was read."""


def _stoppable(sections: Iterator[Section], should_stop: Callable[[], bool]) -> Iterator[Section]:
    """``sections``, looking at ``should_stop`` between them: a 2,000-page PDF does not hold a pause back."""
    for section in sections:
        if should_stop():
            raise _Stopped
        yield section


def _index_file(store: DocumentStore, name: str, item: FoundFile, row: FileRow | None, max_bytes: int,
                should_stop: Callable[[], bool]) -> tuple[int, int, int, bool] | None:
    """One file read and stored, or its report line. Returns (pages, chunks stored, failed 0/1, content unchanged),
    None when a pause stopped it (nothing of it stored)."""
    path = item.path
    try:
        digest = _sha256(path)
        if row is not None and row.sha256 == digest and row.state == "indexed":
            store.touch_file(name, str(path), size=item.size, mtime_ns=item.mtime_ns)  # touched, not changed
            return 0, 0, 0, True
        pieces = list(chunking.chunks(_stoppable(extract.sections(path, max_bytes=max_bytes), should_stop)))
    except _Stopped:
        return None
    except extract.ExtractError as exc:
        store.fail_file(name, str(path), exc.message, size=item.size, mtime_ns=item.mtime_ns)
        return 0, 0, 1, False
    except FileNotFoundError:
        store.fail_file(name, str(path), DELETED)  # gone from the report with the next scan
        return 0, 0, 1, False
    except DocumentsError:
        raise  # the store itself
    except Exception as exc:  # any other failure of one file is its report line, never a stuck index
        if not path.exists():
            store.fail_file(name, str(path), DELETED)
        else:
            log.warning("could not index %s", path, exc_info=True)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            store.fail_file(name, str(path), f"unreadable: {reason}", size=item.size, mtime_ns=item.mtime_ns)
        return 0, 0, 1, False
    if not path.exists():  # deleted while it was read: nothing of it is kept
        store.fail_file(name, str(path), DELETED)
        return 0, 0, 1, False
    pages = max((c.page or 0 for c in pieces), default=0)
    store.store_file(name, str(path), size=item.size, mtime_ns=item.mtime_ns, sha256=digest, chunks=pieces,
                     pages=pages)
    return pages, len(pieces), 0, False


def _embed(run: _Run, store: DocumentStore, name: str, embedder: Embedder, model: str,
           should_stop: Callable[[], bool], *, final: bool) -> bool:
    """Vectors for the collection's chunks without one, in batches, from the run's cursor on (the final pass walks
    them all once). False when it stopped: asked to (pause), or the embedding model failed (``problem`` says)."""
    if final:
        counts = store.collection(name)
        run.embed_after = 0
        run.emit(force=True, state="embedding", embedded=counts.embedded, to_embed=counts.chunks, current="")
    started, done_here = time.monotonic(), 0
    while True:
        if should_stop():
            return False
        batch = store.unembedded(name, model, EMBED_BATCH, after=run.embed_after)
        if not batch:
            run.waiting = 0
            return True
        try:
            vectors = embedder.embed([text for _id, text in batch])
        except QuantDeskError as exc:
            run.emit(force=True, problem=f"the embedding model {Path(model).name} could not embed: {exc}")
            return False
        stored = store.put_vectors(name, model, list(zip([i for i, _t in batch], vectors, strict=True)))
        run.embed_after = batch[-1][0]
        done_here += len(batch)
        p = run.progress
        changes: dict[str, Any] = {"embedded": p.embedded + stored}
        if final:
            elapsed = time.monotonic() - started
            changes["eta_s"] = elapsed / done_here * max(0, p.to_embed - p.embedded - stored)
        run.emit(**changes)


# --- the background indexer ---------------------------------------------------------------------------------------

class Indexer:
    """One daemon thread that indexes every collection, one at a time, in the order asked; watched folders scanned
    again every ``watch_every_s`` seconds (None or 0: only when asked). ``make_embedder(model_path)`` gives the
    collection's embedder (``embedder.pool_embedder`` over the app's pool); None, or a model that cannot be had: text
    search only, and the progress says why. Progress reaches ``on_progress`` on the indexer's thread."""

    def __init__(self, store: DocumentStore, make_embedder: Callable[[str], Embedder] | None, *,
                 on_progress: ProgressCallback | None = None, watch_every_s: float | None = 30.0,
                 max_bytes: int = extract.DEFAULT_MAX_BYTES, max_files: int = DEFAULT_MAX_FILES) -> None:
        self.store = store
        self.make_embedder = make_embedder
        self.on_progress = on_progress
        # Settings' documents_watch_seconds: 0 is "only when asked", as None
        self.watch_every_s = watch_every_s if watch_every_s is not None and watch_every_s > 0 else None
        self.max_bytes = max_bytes
        self.max_files = max_files
        self._wake = threading.Condition()
        self._queue: dict[str, None] = {}  # collections asked for, in order (a set that keeps it)
        self._current: str | None = None
        self._stop_current = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._next_watch = time.monotonic() + (watch_every_s or 0)
        self.last: dict[str, IndexProgress] = {}  # each collection's last progress

    def start(self) -> Indexer:
        """Start the thread; every collection is looked at once: one with work goes on where it stopped, an
        unchanged one costs a scan, a paused one stays paused (its progress says where it stands)."""
        if self._thread is None:
            with self._wake:
                for found in self.store.collections():
                    self._queue[found.name] = None
            self._thread = threading.Thread(target=self._work, name="documents-indexer", daemon=True)
            self._thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        with self._wake:
            self._closing = True
            self._stop_current = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def index(self, name: str) -> None:
        """Index ``name`` soon (after the collections asked before); a paused one stays paused."""
        with self._wake:
            self._queue[name] = None
            self._wake.notify_all()

    def pause(self, name: str) -> None:
        """Pause ``name`` (kept in the database): its index stops after the file or batch under way."""
        self.store.set_paused(name, True)
        with self._wake:
            self._queue.pop(name, None)
            if self._current == name:
                self._stop_current = True
            self._wake.notify_all()
        if self._current != name:
            self._emit(IndexProgress(name, "paused"))

    def resume(self, name: str) -> None:
        """Resume ``name``: its index goes on where it stopped."""
        self.store.set_paused(name, False)
        self.index(name)

    def forget(self, name: str) -> None:
        """``name`` is being removed: its index stops (call before ``store.remove_collection``)."""
        with self._wake:
            self._queue.pop(name, None)
            if self._current == name:
                self._stop_current = True
            self.last.pop(name, None)

    def busy(self) -> bool:
        with self._wake:
            return bool(self._queue) or self._current is not None

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or being indexed; False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._queue or self._current is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.wait(min(left, 0.1))
        return True

    def _emit(self, progress: IndexProgress) -> None:
        self.last[progress.collection] = progress
        if self.on_progress is not None:
            try:
                self.on_progress(progress)
            except Exception:  # a listener's bug (the GUI's) must not end the indexing thread: logged, indexing goes on
                log.exception("a documents progress listener failed")

    def _next(self) -> str | None:
        """The next collection to index, waiting for one (or for the watch); None when closing."""
        with self._wake:
            while not self._closing:
                if self._queue:
                    name = next(iter(self._queue))
                    del self._queue[name]
                    self._current, self._stop_current = name, False
                    return name
                self._wake.notify_all()  # wait_idle's waiters: nothing to do
                if self.watch_every_s is not None and time.monotonic() >= self._next_watch:
                    self._next_watch = time.monotonic() + self.watch_every_s
                    try:
                        watched = [c.name for c in self.store.collections() if c.folder and not c.paused]
                    except DocumentsError:
                        log.warning("could not read the collections to watch", exc_info=True)
                        watched = []
                    for name in watched:
                        self._queue[name] = None
                    continue
                wait = None if self.watch_every_s is None else max(0.05, self._next_watch - time.monotonic())
                self._wake.wait(wait)
            return None

    def _work(self) -> None:
        while True:
            name = self._next()
            if name is None:
                return
            try:
                self._index(name)
            except Exception as exc:  # never a dead thread: the collection's progress says what failed
                log.exception("indexing %s failed", name)
                self._emit(IndexProgress(name, "failed", problem=str(exc) or type(exc).__name__))
            finally:
                with self._wake:
                    self._current = None
                    self._wake.notify_all()

    def _index(self, name: str) -> None:
        try:
            collection = self.store.collection(name)
        except DocumentsError:
            return  # removed meanwhile
        if collection.paused:
            self._emit(IndexProgress(name, "paused", files_done=collection.indexed + collection.failed,
                                     files_total=collection.files, failed=collection.failed,
                                     embedded=collection.embedded,
                                     to_embed=collection.chunks if collection.embed_model else 0,
                                     size_bytes=self.store.size_on_disk(name)))
            return
        embedder: Embedder | None = None
        problem = ""
        if collection.embed_model and self.make_embedder is not None:
            try:
                embedder = self.make_embedder(collection.embed_model)
            except QuantDeskError as exc:
                problem = f"the embedding model cannot be used: {exc}"
        try:
            result = index_collection(self.store, name, embedder, on_progress=self._emit,
                                      should_stop=lambda: self._stop_current or self._closing,
                                      max_bytes=self.max_bytes, max_files=self.max_files)
        except DocumentsError as exc:
            if not any(c.name == name for c in self.store.collections()):
                return  # removed while it was indexed
            self._emit(IndexProgress(name, "failed", problem=str(exc)))
            return
        if problem and not result.problem:
            self._emit(replace(result, problem=problem))
