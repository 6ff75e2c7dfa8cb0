"""Secrets kept for the user: the operating system's keychain (through ``keyring``), or, only where no keychain
exists, a JSON file under the config folder readable by the user alone (0600). One rule for every secret QuantDesk
keeps: remote engines' API keys (app/remote/connections.py) and MCP servers' bearer tokens (app/mcp/config.py),
each kind under its own keychain service and file.

Where a secret went is recorded by its owner as "keychain", "file" or "" (none), so reading it back asks the
same place and a keychain that lost it is said in words.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from app import paths
from app.errors import QuantDeskError
from app.files import write_text_atomic


class KeyStoreError(QuantDeskError):
    """A secret that cannot be stored or is no longer where it was kept; the message says why."""


def keychain() -> Any:
    """The operating system's keychain through keyring, or None where there is none.

    keyring falls back to backends that are not keychains (its ``fail`` and ``null`` backends, or keyrings.alt's
    plain files when installed); those count as none, unless the user chose a backend on purpose with
    PYTHON_KEYRING_BACKEND, which is then theirs to trust."""
    try:
        import keyring
        from keyring.backends import chainer, fail
    except ImportError:
        return None
    backend = keyring.get_keyring()
    if os.environ.get("PYTHON_KEYRING_BACKEND"):
        return backend
    if isinstance(backend, fail.Keyring) or type(backend).__module__.startswith(("keyring.backends.null",
                                                                                  "keyrings.alt")):
        return None
    if isinstance(backend, chainer.ChainerBackend):
        real = [b for b in backend.backends
                if not type(b).__module__.startswith(("keyrings.alt", "keyring.backends.null"))
                and not isinstance(b, fail.Keyring)]
        return backend if real else None
    return backend


class KeyStore:
    """The secrets of one kind: ``service`` names them in the keychain, ``file_name`` is the 0600 file used where
    there is no keychain. ``what`` says them in sentences ("API keys", "bearer tokens")."""

    def __init__(self, service: str, file_name: str, what: str = "keys") -> None:
        self.service, self.file_name, self.what = service, file_name, what

    def file(self) -> Path:
        return paths.config_dir() / self.file_name

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}

    def _write_file(self, keys: dict[str, str]) -> None:
        if keys:
            write_text_atomic(self.file(), json.dumps(keys, indent=1) + "\n", private=True)
        else:
            self.file().unlink(missing_ok=True)

    def storage_sentence(self) -> str:
        """Where a new secret would be kept, in words (Settings and the CLI show it)."""
        backend = keychain()
        if backend is not None:
            return f"{self.what.capitalize()} are kept in the system keychain ({type(backend).__name__})."
        return (f"No system keychain was found, so {self.what} are kept in {self.file()}, readable only by you "
                "(permissions 0600).")

    def store(self, name: str, secret: str) -> str:
        """Keep ``secret`` under ``name``; returns where: "keychain" or "file"."""
        backend = keychain()
        if backend is not None:
            try:
                backend.set_password(self.service, name, secret)
                return "keychain"
            except Exception as exc:  # a locked or refusing keychain: say so rather than fall back silently
                raise KeyStoreError(f"the system keychain refused to store the secret ({exc})",
                                    "unlock the keychain and try again") from None
        keys = self._read_file()
        keys[name] = secret
        self._write_file(keys)
        return "file"

    def forget(self, name: str, where: str) -> None:
        """Remove the secret kept under ``name`` in ``where`` ("keychain", "file"; "" has none)."""
        if where == "keychain":
            backend = keychain()
            if backend is not None:
                try:
                    backend.delete_password(self.service, name)
                except Exception:  # already gone from the keychain: nothing left to forget
                    pass
        elif where == "file":
            keys = self._read_file()
            if keys.pop(name, None) is not None:
                self._write_file(keys)

    def get(self, name: str, where: str) -> str | None:
        """The secret kept under ``name`` in ``where``; "" where none was kept, None where it is no longer there."""
        if where == "keychain":
            backend = keychain()
            return backend.get_password(self.service, name) if backend is not None else None
        if where == "file":
            return self._read_file().get(name)
        return ""
