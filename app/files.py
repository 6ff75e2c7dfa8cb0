"""Writing small files so that a crash mid-write leaves the old file whole: the one way the app replaces a file it
keeps (settings, the Hub token, pins, connections, bench results, a download's job, caches, a chat's images, a
chat's saved model state).

The bytes go to a temp file beside the target (same folder, so the same file system), are flushed and fsynced, and
only then ``os.replace`` the target: a reader sees the old file or the new one, never half of one, and after a power
cut the new name never points at data still in the page cache. A failed write removes its temp file. A second name
for a kept file (a saved state kept under another key too) is a hard link put in place the same way (``link_atomic``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes, *, private: bool = False) -> Path:
    """Write ``data`` to a temp file beside ``path``, flush it to disk, then ``os.replace`` it into place.
    ``private`` creates the file readable and writable by the user only (0600) from its first byte."""
    return write_parts_atomic(path, (data,), private=private)


def write_parts_atomic(path: Path, parts: Iterable[bytes | memoryview], *, private: bool = False) -> Path:
    """``write_bytes_atomic`` of the parts one after the other: a large binary file (a chat's saved model state,
    a header and a buffer the engine owns) is written without first joining it into one more copy in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The process and thread in the name: two writers of one file never share a temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: Path, text: str, *, private: bool = False) -> Path:
    """``write_bytes_atomic`` of ``text`` in UTF-8."""
    return write_bytes_atomic(path, text.encode("utf-8"), private=private)


def link_atomic(source: Path, path: Path) -> Path:
    """``path`` made a second name of the file at ``source`` (a hard link: no copy, the same bytes), replacing what
    ``path`` named as a write does: the link is made beside it under a temp name, then ``os.replace`` d into place.
    OSError where the file system has no hard links (the caller writes a copy instead) or ``source`` is gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    os.link(source, tmp)
    try:
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
