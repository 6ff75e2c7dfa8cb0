"""The documents database: SQLite in WAL mode under ``app.paths.data_dir()`` (``documents.sqlite3``).

A collection is a watched folder and/or files (or folders) added by hand (its *sources*); ``files`` are what the
indexer found there, each ``pending``, ``indexed`` or ``failed`` (with the report line's sentence); ``chunks`` the
passages of an indexed file with where they start (page, heading, line); ``chunks_fts`` the full-text index (FTS5,
external content, kept in step by triggers, ranked with bm25); ``vectors`` one float32 vector per chunk and
embedding model. ``skipped`` keeps the scan's report lines (a 2 GB file, a symlink loop) until the next scan.

Vector search is brute force with numpy over the collection's vectors, read once into one float32 matrix per
collection and model, grown as new vectors are stored and read again only after some are deleted (a changed or
removed file, another embedding model): a tenth of sqlite-vec's time at 100k chunks × 384 dimensions, the same
results (``python -m tests.bench.documents_query``, docs/facts.md), and this Python's sqlite3 cannot
load extensions at all.

One connection serves every thread (the indexer's, the GUI's, the server's): each call takes the store's lock, and a
write is one transaction (a file's chunks, a batch of vectors), so a reader waits at most that long. A write that
SQLite refuses for a reason outside the program (the disk is full, the file is read-only, locked, damaged or gone)
raises ``DocumentsError`` with a sentence and a hint, as app/chats/store.py does; the transaction is rolled back.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from app import paths
from app.databases import sqlite_refusal
from app.documents.passages import Chunk, DocumentsError, Passage

DB_FILENAME = "documents.sqlite3"
FileState = Literal["pending", "indexed", "failed"]

# Each migration is a list of statements; index i takes the schema from version i to i + 1 (one transaction).
# Never edit a released migration; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: collections, their sources, files, chunks with their full-text index, vectors, the scan's report lines
    (
        """CREATE TABLE collections (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            folder TEXT,
            embed_model TEXT,
            paused INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL
        )""",
        # files or folders added by hand (the watched folder is collections.folder)
        """CREATE TABLE sources (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            PRIMARY KEY (collection_id, path)
        )""",
        """CREATE TABLE files (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            size INTEGER NOT NULL DEFAULT -1,
            mtime_ns INTEGER NOT NULL DEFAULT -1,
            sha256 TEXT,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'indexed', 'failed')),
            reason TEXT NOT NULL DEFAULT '',
            pages INTEGER NOT NULL DEFAULT 0,
            chunks INTEGER NOT NULL DEFAULT 0,
            text_bytes INTEGER NOT NULL DEFAULT 0,  -- its chunks' UTF-8 bytes: the size on disk without reading them
            indexed_at REAL,
            UNIQUE (collection_id, path)
        )""",
        """CREATE TABLE chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            page INTEGER,
            heading TEXT NOT NULL DEFAULT '',
            line INTEGER,
            text TEXT NOT NULL
        )""",
        "CREATE INDEX chunks_by_file ON chunks(file_id, ordinal)",
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
        "tokenize='unicode61 remove_diacritics 2')",
        """CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
        END""",
        """CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END""",
        # collection_id repeats the chunk's file's: a collection's vectors are counted and read by one index range
        """CREATE TABLE vectors (
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            collection_id INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (chunk_id, model)
        )""",  # a rowid table: WITHOUT ROWID suits small rows, not 1.5 KB vectors
        "CREATE INDEX vectors_by_collection ON vectors(collection_id, model)",
        """CREATE TABLE skipped (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            reason TEXT NOT NULL
        )""",
        "CREATE INDEX skipped_by_collection ON skipped(collection_id)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

# An I/O error with less than this free on the disk is a full disk (as app/chats/store.py).
# What a stored row costs beside its text and vector bytes (SQLite's b-tree, the FTS index's postings): the size on
# disk is an estimate from the rows, close enough to tell a user what a collection takes.
ROW_OVERHEAD_BYTES = 48
FTS_FACTOR = 1.0  # FTS5's index of a text is about as large as the text itself


@dataclass(frozen=True)
class Collection:
    id: int
    name: str
    folder: str | None
    embed_model: str | None
    paused: bool
    files: int = 0
    indexed: int = 0
    failed: int = 0
    chunks: int = 0
    embedded: int = 0  # chunks with a vector of embed_model
    sources: tuple[str, ...] = ()  # files and folders added by hand

    @property
    def pending(self) -> int:
        return self.files - self.indexed - self.failed


@dataclass(frozen=True)
class ReportLine:
    path: str
    reason: str


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    score: float  # higher is better; best first


@dataclass(frozen=True)
class FileRow:
    """What the store knows of one file of a collection (the indexer's incremental check)."""

    id: int
    path: str
    size: int
    mtime_ns: int
    sha256: str | None
    state: FileState


def default_path() -> Path:
    return paths.data_dir() / DB_FILENAME


def _name_of(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise DocumentsError("a collection needs a name", "give it one, such as “manuals”")
    if len(cleaned) > 200:
        raise DocumentsError("a collection's name is at most 200 characters long")
    return cleaned


class DocumentStore:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.RLock()
        self._matrices: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}  # (collection, model) → ids, rows
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DocumentsError(f"cannot make the folder of the documents database {self.path.parent}: "
                                 f"{exc.strerror or exc}") from exc
        # isolation_level=None: BEGIN/COMMIT are ours, so a file's chunks are one transaction.
        # check_same_thread=False: every call holds self._lock, so the one connection is never used by two threads.
        self._db: sqlite3.Connection | None = sqlite3.connect(self.path, isolation_level=None, timeout=10,
                                                              check_same_thread=False)
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives an application crash
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except (sqlite3.DatabaseError, DocumentsError) as exc:
            self._db.close()
            self._db = None
            if isinstance(exc, DocumentsError):
                raise
            reason = self._reason(exc)
            if reason is not None and reason[0] in ("full", "readonly", "busy"):
                raise DocumentsError(f"cannot open the documents database {self.path}: {reason[1]}",
                                     reason[2]) from exc
            raise DocumentsError(f"cannot open the documents database {self.path}: {exc}",
                                 "move the file aside: the collections are indexed again from their files") from exc

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._matrices.clear()

    def __enter__(self) -> DocumentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise DocumentsError("the documents database is closed")
        return self._db

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise DocumentsError(f"the documents database {self.path} was written by a newer QuantDesk (schema "
                                 f"{version}, this one knows {SCHEMA_VERSION})", "update QuantDesk to open it")
        if version == SCHEMA_VERSION:
            return
        with self._transaction("BEGIN IMMEDIATE"):
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION:d}")

    @contextmanager
    def _transaction(self, begin: str = "BEGIN IMMEDIATE") -> Iterator[sqlite3.Connection]:
        db = self.db
        db.execute(begin)
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite may have rolled back itself (SQLITE_FULL, IOERR, BUSY)
                db.execute("ROLLBACK")
            raise

    @contextmanager
    def _writing(self, action: str, forget: int | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock; SQLite's refusals for outside reasons as "cannot <action>: <why>".
        ``forget``: the collection whose vectors kept in memory no longer hold (its vectors deleted)."""
        with self._lock:
            try:
                with self._transaction() as db:
                    yield db
            except sqlite3.DatabaseError as exc:
                reason = self._reason(exc)
                if reason is None:
                    raise
                raise DocumentsError(f"cannot {action}: {reason[1]}", reason[2]) from exc
            finally:
                if forget is not None:
                    self._forget(forget)

    def _forget(self, collection_id: int) -> None:
        """Drop the collection's matrices: the next vector search reads them again."""
        with self._lock:
            for key in [k for k in self._matrices if k[0] == collection_id]:
                del self._matrices[key]

    def _reading(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self.db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                reason = self._reason(exc)
                if reason is None:
                    raise
                raise DocumentsError(f"cannot read the documents database: {reason[1]}", reason[2]) from exc

    def _reason(self, exc: sqlite3.DatabaseError) -> tuple[str, str, str] | None:
        """(kind, why, hint) for an error SQLite returned because of the disk, the file or another program; None
        for SQL and programming errors (app/databases.py)."""
        return sqlite_refusal(exc, self.path, "documents database",
                              "move it aside: the collections are indexed again from their files")

    # --- collections ---------------------------------------------------------------------------

    def create_collection(self, name: str, *, folder: Path | None = None,
                          embed_model: str | None = None) -> Collection:
        name = _name_of(name)
        folder_text = str(Path(folder).expanduser().resolve()) if folder is not None else None
        if folder_text is not None and not Path(folder_text).is_dir():
            raise DocumentsError(f"{folder_text} is not a folder", "name a folder that exists")
        with self._writing(f"add the collection “{name}”") as db:
            if db.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone():
                raise DocumentsError(f"there is a collection named “{name}” already",
                                     "choose another name, or add files to it")
            db.execute("INSERT INTO collections (name, folder, embed_model, created) VALUES (?, ?, ?, ?)",
                       (name, folder_text, embed_model, time.time()))
        return self.collection(name)

    def _collection_id(self, name: str) -> int:
        rows = self._reading("SELECT id FROM collections WHERE name = ?", (_name_of(name),))
        if not rows:
            raise DocumentsError(f"there is no collection named “{name}”", "see `quantdesk docs ls`")
        return int(rows[0][0])

    def _collections(self, where: str = "", params: Sequence[Any] = ()) -> list[Collection]:
        rows = self._reading(
            f"""SELECT c.id, c.name, c.folder, c.embed_model, c.paused,
                   (SELECT count(*) FROM files f WHERE f.collection_id = c.id) AS files,
                   (SELECT count(*) FROM files f WHERE f.collection_id = c.id AND f.state = 'indexed') AS indexed,
                   (SELECT count(*) FROM files f WHERE f.collection_id = c.id AND f.state = 'failed') AS failed,
                   (SELECT coalesce(sum(f.chunks), 0) FROM files f WHERE f.collection_id = c.id) AS chunks,
                   (SELECT count(*) FROM vectors v
                        WHERE v.collection_id = c.id AND v.model = c.embed_model) AS embedded,
                   (SELECT group_concat(s.path, char(10)) FROM sources s WHERE s.collection_id = c.id) AS sources
               FROM collections c {where} ORDER BY c.name COLLATE NOCASE""", params)
        return [Collection(r["id"], r["name"], r["folder"], r["embed_model"], bool(r["paused"]), r["files"],
                           r["indexed"], r["failed"], r["chunks"], r["embedded"],
                           tuple(sorted(r["sources"].split("\n"))) if r["sources"] else ()) for r in rows]

    def collection(self, name: str) -> Collection:
        found = self._collections("WHERE c.name = ?", (_name_of(name),))
        if not found:
            raise DocumentsError(f"there is no collection named “{name}”", "see `quantdesk docs ls`")
        return found[0]

    def collections(self) -> list[Collection]:
        return self._collections()

    def remove_collection(self, name: str) -> None:
        cid = self._collection_id(name)
        with self._writing(f"remove the collection “{name}”", cid) as db:
            db.execute("DELETE FROM collections WHERE id = ?", (cid,))

    def add_paths(self, name: str, paths_: Sequence[Path]) -> None:
        """Files or folders added by hand: the indexer reads them (a folder's files as a scan finds them)."""
        cid = self._collection_id(name)
        resolved = []
        for path in paths_:
            full = Path(path).expanduser().resolve()
            if not full.exists():
                raise DocumentsError(f"{path} does not exist", "name a file or folder that is there")
            resolved.append(str(full))
        with self._writing(f"add files to “{name}”") as db:
            db.executemany("INSERT OR IGNORE INTO sources (collection_id, path) VALUES (?, ?)",
                           [(cid, p) for p in resolved])

    def remove_paths(self, name: str, paths_: Sequence[Path | str]) -> None:
        """Files or folders added by hand taken out again (their files leave at the next index)."""
        cid = self._collection_id(name)
        with self._writing(f"remove files from “{name}”") as db:
            db.executemany("DELETE FROM sources WHERE collection_id = ? AND path = ?",
                           [(cid, str(p)) for p in paths_])

    def set_embed_model(self, name: str, model: str | None) -> None:
        """The collection's embedding model: the old model's vectors are deleted (never searched against another
        model's query), the indexer embeds every chunk again."""
        cid = self._collection_id(name)
        with self._writing(f"change the embedding model of “{name}”", cid) as db:
            old = db.execute("SELECT embed_model FROM collections WHERE id = ?", (cid,)).fetchone()[0]
            if old == model:
                return
            db.execute("UPDATE collections SET embed_model = ? WHERE id = ?", (model, cid))
            if old is not None:
                db.execute("DELETE FROM vectors WHERE collection_id = ? AND model = ?", (cid, old))

    def set_paused(self, name: str, paused: bool) -> None:
        cid = self._collection_id(name)
        with self._writing(f"{'pause' if paused else 'resume'} “{name}”") as db:
            db.execute("UPDATE collections SET paused = ? WHERE id = ?", (int(paused), cid))

    def report(self, name: str) -> list[ReportLine]:
        """The collection's report: each file it could not read, and what the last scan skipped, with why."""
        cid = self._collection_id(name)
        rows = self._reading("""SELECT path, reason FROM files WHERE collection_id = ? AND state = 'failed'
                                UNION ALL SELECT path, reason FROM skipped WHERE collection_id = ?
                                ORDER BY path""", (cid, cid))
        return [ReportLine(r[0], r[1]) for r in rows]

    def size_on_disk(self, name: str) -> int:
        """About how many bytes the collection takes in the database: its texts, their full-text index, its vectors
        and the rows' own cost."""
        cid = self._collection_id(name)
        row = self._reading(
            """SELECT coalesce(sum(f.text_bytes), 0), coalesce(sum(f.chunks), 0),
                   (SELECT coalesce(sum(n * (? + (SELECT length(w.vector) FROM vectors w
                                                          WHERE w.collection_id = m.collection_id AND w.model = m.model
                                                          LIMIT 1))), 0)
                        FROM (SELECT collection_id, model, count(*) AS n FROM vectors WHERE collection_id = ?
                              GROUP BY model) AS m),
                   count(*)
               FROM files f WHERE f.collection_id = ?""", (ROW_OVERHEAD_BYTES, cid, cid))[0]
        text, chunks, vectors, files = int(row[0]), int(row[1]), int(row[2]), int(row[3])
        return int(text * (1 + FTS_FACTOR)) + chunks * ROW_OVERHEAD_BYTES * 2 + vectors + files * 256

    # --- the indexer's side --------------------------------------------------------------------

    def roots(self, name: str) -> list[Path]:
        """Where the collection's files are: its watched folder, then what was added by hand."""
        found = self.collection(name)
        return ([Path(found.folder)] if found.folder else []) + [Path(p) for p in found.sources]

    def files(self, name: str) -> dict[str, FileRow]:
        cid = self._collection_id(name)
        rows = self._reading("SELECT id, path, size, mtime_ns, sha256, state FROM files WHERE collection_id = ?",
                             (cid,))
        return {r["path"]: FileRow(r["id"], r["path"], r["size"], r["mtime_ns"], r["sha256"], r["state"])
                for r in rows}

    def put_pending(self, name: str, entries: Iterable[tuple[str, int, int]]) -> None:
        """Files the scan found new (path, size, mtime_ns): ``pending`` until the indexer stores them, so a
        progress count knows them and a restart resumes them."""
        cid = self._collection_id(name)
        with self._writing(f"update “{name}”") as db:
            db.executemany("""INSERT INTO files (collection_id, path, state) VALUES (?, ?, 'pending')
                              ON CONFLICT (collection_id, path) DO NOTHING""",
                           [(cid, path) for path, _size, _mtime in entries])

    def store_file(self, name: str, path: str, *, size: int, mtime_ns: int, sha256: str | None,
                   chunks: Sequence[Chunk], pages: int) -> int:
        """A file indexed: its old chunks (and their vectors) replaced by ``chunks`` in one transaction.
        Returns the file's id."""
        cid = self._collection_id(name)
        with self._writing(f"store {path}") as db:
            file_id = self._upsert_file(db, cid, path, size, mtime_ns, sha256, "indexed", "", pages, len(chunks),
                                        sum(len(c.text.encode("utf-8", "replace")) for c in chunks))
            if db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,)).rowcount:
                self._forget(cid)  # a changed file: its old chunks' vectors are gone
            db.executemany("INSERT INTO chunks (file_id, ordinal, page, heading, line, text) VALUES (?, ?, ?, ?, ?, ?)",
                           [(file_id, c.ordinal, c.page, c.heading, c.line, c.text) for c in chunks])
        return file_id

    def touch_file(self, name: str, path: str, *, size: int, mtime_ns: int) -> None:
        """A file whose size or time changed but whose content did not (same sha256): only its figures change."""
        cid = self._collection_id(name)
        with self._writing(f"update {path}") as db:
            db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE collection_id = ? AND path = ?",
                       (size, mtime_ns, cid, path))

    def fail_file(self, name: str, path: str, reason: str, *, size: int = -1, mtime_ns: int = -1) -> None:
        """A file that could not be read: a report line; its chunks (from a previous version) removed. Its size and
        time are kept, so an unchanged failed file is not read again; a changed one is."""
        cid = self._collection_id(name)
        with self._writing(f"update {path}") as db:
            file_id = self._upsert_file(db, cid, path, size, mtime_ns, None, "failed", reason, 0, 0, 0)
            if db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,)).rowcount:
                self._forget(cid)

    @staticmethod
    def _upsert_file(db: sqlite3.Connection, cid: int, path: str, size: int, mtime_ns: int, sha256: str | None,
                     state: FileState, reason: str, pages: int, chunks: int, text_bytes: int) -> int:
        db.execute("""INSERT INTO files (collection_id, path, size, mtime_ns, sha256, state, reason, pages, chunks,
                                         text_bytes, indexed_at)
                      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                      ON CONFLICT (collection_id, path) DO UPDATE SET size = excluded.size,
                          mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, state = excluded.state,
                          reason = excluded.reason, pages = excluded.pages, chunks = excluded.chunks,
                          text_bytes = excluded.text_bytes, indexed_at = excluded.indexed_at""",
                   (cid, path, size, mtime_ns, sha256, state, reason, pages, chunks, text_bytes, time.time()))
        return int(db.execute("SELECT id FROM files WHERE collection_id = ? AND path = ?", (cid, path)).fetchone()[0])

    def remove_files(self, name: str, file_paths: Sequence[str]) -> None:
        """Files gone from the folder: their chunks and vectors go with them."""
        if not file_paths:
            return
        cid = self._collection_id(name)
        with self._writing(f"update “{name}”", forget=cid) as db:
            db.executemany("DELETE FROM files WHERE collection_id = ? AND path = ?", [(cid, p) for p in file_paths])

    def set_skipped(self, name: str, lines: Sequence[ReportLine]) -> None:
        """The last scan's report lines (files it skipped), replacing the previous scan's."""
        cid = self._collection_id(name)
        with self._writing(f"update “{name}”") as db:
            db.execute("DELETE FROM skipped WHERE collection_id = ?", (cid,))
            db.executemany("INSERT INTO skipped (collection_id, path, reason) VALUES (?, ?, ?)",
                           [(cid, line.path, line.reason) for line in lines])

    def unembedded(self, name: str, model: str, limit: int, *, after: int = 0) -> list[tuple[int, str]]:
        """Up to ``limit`` (chunk id, text) of the collection without a vector of ``model``, by id from ``after``
        on (a cursor: the indexer does not walk the embedded chunks again for every batch)."""
        cid = self._collection_id(name)
        rows = self._reading(
            """SELECT k.id, k.text FROM chunks k JOIN files f ON f.id = k.file_id
               WHERE k.id > ? AND f.collection_id = ? AND NOT EXISTS (SELECT 1 FROM vectors v
                                                                     WHERE v.chunk_id = k.id AND v.model = ?)
               ORDER BY k.id LIMIT ?""", (after, cid, model, limit))
        return [(int(r[0]), r[1]) for r in rows]

    def put_vectors(self, name: str, model: str, vectors: Sequence[tuple[int, Sequence[float]]]) -> int:
        """Vectors of ``model`` for chunks (unit length; stored as float32). A chunk deleted meanwhile (its file
        changed) is left out. Returns how many were stored."""
        cid = self._collection_id(name)
        rows = [(int(chunk_id), model, cid, np.asarray(vector, dtype=np.float32).tobytes())
                for chunk_id, vector in vectors]
        with self._writing(f"store the vectors of “{name}”") as db:
            before = db.total_changes
            db.executemany("""INSERT OR REPLACE INTO vectors (chunk_id, model, collection_id, vector)
                              SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?1)""", rows)
            stored = db.total_changes - before
        with self._lock:
            self._grow(cid, model, rows, complete=stored == len(rows))
        return stored

    def _grow(self, cid: int, model: str, rows: list[tuple[int, str, int, bytes]], *, complete: bool) -> None:
        """New vectors added to the collection's matrix kept in memory (indexing goes on while the user searches:
        reading 100k vectors again after every batch would cost a third of a second a search); where that cannot
        be done exactly (a chunk gone meanwhile, a vector replaced, another length) the matrix is read again."""
        cached = self._matrices.get((cid, model))
        if cached is None or not rows:
            return
        ids, matrix = cached
        new_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        dims = matrix.shape[1] if len(ids) else len(rows[0][3]) // 4
        if (not complete or any(len(r[3]) != dims * 4 for r in rows) or len(set(new_ids.tolist())) != len(rows)
                or np.isin(new_ids, ids).any()):
            self._forget(cid)
            return
        added = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), dims)
        self._matrices[(cid, model)] = (np.concatenate([ids, new_ids]), np.concatenate([matrix.reshape(-1, dims),
                                                                                        added]))

    # --- searches ------------------------------------------------------------------------------

    def _ids_of(self, collections: Sequence[str]) -> list[int]:
        return [self._collection_id(name) for name in collections]

    def text_search(self, collections: Sequence[str], query: str, limit: int = 20) -> list[Hit]:
        """Full-text search (FTS5, bm25) of the collections' chunks. Any text is safe: its words are searched as
        quoted terms, never as FTS5 syntax. Chunks with every word rank first, then chunks with some."""
        ids = self._ids_of(collections)
        terms = fts_terms(query)
        if not ids or not terms or limit <= 0:
            return []
        marks = ",".join("?" * len(ids))
        sql = f"""SELECT chunks_fts.rowid, bm25(chunks_fts) AS rank FROM chunks_fts
                  JOIN chunks k ON k.id = chunks_fts.rowid JOIN files f ON f.id = k.file_id
                  WHERE chunks_fts MATCH ? AND f.collection_id IN ({marks}) ORDER BY rank LIMIT ?"""
        hits: dict[int, float] = {}
        every = " AND ".join(terms)
        for row in self._reading(sql, (every, *ids, limit)):
            hits[int(row[0])] = -float(row[1]) + 1000.0  # every word: above any chunk with only some
        if len(hits) < limit and len(terms) > 1:
            for row in self._reading(sql, (" OR ".join(terms), *ids, limit)):
                hits.setdefault(int(row[0]), -float(row[1]))
        ranked = sorted(hits.items(), key=lambda item: -item[1])[:limit]
        return [Hit(chunk_id, score) for chunk_id, score in ranked]

    def _matrix(self, cid: int, model: str) -> tuple[np.ndarray, np.ndarray]:
        """The collection's vectors of ``model`` as (chunk ids, one float32 row each), read once until a write."""
        with self._lock:
            cached = self._matrices.get((cid, model))
            if cached is not None:
                return cached
            rows = self._reading("SELECT v.chunk_id, v.vector FROM vectors v WHERE v.collection_id = ? AND v.model = ?",
                                 (cid, model))
            if rows:
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                dims = len(rows[0][1]) // 4
                matrix = np.frombuffer(b"".join(r[1] if len(r[1]) == dims * 4 else bytes(dims * 4) for r in rows),
                                       dtype=np.float32).reshape(len(rows), dims)
            else:
                ids, matrix = np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
            self._matrices[(cid, model)] = (ids, matrix)
            return ids, matrix

    def vector_search(self, collections: Sequence[str], vector: Sequence[float], limit: int = 20, *,
                      model: str | None = None) -> list[Hit]:
        """The chunks nearest ``vector`` by cosine (unit vectors: the dot product), over each collection's vectors
        of its embedding model (only collections embedded by ``model`` when it is given); vectors of another
        length than the query's are never compared."""
        query = np.asarray(vector, dtype=np.float32)
        if limit <= 0 or query.ndim != 1 or not query.size:
            return []
        norm = float(np.linalg.norm(query))
        if norm > 0:
            query = query / norm
        found_ids: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        for collection in self._collections_named(collections):
            if collection.embed_model is None or (model is not None and collection.embed_model != model):
                continue
            ids, matrix = self._matrix(collection.id, collection.embed_model)
            if not len(ids) or matrix.shape[1] != query.size:
                continue
            scores = matrix @ query
            if len(scores) > limit:
                best = np.argpartition(-scores, limit - 1)[:limit]
                ids, scores = ids[best], scores[best]
            found_ids.append(ids)
            found_scores.append(scores)
        if not found_ids:
            return []
        all_ids, all_scores = np.concatenate(found_ids), np.concatenate(found_scores)
        order = np.argsort(-all_scores, kind="stable")[:limit]
        return [Hit(int(all_ids[i]), float(all_scores[i])) for i in order]

    def _collections_named(self, names: Sequence[str]) -> list[Collection]:
        wanted = [_name_of(n) for n in names]
        found = {c.name: c for c in self._collections_light(wanted)}
        missing = [n for n in wanted if n not in found]
        if missing:
            raise DocumentsError(f"there is no collection named “{missing[0]}”", "see `quantdesk docs ls`")
        return [found[n] for n in dict.fromkeys(wanted)]

    def _collections_light(self, names: Sequence[str]) -> list[Collection]:
        """The named collections without their counts (a search needs only their ids and models)."""
        if not names:
            return []
        rows = self._reading(f"SELECT id, name, folder, embed_model, paused FROM collections WHERE name IN "
                             f"({','.join('?' * len(names))})", list(names))
        return [Collection(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]

    def passages(self, chunk_ids: Sequence[int]) -> list[Passage]:
        """The chunks as passages, in the order given (ids no longer stored left out)."""
        if not chunk_ids:
            return []
        found: dict[int, Passage] = {}
        unique = list(dict.fromkeys(int(i) for i in chunk_ids))
        for start in range(0, len(unique), 500):  # SQLite's limit on bound parameters
            part = unique[start:start + 500]
            rows = self._reading(
                f"""SELECT k.id, c.name, f.path, k.text, k.page, k.heading, k.line FROM chunks k
                    JOIN files f ON f.id = k.file_id JOIN collections c ON c.id = f.collection_id
                    WHERE k.id IN ({','.join('?' * len(part))})""", part)
            for r in rows:
                found[int(r[0])] = Passage(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6])
        return [found[i] for i in unique if i in found]

    def collection_passages(self, collections: Sequence[str], limit: int) -> list[Passage]:
        """The collections' passages in file order (path, then place in the file), at most ``limit``."""
        ids = self._ids_of(collections)
        if not ids or limit <= 0:
            return []
        rows = self._reading(
            f"""SELECT k.id, c.name, f.path, k.text, k.page, k.heading, k.line FROM chunks k
                JOIN files f ON f.id = k.file_id JOIN collections c ON c.id = f.collection_id
                WHERE f.collection_id IN ({','.join('?' * len(ids))}) AND f.state = 'indexed'
                ORDER BY c.name, f.path, k.ordinal LIMIT ?""", (*ids, limit))
        return [Passage(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]


_WORD = re.compile(r"\w+", re.UNICODE)
_PHRASE = re.compile(r'"([^"]+)"')


def fts_terms(query: str) -> list[str]:
    """A user's text as FTS5 strings: each "quoted phrase" kept together, each other word on its own, every one
    quoted (inner quotes doubled), so that no text is FTS5 syntax (AND, NEAR, *, column filters, a stray quote)."""
    terms: list[str] = []
    for phrase in _PHRASE.findall(query):
        words = _WORD.findall(phrase)
        if words:
            terms.append('"' + " ".join(words).replace('"', '""') + '"')
    rest = _PHRASE.sub(" ", query)
    for word in _WORD.findall(rest):
        quoted = '"' + word.replace('"', '""') + '"'
        if quoted not in terms:
            terms.append(quoted)
    return terms[:64]  # a pasted page is not a query: its first 64 words are

