"""A synchronous façade over the official ``mcp`` SDK, for Qt worker threads and the CLI: ``ToolBox`` connects to
MCP servers (stdio or streamable HTTP), lists their tools and calls them.

The SDK is asyncio (anyio) underneath: one event-loop thread per ToolBox runs every connection, each a task that
holds its ``mcp.Client`` open until it is closed (anyio's cancel scopes must be left by the task that entered them).
The caller's thread waits on a future, polling its ``cancel`` event, so Stop ends a call within a fraction of a
second: the request's task is cancelled (the SDK then sends ``notifications/cancelled``) and, should it not end at
once, the connection is closed (a stdio server's process tree is stopped, then killed).

Nothing raises to the caller: a server that never answers ``initialize``, exits, crashes mid-call, floods its
stderr or writes lines that are not JSON-RPC, a tool that fails or does not exist, arguments that fail the tool's
input schema, a result too large for the model: each is a ``ToolOutcome`` (or a ``ServerStatus``) with a sentence
for the user and, for a call, a text for the model.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from app.mcp.config import McpServerConfig

log = logging.getLogger(__name__)

# What the model is given of one result at most, in characters (about 4k tokens): more would crowd the context
# of the small models QuantDesk runs; the user is told what was cut.
RESULT_BUDGET_CHARS = 16_000
CANCEL_GRACE_S = 0.5  # a cancelled call's task gets this long to end before its connection is closed
POLL_S = 0.02
STDERR_LINES = 20
STDERR_LINE_CHARS = 400
_FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_-]")
# The text of the chat templates' control tokens (ChatML and Llama 3's <|…|>, DeepSeek's <｜…｜>, Mistral's [INST],
# Gemma's turns, Hermes' tool tags, <s>): the engines tokenize a rendered prompt with its special tokens parsed, so
# such text in a tool's description or result would become a real turn of the conversation (a server "writing" a
# system prompt). A zero-width space after the first character keeps it text; the user is shown the original.
_CONTROL = re.compile(r"<\||\|>|<｜|｜>|\[/?INST\]|\[/?(?:TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|SYSTEM_PROMPT)\]|"
                      r"</?(?:start_of_turn|end_of_turn|tool_call|tool_response|tools|think|s)>")
ZERO_WIDTH_SPACE = "\u200b"


def neutral(text: str) -> str:
    """``text`` with what reads as a chat template's control token kept as plain text (see _CONTROL)."""
    return _CONTROL.sub(lambda m: m.group(0)[0] + ZERO_WIDTH_SPACE + m.group(0)[1:], text)


def _neutral_schema(value: Any) -> Any:
    if isinstance(value, str):
        return neutral(value)
    if isinstance(value, dict):
        return {k: _neutral_schema(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_neutral_schema(v) for v in value]
    return value


@dataclass(frozen=True)
class ToolSpec:
    """One tool of one server, as the server lists it. ``function_name`` is its name for the model, unique across
    the ToolBox's servers (``server__tool``, within OpenAI's 64 letters, digits, ``_`` and ``-``)."""

    server: str
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    function_name: str

    def as_openai_function(self) -> dict[str, Any]:
        """The ``tools`` entry the engine's SamplingSettings take (OpenAI's shape). The server's texts go to the
        model as text only: control-token look-alikes are neutralised (``neutral``); ``description`` keeps the
        original for the user to read."""
        schema = dict(self.input_schema) if self.input_schema else {"type": "object", "properties": {}}
        schema.pop("$schema", None)  # a draft marker the templates print for nothing
        description = self.description or self.title or self.name
        return {"type": "function", "function": {"name": self.function_name, "description": neutral(description),
                                                 "parameters": _neutral_schema(schema)}}


@dataclass(frozen=True)
class ToolOutcome:
    """What a call came to. ``text`` is what the model is given (a failure's sentence too, so it can go on);
    ``sentence`` what the user is told ("" when all went well); ``kind``: ok, tool_error (the tool said it failed),
    bad_arguments, no_such_tool, timeout, cancelled, crashed (the server went away), unavailable (not connected),
    protocol (an answer the SDK could not read)."""

    text: str
    is_error: bool = False
    kind: str = "ok"
    sentence: str = ""
    structured: Any = None
    cut: bool = False
    full_chars: int = 0  # the result's text before any cut

    @classmethod
    def failure(cls, kind: str, sentence: str, text: str = "") -> ToolOutcome:
        return cls(text=text or sentence, is_error=True, kind=kind, sentence=sentence)


@dataclass(frozen=True)
class ServerStatus:
    """A server's state in the ToolBox: off, ready or failed (with the sentence why)."""

    name: str
    state: str = "off"  # off | ready | failed
    sentence: str = ""
    tools: int = 0
    server_info: str = ""  # the server's own name and version, as it said them
    stderr_tail: tuple[str, ...] = ()


class _StderrTail:
    """A stdio server's stderr, drained on a thread of its own so a flood never blocks the server (a full pipe
    would) nor fills memory: the last few lines are kept, each cut short, for the sentences."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._read_fd = read_fd
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self.bytes = 0
        self._partial = b""
        self._thread = threading.Thread(target=self._drain, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        with os.fdopen(self._read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.bytes += len(chunk)
                *whole, self._partial = (self._partial + chunk).split(b"\n")
                for line in whole[-STDERR_LINES:]:
                    self._keep(line)
                self._partial = self._partial[-STDERR_LINE_CHARS * 4:]
        if self._partial:
            self._keep(self._partial)

    def _keep(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip()
        if text:
            self.lines.append(text if len(text) <= STDERR_LINE_CHARS else text[:STDERR_LINE_CHARS] + "…")

    def close_writer(self) -> None:
        """Our copy of the pipe's write end (the child holds its own); the drain ends when the child exits."""
        if not self.writer.closed:
            self.writer.close()

    def tail(self, n: int = 3) -> tuple[str, ...]:
        return tuple(list(self.lines)[-n:])

    def words(self) -> str:
        lines = self.tail()
        return f"; its last words on stderr: {' | '.join(lines)}" if lines else ""


@dataclass
class _Connection:
    config: McpServerConfig
    client: Any = None  # mcp.Client once ready
    task: asyncio.Task[None] | None = None
    closing: asyncio.Event | None = None
    stderr: _StderrTail | None = None
    garbage: list[str] = field(default_factory=list)  # what the server wrote that is not JSON-RPC
    tools: list[Any] = field(default_factory=list)  # mcp_types.Tool
    status: ServerStatus | None = None
    dead: bool = False  # the transport closed under it (a crash, a kill): the next call connects again


def _unreadable(exc: Exception) -> str:
    """What a server wrote that the SDK could not read, short: the line itself where it was not JSON (pydantic's
    error carries it), else the first thing wrong with the message."""
    errors = getattr(exc, "errors", None)
    try:
        first = errors()[0] if callable(errors) else None
    except Exception:  # noqa: BLE001 - an error of another shape: its own words then
        first = None
    if not first:
        return _message(exc)
    if first.get("type") == "json_invalid" and isinstance(first.get("input"), str):
        line = first["input"]
        return repr(line if len(line) <= 120 else line[:120] + "…")
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"a message of the wrong shape ({where}: {first.get('msg', '')})"


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


class ToolBox:
    """Connections to MCP servers and calls to their tools, usable from any thread. Close it when done (or use it
    as a context manager): every server process it started is stopped."""

    def __init__(self, *, result_budget_chars: int = RESULT_BUDGET_CHARS,
                 headers_for: Any = None) -> None:
        self.result_budget_chars = result_budget_chars
        # config → the HTTP headers to send (its bearer token added); app.mcp.config.McpServers.request_headers
        self._headers_for = headers_for
        self._lock = threading.RLock()
        self._connections: dict[str, _Connection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # --- the event-loop thread

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="mcp-loop", daemon=True)
                self._thread.start()
                started.wait()
                self._loop = loop
            return self._loop

    def __enter__(self) -> ToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- connections

    def connect(self, config: McpServerConfig, *, timeout_s: float | None = None) -> ServerStatus:
        """Start (or reach) the server, ``initialize`` it and list its tools. A running connection of that name is
        closed first. Never raises: the status says what happened."""
        self.close(config.name)
        if config.needs_confirmation or config.disabled:  # the callers ask first; this holds if one forgets
            why = "is disabled" if config.disabled else ("has not been confirmed: its command line is shown in full "
                                                         "and confirmed before it first starts")
            status = ServerStatus(config.name, "failed", f"the MCP server {config.name} {why}")
            with self._lock:
                self._connections[config.name] = _Connection(config, status=status, dead=True)
            return status
        timeout = timeout_s if timeout_s is not None else config.connect_timeout_s
        loop = self._ensure_loop()
        conn = _Connection(config)
        with self._lock:
            self._connections[config.name] = conn
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()

        async def start() -> None:
            conn.closing = asyncio.Event()
            conn.task = asyncio.create_task(self._serve(conn, ready), name=f"mcp:{config.name}")

        asyncio.run_coroutine_threadsafe(start(), loop).result()
        started = time.monotonic()
        failure = ""
        try:
            ready.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            failure = (f"{config.name} did not answer the MCP handshake (initialize) within {timeout:g} s"
                       + self._garbage_words(conn))
        except Exception as exc:  # the handshake's own failure, worded by _serve
            failure = str(exc)
        if failure:
            self._stop(conn, wait_s=0)
            if conn.stderr is not None:
                time.sleep(0.05)  # the last stderr lines of a server that just exited
                failure += conn.stderr.words()
            status = ServerStatus(config.name, "failed", failure,
                                  stderr_tail=conn.stderr.tail() if conn.stderr else ())
        else:
            info = conn.client.server_info
            status = ServerStatus(config.name, "ready", "", tools=len(conn.tools),
                                  server_info=" ".join(filter(None, (info.name, info.version))) if info else "")
            log.info("MCP server %s ready in %.2f s with %d tools", config.name, time.monotonic() - started,
                     len(conn.tools))
        conn.status = status
        return status

    async def _serve(self, conn: _Connection, ready: concurrent.futures.Future[None]) -> None:
        """The connection's life, in one task: open the transport, shake hands, list the tools, then hold the client
        open until ``closing`` is set (or the task is cancelled)."""
        from contextlib import AsyncExitStack

        import mcp_types
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        import app
        from app.mcp.stdio import stdio_transport

        config = conn.config

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):  # a line the SDK could not read as JSON-RPC
                if len(conn.garbage) < 5:
                    conn.garbage.append(_unreadable(message))

        try:
            async with AsyncExitStack() as stack:
                if config.transport == "stdio":
                    conn.stderr = _StderrTail()
                    env = {k: str(v) for k, v in config.env.items()}
                    params = StdioServerParameters(command=config.command, args=list(config.args), env=env or None,
                                                   cwd=config.cwd or None, encoding_error_handler="replace")
                    transport: Any = stdio_transport(params, errlog=conn.stderr.writer)
                else:
                    from mcp.client.streamable_http import streamable_http_client
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    headers = self._headers_for(config) if self._headers_for else dict(config.headers)
                    http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                    transport = streamable_http_client(config.url, http_client=http)
                client = Client(transport, cache=None, message_handler=on_message,
                                client_info=mcp_types.Implementation(name="QuantDesk", version=app.__version__))
                try:
                    await stack.enter_async_context(client)
                finally:
                    if conn.stderr is not None:
                        conn.stderr.close_writer()
                conn.tools = await self._list_all(client)
                conn.client = client
                ready.set_result(None)
                assert conn.closing is not None
                await conn.closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.set_exception(RuntimeError(f"{config.name}: the connection was closed before it was ready"))
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure of the transport or the handshake, in words
            if not ready.done():
                ready.set_exception(RuntimeError(self._connect_failure(conn, exc)))
            else:
                conn.dead = True
                log.info("MCP server %s: the connection ended: %s", config.name, _message(exc))
        finally:
            conn.dead = True
            conn.client = None

    @staticmethod
    async def _list_all(client: Any) -> list[Any]:
        tools, cursor = [], None
        for _ in range(100):  # a paginator that never ends cannot hang the connection
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _garbage_words(self, conn: _Connection) -> str:
        if not conn.garbage:
            return ""
        return f"; it wrote what is not JSON-RPC: {', '.join(conn.garbage[:2])}"

    def _connect_failure(self, conn: _Connection, exc: BaseException) -> str:
        config = conn.config
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if isinstance(exc, FileNotFoundError) and config.transport == "stdio":
            return (f"{config.name} cannot start: the command {config.command!r} was not found "
                    "(is it installed and on PATH?)")
        if isinstance(exc, PermissionError) and config.transport == "stdio":
            return f"{config.name} cannot start: {config.command!r} is not allowed to run ({exc.strerror})"
        if isinstance(exc, OSError) and config.transport == "stdio":
            return f"{config.name} cannot start: {exc.strerror or _message(exc)}"
        text = _message(exc)
        if config.transport == "stdio" and ("closed" in text.lower() or "EndOfStream" in type(exc).__name__):
            return (f"{config.name} ended before it finished the MCP handshake" + self._garbage_words(conn))
        if config.transport == "http":
            return f"{config.name} at {config.url} cannot be reached or did not speak MCP ({text})"
        return f"{config.name} failed during the MCP handshake ({text})" + self._garbage_words(conn)

    def status(self, server: str) -> ServerStatus:
        conn = self._connections.get(server)
        if conn is None or conn.status is None:
            return ServerStatus(server)
        if conn.dead and conn.status.state == "ready":
            return replace(conn.status, state="failed", sentence=f"{server} is no longer connected"
                           + (conn.stderr.words() if conn.stderr else ""))
        return conn.status

    def servers(self) -> list[str]:
        return list(self._connections)

    def close(self, server: str | None = None) -> None:
        """Close one server's connection (its process stopped), or, without a name, all of them and the loop."""
        with self._lock:
            names = [server] if server is not None else list(self._connections)
            conns = [self._connections.pop(n) for n in names if n in self._connections]
        for conn in conns:
            self._stop(conn, wait_s=5.0)
        if server is None:
            with self._lock:
                loop, self._loop = self._loop, None
            if loop is not None:
                loop.call_soon_threadsafe(loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=5)
                    if not self._thread.is_alive():
                        loop.close()

    def _stop(self, conn: _Connection, wait_s: float) -> None:
        """Let the connection's task leave its client (the SDK stops a stdio server: stdin closed, then the process
        group terminated and killed); wait for that up to ``wait_s``."""
        loop = self._loop
        if loop is None or conn.task is None:
            return

        def signal() -> None:
            if conn.closing is not None:
                conn.closing.set()
            if conn.task is not None and conn.client is None:
                conn.task.cancel()  # still shaking hands: nothing to wind down politely

        loop.call_soon_threadsafe(signal)
        if wait_s > 0:
            done = threading.Event()
            loop.call_soon_threadsafe(lambda: conn.task.add_done_callback(lambda _: done.set()) if conn.task
                                      else done.set())
            done.wait(wait_s)

    # --- tools

    def list_tools(self, server: str) -> list[ToolSpec]:
        """The tools of a connected server ([] when it is not connected: ``status`` says why)."""
        return [t for t in self.tools([server])]

    def tools(self, servers: Iterable[str] | None = None) -> list[ToolSpec]:
        """The tools of the given (else all) connected servers, each with a function name unique among them."""
        names = list(servers) if servers is not None else list(self._connections)
        specs: list[ToolSpec] = []
        used: set[str] = set()
        for name in self._connections:  # in connection order, so names stay the same whichever are asked for
            conn = self._connections.get(name)
            if conn is None or conn.status is None or conn.status.state != "ready":
                continue
            for tool in conn.tools:
                function = _function_name(name, tool.name, used)
                if name in names:
                    specs.append(ToolSpec(server=name, name=tool.name, title=tool.title or "",
                                          description=tool.description or "",
                                          input_schema=dict(tool.input_schema or {}), function_name=function))
        return specs

    def find(self, function_name: str, servers: Iterable[str] | None = None) -> ToolSpec | None:
        return next((t for t in self.tools(servers) if t.function_name == function_name), None)

    def call_function(self, function_name: str, arguments: str | dict[str, Any] | None, *,
                      servers: Iterable[str] | None = None, timeout_s: float | None = None,
                      cancel: threading.Event | None = None) -> ToolOutcome:
        """A call as the model named it (``server__tool``)."""
        spec = self.find(function_name, servers)
        if spec is None:
            known = ", ".join(t.function_name for t in self.tools(servers)) or "none"
            return ToolOutcome.failure("no_such_tool", f"there is no tool named {function_name!r} "
                                                       f"(the tools are: {known})")
        return self.call(spec.server, spec.name, arguments, timeout_s=timeout_s, cancel=cancel)

    def call(self, server: str, tool: str, arguments: str | dict[str, Any] | None, *,
             timeout_s: float | None = None, cancel: threading.Event | None = None) -> ToolOutcome:
        """Call ``tool`` of ``server`` with ``arguments`` (an object, or its JSON text as the model wrote it).
        Waits up to ``timeout_s`` (the server's ``timeout_s`` by default); ``cancel`` set ends the wait within a
        fraction of a second. Never raises."""
        conn = self._connections.get(server)
        if conn is None or conn.status is None:
            return ToolOutcome.failure("unavailable", f"the MCP server {server!r} is not connected")
        if conn.dead and conn.status.state == "ready":  # it went away since: one new start
            status = self.connect(conn.config)
            conn = self._connections[server]
            if status.state != "ready":
                return ToolOutcome.failure("unavailable", status.sentence)
        if conn.status is None or conn.status.state != "ready" or conn.client is None:
            return ToolOutcome.failure("unavailable", conn.status.sentence if conn.status else
                                       f"the MCP server {server!r} is not connected")
        found = next((t for t in conn.tools if t.name == tool), None)
        if found is None:
            known = ", ".join(t.name for t in conn.tools) or "none"
            return ToolOutcome.failure("no_such_tool", f"{server} has no tool named {tool!r} (its tools: {known})")
        parsed, problem = _check_arguments(found, arguments)
        if problem:
            return ToolOutcome.failure("bad_arguments", f"the arguments for {server}/{tool} were refused: {problem}")
        timeout = timeout_s if timeout_s is not None else conn.config.timeout_s
        return self._run_call(conn, tool, parsed, timeout, cancel)

    def _run_call(self, conn: _Connection, tool: str, arguments: dict[str, Any], timeout: float,
                  cancel: threading.Event | None) -> ToolOutcome:
        loop = self._ensure_loop()
        finished = threading.Event()
        holder: dict[str, Any] = {}

        async def run() -> Any:
            try:
                return await conn.client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            finally:
                finished.set()

        async def start() -> asyncio.Task[Any]:
            task = asyncio.create_task(run())
            holder["task"] = task
            return task

        asyncio.run_coroutine_threadsafe(start(), loop).result()
        task: asyncio.Task[Any] = holder["task"]
        name = f"{conn.config.name}/{tool}"
        deadline = time.monotonic() + timeout + 2.0  # the SDK's own timeout first; this one if that ever fails
        while not finished.wait(POLL_S):
            if cancel is not None and cancel.is_set():
                loop.call_soon_threadsafe(task.cancel)
                if not finished.wait(CANCEL_GRACE_S):
                    self._stop(conn, wait_s=0)  # it will not stop: the connection (and a stdio process) goes
                    conn.dead = True
                return ToolOutcome.failure("cancelled", f"{name} was stopped", "the user stopped this call")
            if time.monotonic() > deadline:
                loop.call_soon_threadsafe(task.cancel)
                return ToolOutcome.failure("timeout", f"{name} did not answer within {timeout:g} s")
        try:
            result = task.result()
        except asyncio.CancelledError:
            return ToolOutcome.failure("cancelled", f"{name} was stopped", "the user stopped this call")
        except BaseException as exc:  # noqa: BLE001 - every failure in words
            return self._call_failure(conn, name, timeout, exc)
        return self._result(name, result)

    def _call_failure(self, conn: _Connection, name: str, timeout: float, exc: BaseException) -> ToolOutcome:
        from mcp.shared.exceptions import MCPError

        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if isinstance(exc, MCPError):
            import mcp_types

            if exc.code == mcp_types.REQUEST_TIMEOUT or "timed out" in exc.error.message.lower():
                return ToolOutcome.failure("timeout", f"{name} did not answer within {timeout:g} s")
            if exc.code == mcp_types.CONNECTION_CLOSED or conn.dead:
                conn.dead = True
                time.sleep(0.05)  # the stderr of a server that just died
                words = conn.stderr.words() if conn.stderr else ""
                return ToolOutcome.failure("crashed", f"the MCP server {conn.config.name} went away during "
                                                      f"{name}{words}")
            return ToolOutcome.failure("tool_error", f"{name} failed: {exc.error.message}")
        if conn.dead:
            return ToolOutcome.failure("crashed", f"the MCP server {conn.config.name} went away during {name}")
        return ToolOutcome.failure("protocol", f"{name}'s answer could not be read ({_message(exc)})")

    def _result(self, name: str, result: Any) -> ToolOutcome:
        text = _content_text(result.content)
        structured = result.structured_content
        if not text and structured is not None:
            text = json.dumps(structured, ensure_ascii=False)
        full = len(text)
        budget = self.result_budget_chars
        cut = full > budget
        sentence = ""
        if cut:
            text = (text[:budget] + f"\n[… cut by QuantDesk: the result was {full:,} characters; these are the "
                                    f"first {budget:,}]")
            sentence = f"{name}'s result was {full:,} characters; the model was given the first {budget:,}"
            if structured is not None and len(json.dumps(structured, ensure_ascii=False)) > budget:
                structured = None  # kept whole it would cost what the cut saved
        text = neutral(text)  # what a server wrote reaches the model as text, never as its control tokens
        if result.is_error:
            first = text.strip().splitlines()[0] if text.strip() else "no reason given"
            return ToolOutcome(text=text or f"{name} failed", is_error=True, kind="tool_error",
                               sentence=f"{name} reported an error: {first[:300]}", structured=structured, cut=cut,
                               full_chars=full)
        return ToolOutcome(text=text, structured=structured, cut=cut, sentence=sentence, full_chars=full)


def _function_name(server: str, tool: str, used: set[str]) -> str:
    base = _FUNCTION_NAME.sub("_", f"{server}__{tool}")[:64]
    name, n = base, 2
    while name in used:
        suffix = f"_{n}"
        name, n = base[:64 - len(suffix)] + suffix, n + 1
    used.add(name)
    return name


def _check_arguments(tool: Any, arguments: str | dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The arguments as an object, checked against the tool's input schema (jsonschema, before any call); or the
    problem in words, which goes back to the model."""
    import jsonschema

    if arguments is None or arguments == "":
        value: Any = {}
    elif isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError as exc:
            return {}, f"the arguments are not valid JSON ({exc})"
    else:
        value = arguments
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {type(value).__name__}"
    schema = tool.input_schema or {}
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        log.info("the input schema of %s is not a valid JSON schema: its arguments go unchecked", tool.name)
        return value, ""
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        return {}, f"{error.message}" + (f" (at {where})" if where else "")
    return value, ""


def _content_text(content: Iterable[Any]) -> str:
    """A result's content blocks as text for the model: text as it is; images, audio and binary resources named
    with their type and size (a model here reads text)."""
    parts = []
    for block in content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(block, 'mime_type', '')}, {len(getattr(block, 'data', '')) * 3 // 4:,} "
                         "bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}" + (f": {block.name}" if getattr(block, "name", "") else "") + "]")
        elif kind == "resource":
            inner = block.resource
            if getattr(inner, "text", None) is not None:
                parts.append(inner.text)
            else:
                parts.append(f"[resource {inner.uri}, {getattr(inner, 'mime_type', '') or 'binary'}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    return "\n".join(parts)
