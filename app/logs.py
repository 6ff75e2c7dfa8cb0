"""QuantDesk's log file: warnings and the details of unexpected errors, rotated, under the user state folder
(app.paths.log_dir()). A user reads one sentence; the traceback waits here for a bug report.

The CLI (app.cli) and the GUI (app.ui.crash) both call ``setup()`` at start and ``record_unexpected()`` for an
error nobody caught. Nothing is written until something is logged.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

from app import paths

LOG_NAME = "quantdesk.log"
MAX_BYTES = 1 << 20
BACKUPS = 3  # quantdesk.log.1 … .3: the last few megabytes of history

log = logging.getLogger("quantdesk")


def log_file() -> Path:
    return paths.log_dir() / LOG_NAME


def setup() -> Path | None:
    """Send this process's warnings and errors to the rotated log file; idempotent. Called again after the log
    folder has moved (tests point it elsewhere), it follows. None when the folder cannot be made (a read-only
    home): the app runs on without a log file."""
    path = log_file()
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _LogFile):
            if handler.baseFilename == os.path.abspath(path):  # as logging.FileHandler stores it
                return path
            root.removeHandler(handler)
            handler.close()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    handler = _LogFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8", delay=True)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    return path


def record_unexpected(error: BaseException, where: str) -> Path | None:
    """Log ``error`` with its traceback (``where``: what was running); the log file's path, None without one."""
    path = setup()
    log.error("unexpected error in %s", where, exc_info=(type(error), error, error.__traceback__))
    return path


def summary(error: BaseException) -> str:
    """``RuntimeError: boom``: the error's type and the first line of its message, short."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text if len(text) <= 200 else text[:199] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _LogFile(logging.handlers.RotatingFileHandler):
    """Our handler, told apart from any a library or a test adds to the root logger."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # a full disk must not print logging's own traceback on the user's terminal
