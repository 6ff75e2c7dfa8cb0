"""The stdio transport of the ``mcp`` SDK with a line reader that stays linear in a line's length.

The SDK's ``stdio_client`` joins its buffer with each new chunk and splits the whole again (``(buffer +
chunk).split("\\n")``), so one long line costs the square of its length: a tool result of 8 MB took 4.3 s to read
here, one of 50 MB minutes, while the connection answered nothing else. This reader keeps a line's pieces in a list
and joins them once, at the newline. Everything else is the SDK's own (its process start in a new process group, the
spec's shutdown: stdin closed, a grace period, then the process tree terminated and killed), called as it is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.lowlevel
from mcp.client import stdio as sdk
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

READ_BYTES = 1 << 20
# A line (one JSON-RPC message) longer than this is dropped unread, and said: the result it carried is lost, the
# connection is not. Far above what a model could be given of it (app.mcp.client.RESULT_BUDGET_CHARS).
MAX_LINE_BYTES = 256 << 20


class LineTooLong(ValueError):
    """A message from the server longer than MAX_LINE_BYTES."""


class Lines:
    """The server's stdout, read in chunks, split at newlines with each byte looked at once; a line longer than
    MAX_LINE_BYTES is dropped (its rest skipped up to its newline) and said as a LineTooLong in its place."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.held = 0  # bytes in pieces
        self.dropping = False  # inside a line that is too long: its rest is skipped

    def feed(self, chunk: bytes) -> Iterator[bytes | LineTooLong]:
        """The lines ``chunk`` ends (the first one begun by earlier chunks), and a LineTooLong for one dropped."""
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not self.dropping:
                self.pieces.append(chunk[start:end])
                line, self.pieces, self.held = b"".join(self.pieces), [], 0
                yield line
            self.dropping = False
            start = end + 1
        if start < len(chunk) and not self.dropping:
            self.pieces.append(chunk[start:])
            self.held += len(chunk) - start
            if self.held > MAX_LINE_BYTES:
                self.pieces, self.held, self.dropping = [], 0, True
                yield LineTooLong(f"the server sent a message over {MAX_LINE_BYTES >> 20} MB; it was dropped")


@asynccontextmanager
async def stdio_transport(server: sdk.StdioServerParameters, errlog: TextIO) -> AsyncGenerator[TransportStreams, None]:
    """``mcp.client.stdio.stdio_client`` with a linear reader (see the module's words)."""
    command = await sdk._get_executable_command(server.command)
    process = await sdk._create_platform_compatible_process(
        command=command, args=server.args, env=sdk.get_default_environment() | (server.env or {}), errlog=errlog,
        cwd=server.cwd)
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    shutting_down = False
    writer_done = anyio.Event()

    async def deliver(line: bytes) -> None:
        text = line.decode(server.encoding, errors=server.encoding_error_handler)
        if text.strip():
            await read_stream_writer.send(sdk._parse_line(text))

    async def stdout_reader() -> None:
        assert process.stdout is not None
        lines = Lines()
        try:
            async with read_stream_writer:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive(READ_BYTES)
                        except (anyio.EndOfStream, anyio.ClosedResourceError):
                            break
                        for line in lines.feed(chunk):
                            if isinstance(line, LineTooLong):
                                await read_stream_writer.send(line)
                            else:
                                await deliver(line)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the session is gone
                finally:
                    await sdk._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                sdk.logger.exception("Reading from the MCP server's stdout failed mid-session")

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((json + "\n").encode(server.encoding,
                                                                  errors=server.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()

