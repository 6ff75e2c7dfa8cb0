"""Stored responses of the Responses API (``POST /v1/responses`` with ``store`` true, the default): SQLite in WAL mode
under ``app.paths.data_dir()``, so that a later request can go on from one by its ``previous_response_id`` and
``GET``/``DELETE /v1/responses/{id}`` can read or remove it.

A row keeps the response object as it was answered (for ``GET``) and the conversation it closes: the turns the model
read (without that request's ``instructions``, which OpenAI does not carry over to the next response) and its own
reply, as ``Message`` fields. A response older than the retention period (Settings: ``responses_retention_days``,
30 by default) is purged when the store opens and whenever a response is stored; one that is out of date but not yet
purged is never handed out.

The server reaches the store from worker threads (``asyncio.to_thread``): one connection, shared under a lock.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from app import paths
from app.settings import RESPONSES_RETENTION_DEFAULT
from app.datatypes import Message

DB_FILENAME = "responses.sqlite3"
_DAY_S = 86_400.0

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        response_json TEXT NOT NULL,
        conversation_json TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS responses_by_created ON responses(created)",
)


@dataclasses.dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]  # the response object, as the API answered it
    conversation: tuple[Message, ...]  # the turns it went on from, then its reply


def _message_json(message: Message) -> dict[str, Any]:
    return dataclasses.asdict(message)


def _message(data: dict[str, Any]) -> Message:
    return Message(role=data["role"], content=data["content"], images=tuple(data.get("images", ())),
                   tool_calls=tuple(data.get("tool_calls", ())), tool_call_id=data.get("tool_call_id", ""),
                   name=data.get("name", ""), reasoning=data.get("reasoning", ""))


class ResponseStore:
    """``path``: the database file (created with its folder); ``retention_days``: how long a response is kept;
    ``clock``: seconds since the epoch (tests move it)."""

    def __init__(self, path: Path | None = None, *, retention_days: float = RESPONSES_RETENTION_DEFAULT,
                 clock: Any = time.time) -> None:
        if retention_days <= 0:
            raise ValueError("the retention period must be above 0 days")
        self.path = path or paths.data_dir() / DB_FILENAME
        self.retention_s = retention_days * _DAY_S
        self._clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        with self._lock:
            for statement in _SCHEMA:
                self._db.execute(statement)
        self.purge()

    def _oldest_kept(self) -> float:
        return float(self._clock()) - self.retention_s

    def purge(self) -> int:
        """Remove the responses past the retention period; how many went."""
        with self._lock:
            return self._db.execute("DELETE FROM responses WHERE created < ?", (self._oldest_kept(),)).rowcount

    def put(self, response_id: str, response: dict[str, Any], conversation: list[Message]) -> None:
        self.purge()
        row = (response_id, float(self._clock()), json.dumps(response, ensure_ascii=False),
               json.dumps([_message_json(m) for m in conversation], ensure_ascii=False))
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (id, created, response_json, conversation_json) "
                             "VALUES (?, ?, ?, ?)", row)

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            row = self._db.execute("SELECT response_json, conversation_json FROM responses WHERE id = ? "
                                   "AND created >= ?", (response_id, self._oldest_kept())).fetchone()
        if row is None:
            return None
        return StoredResponse(json.loads(row[0]), tuple(_message(m) for m in json.loads(row[1])))

    def delete(self, response_id: str) -> bool:
        """Whether there was such a response to delete."""
        with self._lock:
            return self._db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount > 0

    def close(self) -> None:
        with self._lock:
            self._db.close()
