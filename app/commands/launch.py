"""``quantdesk launch TOOL``: a coding tool (Claude Code, Codex, OpenCode, Continue, Cline) or any OpenAI client set up
against the local server in one command. It finds a running server (``quantdesk serve`` or the app's Server page, by
the records they keep while they listen: app/server/running.py) that serves the model, or starts ``quantdesk serve``
for it in the background, detached, with a context the tool can work in; then prints the tool's own configuration, or
with ``--write`` merges it into the tool's file (the user's file backed up first). A model whose context is too small
for the tool is refused in words (app/server/agent_configs.py has each tool's format and minimum, with sources)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import add_command
from app.commands.engine import FORCE_HELP, add_force_arguments
from app.commands.server import API_KEY_ENV
from app.errors import EngineError

if TYPE_CHECKING:
    from app.server.agent_configs import Endpoint

START_TIMEOUT_S = 600.0  # a large model's load, and the server's start
TOOL_NAMES = ("claude", "codex", "opencode", "continue", "cline", "openai")


def register(subparsers: Any) -> None:
    p = add_command(
        subparsers, "launch",
        description="Set up a coding tool against QuantDesk's local server: claude (Claude Code, over the Messages "
                    "API), codex (Codex, over the Responses API), opencode, continue, cline, or openai (the "
                    "environment of any OpenAI client). A running server (quantdesk serve, the app's Server page) "
                    "that serves the model is used, else one is started in the background. The tool's settings are "
                    "printed, or written with --write (your file is backed up first).")
    p.add_argument("tool", choices=TOOL_NAMES, help="the tool to set up")
    p.add_argument("--model", help="a library model as `quantdesk ls` prints it (or a .gguf file or model folder); "
                                   "default: the model a running server serves")
    p.add_argument("--write", action="store_true", help="write the settings into the tool's own file (Claude Code: "
                   "~/.claude/settings.json; Codex: ~/.codex/config.toml; OpenCode: ~/.config/opencode/opencode.json; "
                   "Continue: ~/.continue/config.yaml) instead of printing them only")
    p.add_argument("--server", metavar="URL", help="use the server at URL (default: a running one QuantDesk finds)")
    p.add_argument("--api-key", help=f"the server's API key, if it wants one (or set {API_KEY_ENV})")
    p.add_argument("--port", type=int, default=8080, help="the port of a server started here (default 8080)")
    p.add_argument("--ctx", type=int, help="the context of a server started here (default: what the tool needs, "
                                           "at least the Default context of Settings, at most the model's own)")
    add_force_arguments(p, FORCE_HELP + " (a server started here)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.server.agent_configs import TOOLS, write_setup

    tool = TOOLS[args.tool]
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    endpoint = _find(args, key)
    if endpoint is None:
        if not args.model:
            raise EngineError("no QuantDesk server is running, and no model was named",
                              "name one: quantdesk launch " + args.tool + " --model NAME (see quantdesk ls)",
                              kind="launch")
        endpoint = _start(args, key, tool.min_context)
    if (why := tool.refusal(endpoint)) is not None:
        raise EngineError(why, f"serve it with a larger context, up to what the model was trained for: stop that "
                               f"server, then quantdesk launch {args.tool} --model M --ctx N", kind="launch")
    setup = tool.make(endpoint)
    print(f"{tool.title} ← {endpoint.model} at {endpoint.openai_base} (context {endpoint.n_ctx:,} tokens)")
    for line in setup.lines:
        print(line)
    if args.write:
        if setup.file is None:
            raise EngineError(f"{tool.title} keeps its settings where QuantDesk cannot write them: enter the values "
                              "above", kind="launch")
        path, backup = write_setup(setup)
        print(f"wrote {path}" + (f" (your previous file is kept as {backup})" if backup else ""), file=sys.stderr)
    if setup.run:
        print(f"then run: {setup.run}", file=sys.stderr)
    return 0


def _find(args: argparse.Namespace, key: str | None) -> Endpoint | None:
    """A running server that serves the model asked for (any model, when none is asked), as an Endpoint; None."""
    from app.server import running
    from app.server.agent_configs import Endpoint

    wanted = _wanted_id(args.model) if args.model else None
    urls = [args.server.rstrip("/").removesuffix("/v1")] if args.server else [r.url for r in running.running()]
    for url in urls:
        cards = _models(url, key, required=bool(args.server))
        if cards is None:
            continue
        loaded = [c for c in cards if c.get("meta", {}).get("loaded") and not c["meta"].get("alias_of")]
        chosen = next((c for c in loaded if c["id"] == wanted), None) if wanted else \
            next((c for c in loaded if c["meta"].get("primary")), loaded[0] if loaded else None)
        if chosen is None:
            if args.server:
                raise EngineError(f"the server at {url} does not serve {args.model}"
                                  if wanted else f"the server at {url} has no model loaded", kind="launch")
            continue
        return Endpoint(url, chosen["id"], int(chosen["meta"].get("n_ctx") or 0), key)
    return None


def _models(url: str, key: str | None, *, required: bool) -> list[dict[str, Any]] | None:
    """The server's /v1/models cards; None where it does not answer (and was not named)."""
    import httpx

    try:
        answer = httpx.get(f"{url}/v1/models", timeout=10, headers={"Authorization": f"Bearer {key}"} if key else {})
    except httpx.HTTPError as exc:
        if required:
            raise EngineError(f"no server answers at {url}: {exc}", kind="launch") from None
        return None
    if answer.status_code == 401:
        raise EngineError(f"the server at {url} wants an API key", f"give it: --api-key KEY or {API_KEY_ENV}",
                          kind="launch")
    if answer.status_code >= 400:
        if required:
            raise EngineError(f"the server at {url} answered {answer.status_code}", kind="launch")
        return None
    data = answer.json().get("data")
    return data if isinstance(data, list) else []


def _wanted_id(model: str) -> str:
    """The id a server serves ``model`` under (app/server/router.py model_id of its path); a name that is no model
    here is taken as the id itself (a server may serve it by that name)."""
    from app.errors import QuantDeskError
    from app.hub.resolve import local_model
    from app.server.router import model_id

    try:
        return model_id(local_model(model))
    except QuantDeskError:
        return model


def _start(args: argparse.Namespace, key: str | None, min_context: int) -> Endpoint:
    """``quantdesk serve`` for the model, started detached (it outlives this command); the Endpoint once it listens."""
    from app.commands.engine import check_fit
    from app.datatypes import LoadSettings
    from app.hub.resolve import local_model
    from app.models.metadata import read_model
    from app.paths import log_dir
    from app.server import running
    from app.server.agent_configs import TOOLS, Endpoint
    from app.server.router import model_id
    from app.settings import context_length

    path = local_model(args.model)
    trained = read_model(path).context_length
    n_ctx = args.ctx or max(min_context, context_length(None))
    if trained and not args.ctx:
        n_ctx = min(n_ctx, trained)
    tool = TOOLS[args.tool]
    if trained and min_context > trained:
        raise EngineError(f"{Path(path).name} was trained for a context of {trained:,} tokens; {tool.title} needs "
                          f"at least {min_context:,} ({tool.min_context_source})",
                          "choose a model made for longer contexts", kind="launch")
    check_fit(path, LoadSettings(n_ctx=n_ctx), args)  # a model too large for this machine: refused in words now

    log = log_dir() / f"serve-{args.port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable] if getattr(sys, "frozen", False) else [sys.executable, "-m", "app"]
    command += ["serve", "--model", path, "--ctx", str(n_ctx), "--port", str(args.port)]
    if args.force:
        command.append("--force")
    if args.hardware:
        command += ["--hardware", args.hardware]
    env = {**os.environ, **({API_KEY_ENV: key} if key else {})}  # the key never in argv, which others can read
    # detached: a session of its own (POSIX), a process group and no console of its own (Windows), so closing this
    # terminal does not end it
    detach: dict[str, Any] = {"start_new_session": True}
    if sys.platform == "win32":
        detach = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS}
    with open(log, "ab") as out:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, close_fds=True,
                                 **detach)
    print(f"starting quantdesk serve --model {Path(path).name} --ctx {n_ctx} --port {args.port} in the background "
          f"(pid {child.pid}, log {log})", file=sys.stderr, flush=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        record = next((r for r in running.running() if r.pid == child.pid), None)
        if record is not None:
            return Endpoint(record.url, model_id(path), n_ctx, key)
        if child.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
            raise EngineError("the server did not start: " + (" / ".join(tail) or f"exit {child.returncode}"),
                              f"see {log}", kind="launch")
        time.sleep(0.2)
    raise EngineError(f"the server did not start listening within {START_TIMEOUT_S:.0f} s", f"see {log}",
                      kind="launch")

