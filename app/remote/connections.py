"""Connections to remote OpenAI-compatible servers: their addresses in ``remotes.json`` under the config folder, their
API keys in the operating system's keychain (through ``keyring``), or — only where no keychain exists — in a file
readable by the user alone (0600), which the Settings page and ``quantdesk remote ls`` say.

A remote model is named ``remote:CONNECTION/MODEL`` wherever a model path is taken (``quantdesk chat``, ``serve``,
``bench``, the Chat page), so every place that loads a model loads a remote one the same way.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from app import paths
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.keychain import KeyStore, KeyStoreError
from app.keychain import keychain as keychain  # where the remote engines' keys go: said by `remote ls` and tests
from app.records import from_known
from backends.remote import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S, Endpoint

FILE_NAME = "remotes.json"
KEY_FILE_NAME = "remote-keys.json"
KEYRING_SERVICE = "QuantDesk remote engine"
REF_PREFIX = "remote:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RemoteConnectionError(QuantDeskError):
    """A connection that cannot be added, found or used; the message says why."""


class ProbedModel(TypedDict):
    id: str
    owned_by: str
    n_ctx: int | None  # where the server says


class ConnectionProbe(TypedDict):
    """What ``Connections.probe`` found (``quantdesk remote test --json`` prints it as is)."""

    name: str
    kind: str  # quantdesk | llama.cpp | vllm | openai-compatible
    latency_ms: float
    models: list[ProbedModel]


@dataclass
class Connection:
    name: str
    base_url: str
    ca_file: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    stall_s: float = DEFAULT_STALL_S
    key_store: str = ""  # "" no key | "keychain" | "file"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def has_key(self) -> bool:
        return bool(self.key_store)

    def warnings(self) -> list[str]:
        """What the user should know about this connection's safety."""
        host = urlsplit(self.base_url).hostname or ""
        if self.has_key and urlsplit(self.base_url).scheme == "http" and not _is_loopback(host):
            return [f"{self.name} uses plain http to {host}: the API key and the chats travel unencrypted; "
                    "use https where the server offers it"]
        return []


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalise_url(url: str) -> str:
    """Check an endpoint address and drop a trailing slash; refuse what is not an http(s) URL with a host."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteConnectionError(f"{url!r} is not an http:// or https:// address",
                                    "for example http://192.168.1.20:8080/v1")
    if parts.username or parts.password:
        raise RemoteConnectionError("put the API key in the key field, not in the address",
                                    "an address with a password ends up in logs and history")
    if parts.query or parts.fragment:
        raise RemoteConnectionError(f"{url!r} has a query or fragment; give the server's base address, e.g. …/v1")
    return url.rstrip("/")


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise RemoteConnectionError(f"{name!r} cannot name a connection",
                                    "use letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit")
    return name


# --- model references ---------------------------------------------------------------------------------


def is_remote_ref(text: str | os.PathLike[str]) -> bool:
    return isinstance(text, str) and text.startswith(REF_PREFIX)


def model_ref(connection: str, model: str) -> str:
    return f"{REF_PREFIX}{connection}/{model}"


def parse_ref(ref: str) -> tuple[str, str]:
    """``remote:NAME/MODEL`` → (NAME, MODEL); the model id may itself hold slashes (``Qwen/Qwen3-8B``)."""
    name, _, model = ref[len(REF_PREFIX):].partition("/")
    if not is_remote_ref(ref) or not name or not model:
        raise RemoteConnectionError(f"{ref!r} is not a remote model", "write it as remote:CONNECTION/MODEL")
    return name, model


def display_name(ref: str) -> str:
    name, model = parse_ref(ref)
    return f"{model} @ {name}"


@dataclass(frozen=True)
class RemoteModelRef:
    """A remote model where a local one would be a ``ModelRef`` (app.models.detect)."""

    path: str  # remote:CONNECTION/MODEL
    format: str = "remote"

    @property
    def display_name(self) -> str:
        return display_name(self.path)


# --- keys ------------------------------------------------------------------------------------------------


_KEYS = KeyStore(KEYRING_SERVICE, KEY_FILE_NAME, "API keys")


def key_file() -> Path:
    return _KEYS.file()


def key_storage_sentence() -> str:
    """Where a new key would be kept, in words (the Settings page and ``remote ls`` show it)."""
    return _KEYS.storage_sentence()


# --- the store -------------------------------------------------------------------------------------------


class Connections:
    """The saved connections. Reads the file at each call (the CLI and the GUI may both change it)."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder

    @property
    def path(self) -> Path:
        return (self._folder or paths.config_dir()) / FILE_NAME

    def all(self) -> list[Connection]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise RemoteConnectionError(f"the connections file {self.path} cannot be read ({exc})",
                                        "fix or delete it; keys in the keychain are not affected") from None
        out = []
        for item in data.get("connections", []) if isinstance(data, dict) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("base_url"), str):
                out.append(from_known(Connection, item))
        return out

    def get(self, name: str) -> Connection:
        found = next((c for c in self.all() if c.name == name), None)
        if found is None:
            known = ", ".join(c.name for c in self.all()) or "none yet"
            raise RemoteConnectionError(f"there is no remote connection named {name!r} (known: {known})",
                                        "add one with: quantdesk remote add NAME URL")
        return found

    def _save(self, connections: list[Connection]) -> None:
        write_text_atomic(self.path, json.dumps({"connections": [c.to_json() for c in connections]}, indent=2) + "\n")

    def save(self, connection: Connection, api_key: str | None = None) -> Connection:
        """Add or replace a connection. ``api_key``: None keeps the current key, "" removes it, else stores it."""
        check_name(connection.name)
        connection.base_url = normalise_url(connection.base_url)
        if connection.ca_file and not Path(connection.ca_file).expanduser().is_file():
            raise RemoteConnectionError(f"the CA file {connection.ca_file} does not exist")
        if connection.timeout_s <= 0 or connection.stall_s <= 0:
            raise RemoteConnectionError("timeouts must be more than 0 seconds")
        others = [c for c in self.all() if c.name != connection.name]
        previous = next((c for c in self.all() if c.name == connection.name), None)
        connection.key_store = previous.key_store if previous else ""
        if api_key is not None:
            self._forget_key(connection)
            if api_key.strip():
                connection.key_store = self._store_key(connection.name, api_key.strip())
        self._save([*others, connection])
        return connection

    def remove(self, name: str) -> None:
        connection = self.get(name)
        self._forget_key(connection)
        self._save([c for c in self.all() if c.name != name])

    # --- keys

    def _store_key(self, name: str, key: str) -> str:
        try:
            return _KEYS.store(name, key)
        except KeyStoreError as exc:
            raise RemoteConnectionError(exc.message.replace("the secret", "the key"), exc.hint) from None

    def _forget_key(self, connection: Connection) -> None:
        _KEYS.forget(connection.name, connection.key_store)
        connection.key_store = ""

    def api_key(self, connection: Connection) -> str:
        key = _KEYS.get(connection.name, connection.key_store)
        if key is None:
            where = "the system keychain" if connection.key_store == "keychain" else str(key_file())
            missing = "no longer in" if connection.key_store == "keychain" else "missing from"
            raise RemoteConnectionError(f"the API key of {connection.name} is {missing} {where}",
                                        "set it again in Settings or with: quantdesk remote add --api-key-stdin")
        return key

    def endpoint(self, connection: Connection, model: str = "") -> Endpoint:
        return Endpoint(base_url=connection.base_url, model=model, api_key=self.api_key(connection),
                        ca_file=str(Path(connection.ca_file).expanduser()) if connection.ca_file else "",
                        timeout_s=connection.timeout_s, stall_s=connection.stall_s, name=connection.name)

    def probe(self, connection: Connection) -> ConnectionProbe:
        """The connection's models, the kind of server and its latency (``remote test``, Settings' Test button);
        raises EngineError with the sentence when the server cannot be used."""
        from app.errors import EngineError
        from backends.base import GenerationError
        from backends.remote import list_models

        try:
            info = list_models(self.endpoint(connection))
        except GenerationError as exc:
            raise EngineError(exc.message, exc.hint, kind=exc.kind) from None
        return {"name": connection.name, "kind": info.kind, "latency_ms": round(info.latency_ms, 1),
                "models": [{"id": m.id, "owned_by": m.owned_by, "n_ctx": m.n_ctx} for m in info.models]}

    def endpoint_for(self, ref: str) -> Endpoint:
        name, model = parse_ref(ref)
        return self.endpoint(self.get(name), model)
