"""The user's approvals of tool calls: each call asks "Allow once", "Always allow this tool" or "Deny"; the tools
always allowed are remembered per server and tool in ``mcp-approvals.json`` under the config folder (app/files'
atomic write) until revoked (Settings → Tools, ``quantdesk mcp ls``, or removing the server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from app import paths
from app.files import write_text_atomic

FILE_NAME = "mcp-approvals.json"
Decision = Literal["once", "always", "deny"]
ALLOW_ONCE: Decision = "once"
ALWAYS_ALLOW: Decision = "always"
DENY: Decision = "deny"
DECISIONS: tuple[Decision, ...] = (ALLOW_ONCE, ALWAYS_ALLOW, DENY)


class Approvals:
    """The tools the user always allows. Reads the file at each call (the CLI and the GUI may both change it); a
    file that cannot be read counts as no approvals (each call asks again), never as more."""

    def __init__(self, folder: Path | None = None) -> None:
        self._folder = folder

    @property
    def path(self) -> Path:
        return (self._folder or paths.config_dir()) / FILE_NAME

    def always(self) -> list[tuple[str, str]]:
        """(server, tool) of every tool always allowed, sorted."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        items = data.get("always", []) if isinstance(data, dict) else []
        return sorted({(i[0], i[1]) for i in items
                       if isinstance(i, list) and len(i) == 2 and all(isinstance(x, str) for x in i)})

    def is_always(self, server: str, tool: str) -> bool:
        return (server, tool) in self.always()

    def _save(self, pairs: set[tuple[str, str]]) -> None:
        write_text_atomic(self.path, json.dumps({"always": [list(p) for p in sorted(pairs)]}, indent=1) + "\n")

    def allow_always(self, server: str, tool: str) -> None:
        self._save({*self.always(), (server, tool)})

    def revoke(self, server: str, tool: str | None = None) -> int:
        """Forget ``tool`` of ``server`` (every tool of it without ``tool``); how many were forgotten."""
        pairs = set(self.always())
        gone = {p for p in pairs if p[0] == server and (tool is None or p[1] == tool)}
        if gone:
            self._save(pairs - gone)
        return len(gone)

    def record(self, server: str, tool: str, decision: Decision) -> None:
        """Remember what a decision asks to be remembered ("always"); "once" and "deny" hold for one call."""
        if decision == ALWAYS_ALLOW:
            self.allow_always(server, tool)
