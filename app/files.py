"""Writing small files so that a crash mid-write leaves the old file whole."""

from __future__ import annotations

import os
from pathlib import Path


def write_text_atomic(path: Path, text: str, *, private: bool = False) -> Path:
    """Write ``text`` to a temp file beside ``path``, flush it to disk, then ``os.replace`` it into place.
    ``private`` creates the file readable and writable by the user only (0600) from its first byte."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
