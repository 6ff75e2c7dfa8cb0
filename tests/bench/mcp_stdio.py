"""Benchmark: reading a large tool result over stdio, the ``mcp`` SDK's own transport against app/mcp/stdio.py.

The SDK's stdio reader joins its buffer with each chunk and splits the whole again, so one message costs the square
of its length; app/mcp/stdio.py keeps a line's pieces and joins them once. One server (the SDK's own MCPServer,
tests/mcp/conftest.py) is reached through each transport in turn, and a tool returning ``MB`` megabytes is called
in alternating rounds, the two times side by side for each size (this machine is shared: compare within a row).

    python -m tests.bench.mcp_stdio [--sizes 1,2,4,8] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from app.mcp.stdio import stdio_transport
from tests.mcp.conftest import PYTHON_SERVER, script


async def _time_calls(transport, sizes: list[int]) -> dict[int, float]:
    out = {}
    async with Client(transport, cache=None) as client:
        for mb in sizes:
            started = time.perf_counter()
            result = await client.call_tool("huge", {"megabytes": mb}, read_timeout_seconds=600)
            out[mb] = time.perf_counter() - started
            assert len(result.content[0].text) == mb * 2**20
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8", help="result sizes in MB, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        params = StdioServerParameters(command=sys.executable, args=[str(script(Path(folder), "server", PYTHON_SERVER))])
        sdk: dict[int, list[float]] = {mb: [] for mb in sizes}
        ours: dict[int, list[float]] = {mb: [] for mb in sizes}
        with open(Path(folder) / "stderr", "w") as errlog:
            for _ in range(args.runs):
                for mb, seconds in anyio.run(_time_calls, stdio_client(params, errlog=errlog), sizes).items():
                    sdk[mb].append(seconds)
                for mb, seconds in anyio.run(_time_calls, stdio_transport(params, errlog=errlog), sizes).items():
                    ours[mb].append(seconds)
    print(f"{'MB':>4}  {'SDK stdio_client':>17}  {'app/mcp/stdio':>14}  ratio")
    for mb in sizes:
        a, b = statistics.median(sdk[mb]), statistics.median(ours[mb])
        print(f"{mb:>4}  {a:>15.2f} s  {b:>12.2f} s  {a / b:5.1f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
