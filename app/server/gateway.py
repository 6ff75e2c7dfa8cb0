"""The server as a gateway: the models of the user's remote connections served at the local address, beside the
local model (``quantdesk serve --serve-remotes``, the Server page's switch).

A remote model is named by its reference, ``remote:CONNECTION/MODEL`` (as in ``quantdesk chat``), and served through
an engine host of its own running the remote backend, started by the first request that names it (loaded into the
pool by app/server/router.py, at 0 bytes; the pool unloads it again when idle): the same events, cancel and stats as
a local model.
The connection's API key reaches that host over its private pipe (``LoadRequest.backend_options``) and goes no
further: nothing the gateway answers carries it, and a local client never needs it. Which models each connection
serves is asked of it at most every ``LIST_TTL_S``.

Qt-free; blocking calls here run on worker threads (``asyncio.to_thread``) from the server's event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.remote import connections

log = logging.getLogger(__name__)

LIST_TTL_S = 30.0


@dataclass(frozen=True)
class RemoteModel:
    ref: str  # remote:CONNECTION/MODEL, the id clients send
    connection: str
    n_ctx: int | None


class RemoteModels:
    """The remote models a gateway serves (the engine pool starts a host for each one in use)."""

    def __init__(self, store: connections.Connections | None = None) -> None:
        self._store = store or connections.Connections()
        self._listed: list[RemoteModel] = []
        self._listed_at = -LIST_TTL_S
        self.problems: dict[str, str] = {}  # connection -> why its models are not listed now
        self._lock = threading.Lock()  # the listing changes under it

    # --- listing ---

    def models(self) -> list[RemoteModel]:
        """Every model of every connection (cached for LIST_TTL_S). A connection that cannot be reached is left
        out, with its reason in ``problems``; the local model is served regardless."""
        with self._lock:
            if time.monotonic() - self._listed_at < LIST_TTL_S:
                return list(self._listed)
        all_connections = self._store.all()
        listed: list[RemoteModel] = []
        problems: dict[str, str] = {}

        def ask(connection: connections.Connection) -> list[RemoteModel]:
            try:
                answer = self._store.probe(connection)
            except Exception as exc:  # noqa: BLE001 - an unreachable connection must not take /v1/models down
                problems[connection.name] = str(exc)
                return []
            return [RemoteModel(connections.model_ref(connection.name, m["id"]), connection.name, m.get("n_ctx"))
                    for m in answer["models"]]

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(all_connections)))) as pool:
            for found in pool.map(ask, all_connections):
                listed += found
        for name, why in problems.items():
            log.warning("gateway: the models of %s are not listed: %s", name, why)
        with self._lock:
            self._listed, self._listed_at, self.problems = listed, time.monotonic(), problems
        return listed
