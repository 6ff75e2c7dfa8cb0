"""The official SDK's MCP server over streamable HTTP behind a bearer token, in a child process (uvicorn), for the
ToolBox's HTTP path: ``with serving("token") as url: ...``."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

SERVER = '''
import sys
import uvicorn
from mcp.server.mcpserver import MCPServer

token, port = sys.argv[1], int(sys.argv[2])
server = MCPServer("http-test-server")

@server.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b

inner = server.streamable_http_app()

async def app(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode():
        await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"unauthorized"})
        return
    await inner(scope, receive, send)

uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(token: str) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-c", SERVER, token, str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP MCP server did not start: {process.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()
