"""The SQLite databases the app keeps (the chats, the documents): an error SQLite returned because of the disk, the
file or another program, in words. The one copy of that rule; each store names its database and what to do with a
damaged one."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

FULL_DISK_BYTES = 1 << 20  # less free space than this, and an I/O error is taken for a full disk


def sqlite_refusal(exc: sqlite3.DatabaseError, path: Path, noun: str,
                   damaged_hint: str) -> tuple[str, str, str] | None:
    """(kind, why, hint) for an error SQLite returned about the database at ``path`` (``noun``: "chat database")
    because of the disk, the file or another program; None for SQL and programming errors."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself (misuse), not by SQLite
        return None
    primary = code & 0xFF  # extended codes (SQLITE_IOERR_WRITE, ...) keep the primary code in the low byte
    folder = path.parent
    # A full disk shows as SQLITE_FULL when a file cannot grow, but as an I/O error where SQLite
    # cannot tell (growing the -shm file, fsync): then the free space decides.
    if primary == sqlite3.SQLITE_FULL or primary == sqlite3.SQLITE_IOERR and disk_is_full(folder):
        return "full", f"the disk that holds the {noun} is full", f"free some space on the disk with {folder}"
    if primary == sqlite3.SQLITE_IOERR:
        return "io", f"the {noun} could not be written ({exc})", f"check the disk with {folder}"
    if primary == sqlite3.SQLITE_READONLY:
        return "readonly", f"the {noun} {path} is read-only", f"make sure you can write to {folder}"
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return "busy", f"another program is using the {noun}", "close other QuantDesk windows"
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return "damaged", f"the {noun} {path} is damaged", damaged_hint
    if primary == sqlite3.SQLITE_CANTOPEN:
        return "gone", f"the {noun} {path} cannot be opened any more", f"check that {folder} is there"
    return None


def disk_is_full(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < FULL_DISK_BYTES
    except OSError:
        return False  # cannot tell: say what SQLite said instead
