"""Run the server in-process on a thread: for tests, and for the GUI's switch (start, show the URL, stop).

uvicorn installs signal handlers only on the main thread, so a server on another thread leaves the
host application's Ctrl-C and Qt handling alone.
"""

from __future__ import annotations

import socket
import threading

import uvicorn
from starlette.types import ASGIApp

from app.errors import QuantDeskError
from app.server.guard import host_literal

GRACEFUL_SHUTDOWN_S = 3


class ServerStartFailed(QuantDeskError):
    """The server could not start (the port is taken, the address is not on this machine)."""


class _NotifyingServer(uvicorn.Server):
    """uvicorn's server, with an event once it listens or gives up."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()


def server_config(app: ASGIApp, host: str, port: int, *, log_level: str = "warning") -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                          timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                          # No proxy is in front of a desktop server: never trust X-Forwarded-* headers.
                          proxy_headers=False, server_header=False)


def bound_url(server: uvicorn.Server) -> str:
    """http://host:port of the first listening socket (the real port when 0 was asked for)."""
    address, port = server.servers[0].sockets[0].getsockname()[:2]
    return f"http://{host_literal(address)}:{port}"


class ServerThread:
    """``ServerThread(create_app(client)).start()``; ``.url`` is where it listens; ``.stop()`` ends it."""

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning") -> None:
        self.app = app
        self._server = _NotifyingServer(server_config(app, host, port, log_level=log_level))
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.url = ""

    def _run(self) -> None:
        try:
            self._server.run()
        except BaseException as exc:  # uvicorn exits with SystemExit when it cannot bind
            self._failure = exc
        finally:
            self._server.ready.set()

    def start(self, timeout: float = 30.0) -> ServerThread:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="openai-server", daemon=True)
        self._thread.start()
        if not self._server.ready.wait(timeout):
            self.stop()
            raise ServerStartFailed(f"the server did not start within {timeout:.0f} s")
        if not self._server.started:
            self._thread.join(timeout)
            config = self._server.config
            raise ServerStartFailed(f"the server could not listen on {config.host}:{config.port}",
                                    "is the port already in use?")
        self.url = bound_url(self._server)
        return self

    @property
    def active_requests(self) -> int:
        """Requests being answered now (streams included): what a GUI shows, and what tests check drains."""
        return len(self._server.server_state.tasks)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop accepting, let running responses finish (briefly), stop the engine queue. Idempotent."""
        if self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
