"""The local servers running now, each said by a small file while it listens: ``quantdesk serve`` and the app's Server
page write one when they start listening and remove it when they stop, so ``quantdesk launch`` finds a running server
(its address, whether it wants an API key) instead of starting another.

A record never holds the key itself: secrets are kept in one place only (app/keychain.py), and a client that needs
the key is given it by its user (``--api-key`` or ``QUANTDESK_API_KEY``). A server killed without stopping leaves its
file behind: a file whose process is gone is removed when the records are read.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from app import paths
from app.files import write_text_atomic


@dataclass(frozen=True)
class ServerRecord:
    url: str  # http://host:port, without /v1
    pid: int
    api_key_required: bool
    source: str  # "serve" (quantdesk serve) or "app" (the Server page)
    started: float  # time.time() when it began listening


def records_dir() -> Path:
    return paths.data_dir() / "servers"


def announce(url: str, *, api_key_required: bool, source: str) -> Path:
    """Say that this process serves at ``url``; the record's path, for ``withdraw``."""
    record = ServerRecord(url.rstrip("/"), os.getpid(), api_key_required, source, time.time())
    path = records_dir() / f"{record.pid}-{url.rsplit(':', 1)[-1].strip('/')}.json"
    write_text_atomic(path, json.dumps(asdict(record)) + "\n")
    return path


def withdraw(path: Path | None) -> None:
    """The server of that record stopped listening."""
    if path is not None:
        path.unlink(missing_ok=True)


def running() -> list[ServerRecord]:
    """The servers whose process still runs, the newest first; records of processes gone are removed."""
    found: list[ServerRecord] = []
    folder = records_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = ServerRecord(str(data["url"]), int(data["pid"]), bool(data["api_key_required"]),
                                  str(data.get("source", "")), float(data.get("started", 0)))
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # half a file from another version, or damaged: not a server to find
            continue
        if not psutil.pid_exists(record.pid):
            path.unlink(missing_ok=True)
            continue
        found.append(record)
    return sorted(found, key=lambda r: r.started, reverse=True)
