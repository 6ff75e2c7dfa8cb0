"""Fixtures for app/mcp's tests: a ToolBox closed after each test, and small MCP servers written as Python scripts
(the official SDK's own server, or scripts that misbehave on purpose) beside the real npm servers of
tests/fixtures/mcp_servers.py."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from app.mcp.client import ToolBox
from app.mcp.config import McpServerConfig

# The SDK's own server (mcp.server.mcpserver.MCPServer) with the tools the faults need: a result of any size, a tool
# that raises, one that sleeps. ``--flood N`` writes N MB to stderr before it serves.
PYTHON_SERVER = '''
import sys, time
from mcp.server.mcpserver import MCPServer

if "--flood" in sys.argv:
    megabytes = int(sys.argv[sys.argv.index("--flood") + 1])
    for _ in range(megabytes):
        sys.stderr.write(("stderr flood " + "x" * 1010 + "\\n") * 1024)
    sys.stderr.write("the flood is over\\n")
    sys.stderr.flush()
server = MCPServer("python-test-server")

@server.tool()
def huge(megabytes: int) -> str:
    """A text of this many megabytes."""
    return "0123456789abcdef" * (megabytes * 65536)

@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)

@server.tool()
def nap(seconds: float) -> str:
    """Sleeps, then says so."""
    time.sleep(seconds)
    return f"slept {seconds}"

server.run()
'''

# Never answers initialize: reads its stdin and says on stderr that it waits.
SILENT = '''
import sys
sys.stderr.write("waiting for nothing\\n"); sys.stderr.flush()
for line in sys.stdin:
    pass
'''

# Answers every line with something that is not JSON-RPC.
GARBAGE = '''
import sys
for line in sys.stdin:
    sys.stdout.write("hello, this is not JSON-RPC\\n"); sys.stdout.flush()
'''


def script(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def python_server(folder: Path, name: str = "py", *args: str, **kwargs: object) -> McpServerConfig:
    path = script(folder, "python_server", PYTHON_SERVER)
    return McpServerConfig(name, command=sys.executable, args=[str(path), *args], **kwargs).confirm()  # type: ignore[arg-type]


def python_script(folder: Path, name: str, source: str, **kwargs: object) -> McpServerConfig:
    return McpServerConfig(name, command=sys.executable, args=[str(script(folder, name, source))],  # type: ignore[arg-type]
                           **kwargs).confirm()


@pytest.fixture
def box():
    with ToolBox() as tool_box:
        yield tool_box
