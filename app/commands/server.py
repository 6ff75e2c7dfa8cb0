"""``quantdesk serve``: an OpenAI-compatible API for one local model, on this machine only by default; ``quantdesk ps``
and ``quantdesk eject``: what a running server (``serve`` or the app's Server page) has loaded, and Eject of one."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import COMMANDS, add_command
from app.errors import EngineError
from app.commands.engine import (FORCE_HELP, add_draft_arguments, add_force_arguments, check_fit, draft_note,
                                 draft_setting)
from app.commands.mcp_serve import check_pool_options
from app.commands.models import CPU_MOE_HELP, cpu_moe_arg
from app.settings import CONTEXT_HELP, context_length
from app.settings import load as load_settings
from app.datatypes import DEFAULT_PARALLEL, MAX_PARALLEL, OVERFLOW_POLICIES, Loaded, LoadSettings

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.applications import Starlette

    from app.engine.client import EngineClientLike
    from app.server.app import OpenAIServer
    from app.server.thread import _NotifyingServer

# app.server.router's and app.server.app's; not imported here so that `quantdesk --help` stays light (a test checks
# that they agree).
DEFAULT_IDLE_TTL_S = 600.0
STREAM_EVERY_S = 0.040
API_KEY_ENV = "QUANTDESK_API_KEY"
DEFAULT_SERVER = "http://127.0.0.1:8080"
# Requests decoded together by default: llama-server's (its -np auto), and what a 2-core CPU gains most of (issue 38:
# 4 sequences give 1.7-1.8x one's tokens a second, 8 give 1.9x). Not limited by memory: the unified KV cache is the
# context's size whatever their number (only a sliding-window model's window cache grows with it).


def parallel_words(details: dict[str, Any], n_ctx: int, *, chosen: bool) -> str:
    """The sentence serve says on start about how many requests its model answers at once."""
    parallel = int(details.get("parallel", 1))
    if parallel > 1:
        shared = "and together they share it" if details.get("kv_unified", True) else "in a cache of its own"
        return (f"{parallel} requests decode together" + ("" if chosen else " (the default; --parallel N)")
                + f", each may use the whole context of {n_ctx} tokens {shared}; more wait in the queue")
    why = details.get("parallel_note") or "this engine answers one request at a time"
    return f"{why}; more wait in the queue"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        subparsers, "serve",
        description="Serve one model over the OpenAI API (/v1/models, /v1/chat/completions, /v1/completions). "
                    "It listens on 127.0.0.1 only; another address needs --allow-lan and an API key. "
                    "Requests from web pages of other origins are refused unless listed with --allow-origin.")
    p.add_argument("--model", required=True, help="a library model as `quantdesk ls` prints it (or its OWNER/REPO, "
                   "with :QUANT where the library holds several, or a unique prefix), a .gguf file or a model folder "
                   "(chosen here, never by a request)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0 picks a free one)")
    p.add_argument("--api-key", help=f"require 'Authorization: Bearer KEY' (or set {API_KEY_ENV}, which "
                                      "keeps the key out of the process list)")
    p.add_argument("--allow-lan", action="store_true",
                   help="allow listening on a non-loopback address (needs an API key of 16+ characters)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web origin (e.g. http://localhost:3000) allowed to call the API from a browser")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="an extra name clients may use in the Host header (e.g. mybox.local)")
    p.add_argument("--serve-remotes", action="store_true",
                   help="also serve the models of your remote connections (quantdesk remote ls) as "
                        "remote:CONNECTION/MODEL; their API keys are never sent to this server's clients")
    p.add_argument("--load-on-demand", action="store_true",
                   help="let a request naming a library model (quantdesk ls) load it in an engine of its own, when it "
                        "fits the memory budget (off by default: only --model is served)")
    p.add_argument("--memory-budget", type=float, metavar="GIB",
                   help="memory the server's local models may take together, in GiB (default: what the fit check "
                        "finds free when the server starts, plus the --model's estimate)")
    p.add_argument("--max-loaded", type=int, metavar="N",
                   help="at most N models loaded at once, --model included (default: no count limit; the memory "
                        "budget still holds)")
    p.add_argument("--idle-ttl", type=float, default=DEFAULT_IDLE_TTL_S, metavar="SECONDS",
                   help=f"unload a model loaded on demand after this long without a request (default "
                        f"{DEFAULT_IDLE_TTL_S:g}); --model stays loaded")
    add_force_arguments(p, FORCE_HELP + "; with --load-on-demand, loads go past --memory-budget too (idle models "
                           "still unload first)")
    p.add_argument("--alias", action="append", default=[], metavar="NAME",
                   help="another name --model answers to (e.g. gpt-4.1, for a client with a fixed model name); "
                        "repeat for more")
    p.add_argument("--serve-any-model", action="store_true",
                   help="answer a request naming any model that is not served here with --model, as llama-server "
                        "does (off by default: such a request is a 404); /v1/models says so")
    p.add_argument("--allow-downloads", action="store_true",
                   help="let an agent download models from the Hub into the library through /mcp's pull tool (off "
                        "by default: no request can download a model)")
    p.add_argument("--max-queue", type=int, default=32, help="requests running or waiting before 503 (default 32)")
    p.add_argument("--stream-every-ms", type=float, default=STREAM_EVERY_S * 1000, metavar="MS",
                   help=f"send a streamed reply's tokens in chunks at most this often (default "
                        f"{STREAM_EVERY_S * 1000:g}; 0: every token in its own chunk); usage counts are exact "
                        "either way")
    p.add_argument("--overflow", choices=OVERFLOW_POLICIES,
                   help="a chat request that does not fit the context, unless it names a policy (\"quantdesk\": "
                        "{\"overflow\": ...} or the X-QuantDesk-Overflow header): stop (a 400), drop-oldest, "
                        "truncate-middle or compact; the response says what was left out (default: the "
                        "server_overflow setting, stop unless changed)")
    p.add_argument("--backend", help="engine to use (default: follows from the format)")
    p.add_argument("--ctx", type=int, help=CONTEXT_HELP)
    p.add_argument("--gpu-layers", type=int,
                   help="layers to offload to the GPU, -1 all, 0 none (default: the most that fit, as the Chat plans "
                        "them)")
    p.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    p.add_argument("--cpu-moe", type=cpu_moe_arg, default=0, metavar="N|all", help=CPU_MOE_HELP)
    p.add_argument("--parallel", type=int, metavar="N",
                   help=f"requests a llama.cpp or MLX model decodes together, each up to the whole context (default "
                        f"{DEFAULT_PARALLEL}; llama.cpp's unified cache does not grow with N, MLX's grows with those "
                        "running; 1 with a draft or a vision model); more wait in the queue (--max-queue)")
    add_draft_arguments(p)  # for the --model
    p.set_defaults(func=run)

    for name, func in (("ps", ps), ("eject", eject)):
        help_text = COMMANDS[name].help
        q = add_command(subparsers, name, description=help_text[0].upper() + help_text[1:] + ".")
        if name == "eject":
            q.add_argument("model", help="the model's id, as `quantdesk ps` lists it")
        q.add_argument("--server", default=None if name == "ps" else DEFAULT_SERVER, metavar="URL",
                       help="the server's address (default: " + ("every server running here (quantdesk serve, the "
                                                             "Server page), else " if name == "ps" else "")
                       + f"{DEFAULT_SERVER})")
        q.add_argument("--api-key", help=f"its API key, if it requires one (or set {API_KEY_ENV})")
        q.set_defaults(func=func)


def run(args: argparse.Namespace) -> int:
    from app.engine.client import EngineClient
    from app.server.guard import check_bind

    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    check_bind(args.host, allow_lan=args.allow_lan, api_key=api_key)  # before any work: refuse fast
    from app.hub.resolve import local_model

    args.model = local_model(args.model)  # a library model by name: its path
    _check_options(args)
    settings = _load_settings(args)
    given = tuple(name for name, value in (("n_ctx", args.ctx), ("gpu_layers", args.gpu_layers),
                                           ("cpu_moe", args.cpu_moe or None), ("parallel", args.parallel))
                  if value is not None)
    # The model as the load planner plans it for this machine (a vision model with the projector beside it);
    # library models loaded on request start again from the server's own settings.
    planned = check_fit(args.model, settings, args, given=given, find_projector=True)
    if note := draft_note(planned):
        print(note, file=sys.stderr)

    from app.server.thread import _NotifyingServer, server_config

    with EngineClient() as client:
        loaded = client.load(args.model, planned, backend=args.backend)

        announce = _announcer(args, loaded)
        app = serve_app(args, client, api_key, settings, on_ready=announce)
        server = _NotifyingServer(server_config(app, args.host, args.port, log_level="warning"))

        try:
            asyncio.run(_serve(server, api_key))
        except KeyboardInterrupt:  # uvicorn shut down gracefully, then re-raised the Ctrl-C it caught
            print("server stopped", file=sys.stderr)
        except SystemExit as exc:  # uvicorn exits when it cannot bind; it has logged why
            if exc.code:
                raise EngineError(f"could not listen on {args.host}:{args.port}", "is the port already in use?",
                                  kind="serve") from None
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """Refuse serve's numeric options out of their range, before anything loads."""
    if not 0 <= args.port <= 65535:
        raise EngineError(f"the port must be between 0 and 65535, not {args.port}", kind="settings")
    if args.max_queue < 1:
        raise EngineError(f"--max-queue must be at least 1, not {args.max_queue}", kind="settings")
    check_pool_options(args)
    if args.parallel is not None and not 1 <= args.parallel <= MAX_PARALLEL:
        raise EngineError(f"--parallel must be from 1 to {MAX_PARALLEL}, not {args.parallel}", kind="settings")
    if not 0 <= args.stream_every_ms <= 1000:
        raise EngineError(f"--stream-every-ms must be from 0 to 1000, not {args.stream_every_ms:g}", kind="settings")


def _load_settings(args: argparse.Namespace) -> LoadSettings:
    """The --model's load settings from the options, checked."""
    settings = LoadSettings(n_ctx=context_length(args.ctx), threads=args.threads, cpu_moe=args.cpu_moe,
                            draft=draft_setting(args), draft_tokens=args.draft_tokens, draft_p_min=args.draft_p_min,
                            parallel=args.parallel if args.parallel is not None else DEFAULT_PARALLEL,
                            **({} if args.gpu_layers is None else {"gpu_layers": args.gpu_layers}))
    try:
        settings.validate()
    except ValueError as exc:
        raise EngineError(str(exc), kind="settings") from None
    return settings


def _announcer(args: argparse.Namespace, loaded: Loaded) -> Callable[[OpenAIServer], None]:
    """What the server prints once it is ready: the loaded model, its parallel slots, on-demand loads, remotes."""

    def announce(openai: OpenAIServer) -> None:
        # Printed from the lifespan, before the socket is bound; the URL follows once it listens.
        experts, draft = loaded.details.get("experts_in_ram"), loaded.details.get("draft")
        print(f"loaded {loaded.model_path} with {loaded.backend} · context {loaded.n_ctx} · "
              + (f"experts of {experts} layer{'s' if experts != 1 else ''} in RAM · " if experts else "")
              + (f"draft {Path(draft['model']).name}, {draft['draft_tokens']} tokens a check · " if draft else "")
              + f"model id {openai.model_id!r}", file=sys.stderr)
        print(parallel_words(loaded.details, loaded.n_ctx, chosen=args.parallel is not None), file=sys.stderr)
        pool = openai.pool
        if pool.settings.load_on_demand:
            print(f"library models load on request ({pool.models.budget_words()}; idle ones unload after "
                  f"{pool.settings.idle_ttl_s:g} s" + ("; --force: loads go past the budget" if args.force else "")
                  + ")", file=sys.stderr)
        if openai.remotes is not None:
            remote_ids = [m.ref for m in openai.remotes.models()]
            print(f"also serving {len(remote_ids)} remote model{'s' if len(remote_ids) != 1 else ''}"
                  + (": " + ", ".join(remote_ids) if remote_ids else "")
                  + "".join(f"; {name} not reachable: {why}" for name, why in openai.remotes.problems.items()),
                  file=sys.stderr)

    return announce


async def _serve(server: _NotifyingServer, api_key: str | None) -> None:
    """Run uvicorn's ``server``, saying where it listens once it does and recording that for `quantdesk launch`."""
    from app.server import running
    from app.server.thread import bound_url

    task = asyncio.create_task(server.serve())
    await asyncio.to_thread(server.ready.wait)
    record = None
    if server.started:
        key_note = "an API key is required" if api_key else "no API key"
        print(f"serving on {bound_url(server)}/v1, and QuantDesk's tools for agents over MCP on "
              f"{bound_url(server)}/mcp ({key_note}); Ctrl-C stops", file=sys.stderr, flush=True)
        # where it listens, for `quantdesk launch` to find it (app/server/running.py)
        record = running.announce(bound_url(server), api_key_required=bool(api_key), source="serve")
    try:
        await task
    finally:
        running.withdraw(record)


def serve_app(args: argparse.Namespace, client: EngineClientLike, api_key: str | None, settings: LoadSettings, *,
              on_ready: Callable[[OpenAIServer], None] | None = None) -> Starlette:
    """The server ``quantdesk serve`` runs, over ``client`` (its --model loaded): the same app and router as the
    app's Server page builds over the app's pool (tests ask both the same things)."""
    from app.server.app import create_app
    from app.server.router import ServeSettings

    return create_app(client, api_key=api_key, allowed_hosts=[*args.allow_host, args.host],
                      allowed_origins=args.allow_origin, max_pending=args.max_queue,
                      serve_remotes=args.serve_remotes, on_ready=on_ready,
                      stream_every_s=args.stream_every_ms / 1000,
                      overflow=getattr(args, "overflow", None) or load_settings().server_overflow,
                      allow_downloads=args.allow_downloads,
                      pool=ServeSettings(
                          load_on_demand=args.load_on_demand, force=args.force, idle_ttl_s=args.idle_ttl,
                          max_loaded=args.max_loaded, aliases=tuple(args.alias),
                          serve_any_model=args.serve_any_model,
                          memory_budget_bytes=None if args.memory_budget is None else
                          int(args.memory_budget * (1 << 30)), load=settings, profile_path=args.hardware))


def _call(args: argparse.Namespace, method: str, route: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request to a running server; its answer, or an EngineError with the server's own sentence."""
    import httpx

    base = args.server.rstrip("/").removesuffix("/v1")
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    try:
        answer = httpx.request(method, f"{base}{route}", json=body, timeout=60,
                               headers={"Authorization": f"Bearer {key}"} if key else {})
    except httpx.HTTPError as exc:
        raise EngineError(f"no server answers at {base}: {exc}", "is it running (quantdesk serve, or the app's "
                          "Server page)? Name its address with --server", kind="serve") from None
    try:
        found = answer.json()
    except ValueError:
        found = {}
    if answer.status_code >= 400:
        message = (found.get("error") or {}).get("message") if isinstance(found, dict) else None
        raise EngineError(message or f"the server answered {answer.status_code}", kind="serve")
    answered: dict[str, Any] = found  # the server's routes answer JSON objects
    return answered


def ps(args: argparse.Namespace) -> int:
    """The models each running server has loaded (the servers' records, app/server/running.py, or --server): their
    sequences busy and the queue, and how many of the last requests their engine's cache served in part."""
    from app.server.running import running

    servers = [args.server] if args.server else [r.url for r in running()] or [DEFAULT_SERVER]
    found = 0
    for url in servers:
        cards = [c for c in _call(argparse.Namespace(**{**vars(args), "server": url}), "GET", "/v1/models")
                 .get("data", []) if c.get("meta", {}).get("loaded")]
        if len(servers) > 1:
            print(f"{url}:")
        for card in cards:
            print(_ps_line(card))
        found += len(cards)
    if not found:
        print("no model is loaded", file=sys.stderr)
    return 0


def _ps_line(card: dict[str, Any]) -> str:
    meta = card["meta"]
    size = meta.get("memory_estimate_bytes")
    line = f"{card['id']}\t{meta.get('backend', '')}\tcontext {meta.get('n_ctx')}" + (
        f"\t{size / (1 << 30):.2f} GiB" if size else "")
    if "parallel" in meta:
        line += f"\t{meta['busy_sequences']}/{meta['parallel']} busy, {meta['queued']} queued"
        if meta["parallel"] == 1 and meta.get("parallel_note"):  # asked for more, but this model answers one
            line += f" ({meta['parallel_note']}, the rest wait in order)"
        elif meta["parallel"] == 1 and meta.get("backend") in ("exllamav2", "exllamav3"):
            line += f" ({meta['backend']}: one request at a time, the rest wait in order)"
    cache = meta.get("cache")
    if cache and cache["requests"]:
        line += (f"\tcache hits {cache['hits']}/{cache['requests']} requests "
                 f"({cache['cached_tokens']} of {cache['prompt_tokens']} prompt tokens)")
    return line + ("\tprimary" if meta.get("primary") else "")


def eject(args: argparse.Namespace) -> int:
    said = _call(args, "POST", "/models/unload", {"model": args.model})
    print(said.get("message") or f"{args.model} unloaded", file=sys.stderr)
    return 0
