"""The CLI faces: one module per home (``chat`` in engine.py, ``search``/``show``/``pull``… in hub.py, ``hw``,
``inspect``/``fit``/``recommend`` in models.py, ``serve``, ``bench``), each exposing ``register(subparsers)``.
They sit on top of the homes they call and nothing imports them but app/cli.py, so no home points up to a
command-line face.

COMMANDS below is all that ``quantdesk --help`` needs: each command's name, one-line help and module. app/cli.py
imports a command's module only when that command is named (to run it, or for its ``--help``); every other command
is listed from this table alone, so this file imports nothing.

To add a command: an entry in COMMANDS (in the order ``--help`` lists them; a module's commands side by side), and in
its module ``register(subparsers)``, which builds the command's parser with ``add_command(subparsers, name, ...)``
(the help comes from here) and sets ``func``; heavy imports go inside the functions that run the command.
tests/test_cli.py checks that the table and the modules agree.

In detail (each module's job, read with docs/architecture.md's module map):

the ``quantdesk`` command; one module of sub-commands per home (``commands/engine.py`` ``chat`` (its ``--tools``
loop in ``commands/chat_tools.py``, over ``app/mcp/loop.py``), ``commands/mcp.py`` ``mcp`` (add, ls, test, rm,
import, enable, disable, revoke) over ``app/mcp`` (each action one ``(name, build)`` entry of its ``ACTIONS``; ``mcp
serve``, QuantDesk's own MCP tools over stdio, built in ``commands/mcp_serve.py``), ``commands/hub.py`` the Hub and
the library, ``commands/hardware.py`` ``hw``, ``commands/models.py`` ``inspect``/``fit``/``recommend``,
``commands/runtime.py``, ``commands/server.py`` ``serve``/``ps``/``eject``, ``commands/launch.py`` ``launch`` (a
coding tool set up against a running server, found by ``server/running``'s records, or one started detached; the
tool's file written through ``server/agent_configs``), ``commands/lab.py`` ``bench``, ``commands/remote.py``,
``commands/chats.py`` over ``chats/store``, ``commands/config.py`` over ``settings`` (typed by ``settings.parse``),
``commands/presets.py`` ``preset`` over ``hub/presets`` and ``hub/preset_ini``) on top of the homes it calls, wired
by ``cli.py``. Most GUI actions have a CLI twin; these have none yet: renaming a chat, chat presets, going on with a
saved chat (``quantdesk chat`` starts an unsaved one), the Downloads page's queue (pause, cancel, retry: ``pull`` is
one download, resumed by running it again), Discover's starting list, deleting a saved lab result, removing the Hub
token. ``commands/__init__.py`` holds ``COMMANDS``, each command's name, ``--help`` line and module: the parser
lists every command from it and imports only the module of the command named (none for ``quantdesk --help``). A new
command is an entry there plus its module's ``register(subparsers)``, which builds it with ``add_command(subparsers,
name, ...)``; its heavy imports go inside the function that runs it
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Command(NamedTuple):
    module: str  # the module whose register(subparsers) builds it
    help: str  # the line ``quantdesk --help`` lists it with


COMMANDS: dict[str, Command] = {
    "chat": Command("app.commands.engine", "chat with a local model (GGUF file or model folder)"),
    "search": Command("app.commands.hub", "search models on the Hugging Face Hub"),
    "show": Command("app.commands.hub", "a Hub repo's quants (files grouped by quant), branches and licence"),
    "pull": Command("app.commands.hub", "download a model, verified and resumable"),
    "ls": Command("app.commands.hub", "list the local model library"),
    "update": Command("app.commands.hub", "update a downloaded model to its repo's current files"),
    "rm": Command("app.commands.hub", "remove a model from the library (deletes the files only where QuantDesk "
                                      "downloaded or copied them)"),
    "import": Command("app.commands.hub", "add a .gguf file or a model folder to the library"),
    "login": Command("app.commands.hub", "store a Hugging Face token the way huggingface_hub's login does"),
    "hw": Command("app.commands.hardware", "show this machine's CPU, memory, GPUs and backends"),
    "runtime": Command("app.commands.runtime",
                       "list, build, choose or remove llama.cpp runtimes (CPU, Vulkan, CUDA, ROCm, Metal)"),
    "inspect": Command("app.commands.models",
                       "show a model's metadata (a local file or folder, or a Hub repo or file)"),
    "fit": Command("app.commands.models", "memory per device for MODEL at a context size, and the verdict"),
    "recommend": Command("app.commands.models", "which quant of a repo, folder or list fits this machine best"),
    "serve": Command("app.commands.server", "serve a model over an OpenAI-compatible API (127.0.0.1 only by default)"),
    "ps": Command("app.commands.server", "list the models a running server has loaded (its GET /v1/models)"),
    "eject": Command("app.commands.server", "unload a model a running server has loaded (a reply it is writing is "
                                            "stopped first; the server's primary model stays)"),
    "launch": Command("app.commands.launch", "set up Claude Code, Codex, OpenCode, Continue, Cline or any OpenAI "
                                             "client against the local server (started if none runs)"),
    "bench": Command("app.commands.lab", "compare quants/formats of a model: speed, memory and quality side by side"),
    "remote": Command("app.commands.remote",
                      "connect to OpenAI-compatible servers (llama-server, vLLM, another QuantDesk)"),
    "mcp": Command("app.commands.mcp", "add, list, test or remove MCP servers whose tools a chat may use "
                                       "(quantdesk chat --tools NAME); serve QuantDesk's own tools (mcp serve)"),
    "preset": Command("app.commands.presets", "a model's own load and chat settings, applied on every load; import "
                                              "and export llama-server's preset INI files"),
    "chats": Command("app.commands.chats", "list, show, export or delete saved chats"),
    "docs": Command("app.commands.docs", "your documents, indexed on this machine: add a folder or files, list, "
                                         "index, search or remove collections"),
    "config": Command("app.commands.config", "show or change the app's settings"),
}


def add_command(subparsers: Any, name: str, **kwargs: Any) -> Any:
    """``subparsers.add_parser`` for the command ``name``, with its help line from COMMANDS."""
    return subparsers.add_parser(name, help=COMMANDS[name].help, **kwargs)
