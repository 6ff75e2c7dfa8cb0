"""The server as a gateway: the models of the user's remote connections served at the local address, beside the
local model (``quantdesk serve --serve-remotes``, the Server page's switch).

A remote model is named by its reference, ``remote:CONNECTION/MODEL`` (as in ``quantdesk chat``), and served through
an engine host of its own running the remote backend, started by the first request that names it and kept until the
server stops: the same events, cancel and stats as a local model. The connection's API key reaches that host over
its private pipe (``LoadRequest.backend_options``) and goes no further: nothing the gateway answers carries it, and
a local client never needs it. Which models each connection serves is asked of it at most every ``LIST_TTL_S``.

Qt-free; blocking calls here run on worker threads (``asyncio.to_thread``) from the server's event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.engine.client import EngineClient, EngineClientLike
from app.errors import QuantDeskError
from app.remote import connections
from app.server.engine_queue import EngineQueue
from app.server.params import ApiError
from backends.base import LoadSettings, Loaded

log = logging.getLogger(__name__)

LIST_TTL_S = 30.0


@dataclass(frozen=True)
class RemoteModel:
    ref: str  # remote:CONNECTION/MODEL, the id clients send
    connection: str
    n_ctx: int | None


class RemoteModels:
    """The remote models a gateway serves, and one engine (host + queue) per model in use."""

    def __init__(self, store: connections.Connections | None = None, *, max_pending: int = 32,
                 make_client: Callable[[], EngineClientLike] = EngineClient) -> None:
        self._store = store or connections.Connections()
        self._max_pending = max_pending
        self._make_client = make_client
        self._listed: list[RemoteModel] = []
        self._listed_at = -LIST_TTL_S
        self.problems: dict[str, str] = {}  # connection -> why its models are not listed now
        self._engines: dict[str, tuple[EngineClientLike, EngineQueue]] = {}
        self._lock = threading.Lock()  # one load at a time; the listing and the engines change under it
        self._closed = False

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

    # --- engines ---

    def engine(self, ref: str) -> tuple[EngineQueue, Loaded]:
        """The queue and the loaded model serving ``ref``, starting its engine host on first use. ApiError 404 for
        a model no connection serves, 502 when the remote server cannot be used."""
        with self._lock:
            if self._closed:
                raise ApiError(503, "the server is stopping", type="server_error", code="server_stopping")
            running = self._engines.get(ref)
            if running is not None and running[0].alive and running[0].loaded is not None:
                return running[1], running[0].loaded
        if not any(m.ref == ref for m in self.models()):
            try:
                name, _ = connections.parse_ref(ref)
            except ValueError:
                name = ""
            if name in self.problems:
                raise ApiError(502, f"the remote connection {name!r} cannot be used now: {self.problems[name]}",
                               type="server_error", code="remote_unavailable")
            raise ApiError(404, f"the model {ref[:200]!r} is not served here: no remote connection lists it",
                           param="model", code="model_not_found")
        with self._lock:
            running = self._engines.pop(ref, None)
            if running is not None:  # its host died: replace it
                running[1].close()
                running[0].close()
            client = self._make_client()
            try:
                loaded = client.load(ref, LoadSettings())
            except QuantDeskError as exc:  # refused, unreachable, a key gone from the keychain
                client.close()
                raise ApiError(502, f"the remote model {ref[:200]!r} cannot be used: {exc}",
                               type="server_error", code="remote_unavailable") from None
            engine_queue = EngineQueue(client, max_pending=self._max_pending).start()
            self._engines[ref] = (client, engine_queue)
            return engine_queue, loaded

    def queues(self) -> list[EngineQueue]:
        with self._lock:
            return [q for _, q in self._engines.values()]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            engines, self._engines = list(self._engines.values()), {}
        for client, engine_queue in engines:
            engine_queue.close()
            client.close()
