"""The ``quantdesk`` command. Each feature's home has its sub-commands in a module of app/commands that exposes
``register(subparsers)``; this file only wires them together and turns errors into sentences.

Imports here stay light: app.commands.COMMANDS lists every command (name, help line, module), so the parser
imports only the module of the command it is given (none for ``quantdesk --help``), and that command imports what
it needs when it runs: ``quantdesk --help``, ``quantdesk hw`` and the GUI start fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app import __version__
from app.commands import COMMANDS
from app.errors import QuantDeskError

# Sub-commands that may reach the Hub: they also take --online after the command name.
HUB_COMMANDS: tuple[str, ...] = ("search", "show", "pull", "inspect", "fit", "recommend", "bench", "ls", "update")
ONLINE_HELP = "ignore the offline mode saved in Settings for this run (HF_HUB_OFFLINE in the environment still wins)"


def named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the global options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: every command listed with its help line, and the arguments of the command ``argv``
    names, built by its module (imported for it); the other commands' modules are not imported. Without ``argv``,
    every command is built in full (the tests read them all)."""
    parser = argparse.ArgumentParser(
        prog="quantdesk",
        description="Run local LLMs: detect this machine, pick the quant that fits, download it, chat. "
                    "Without a COMMAND, the desktop app opens. Commands follow the app's Settings (models folder, "
                    "offline mode).",
        epilog="`quantdesk COMMAND --help` describes one command.",
    )
    parser.add_argument("--version", action="version", version=f"quantdesk {__version__}")
    parser.add_argument("--online", action="store_true", help=ONLINE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = None if argv is None else COMMANDS.get(named_command(argv) or "")
    built: set[str] = set()  # the commands a module's register() made in full
    for name, command in COMMANDS.items():  # in --help's order; a module's commands are side by side
        if name in subparsers.choices:
            continue  # its module's register() made it with an earlier one
        if argv is None or (named is not None and command.module == named.module):
            before = set(subparsers.choices)
            importlib.import_module(command.module).register(subparsers)
            built |= set(subparsers.choices) - before
        else:
            subparsers.add_parser(name, help=command.help)  # listed only: it is never parsed in this run
    for name in HUB_COMMANDS:
        if name in built:  # SUPPRESS: left out after the command, the global flag's value stays
            subparsers.choices[name].add_argument("--online", action="store_true", default=argparse.SUPPRESS,
                                                  help=ONLINE_HELP)
    return parser


def apply_settings(online: bool = False) -> None:
    """What the app's saved Settings change in this process, as the GUI applies them at start-up: offline mode
    (unless ``online``; an HF_HUB_OFFLINE from the environment is never cleared). The models folder needs
    nothing here: app.settings.models_dir() reads the setting at each call."""
    from app import settings

    saved = settings.load()
    if saved.problem:
        print(f"quantdesk: {saved.problem}", file=sys.stderr)
    if online:
        saved.offline = False
    settings.apply_environment(saved)


def _start_gui() -> int:
    try:
        platform_check = importlib.import_module("app.ui.platform_check")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("app.ui"):  # a build without the desktop app
            build_parser([]).print_help()
            return 0
        raise
    # Before QtGui loads and a QApplication exists: when Qt cannot open a window, it aborts the process with a
    # message that names neither the missing package nor the command that installs it.
    paragraph = platform_check.problem()
    if paragraph is None:
        try:
            ui = importlib.import_module("app.ui.main")
        except ImportError as exc:  # QtGui itself links libGL, libEGL, libfontconfig ...
            paragraph = platform_check.import_problem(exc)
            if paragraph is None:
                raise
    if paragraph is not None:
        print(paragraph, file=sys.stderr)
        return 1
    status: int = ui.run()  # app.ui.main.run, imported by name so that a build without the desktop app still starts
    return status


def _unexpected(error: BaseException, where: str) -> int:
    """An error no code expected: one sentence on stderr, the traceback in the log file."""
    from app import logs

    path = logs.record_unexpected(error, where)
    details = f"the details are in {path}" if path else "no log file could be written, so here they are:"
    print(f"quantdesk: unexpected error ({logs.summary(error)}); {details}", file=sys.stderr)
    if path is None:
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--engine-host"]:
        # A frozen build has no ``python -m``: the app binary itself becomes the engine host.
        from app.engine.host import main as host_main

        return host_main()
    if argv[:1] == ["--runtime-devices"]:  # the same for a runtime's device probe (app/runtimes/devices.py)
        from app.runtimes.devices import main as devices_main

        return devices_main(argv[1:])
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C at any point, also while a command's modules are still being imported
        print("quantdesk: interrupted", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    if not argv:
        try:
            return _start_gui()
        except Exception as exc:  # a bug before the window could show it (app.ui.crash takes over after)
            return _unexpected(exc, "the desktop app's start")
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        from app import logs

        logs.setup()
        apply_settings(online=args.online)
        return int(args.func(args) or 0)
    except QuantDeskError as exc:
        print(f"quantdesk: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: the user gets a sentence, the log keeps the traceback
        return _unexpected(exc, f"quantdesk {args.command}")


if __name__ == "__main__":
    raise SystemExit(main())
