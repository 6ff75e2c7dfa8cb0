"""The MCP servers the user added, in ``mcp.json`` under the config folder, in the format LM Studio, Claude Desktop
and Cursor use::

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                              "env": {}},
                    "search": {"url": "https://example.com/mcp", "headers": {"X-Team": "a"}}}}

so the file can be copied between those apps and QuantDesk. QuantDesk adds its own keys to an entry, which the
others ignore: ``confirmed`` (the command line the user saw and confirmed before its first start: a changed command
needs confirming again), ``disabled``, ``bearer`` (where the server's bearer token is kept: "keychain" or "file",
never the token itself: app/keychain.py), ``timeout_s`` (a tool call's limit). Keys this version does not know are
kept as they were. The file may hold secrets in ``env`` (as the other apps' files do), so it is written 0600.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app import paths
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.keychain import KeyStore, KeyStoreError

FILE_NAME = "mcp.json"
TOKEN_FILE_NAME = "mcp-tokens.json"
KEYRING_SERVICE = "QuantDesk MCP server"
DEFAULT_CALL_TIMEOUT_S = 60.0
DEFAULT_CONNECT_TIMEOUT_S = 30.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The keys of an entry this module reads; any other key is kept as it was (another app's, or a newer QuantDesk's).
_KNOWN = ("command", "args", "env", "cwd", "url", "headers", "confirmed", "disabled", "bearer", "timeout_s")

_TOKENS = KeyStore(KEYRING_SERVICE, TOKEN_FILE_NAME, "bearer tokens")


class McpConfigError(QuantDeskError):
    """An MCP server that cannot be added, found or read; the message says why."""


@dataclass
class McpServerConfig:
    """One MCP server: over stdio (``command`` with ``args``, ``env``, ``cwd``) or streamable HTTP (``url`` with
    ``headers``; a bearer token in the keychain, see ``McpServers.bearer_token``)."""

    name: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    confirmed: str = ""  # the command line the user confirmed (stdio); "" not yet
    disabled: bool = False
    bearer: str = ""  # "" none | "keychain" | "file": where its bearer token is kept
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S  # not saved: tests and callers shorten it
    extra: dict[str, Any] = field(default_factory=dict)  # keys of the entry this version does not read

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def command_line(self) -> str:
        """The command in full, as the user confirms it (environment variables first, then the working folder)."""
        if self.transport == "http":
            return self.url
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        line = shlex.join([self.command, *self.args])
        where = f" (in {self.cwd})" if self.cwd else ""
        return f"{env + ' ' if env else ''}{line}{where}"

    @property
    def needs_confirmation(self) -> bool:
        """A stdio server runs a program on this machine: the user sees its command line in full and confirms it
        before its first start, and again once it changed."""
        return self.transport == "stdio" and self.confirmed != self.command_line()

    def confirm(self) -> McpServerConfig:
        return replace(self, confirmed=self.command_line() if self.transport == "stdio" else "")

    def entry(self) -> dict[str, Any]:
        """The ``mcpServers`` entry: the shared keys the other apps read, then QuantDesk's own."""
        out: dict[str, Any] = dict(self.extra)
        if self.transport == "http":
            out["url"] = self.url
            if self.headers:
                out["headers"] = dict(self.headers)
        else:
            out.update({"command": self.command, "args": list(self.args), "env": dict(self.env)})
            if self.cwd:
                out["cwd"] = self.cwd
            if self.confirmed:
                out["confirmed"] = self.confirmed
        if self.disabled:
            out["disabled"] = True
        if self.bearer:
            out["bearer"] = self.bearer
        if self.timeout_s != DEFAULT_CALL_TIMEOUT_S:
            out["timeout_s"] = self.timeout_s
        return out

    @classmethod
    def from_entry(cls, name: str, entry: Any) -> McpServerConfig:
        """An ``mcpServers`` entry read as another app (or this one) wrote it; a sentence where it cannot be used."""
        if not isinstance(entry, dict):
            raise McpConfigError(f"the MCP server {name!r} is not described by an object")
        command, url = entry.get("command"), entry.get("url") or entry.get("serverUrl")  # serverUrl: Windsurf
        if bool(command) == bool(url):
            raise McpConfigError(f"the MCP server {name!r} needs either a command (stdio) or a url (HTTP), "
                                 "not both or neither")
        args, env, headers = entry.get("args", []), entry.get("env", {}), entry.get("headers", {})
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise McpConfigError(f"the args of the MCP server {name!r} are not a list of strings")
        if not _string_map(env):
            raise McpConfigError(f"the env of the MCP server {name!r} is not an object of strings")
        if not _string_map(headers):
            raise McpConfigError(f"the headers of the MCP server {name!r} are not an object of strings")
        if command is not None and not isinstance(command, str) or url and not isinstance(url, str):
            raise McpConfigError(f"the command or url of the MCP server {name!r} is not a string")
        timeout = entry.get("timeout_s", DEFAULT_CALL_TIMEOUT_S)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 < timeout <= 86_400:
            timeout = DEFAULT_CALL_TIMEOUT_S
        return cls(name=name, command=command or "", args=[str(a) for a in args],
                   env={k: str(v) for k, v in env.items()}, cwd=str(entry.get("cwd") or ""),
                   url=(url or "").strip(), headers={k: str(v) for k, v in headers.items()},
                   confirmed=_text(entry.get("confirmed")),
                   disabled=entry.get("disabled") is True,
                   bearer=_text(entry.get("bearer")) if entry.get("bearer") in ("keychain", "file") else "",
                   timeout_s=float(timeout),
                   extra={k: v for k, v in entry.items() if k not in _KNOWN and k != "serverUrl"})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, (str, int, float))
                                           for k, v in value.items())


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise McpConfigError(f"{name!r} cannot name an MCP server",
                             "use letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit")
    return name


def clean_name(name: str) -> str:
    """A name another app's file uses, made one QuantDesk takes ("Brave Search" → "Brave-Search")."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-._")[:64]
    return cleaned or "server"


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpConfigError(f"{url!r} is not an http:// or https:// address",
                             "for example https://example.com/mcp")
    if parts.username or parts.password:
        raise McpConfigError("put the token in the bearer token field, not in the address",
                             "an address with a password ends up in logs and history")
    return url


def _split_bearer(headers: dict[str, str]) -> tuple[dict[str, str], str]:
    """The headers without an ``Authorization: Bearer …`` header, and its token ("" where none)."""
    kept, token = {}, ""
    for key, value in headers.items():
        if key.lower() == "authorization" and value.lower().startswith("bearer ") and value[7:].strip():
            token = value[7:].strip()
        else:
            kept[key] = value
    return kept, token


@dataclass
class ImportReport:
    """What ``import_mcp_json`` did: the servers added, those left alone because the name was taken (with a
    different command or address), those renamed to a name QuantDesk takes, and entries that could not be read."""

    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # already here, the same
    conflicts: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # their name → ours
    skipped: dict[str, str] = field(default_factory=dict)  # name → why

    def sentences(self) -> list[str]:
        out = []
        if self.added:
            out.append(f"added {len(self.added)}: {', '.join(self.added)}")
        if self.unchanged:
            out.append(f"already here: {', '.join(self.unchanged)}")
        for theirs, ours in self.renamed.items():
            out.append(f"{theirs!r} was added as {ours!r} (a name QuantDesk takes)")
        for name in self.conflicts:
            out.append(f"{name!r} was left out: a different server of that name is already here "
                       f"(remove it first with: quantdesk mcp rm {name})")
        for name, why in self.skipped.items():
            out.append(f"{name!r} was left out: {why}")
        return out


class McpServers:
    """The saved MCP servers. Reads the file at each call (the CLI and the GUI may both change it)."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder

    @property
    def path(self) -> Path:
        return (self._folder or paths.config_dir()) / FILE_NAME

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise McpConfigError(f"the MCP servers file {self.path} cannot be read ({exc})",
                                 "fix or delete it; tokens in the keychain are not affected") from None
        if not isinstance(data, dict):
            raise McpConfigError(f"the MCP servers file {self.path} holds no JSON object", "fix or delete it")
        return data

    def all(self) -> list[McpServerConfig]:
        """Every readable server, in the file's order (an unreadable entry is left out here and kept in the file)."""
        out = []
        servers = self._read().get("mcpServers", {})
        for name, entry in servers.items() if isinstance(servers, dict) else ():
            try:
                out.append(McpServerConfig.from_entry(name, entry))
            except McpConfigError:
                continue
        return out

    def get(self, name: str) -> McpServerConfig:
        found = next((s for s in self.all() if s.name == name), None)
        if found is None:
            known = ", ".join(s.name for s in self.all()) or "none yet"
            raise McpConfigError(f"there is no MCP server named {name!r} (known: {known})",
                                 "add one with: quantdesk mcp add NAME -- COMMAND ARGS…, or --url URL")
        return found

    def _write(self, data: dict[str, Any]) -> None:
        write_text_atomic(self.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", private=True)

    def _put(self, config: McpServerConfig) -> None:
        """Write ``config``'s entry in place (or at the end), the file's other keys and entries as they were."""
        data = self._read()
        servers = data.get("mcpServers")
        servers = dict(servers) if isinstance(servers, dict) else {}
        servers[config.name] = config.entry()
        data["mcpServers"] = servers
        self._write(data)

    def save(self, config: McpServerConfig, bearer_token: str | None = None) -> McpServerConfig:
        """Add or replace a server. ``bearer_token``: None keeps the current one, "" removes it, else stores it in
        the keychain. A stdio server whose command line changed needs confirming again (``confirmed`` is kept only
        while it names the same command line)."""
        check_name(config.name)
        if config.transport == "http":
            config.url = check_url(config.url.strip())
            config.headers, in_headers = _split_bearer(config.headers)
            if in_headers and bearer_token is None:
                bearer_token = in_headers  # a token written into the headers goes to the keychain instead
        elif not config.command.strip():
            raise McpConfigError(f"the MCP server {config.name!r} needs a command to start")
        if not 0 < config.timeout_s <= 86_400:
            raise McpConfigError("a tool call's timeout must be more than 0 seconds and at most a day")
        previous = next((s for s in self.all() if s.name == config.name), None)
        config.bearer = previous.bearer if previous else ""
        if bearer_token is not None:
            _TOKENS.forget(config.name, config.bearer)
            config.bearer = ""
            if bearer_token.strip():
                try:
                    config.bearer = _TOKENS.store(config.name, bearer_token.strip())
                except KeyStoreError as exc:
                    raise McpConfigError(exc.message.replace("the secret", "the bearer token"), exc.hint) from None
        if config.transport == "stdio" and config.confirmed != config.command_line():
            config.confirmed = ""
        self._put(config)
        return config

    def confirm(self, name: str) -> McpServerConfig:
        """The user saw the command line in full and allowed it to start."""
        config = self.get(name).confirm()
        self._put(config)
        return config

    def set_disabled(self, name: str, disabled: bool) -> McpServerConfig:
        config = replace(self.get(name), disabled=disabled)
        self._put(config)
        return config

    def remove(self, name: str) -> None:
        config = self.get(name)
        _TOKENS.forget(config.name, config.bearer)
        data = self._read()
        servers = data.get("mcpServers")
        if isinstance(servers, dict):
            servers.pop(name, None)
        self._write(data)

    def bearer_token(self, config: McpServerConfig) -> str:
        token = _TOKENS.get(config.name, config.bearer)
        if token is None:
            raise McpConfigError(f"the bearer token of the MCP server {config.name} is no longer where it was kept",
                                 f"set it again with: quantdesk mcp add {config.name} --url URL "
                                 "--bearer-token-stdin")
        return token

    def request_headers(self, config: McpServerConfig) -> dict[str, str]:
        """The headers an HTTP server is sent: its own, and its bearer token as ``Authorization``."""
        headers = dict(config.headers)
        if token := self.bearer_token(config):
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def import_file(self, path: Path) -> ImportReport:
        """Merge another app's ``mcp.json`` (LM Studio, Claude Desktop, Cursor; VS Code's ``servers`` too): new
        servers are added unconfirmed (their commands are shown before they first start); a name already here
        with a different command or address is reported, never overwritten."""
        try:
            data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise McpConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise McpConfigError(f"{path} is not valid JSON ({exc})") from None
        servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            raise McpConfigError(f"{path} has no \"mcpServers\" object",
                                 'the format is {"mcpServers": {"NAME": {"command": …, "args": […]}}}')
        report = ImportReport()
        mine = {s.name: s for s in self.all()}
        for theirs, entry in servers.items():
            try:
                config = McpServerConfig.from_entry(str(theirs), entry)
            except McpConfigError as exc:
                report.skipped[str(theirs)] = exc.message
                continue
            config.confirmed, config.bearer = "", ""  # never trust another app's confirmation or key record
            name = str(theirs) if _NAME.match(str(theirs)) else clean_name(str(theirs))
            config.name = name
            if name in mine:
                same = (mine[name].command, mine[name].args, mine[name].url) == (config.command, config.args,
                                                                                   config.url)
                (report.unchanged if same else report.conflicts).append(name)
                continue
            try:
                self.save(config)
            except McpConfigError as exc:
                report.skipped[str(theirs)] = exc.message
                continue
            mine[name] = config
            report.added.append(name)
            if name != theirs:
                report.renamed[str(theirs)] = name
        return report


def import_mcp_json(path: Path, servers: McpServers | None = None) -> ImportReport:
    """Merge another app's ``mcp.json`` into QuantDesk's (see ``McpServers.import_file``)."""
    return (servers or McpServers()).import_file(path)


def token_storage_sentence() -> str:
    return _TOKENS.storage_sentence()
