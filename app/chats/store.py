"""The conversation store: SQLite in WAL mode under ``app.paths.data_dir()``.

A reply is saved while it streams (``ReplyWriter``), so a kill -9 of the app loses at most the last
~250 ms of text; rows still marked ``streaming`` when the store opens were left by a process that
died mid-reply and become ``interrupted``. The schema carries a version (``PRAGMA user_version``);
each migration runs in one transaction, so a failed upgrade leaves the old database as it was.

One store object belongs to one thread (sqlite3's default check); the GUI uses it from its own.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app import paths
from app.errors import QuantDeskError

MessageState = Literal["complete", "streaming", "interrupted"]
Role = Literal["system", "user", "assistant"]

DB_FILENAME = "chats.sqlite3"
EXPORT_FORMAT = "quantdesk-chat"
EXPORT_VERSION = 1

# Each migration is a list of statements (not a script: ``executescript`` would commit the open
# transaction first). Index i takes the schema from version i to version i + 1. Never edit a released
# migration; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: conversations, messages, presets
    (
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            system_prompt TEXT NOT NULL DEFAULT '',
            sampling_json TEXT NOT NULL DEFAULT '{}',
            model_path TEXT
        )""",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            content TEXT NOT NULL DEFAULT '',
            created REAL NOT NULL,
            stats_json TEXT,
            state TEXT NOT NULL DEFAULT 'complete'
                CHECK (state IN ('complete', 'streaming', 'interrupted'))
        )""",
        "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)",
        "CREATE INDEX conversations_by_updated ON conversations(updated DESC)",
        """CREATE TABLE presets (
            name TEXT PRIMARY KEY,
            system_prompt TEXT NOT NULL DEFAULT '',
            sampling_json TEXT NOT NULL DEFAULT '{}'
        )""",
    ),
    # 2: full-text search over message content, kept in step by triggers; backfilled for old rows.
    (
        "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id')",
        """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END""",
        """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END""",
        """CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END""",
        "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


class ChatStoreError(QuantDeskError):
    """The chat database cannot be opened or upgraded; the message says why."""


class NotFound(QuantDeskError):
    """A conversation, message or preset that does not exist (any more)."""


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created: float
    updated: float
    system_prompt: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)
    model_path: str | None = None


@dataclass(frozen=True)
class ChatMessage:
    id: int
    conversation_id: int
    role: Role
    content: str
    created: float
    stats: dict[str, Any] | None = None
    state: MessageState = "complete"


@dataclass(frozen=True)
class Preset:
    name: str
    system_prompt: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeletedConversation:
    """The rows ``ChatStore.delete_conversation`` removed, column for column (kept in memory for undo)."""
    row: dict[str, Any]
    messages: tuple[dict[str, Any], ...]

    @property
    def id(self) -> int:
        return self.row["id"]

    @property
    def title(self) -> str:
        return self.row["title"]


def default_path() -> Path:
    return paths.data_dir() / DB_FILENAME


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["title"], row["created"], row["updated"], row["system_prompt"],
                        json.loads(row["sampling_json"]), row["model_path"])


def _message(row: sqlite3.Row) -> ChatMessage:
    stats = json.loads(row["stats_json"]) if row["stats_json"] else None
    return ChatMessage(row["id"], row["conversation_id"], row["role"], row["content"], row["created"],
                       stats, row["state"])


def _fts_query(text: str) -> str:
    """Each word becomes a quoted prefix term, so user input is never parsed as FTS5 syntax."""
    return " ".join('"' + word.replace('"', '""') + '"*' for word in text.split())


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class ChatStore:
    def __init__(self, path: Path | str | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a migration is one transaction.
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=10)
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL survives an application crash (kill -9); only a power cut can lose
            # the last commits. FULL would fsync every streamed chunk for nothing.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
            self.recovered_interrupted = self._mark_abandoned_streams()
        except (sqlite3.DatabaseError, ChatStoreError) as exc:
            self._db.close()
            if isinstance(exc, ChatStoreError):
                raise
            raise ChatStoreError(f"cannot open the chat database {self.path}: {exc}",
                                 "move the file aside to start with an empty history") from exc

    # --- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None  # type: ignore[assignment]

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise ChatStoreError(
                f"the chat database {self.path} was written by a newer QuantDesk (schema {version}, "
                f"this one knows {SCHEMA_VERSION})", "update QuantDesk to open it")
        if version == SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    self._db.execute(statement)
            # PRAGMA takes no parameters; SCHEMA_VERSION is our own int.
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION:d}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _mark_abandoned_streams(self) -> int:
        cur = self._db.execute("UPDATE messages SET state='interrupted' WHERE state='streaming'")
        return cur.rowcount

    # --- conversations -------------------------------------------------------------------------

    def create_conversation(self, title: str = "New chat", *, system_prompt: str = "",
                            sampling: dict[str, Any] | None = None,
                            model_path: str | None = None) -> Conversation:
        now = self._clock()
        cur = self._db.execute(
            "INSERT INTO conversations(title, created, updated, system_prompt, sampling_json, model_path)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (title, now, now, system_prompt, json.dumps(sampling or {}), model_path))
        return self.conversation(cur.lastrowid)

    def conversation(self, conversation_id: int) -> Conversation:
        row = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        if row is None:
            raise NotFound(f"conversation {conversation_id} does not exist")
        return _conversation(row)

    def conversations(self) -> list[Conversation]:
        """Newest activity first."""
        rows = self._db.execute("SELECT * FROM conversations ORDER BY updated DESC, id DESC")
        return [_conversation(r) for r in rows]

    def search(self, text: str) -> list[Conversation]:
        """Conversations whose title or any message contains every word of ``text`` (prefix match)."""
        text = text.strip()
        if not text:
            return self.conversations()
        rows = self._db.execute(
            """SELECT * FROM conversations WHERE title LIKE ? ESCAPE '\\' OR id IN (
                   SELECT m.conversation_id FROM messages_fts f JOIN messages m ON m.id = f.rowid
                   WHERE messages_fts MATCH ?)
               ORDER BY updated DESC, id DESC""",
            (f"%{_escape_like(text)}%", _fts_query(text)))
        return [_conversation(r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        self._update_conversation(conversation_id, "title=?", (title,))

    def update_settings(self, conversation_id: int, *, system_prompt: str | None = None,
                        sampling: dict[str, Any] | None = None, model_path: str | None = None) -> None:
        sets: list[str] = []
        values: list[Any] = []
        for column, value in (("system_prompt", system_prompt), ("model_path", model_path),
                              ("sampling_json", None if sampling is None else json.dumps(sampling))):
            if value is not None:
                sets.append(f"{column}=?")
                values.append(value)
        if sets:
            self._update_conversation(conversation_id, ", ".join(sets), tuple(values))

    def _update_conversation(self, conversation_id: int, assignments: str, values: tuple) -> None:
        cur = self._db.execute(f"UPDATE conversations SET {assignments}, updated=? WHERE id=?",
                               (*values, self._clock(), conversation_id))
        if cur.rowcount == 0:
            raise NotFound(f"conversation {conversation_id} does not exist")

    def delete_conversation(self, conversation_id: int) -> DeletedConversation:
        """Deletes its messages too (ON DELETE CASCADE). Returns the rows removed, so that
        ``restore_conversation`` can undo it."""
        self._db.execute("BEGIN")
        try:
            row = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
            if row is None:
                raise NotFound(f"conversation {conversation_id} does not exist")
            messages = self._db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id",
                                        (conversation_id,)).fetchall()
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return DeletedConversation(dict(row), tuple(dict(m) for m in messages))

    def restore_conversation(self, deleted: DeletedConversation) -> Conversation:
        """Put back a deleted conversation with the same ids, settings, timestamps and messages
        (undo). The ids are free: AUTOINCREMENT never hands a deleted id out again."""
        self._db.execute("BEGIN")
        try:
            for table, rows in (("conversations", (deleted.row,)), ("messages", deleted.messages)):
                for row in rows:
                    # Column names come from our own table's rows, never from input.
                    columns = ", ".join(row)
                    marks = ", ".join("?" * len(row))
                    self._db.execute(f"INSERT INTO {table}({columns}) VALUES ({marks})", tuple(row.values()))
            self._db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            self._db.execute("ROLLBACK")
            raise ChatStoreError(f"cannot restore the chat “{deleted.title}”: it is there already",
                                 "nothing to undo") from exc
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return self.conversation(deleted.id)

    # --- messages ------------------------------------------------------------------------------

    def add_message(self, conversation_id: int, role: Role, content: str, *,
                    state: MessageState = "complete", stats: dict[str, Any] | None = None) -> ChatMessage:
        now = self._clock()
        self._db.execute("BEGIN")
        try:
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, created, stats_json, state)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, now, json.dumps(stats) if stats else None, state))
            self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
            self._db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            self._db.execute("ROLLBACK")
            raise NotFound(f"conversation {conversation_id} does not exist") from exc
        return self.message(cur.lastrowid)

    def message(self, message_id: int) -> ChatMessage:
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        if row is None:
            raise NotFound(f"message {message_id} does not exist")
        return _message(row)

    def messages(self, conversation_id: int) -> list[ChatMessage]:
        rows = self._db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id", (conversation_id,))
        return [_message(r) for r in rows]

    def update_message(self, message_id: int, *, content: str | None = None,
                       state: MessageState | None = None, stats: dict[str, Any] | None = None) -> None:
        sets, values = [], []
        for column, value in (("content", content), ("state", state),
                              ("stats_json", None if stats is None else json.dumps(stats))):
            if value is not None:
                sets.append(f"{column}=?")
                values.append(value)
        if not sets:
            return
        cur = self._db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*values, message_id))
        if cur.rowcount == 0:
            raise NotFound(f"message {message_id} does not exist")

    def delete_messages_from(self, message_id: int) -> int:
        """Delete a message and every later one of its conversation (regenerate, edit and resend)."""
        msg = self.message(message_id)
        cur = self._db.execute("DELETE FROM messages WHERE conversation_id=? AND id>=?",
                               (msg.conversation_id, message_id))
        return cur.rowcount

    def begin_reply(self, conversation_id: int, *, min_interval_s: float = 0.25,
                    min_chars: int = 2000, monotonic: Callable[[], float] = time.monotonic) -> ReplyWriter:
        """Start an assistant message in state ``streaming``; feed it with ``ReplyWriter.append``."""
        msg = self.add_message(conversation_id, "assistant", "", state="streaming")
        return ReplyWriter(self, msg.id, min_interval_s=min_interval_s, min_chars=min_chars, monotonic=monotonic)

    # --- presets -------------------------------------------------------------------------------

    def save_preset(self, name: str, *, system_prompt: str = "", sampling: dict[str, Any] | None = None) -> None:
        name = name.strip()
        if not name:
            raise ValueError("a preset needs a name")
        self._db.execute(
            "INSERT INTO presets(name, system_prompt, sampling_json) VALUES (?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET system_prompt=excluded.system_prompt,"
            " sampling_json=excluded.sampling_json",
            (name, system_prompt, json.dumps(sampling or {})))

    def presets(self) -> list[Preset]:
        rows = self._db.execute("SELECT * FROM presets ORDER BY name COLLATE NOCASE")
        return [Preset(r["name"], r["system_prompt"], json.loads(r["sampling_json"])) for r in rows]

    def delete_preset(self, name: str) -> None:
        if self._db.execute("DELETE FROM presets WHERE name=?", (name,)).rowcount == 0:
            raise NotFound(f"there is no preset named {name!r}")

    # --- export --------------------------------------------------------------------------------

    def export_json(self, conversation_id: int) -> str:
        conv = self.conversation(conversation_id)
        data = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "conversation": asdict(conv),
                "messages": [{k: v for k, v in asdict(m).items() if k != "conversation_id"}
                             for m in self.messages(conversation_id)]}
        return json.dumps(data, indent=2, ensure_ascii=False)

    def export_markdown(self, conversation_id: int) -> str:
        conv = self.conversation(conversation_id)
        parts = [f"# {conv.title}\n"]
        if conv.model_path:
            parts.append(f"Model: `{Path(conv.model_path).name}`\n")
        if conv.system_prompt:
            parts.append("## System\n\n" + conv.system_prompt + "\n")
        for msg in self.messages(conversation_id):
            heading = {"user": "You", "assistant": "Assistant", "system": "System"}[msg.role]
            parts.append(f"## {heading}\n\n{msg.content}\n")
            if msg.state == "interrupted":
                parts.append("*(reply interrupted)*\n")
        return "\n".join(parts)


class ReplyWriter:
    """Saves a streamed reply as it grows: a cheap UPDATE at most every ``min_interval_s`` (or when
    ``min_chars`` arrive sooner), and always on ``finish``/``interrupt``. The text in memory is the
    truth; the database lags it by at most one interval."""

    def __init__(self, store: ChatStore, message_id: int, *, min_interval_s: float, min_chars: int,
                 monotonic: Callable[[], float]) -> None:
        self.store = store
        self.message_id = message_id
        self._parts: list[str] = []
        self._unsaved_chars = 0
        self._min_interval_s = min_interval_s
        self._min_chars = min_chars
        self._monotonic = monotonic
        self._last_save = monotonic()
        self.saves = 0
        self.closed = False

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def append(self, text: str) -> None:
        if self.closed:
            raise RuntimeError("this reply is already finished")
        if not text:
            return
        self._parts.append(text)
        self._unsaved_chars += len(text)
        if (self._unsaved_chars >= self._min_chars
                or self._monotonic() - self._last_save >= self._min_interval_s):
            self.save()

    def save(self) -> None:
        if self._unsaved_chars:
            # Join once per save, not per token: rendering and saving both stay cheap per token.
            joined = self.text
            self._parts = [joined]
            self.store.update_message(self.message_id, content=joined)
            self._unsaved_chars = 0
            self.saves += 1
        self._last_save = self._monotonic()

    def finish(self, stats: dict[str, Any] | None = None, *, text: str | None = None) -> None:
        """The reply ended normally (also after a Stop: the engine's Done says ``cancelled``)."""
        self._close("complete", stats, text)

    def interrupt(self, stats: dict[str, Any] | None = None) -> None:
        """The engine died or failed mid-reply: keep what arrived, marked."""
        self._close("interrupted", stats, None)

    def _close(self, state: MessageState, stats: dict[str, Any] | None, text: str | None) -> None:
        if self.closed:
            return
        if text is not None:
            self._parts = [text]
        self.store.update_message(self.message_id, content=self.text, state=state, stats=stats)
        self._unsaved_chars = 0
        self.closed = True

