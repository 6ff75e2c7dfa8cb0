"""``quantdesk mcp add | ls | test | rm | import | enable | disable | revoke``: the MCP servers whose tools a chat may
use (``quantdesk chat --tools NAME``, the Chat), kept in ``mcp.json`` in the format LM Studio, Claude Desktop and
Cursor use (app/mcp/config.py); and ``quantdesk mcp serve``, QuantDesk's own tools served over MCP
(app/commands/mcp_serve.py).

Each action is a ``(name, build)`` pair in ``ACTIONS``; ``build(sub)`` adds its parser and sets ``func``. A new
action is one function and one entry there."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from app.commands import add_command
from app.errors import QuantDeskError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "mcp",
        description="Manage the MCP servers whose tools a chat may use (quantdesk chat --tools NAME). A server is "
                    "a command started on this machine (stdio: shown in full and confirmed before it first runs) "
                    "or an address (streamable HTTP; a bearer token goes to the system keychain). The list is "
                    "kept in mcp.json in the format LM Studio, Claude Desktop and Cursor use.")
    sub = parser.add_subparsers(dest="mcp_command", metavar="ACTION", required=True,
                                help=", ".join(name for name, _ in ACTIONS))
    for _, build in ACTIONS:
        build(sub)


# --- add


def _build_add(sub: Any) -> None:
    add = sub.add_parser(
        "add", help="add or change a server, then test it",
        description="Add (or replace) an MCP server: `add NAME -- COMMAND ARGS…` starts a program over stdio, "
                    "`add NAME --url URL` reaches one over streamable HTTP.",
        epilog="example: quantdesk mcp add files -- npx -y @modelcontextprotocol/server-filesystem ~/Documents")
    add.add_argument("name", help="a short name: letters, digits, '.', '_', '-'")
    # Everything after NAME: its options, then -- and the command (argparse alone would take the options after
    # NAME as part of the command, or refuse the command after --)
    add.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                     help="the program to start and its arguments, after --")
    _add_options(add)
    add.set_defaults(func=run_add)


def _add_options(add: argparse.ArgumentParser) -> None:
    add.add_argument("--url", help="the server's streamable HTTP address instead of a command")
    add.add_argument("--header", action="append", metavar="NAME:VALUE", help="an HTTP header to send (repeatable)")
    add.add_argument("--bearer-token-stdin", action="store_true",
                     help="read a bearer token from standard input (asked for without echo on a terminal); it is "
                          "kept in the system keychain")
    add.add_argument("--no-bearer-token", action="store_true", help="remove a bearer token stored for this server")
    add.add_argument("--env", action="append", metavar="NAME=VALUE",
                     help="an environment variable for the command (repeatable)")
    add.add_argument("--cwd", help="the folder the command starts in")
    add.add_argument("--timeout", type=float, help="seconds a tool call may take (default 60)")
    add.add_argument("--yes", action="store_true",
                     help="confirm the command now (it runs on this machine with your rights) instead of being asked")
    add.add_argument("--no-test", action="store_true", help="save without starting or contacting the server")
    add.add_argument("--json", action="store_true", help="print the server and the test as JSON")


def _after_name(args: argparse.Namespace) -> list[str]:
    """The options given after NAME read into ``args``; the command after ``--``."""
    rest = list(args.command)
    if rest and not rest[0].startswith("-"):  # argparse already took the -- away: all of it is the command
        return rest
    options, command = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    if options:
        later = argparse.ArgumentParser(prog="quantdesk mcp add NAME", add_help=False,
                                        argument_default=argparse.SUPPRESS)
        _add_options(later)
        later.parse_args(options, namespace=args)
    return command


def _pairs(items: list[str], sep: str, what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise QuantDeskError(f"{item!r} is not {what}", f"write it as NAME{sep}VALUE")
        out[key.strip()] = value.strip() if sep == ":" else value
    return out


def _read_token(args: argparse.Namespace) -> str | None:
    if args.no_bearer_token:
        return ""
    if args.bearer_token_stdin:
        value = getpass.getpass("Bearer token: ") if sys.stdin.isatty() else sys.stdin.readline()
        if not value.strip():
            raise QuantDeskError("no bearer token was given on standard input")
        return value.strip()
    return None


def run_add(args: argparse.Namespace) -> int:
    from app.mcp.config import McpServerConfig, McpServers

    command = _after_name(args)
    if bool(command) == bool(args.url):
        raise QuantDeskError("give either a command after -- or --url, not both or neither",
                             "quantdesk mcp add NAME -- COMMAND ARGS…, or quantdesk mcp add NAME --url URL")
    store = McpServers()
    previous = next((s for s in store.all() if s.name == args.name), None)
    config = McpServerConfig(args.name, command=command[0] if command else "", args=command[1:],
                             env=_pairs(args.env or [], "=", "an environment variable"), cwd=args.cwd or "",
                             url=args.url or "", headers=_pairs(args.header or [], ":", "a header"),
                             timeout_s=args.timeout or (previous.timeout_s if previous else McpServerConfig.timeout_s),
                             confirmed=previous.confirmed if previous else "", disabled=False)
    config = store.save(config, bearer_token=_read_token(args))
    if config.needs_confirmation and (args.yes or _ask_to_confirm(config, required=False)):
        config = store.confirm(config.name)
    test = None
    if not args.no_test and not config.needs_confirmation:
        test = _test(store, config)
    if args.json:
        print(json.dumps({"server": _described(config), "test": test}, indent=1))
        return 0 if test is None or test["state"] == "ready" else 1
    where = config.url if config.transport == "http" else config.command_line()
    print(f"saved {config.name} → {where}" + (" (bearer token kept)" if config.bearer else ""))
    if config.needs_confirmation:
        print(f"note: {config.name} was not confirmed, so it has not been started; confirm it with: "
              f"quantdesk mcp test {config.name}", file=sys.stderr)
    if test is not None:
        _print_test(test)
    return 0 if test is None or test["state"] == "ready" else 1


def _ask_to_confirm(config: Any, *, required: bool) -> bool:
    """Show the command in full and ask; without a terminal there is nobody to ask: not confirmed."""
    if not sys.stdin.isatty():
        if required:
            raise QuantDeskError(f"the MCP server {config.name} has not been confirmed, and there is no terminal "
                                 "to ask", f"run it once with: quantdesk mcp test {config.name} --yes (it starts: "
                                           f"{config.command_line()})")
        return False
    print(f"{config.name} starts this program on your computer, with your rights:\n  {config.command_line()}")
    answer = input("Start it? [y/N] ").strip().lower()
    return answer in ("y", "yes")


# --- ls


def _build_ls(sub: Any) -> None:
    ls = sub.add_parser("ls", help="list the servers and the tools always allowed",
                        description="List the MCP servers, how each is reached, whether it is confirmed or "
                                    "disabled, and the tools you always allow.")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    ls.set_defaults(func=run_ls)


def _described(config: Any) -> dict[str, Any]:
    from app.mcp.approvals import Approvals

    allowed = [tool for server, tool in Approvals().always() if server == config.name]
    return {"name": config.name, "transport": config.transport, "command": config.command, "args": config.args,
            "env": sorted(config.env), "cwd": config.cwd, "url": config.url, "headers": sorted(config.headers),
            "bearer_token": config.bearer or None, "confirmed": not config.needs_confirmation,
            "disabled": config.disabled, "timeout_s": config.timeout_s, "always_allowed": allowed}


def run_ls(args: argparse.Namespace) -> int:
    from app.mcp.config import McpServers, token_storage_sentence

    servers = McpServers().all()
    if args.json:
        print(json.dumps([_described(s) for s in servers], indent=1))
        return 0
    if not servers:
        print("no MCP servers; add one with: quantdesk mcp add NAME -- COMMAND ARGS…, or import an mcp.json with: "
              "quantdesk mcp import FILE")
    for s in servers:
        info = _described(s)
        state = ["disabled" if s.disabled else "enabled"]
        if s.transport == "stdio":
            state.append("confirmed" if info["confirmed"] else "not confirmed yet")
        if s.bearer:
            state.append(f"bearer token in the {'keychain' if s.bearer == 'keychain' else 'token file'}")
        where = s.url if s.transport == "http" else s.command_line()
        print(f"{s.name}\t{s.transport}\t{where}\t{', '.join(state)}")
        if info["always_allowed"]:
            print(f"  always allowed: {', '.join(info['always_allowed'])} (revoke with: quantdesk mcp revoke "
                  f"{s.name} [TOOL])")
    if any(s.bearer for s in servers):
        print(token_storage_sentence(), file=sys.stderr)
    return 0


# --- test


def _build_test(sub: Any) -> None:
    test = sub.add_parser("test", help="start or reach a server and list its tools",
                          description="Connect to the server (a stdio server is confirmed first), list its tools "
                                      "and time the handshake.")
    test.add_argument("name", help="the server's name")
    test.add_argument("--yes", action="store_true", help="confirm a command not confirmed yet without asking")
    test.add_argument("--timeout", type=float, default=None, help="seconds to wait for the handshake (default 30)")
    test.add_argument("--json", action="store_true", help="print the result as JSON")
    test.set_defaults(func=run_test)


def _test(store: Any, config: Any, timeout_s: float | None = None) -> dict[str, Any]:
    from app.mcp.client import ToolBox

    started = time.monotonic()
    with ToolBox(headers_for=store.request_headers) as box:
        status = box.connect(config, timeout_s=timeout_s)
        tools = [{"name": t.name, "function": t.function_name, "title": t.title, "description": t.description,
                  "input_schema": t.input_schema} for t in box.list_tools(config.name)]
    return {"name": config.name, "state": status.state, "sentence": status.sentence,
            "server": status.server_info, "seconds": round(time.monotonic() - started, 2), "tools": tools,
            "stderr_tail": list(status.stderr_tail)}


def _print_test(test: dict[str, Any]) -> None:
    if test["state"] != "ready":
        print(test["sentence"], file=sys.stderr)
        return
    n = len(test["tools"])
    print(f"{test['name']}: {test['server'] or 'MCP server'} answered in {test['seconds']:.1f} s, "
          f"{n} tool{'s' if n != 1 else ''}")
    for tool in test["tools"]:
        first = (tool["description"] or tool["title"]).strip().splitlines()
        line = first[0] if first else ""
        print(f"  {tool['name']}" + (f" — {line[:100]}{'…' if len(line) > 100 else ''}" if line else ""))


def run_test(args: argparse.Namespace) -> int:
    from app.mcp.config import McpServers

    store = McpServers()
    config = store.get(args.name)
    if config.needs_confirmation:
        if not (args.yes or _ask_to_confirm(config, required=True)):
            print(f"{config.name} was not started", file=sys.stderr)
            return 1
        config = store.confirm(config.name)
    result = _test(store, config, args.timeout)
    print(json.dumps(result, indent=1)) if args.json else _print_test(result)
    return 0 if result["state"] == "ready" else 1


# --- rm, enable, disable, revoke, import


def _build_rm(sub: Any) -> None:
    rm = sub.add_parser("rm", help="remove a server, its stored token and its approvals",
                        description="Remove an MCP server, forget its bearer token and the tools always allowed.")
    rm.add_argument("name", help="the server's name")
    rm.set_defaults(func=run_rm)


def run_rm(args: argparse.Namespace) -> int:
    from app.mcp.approvals import Approvals
    from app.mcp.config import McpServers

    McpServers().remove(args.name)
    Approvals().revoke(args.name)
    print(f"removed {args.name}")
    return 0


def _build_switch(name: str, disabled: bool) -> Callable[[Any], None]:
    def build(sub: Any) -> None:
        p = sub.add_parser(name, help=f"{name} a server (a disabled one offers no tools to any chat)",
                           description=f"{name.capitalize()} an MCP server: a disabled server is kept, but no chat "
                                       "starts it or sees its tools.")
        p.add_argument("name", help="the server's name")
        p.set_defaults(func=run_disable if disabled else run_enable)
    return build


def run_enable(args: argparse.Namespace) -> int:
    return _switch(args.name, False)


def run_disable(args: argparse.Namespace) -> int:
    return _switch(args.name, True)


def _switch(name: str, disabled: bool) -> int:
    from app.mcp.config import McpServers

    McpServers().set_disabled(name, disabled)
    print(f"{name} {'disabled' if disabled else 'enabled'}")
    return 0


def _build_revoke(sub: Any) -> None:
    p = sub.add_parser("revoke", help="ask again before a tool you always allowed",
                       description="Forget 'always allow' for one tool of a server, or for all of its tools.")
    p.add_argument("name", help="the server's name")
    p.add_argument("tool", nargs="?", help="the tool (default: every tool of the server)")
    p.set_defaults(func=run_revoke)


def run_revoke(args: argparse.Namespace) -> int:
    from app.mcp.approvals import Approvals

    n = Approvals().revoke(args.name, args.tool)
    what = f"{args.name}/{args.tool}" if args.tool else f"the tools of {args.name}"
    print(f"{what}: each call asks again" if n else f"{what}: nothing was always allowed")
    return 0


def _build_import(sub: Any) -> None:
    p = sub.add_parser("import", help="add the servers of another app's mcp.json (LM Studio, Claude Desktop, Cursor)",
                       description="Merge the servers of an mcp.json file (LM Studio, Claude Desktop, Cursor, VS "
                                   "Code) into QuantDesk's. A name already here is reported and left alone; imported "
                                   "commands are confirmed before they first start.")
    p.add_argument("file", help="the mcp.json (or claude_desktop_config.json) to read")
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    p.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    from dataclasses import asdict
    from pathlib import Path

    from app.mcp.config import import_mcp_json

    report = import_mcp_json(Path(args.file))
    if args.json:
        print(json.dumps(asdict(report), indent=1))
    else:
        for sentence in report.sentences() or ["the file lists no MCP servers"]:
            print(sentence)
    return 0


# --- serve: QuantDesk's own tools over stdio (the parser and the run in app/commands/mcp_serve.py)


def _build_serve(sub: Any) -> None:
    from app.commands.mcp_serve import register_serve

    register_serve(sub, func=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from app.commands import mcp_serve

    return mcp_serve.run(args)


ACTIONS: list[tuple[str, Callable[[Any], None]]] = [
    ("add", _build_add), ("ls", _build_ls), ("test", _build_test), ("rm", _build_rm), ("import", _build_import),
    ("enable", _build_switch("enable", False)), ("disable", _build_switch("disable", True)),
    ("revoke", _build_revoke), ("serve", _build_serve),
]
