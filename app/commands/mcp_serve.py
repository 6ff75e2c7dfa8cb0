"""``quantdesk mcp serve``: QuantDesk's own tools (the machine, the library, fit, recommend, Hub search, pull, chat,
complete, bench) for an agent over MCP's stdio transport; the tools are app/server/mcp.py's.

``register_serve(subparsers)`` adds ``serve`` to the sub-commands of ``quantdesk mcp`` (app/commands/mcp.py, whose
``ACTIONS`` list it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

SERVE_HELP = "serve QuantDesk's tools to an agent over MCP (stdio): the machine, the library, fit, chat, bench…"
SERVE_DESCRIPTION = (
    "Serve QuantDesk's own tools to an MCP client over stdin/stdout (add it to Claude Desktop, LM Studio or Cursor as "
    '{"command": "quantdesk", "args": ["mcp", "serve"]}): hardware, library, fit, recommend, search_hub, chat and '
    "complete with a library model (loaded on first use within the memory budget), bench (a speed run), and pull "
    "with --allow-downloads. Nothing but the protocol is written to stdout; messages go to stderr.")
IDLE_TTL_S = 600.0  # app.server.router's DEFAULT_IDLE_TTL_S; not imported, so that --help stays light


def register_serve(subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
                   func: Callable[[argparse.Namespace], int] | None = None) -> None:
    """``serve`` among ``quantdesk mcp``'s actions; ``func`` runs it (default ``run``: a module that registers it
    may hand a function of its own that calls ``run``)."""
    from app.hardware import add_hardware_argument
    from app.settings import CONTEXT_HELP

    p = subparsers.add_parser("serve", help=SERVE_HELP, description=SERVE_DESCRIPTION)
    p.add_argument("--allow-downloads", action="store_true",
                   help="offer the pull tool, so the agent may download models from the Hub into the library "
                        "(off by default)")
    p.add_argument("--memory-budget", type=float, metavar="GIB",
                   help="memory the models loaded for chat and complete may take together, in GiB (default: what "
                        "the fit check finds free when the first one loads)")
    p.add_argument("--max-loaded", type=int, metavar="N", help="at most N models loaded at once (default: no count "
                                                              "limit; the memory budget still holds)")
    p.add_argument("--idle-ttl", type=float, default=IDLE_TTL_S, metavar="SECONDS",
                   help=f"unload a model after this long without a call (default {IDLE_TTL_S:g})")
    p.add_argument("--force", action="store_true",
                   help="load a model even where the fit check or the memory budget says it does not fit (risks "
                        "running out of memory)")
    p.add_argument("--ctx", type=int, help=f"{CONTEXT_HELP}; for the models chat and complete load")
    p.add_argument("--threads", type=int, help="CPU threads of the models loaded (default: physical cores)")
    add_hardware_argument(p)
    p.set_defaults(func=func or run)


def check_pool_options(args: argparse.Namespace) -> None:
    """Refuse the model pool's limits out of their range (serve's and mcp serve's --memory-budget, --max-loaded,
    --idle-ttl), before anything loads."""
    from app.errors import EngineError

    if args.memory_budget is not None and args.memory_budget <= 0:
        raise EngineError(f"--memory-budget must be more than 0 GiB, not {args.memory_budget:g}", kind="settings")
    if args.max_loaded is not None and args.max_loaded < 1:
        raise EngineError(f"--max-loaded must be at least 1, not {args.max_loaded}", kind="settings")
    if args.idle_ttl <= 0:
        raise EngineError(f"--idle-ttl must be more than 0 seconds, not {args.idle_ttl:g}", kind="settings")


def run(args: argparse.Namespace) -> int:
    from app.datatypes import LoadSettings
    from app.errors import EngineError
    from app.server.mcp import run_stdio
    from app.server.router import ServeSettings
    from app.settings import context_length

    check_pool_options(args)
    load = LoadSettings(n_ctx=context_length(args.ctx), threads=args.threads)
    try:
        load.validate()
    except ValueError as exc:
        raise EngineError(str(exc), kind="settings") from None
    settings = ServeSettings(load_on_demand=True, force=args.force, idle_ttl_s=args.idle_ttl,
                             max_loaded=args.max_loaded, load=load, profile_path=args.hardware,
                             memory_budget_bytes=None if args.memory_budget is None else
                             int(args.memory_budget * (1 << 30)))
    try:
        run_stdio(settings, allow_downloads=args.allow_downloads)
    except KeyboardInterrupt:
        pass  # Ctrl-C in a terminal: the client's end, as a closed stdin is
    return 0
