"""Typed errors that carry a sentence for the user and, where we know one, a hint.

The GUI shows ``str(error)`` (never a traceback); the CLI prints it to stderr and exits non-zero.
"""

from __future__ import annotations


class QuantDeskError(Exception):
    """Base of every error we expect a user to read."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ModelFileError(QuantDeskError):
    """A model file or folder is missing, corrupt, truncated or of a kind we cannot run."""


class BackendUnavailable(QuantDeskError):
    """The backend cannot run on this machine; the message says why."""


class EngineError(QuantDeskError):
    """The engine reported a failure (load failed, bad request) and is still alive."""

    def __init__(self, message: str, hint: str = "", kind: str = "engine") -> None:
        super().__init__(message, hint)
        self.kind = kind


class EngineCrashed(QuantDeskError):
    """The engine process died. ``reason`` is the sentence; ``returncode`` and ``stderr_tail`` the evidence."""

    def __init__(self, message: str, hint: str = "", *, returncode: int | None = None,
                 stderr_tail: tuple[str, ...] = (), phase: str = "") -> None:
        super().__init__(message, hint)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.phase = phase
