"""The conversation store: SQLite in WAL mode under ``app.paths.data_dir()``.

Its records are in app/chats/messages.py, its exports in app/chats/export.py. A reply is saved while it streams
(``ReplyWriter``), so a kill -9 of the app loses at most the last
~250 ms of text; rows still marked ``streaming`` when the store opens were left by a process that
died mid-reply and become ``interrupted``. The schema carries a version (``PRAGMA user_version``);
each migration runs in one transaction, so a failed upgrade leaves the old database as it was.

One store object belongs to one thread (sqlite3's default check); the GUI uses it from its own.

A write that SQLite refuses for a reason outside the program (the disk is full, the file is read-only,
locked, damaged or gone) raises ``ChatStoreError`` with a sentence and a hint, the sqlite3 error as its
cause; the transaction it was part of is rolled back, so the database stays as it was before the call.
SQL and programming errors are not dressed up: they propagate as they are.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app import paths
from app.chats.messages import (Attachment, Branches, ChatMessage, Conversation, DeletedConversation, MessageState,
                                Preset, Role, ToolCard)
from app.databases import sqlite_refusal
from app.errors import QuantDeskError
from app.files import write_bytes_atomic
from app.images import ImageInfo

DB_FILENAME = "chats.sqlite3"
AT_LEAF = -1  # where a new message goes by default: after the last message of the branch on show

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
    # 3: images attached to messages: the files live in ``attachments/`` beside the database, named by their
    # sha256 (the same picture twice is one file); a row per image, in order, deleted with its message.
    (
        """CREATE TABLE attachments (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            file TEXT NOT NULL,
            media_type TEXT NOT NULL,
            width INTEGER NOT NULL,
            height INTEGER NOT NULL
        )""",
        "CREATE INDEX attachments_by_message ON attachments(message_id, position)",
    ),
    # 4: conversation branches. Each message has a parent (NULL for the first of a conversation); editing or
    # regenerating adds a sibling instead of deleting. The conversation's leaf is the last message of the branch
    # on show. Old conversations become one chain, their last message the leaf.
    (
        "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE",
        """UPDATE messages SET parent_id = (SELECT max(p.id) FROM messages p
               WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id)""",
        "CREATE INDEX messages_by_parent ON messages(parent_id)",
        "ALTER TABLE conversations ADD COLUMN leaf_id INTEGER",
        """UPDATE conversations SET leaf_id = (SELECT max(m.id) FROM messages m
               WHERE m.conversation_id = conversations.id)""",
    ),
    # 5: a thinking model's reply keeps its thinking apart from its answer (the thinking's figures ride in
    # stats_json with the rest: reasoning_tokens, reasoning_ms, first_answer_ms). Old replies had none. Not in the
    # full-text index: a search finds what was said, not what was thought.
    (
        "ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''",
    ),
    # 6: tool cards. An assistant reply that called tools keeps its calls and what each returned (``ToolCard``: the
    # tool, its server, the arguments, the result, error / cut / denied, the seconds it took) as one JSON list beside
    # its text: the message is one node of the branch tree, so edit and regenerate keep its calls with it, and the
    # next turn sends them back to the engine as the assistant's tool_calls and the ``tool`` messages. Old replies
    # had none (NULL). A chat's choice of which MCP servers' tools its model sees: a JSON list of server names;
    # NULL, as for every older chat, is every server the user added.
    (
        "ALTER TABLE messages ADD COLUMN tools_json TEXT",
        "ALTER TABLE conversations ADD COLUMN tool_servers_json TEXT",
    ),
    # 7: long conversations' overflow policy (app/engine/overflow.py): a chat's own (NULL: the Settings' default
    # for new chats), and on a reply whose prompt left earlier messages out, what it left out and the model's note
    # (app.datatypes.ContextCut as JSON; its ``start`` counts the turns the engine is sent — a reply with tool calls
    # is its calls and a turn per result — the system prompt not counted),
    # so that the mark stays where it happened and the next reply goes on from the same cut. Old rows: none.
    (
        "ALTER TABLE conversations ADD COLUMN overflow TEXT",
        "ALTER TABLE messages ADD COLUMN context_cut_json TEXT",
    ),
    # 8: pinned messages, which an overflow policy never leaves out of the prompt (app/engine/overflow.py). A pin
    # belongs to its message row: an edit or a regenerated reply is a new row, not pinned. Old rows: not pinned.
    (
        "ALTER TABLE messages ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",
    ),
    # 9: the user's documents (issue 28). A reply keeps the passages it was given and cited ([1], [2], …) as one JSON
    # list of dicts (app.documents.passages.Citation.to_dict(), plus its ``where``: the store stays below the
    # documents home and keeps them as plain data); a regenerated reply is a new row with its own. A chat's
    # documents: a JSON list of the collections attached to it (its own "chat-<id>" for files attached to it, and
    # any collection chosen). Old rows: none (NULL).
    (
        "ALTER TABLE messages ADD COLUMN citations_json TEXT",
        "ALTER TABLE conversations ADD COLUMN documents_json TEXT",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


# An I/O error (SQLITE_IOERR_*, e.g. growing the -shm file) with less than this free on the disk is a full disk.


class ChatStoreError(QuantDeskError):
    """The chat database cannot be opened, upgraded or written; the message says why, the hint what to do."""


class NotFound(QuantDeskError):
    """A conversation, message or preset that does not exist (any more)."""


def default_path() -> Path:
    return paths.data_dir() / DB_FILENAME


def _conversation(row: sqlite3.Row) -> Conversation:
    servers = row["tool_servers_json"]
    documents = row["documents_json"]
    return Conversation(row["id"], row["title"], row["created"], row["updated"], row["system_prompt"],
                        json.loads(row["sampling_json"]), row["model_path"],
                        None if servers is None else tuple(json.loads(servers)), row["overflow"],
                        tuple(json.loads(documents)) if documents else ())


def _message(row: sqlite3.Row, images: tuple[Attachment, ...] = ()) -> ChatMessage:
    stats = json.loads(row["stats_json"]) if row["stats_json"] else None
    cut = json.loads(row["context_cut_json"]) if row["context_cut_json"] else None
    tools = tuple(ToolCard.from_dict(card) for card in json.loads(row["tools_json"])) if row["tools_json"] else ()
    citations = tuple(json.loads(row["citations_json"])) if row["citations_json"] else ()
    return ChatMessage(row["id"], row["conversation_id"], row["role"], row["content"], row["created"],
                       stats, row["state"], images, row["parent_id"], row["reasoning"], tools, cut, bool(row["pinned"]),
                       citations)


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
            self.purge_attachments()
        except (sqlite3.DatabaseError, ChatStoreError) as exc:
            self._db.close()
            if isinstance(exc, ChatStoreError):
                raise
            reason = self._reason(exc)
            if reason is not None and reason[0] in ("full", "readonly", "busy"):  # the file itself is fine
                raise ChatStoreError(f"cannot open the chat database {self.path}: {reason[1]}", reason[2]) from exc
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
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise ChatStoreError(
                f"the chat database {self.path} was written by a newer QuantDesk (schema {version}, "
                f"this one knows {SCHEMA_VERSION})", "update QuantDesk to open it")
        if version == SCHEMA_VERSION:
            return
        with self._transaction("BEGIN IMMEDIATE"):
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    self._db.execute(statement)
            # PRAGMA takes no parameters; SCHEMA_VERSION is our own int.
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION:d}")

    @contextmanager
    def _transaction(self, begin: str = "BEGIN") -> Iterator[None]:
        self._db.execute(begin)
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already: after SQLITE_FULL, SQLITE_IOERR or SQLITE_BUSY it
            # can end the whole transaction itself (https://sqlite.org/lang_transaction.html), and
            # a second ROLLBACK would raise "no transaction is active" over the real error.
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    @contextmanager
    def _writing(self, action: str) -> Iterator[None]:
        """Turn a write that SQLite refuses for an outside reason into a ChatStoreError that says
        "cannot <action>: <why>"; anything else (bad SQL, a closed store) propagates unchanged."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            error = self._refusal(exc, action)
            if error is None:
                raise
            raise error from exc

    def _refusal(self, exc: sqlite3.DatabaseError, action: str) -> ChatStoreError | None:
        """``exc`` as "cannot <action>: <why>" with a hint, or None when it is not the outside world's doing."""
        reason = self._reason(exc)
        return None if reason is None else ChatStoreError(f"cannot {action}: {reason[1]}", reason[2])

    def _reason(self, exc: sqlite3.DatabaseError) -> tuple[str, str, str] | None:
        """(kind, why, hint) for an error SQLite returned because of the disk, the file or another program; None
        for SQL and programming errors (app/databases.py)."""
        return sqlite_refusal(exc, self.path, "chat database",
                              "copy it somewhere safe, then move it aside to start with an empty history")

    @property
    def attachments_dir(self) -> Path:
        return self.path.parent / "attachments"

    def purge_attachments(self) -> int:
        """Delete the image files no message refers to any more (a deleted chat's, once its undo is over, or
        files written for a message that was never saved); returns how many went."""
        folder = self.attachments_dir
        if not folder.is_dir():
            return 0
        kept = {r[0] for r in self._db.execute("SELECT DISTINCT file FROM attachments")}
        removed = 0
        for path in folder.iterdir():
            if path.name not in kept:
                try:
                    path.unlink()
                    removed += 1
                except OSError:
                    pass  # in use or read-only: tried again next time
        return removed

    def _store_image(self, data: bytes) -> tuple[str, ImageInfo]:
        """Write an image under ``attachments/`` (app/files: whole or not at all), named by its sha256; checked
        first."""
        import hashlib

        from app.images import image_info

        info = image_info(data)
        name = f"{hashlib.sha256(data).hexdigest()}.{info.format}"
        target = self.attachments_dir / name
        if not target.exists():
            try:
                write_bytes_atomic(target, data)
            except OSError as exc:
                raise ChatStoreError(f"cannot keep the image: {exc.strerror}",
                                     f"check the disk with {self.attachments_dir}") from exc
        return name, info

    def _mark_abandoned_streams(self) -> int:
        cur = self._db.execute("UPDATE messages SET state='interrupted' WHERE state='streaming'")
        return cur.rowcount

    # --- conversations -------------------------------------------------------------------------

    def create_conversation(self, title: str = "New chat", *, system_prompt: str = "",
                            sampling: dict[str, Any] | None = None,
                            model_path: str | None = None) -> Conversation:
        now = self._clock()
        with self._writing("start a new chat"):
            cur = self._db.execute(
                "INSERT INTO conversations(title, created, updated, system_prompt, sampling_json, model_path)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (title, now, now, system_prompt, json.dumps(sampling or {}), model_path))
        assert cur.lastrowid is not None  # an INSERT's row
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
        self._update_conversation(conversation_id, "title=?", (title,), "rename the chat")

    def update_settings(self, conversation_id: int, *, system_prompt: str | None = None,
                        sampling: dict[str, Any] | None = None, model_path: str | None = None,
                        overflow: str | None = None) -> None:
        """Each value given is saved; ``overflow`` "" goes back to the Settings' default."""
        sets: list[str] = []
        values: list[Any] = []
        if overflow is not None:
            sets.append("overflow=?")
            values.append(overflow or None)
        for column, value in (("system_prompt", system_prompt), ("model_path", model_path),
                              ("sampling_json", None if sampling is None else json.dumps(sampling))):
            if value is not None:
                sets.append(f"{column}=?")
                values.append(value)
        if sets:
            self._update_conversation(conversation_id, ", ".join(sets), tuple(values), "save the chat's settings")

    def set_tool_servers(self, conversation_id: int, servers: Sequence[str] | None) -> None:
        """The MCP servers whose tools the chat's model sees: these (an empty list: none), or None: every server."""
        self._update_conversation(conversation_id, "tool_servers_json=?",
                                  (None if servers is None else json.dumps(list(servers)),), "save the chat's tools")

    def set_documents(self, conversation_id: int, names: Sequence[str]) -> None:
        """The document collections attached to the chat (each question retrieves from them); empty: none."""
        unique = list(dict.fromkeys(names))  # attached twice is attached once, in the order first given
        self._update_conversation(conversation_id, "documents_json=?", (json.dumps(unique) if unique else None,),
                                  "save the chat's documents")

    def _update_conversation(self, conversation_id: int, assignments: str, values: tuple[Any, ...],
                             action: str) -> None:
        with self._writing(action):
            cur = self._db.execute(f"UPDATE conversations SET {assignments}, updated=? WHERE id=?",
                                   (*values, self._clock(), conversation_id))
        if cur.rowcount == 0:
            raise NotFound(f"conversation {conversation_id} does not exist")

    def delete_conversation(self, conversation_id: int) -> DeletedConversation:
        """Deletes its messages too (ON DELETE CASCADE). Returns the rows removed, so that
        ``restore_conversation`` can undo it."""
        with self._writing("delete the chat"), self._transaction():
            row = self._db.execute("SELECT * FROM conversations WHERE id=?", (conversation_id,)).fetchone()
            if row is None:
                raise NotFound(f"conversation {conversation_id} does not exist")
            messages = self._db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id",
                                        (conversation_id,)).fetchall()
            attachments = self._db.execute(
                "SELECT a.* FROM attachments a JOIN messages m ON m.id = a.message_id WHERE m.conversation_id=? "
                "ORDER BY a.id", (conversation_id,)).fetchall()
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))
        # The image files stay until purge_attachments: an undo puts the rows back and finds them.
        return DeletedConversation(dict(row), tuple(dict(m) for m in messages), tuple(dict(a) for a in attachments))

    def restore_conversation(self, deleted: DeletedConversation) -> Conversation:
        """Put back a deleted conversation with the same ids, settings, timestamps and messages
        (undo). The ids are free: AUTOINCREMENT never hands a deleted id out again."""
        try:
            with self._writing(f"restore the chat “{deleted.title}”"), self._transaction():
                for table, rows in (("conversations", (deleted.row,)), ("messages", deleted.messages),
                                    ("attachments", deleted.attachments)):
                    for row in rows:
                        # Column names come from our own table's rows, never from input.
                        columns = ", ".join(row)
                        marks = ", ".join("?" * len(row))
                        self._db.execute(f"INSERT INTO {table}({columns}) VALUES ({marks})", tuple(row.values()))
        except sqlite3.IntegrityError as exc:
            raise ChatStoreError(f"cannot restore the chat “{deleted.title}”: it is there already",
                                 "nothing to undo") from exc
        return self.conversation(deleted.id)

    # --- messages ------------------------------------------------------------------------------

    def add_message(self, conversation_id: int, role: Role, content: str, *, state: MessageState = "complete",
                    stats: dict[str, Any] | None = None, reasoning: str = "") -> ChatMessage:
        """Append a message to the branch on show."""
        with self._writing("save the message"), self._transaction():
            message_id = self._insert_message(conversation_id, role, content, state, stats, reasoning=reasoning)
        return self.message(message_id)

    def _insert_message(self, conversation_id: int, role: Role, content: str, state: MessageState,
                        stats: dict[str, Any] | None, images: Sequence[tuple[str, ImageInfo]] = (),
                        parent_id: int | None = AT_LEAF, reasoning: str = "") -> int:
        """INSERT inside the caller's transaction (with the rows of its images, already stored), as a child of
        ``parent_id`` (by default the leaf of the branch on show; None: a first message), and make it the leaf;
        bumps the conversation's ``updated``."""
        now = self._clock()
        if parent_id == AT_LEAF:
            parent_id = self._leaf_id(conversation_id)
        elif parent_id is not None and self.message(parent_id).conversation_id != conversation_id:
            raise NotFound(f"message {parent_id} is not in conversation {conversation_id}")
        try:
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, created, stats_json, state, parent_id, reasoning)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, role, content, now, json.dumps(stats) if stats else None, state, parent_id,
                 reasoning))
        except sqlite3.IntegrityError as exc:
            raise NotFound(f"conversation {conversation_id} does not exist") from exc
        for position, (name, info) in enumerate(images):
            self._db.execute("INSERT INTO attachments(message_id, position, file, media_type, width, height)"
                             " VALUES (?, ?, ?, ?, ?, ?)",
                             (cur.lastrowid, position, name, info.media_type, info.width, info.height))
        self._db.execute("UPDATE conversations SET updated=?, leaf_id=? WHERE id=?",
                         (now, cur.lastrowid, conversation_id))
        assert cur.lastrowid is not None  # an INSERT's row
        return cur.lastrowid

    def _leaf_id(self, conversation_id: int) -> int | None:
        row = self._db.execute("SELECT leaf_id FROM conversations WHERE id=?", (conversation_id,)).fetchone()
        if row is None:
            raise NotFound(f"conversation {conversation_id} does not exist")
        leaf: int | None = row["leaf_id"]
        return leaf

    def _images(self, message_ids: list[int]) -> dict[int, tuple[Attachment, ...]]:
        found: dict[int, list[Attachment]] = {}
        if message_ids:
            marks = ", ".join("?" * len(message_ids))
            for r in self._db.execute(f"SELECT * FROM attachments WHERE message_id IN ({marks}) "
                                      "ORDER BY message_id, position", message_ids):
                found.setdefault(r["message_id"], []).append(
                    Attachment(self.attachments_dir / r["file"], r["media_type"], r["width"], r["height"]))
        return {k: tuple(v) for k, v in found.items()}

    def message(self, message_id: int) -> ChatMessage:
        row = self._db.execute("SELECT * FROM messages WHERE id=?", (message_id,)).fetchone()
        if row is None:
            raise NotFound(f"message {message_id} does not exist")
        return _message(row, self._images([message_id]).get(message_id, ()))

    def messages(self, conversation_id: int) -> list[ChatMessage]:
        """The branch on show, first message first: the leaf and its ancestors."""
        rows = self._db.execute(
            """WITH RECURSIVE branch(id) AS (
                   SELECT leaf_id FROM conversations WHERE id=?
                   UNION ALL SELECT m.parent_id FROM messages m JOIN branch b ON m.id = b.id
                   WHERE m.parent_id IS NOT NULL)
               SELECT m.* FROM messages m JOIN branch b ON m.id = b.id ORDER BY m.id""", (conversation_id,)).fetchall()
        return self._with_images(rows)

    def all_messages(self, conversation_id: int) -> list[ChatMessage]:
        """Every message of every branch, in the order they were written."""
        rows = self._db.execute("SELECT * FROM messages WHERE conversation_id=? ORDER BY id",
                                (conversation_id,)).fetchall()
        return self._with_images(rows)

    def _with_images(self, rows: list[sqlite3.Row]) -> list[ChatMessage]:
        images = self._images([r["id"] for r in rows])
        return [_message(r, images.get(r["id"], ())) for r in rows]

    def branches(self, message_id: int) -> Branches:
        """``message_id`` among its siblings (the other answers to its parent, or the other first messages)."""
        msg = self.message(message_id)
        if msg.parent_id is None:
            rows = self._db.execute("SELECT id FROM messages WHERE conversation_id=? AND parent_id IS NULL ORDER BY id",
                                    (msg.conversation_id,))
        else:
            rows = self._db.execute("SELECT id FROM messages WHERE parent_id=? ORDER BY id", (msg.parent_id,))
        ids = tuple(r["id"] for r in rows)
        return Branches(ids.index(message_id) + 1, len(ids), ids)

    def show_branch(self, message_id: int) -> list[ChatMessage]:
        """Show the branch through ``message_id``: down to its newest descendants (the newest child at each
        step). Returns the branch now on show."""
        msg = self.message(message_id)
        leaf = message_id
        while (child := self._db.execute("SELECT max(id) AS id FROM messages WHERE parent_id=?",
                                         (leaf,)).fetchone()["id"]) is not None:
            leaf = child
        with self._writing("switch branches"):
            self._db.execute("UPDATE conversations SET leaf_id=? WHERE id=?", (leaf, msg.conversation_id))
        return self.messages(msg.conversation_id)

    def delete_branch(self, message_id: int) -> list[ChatMessage]:
        """Delete a message and everything written after it on its branches (its descendants); the branch on
        show becomes a neighbouring sibling's, or ends at the parent when it had none. Returns that branch."""
        msg = self.message(message_id)
        siblings = self.branches(message_id).ids
        neighbour = next((i for i in reversed(siblings) if i < message_id), None) or \
            next((i for i in siblings if i > message_id), None)
        on_show = any(m.id == message_id for m in self.messages(msg.conversation_id))
        with self._writing("delete the branch"), self._transaction():
            self._db.execute("DELETE FROM messages WHERE id=?", (message_id,))  # descendants: ON DELETE CASCADE
            if on_show and neighbour is None:
                self._db.execute("UPDATE conversations SET leaf_id=? WHERE id=?", (msg.parent_id, msg.conversation_id))
        if on_show and neighbour is not None:
            return self.show_branch(neighbour)
        return self.messages(msg.conversation_id)

    def set_context_cut(self, message_id: int, cut: dict[str, Any]) -> None:
        """Keep with a reply what the overflow policy left out of its prompt (ContextCut.to_dict())."""
        with self._writing("save what the model was not sent"):
            cur = self._db.execute("UPDATE messages SET context_cut_json=? WHERE id=?", (json.dumps(cut), message_id))
        if cur.rowcount == 0:
            raise NotFound(f"message {message_id} does not exist")

    def set_citations(self, message_id: int, citations: Sequence[dict[str, Any]]) -> None:
        """Keep with a reply the passages it was given (Citation.to_dict() each, with its ``where``); empty: none."""
        with self._writing("save the reply's citations"):
            cur = self._db.execute("UPDATE messages SET citations_json=? WHERE id=?",
                                   (json.dumps([dict(c) for c in citations]) if citations else None, message_id))
        if cur.rowcount == 0:
            raise NotFound(f"message {message_id} does not exist")

    def set_pinned(self, message_id: int, pinned: bool) -> None:
        """Pin a message (an overflow policy never leaves it out of the prompt: app/engine/overflow.py) or unpin it."""
        with self._writing("pin the message" if pinned else "unpin the message"):
            cur = self._db.execute("UPDATE messages SET pinned=? WHERE id=?", (int(pinned), message_id))
        if cur.rowcount == 0:
            raise NotFound(f"message {message_id} does not exist")

    def update_message(self, message_id: int, *, content: str | None = None, state: MessageState | None = None,
                       stats: dict[str, Any] | None = None, reasoning: str | None = None,
                       tools: Sequence[ToolCard] | None = None) -> None:
        """``tools``: the reply's tool cards, all of them (each save writes the whole list)."""
        self._update_message(message_id, "save the message", content, state, stats, reasoning, tools)

    def _update_message(self, message_id: int, action: str, content: str | None, state: MessageState | None,
                        stats: dict[str, Any] | None, reasoning: str | None = None,
                        tools: Sequence[ToolCard] | None = None) -> None:
        sets, values = [], []
        tools_json = None if tools is None else json.dumps([card.to_dict() for card in tools]) if tools else ""
        for column, value in (("content", content), ("state", state),
                              ("stats_json", None if stats is None else json.dumps(stats)), ("reasoning", reasoning),
                              ("tools_json", tools_json)):
            if value is not None:
                sets.append(f"{column}=?")
                values.append(value)
        if not sets:
            return
        with self._writing(action):
            cur = self._db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*values, message_id))
        if cur.rowcount == 0:
            raise NotFound(f"message {message_id} does not exist")

    def begin_reply(self, conversation_id: int, *, prompt: str | None = None, images: Sequence[bytes] = (),
                    after: int | None = AT_LEAF, min_interval_s: float = 0.25, min_chars: int = 2000,
                    monotonic: Callable[[], float] = time.monotonic) -> ReplyWriter:
        """Start an assistant message in state ``streaming``; feed it with ``ReplyWriter.append``.
        With ``prompt``, the user's message goes in first (with its ``images``: PNG, JPEG or WebP files, kept
        under ``attachments/``), in the same transaction: both are saved or neither is (``ReplyWriter.prompt_id``
        is its id). An image that is not one raises ``app.images.ImageError`` before anything is saved.
        ``after``: the message the new one follows (by default the leaf of the branch on show); naming an earlier
        one starts a new branch there (an edited message resent, a reply written again), None before the first
        message."""
        stored = [self._store_image(data) for data in images] if prompt is not None else []
        with self._writing("save your message" if prompt is not None else "start the reply"), self._transaction():
            prompt_id = None if prompt is None else self._insert_message(conversation_id, "user", prompt,
                                                                         "complete", None, stored, after)
            reply_id = self._insert_message(conversation_id, "assistant", "", "streaming", None, (),
                                            prompt_id if prompt_id is not None else after)
        return ReplyWriter(self, reply_id, min_interval_s=min_interval_s, min_chars=min_chars, monotonic=monotonic,
                           conversation_id=conversation_id, prompt_id=prompt_id)

    # --- presets -------------------------------------------------------------------------------

    def save_preset(self, name: str, *, system_prompt: str = "", sampling: dict[str, Any] | None = None) -> None:
        name = name.strip()
        if not name:
            raise ValueError("a preset needs a name")
        with self._writing(f"save the preset {name!r}"):
            self._db.execute(
                "INSERT INTO presets(name, system_prompt, sampling_json) VALUES (?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET system_prompt=excluded.system_prompt,"
                " sampling_json=excluded.sampling_json",
                (name, system_prompt, json.dumps(sampling or {})))

    def presets(self) -> list[Preset]:
        rows = self._db.execute("SELECT * FROM presets ORDER BY name COLLATE NOCASE")
        return [Preset(r["name"], r["system_prompt"], json.loads(r["sampling_json"])) for r in rows]

    def delete_preset(self, name: str) -> None:
        with self._writing(f"delete the preset {name!r}"):
            deleted = self._db.execute("DELETE FROM presets WHERE name=?", (name,)).rowcount
        if deleted == 0:
            raise NotFound(f"there is no preset named {name!r}")


class ReplyWriter:
    """Saves a streamed reply as it grows: a cheap UPDATE at most every ``min_interval_s`` (or when
    ``min_chars`` arrive sooner), and always on ``finish``/``interrupt``. The text in memory is the
    truth; the database lags it by at most one interval. A thinking model's reply has two texts, its
    thinking (``reasoning``) and its answer (``text``), saved together.

    A save the store refuses (``ChatStoreError``: the disk is full, ...) never raises out of
    ``append``/``finish``/``interrupt`` and loses nothing: ``error`` says why, ``saved`` is False, and
    the next save tries again (the next due ``append``, or ``save()`` itself, also after the reply
    has ended) until the text, state and stats are all in the database."""

    def __init__(self, store: ChatStore, message_id: int, *, min_interval_s: float, min_chars: int,
                 monotonic: Callable[[], float], conversation_id: int | None = None,
                 prompt_id: int | None = None) -> None:
        self.store = store
        self.message_id = message_id
        self.conversation_id = conversation_id
        self.prompt_id = prompt_id  # the user's message begin_reply saved with it, if any
        self._parts: list[str] = []
        self._reasoning_parts: list[str] = []
        self._unsaved_chars = 0
        self._min_interval_s = min_interval_s
        self._min_chars = min_chars
        self._monotonic = monotonic
        self._last_save = monotonic()
        self.saves = 0
        self.closed = False
        self.state: MessageState = "streaming"
        self.stats: dict[str, Any] | None = None
        self.error: ChatStoreError | None = None  # why the last save failed; None once one succeeds
        self._close_unsaved = False  # finish/interrupt is not in the database yet

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning_parts)

    @property
    def saved(self) -> bool:
        """Everything this writer was given (text, and the end state and stats) is in the database."""
        return not self._unsaved_chars and not self._close_unsaved

    def append(self, text: str, reasoning: str = "") -> None:
        """More of the answer (``text``) and of the thinking (``reasoning``), as they come."""
        if self.closed:
            raise RuntimeError("this reply is already finished")
        if not text and not reasoning:
            return
        if reasoning:
            self._reasoning_parts.append(reasoning)
        if text:
            self._parts.append(text)
        self._unsaved_chars += len(text) + len(reasoning)
        # After a failure only the interval paces the retries: a full disk is not asked per token.
        if (self._monotonic() - self._last_save >= self._min_interval_s
                or self.error is None and self._unsaved_chars >= self._min_chars):
            self.save()

    def save(self) -> bool:
        """Write what the database lacks; True when it has it all. On a refusal ``error`` says why
        and the text stays in memory for the next try."""
        if not self.saved:
            # Join once per save, not per token: rendering and saving both stay cheap per token.
            joined, reasoning = self.text, self.reasoning
            self._parts, self._reasoning_parts = [joined], [reasoning]
            closing = self._close_unsaved
            try:
                if closing:
                    self.store._update_message(self.message_id, "save the reply", joined, self.state, self.stats,
                                               reasoning)
                else:
                    self.store._update_message(self.message_id, "save the reply", joined, None, None, reasoning)
            except ChatStoreError as exc:
                self.error = exc
            else:
                self.error = None
                self._unsaved_chars = 0
                self._close_unsaved = False
                if not closing:
                    self.saves += 1
        self._last_save = self._monotonic()
        return self.saved

    def finish(self, stats: dict[str, Any] | None = None, *, text: str | None = None,
               reasoning: str | None = None) -> bool:
        """The reply ended normally (also after a Stop: the engine's Done says ``cancelled``); ``text`` and
        ``reasoning``, when given, are the whole answer and thinking. Returns ``saved``."""
        return self._close("complete", stats, text, reasoning)

    def interrupt(self, stats: dict[str, Any] | None = None) -> bool:
        """The engine died or failed mid-reply: keep what arrived, marked. Returns ``saved``."""
        return self._close("interrupted", stats, None, None)

    def _close(self, state: MessageState, stats: dict[str, Any] | None, text: str | None,
               reasoning: str | None) -> bool:
        if self.closed:
            return self.saved
        if text is not None:
            self._parts = [text]
        if reasoning is not None:
            self._reasoning_parts = [reasoning]
        self.state, self.stats = state, stats
        self.closed = True
        self._close_unsaved = True
        return self.save()
