"""The CLI's surface: every command and option says what it does in --help; the parser is built from the command
named alone (app.commands.COMMANDS), with the same help and parsing as the parser of every command."""

import argparse
import contextlib
import io
import subprocess
import sys

import pytest

from app import commands as command_table
from app.cli import build_parser

COMMANDS = next(a for a in build_parser()._actions if a.dest == "command").choices
# Every way in: each command, and each action of a command that has them (runtime ls, remote add, ...).
ACTIONS = sorted([name] for name in COMMANDS) + sorted(
    [name, action] for name, parser in COMMANDS.items() for a in parser._actions
    if isinstance(a, argparse._SubParsersAction) for action in a.choices)


def test_the_commands_are_all_listed():
    assert {"chat", "search", "show", "pull", "ls", "rm", "import", "login", "hw", "inspect", "fit", "recommend",
            "serve", "bench"} <= set(COMMANDS)


def test_the_table_lists_exactly_the_commands_the_modules_build():
    assert list(COMMANDS) == list(command_table.COMMANDS)  # the same names, in --help's order
    for name, command in command_table.COMMANDS.items():
        built = next(a for a in build_parser([name])._actions if a.dest == "command").choices
        assert _funcs(built[name]) == {command.module}, name


def _help(argv: list[str], parser) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser.parse_args(argv)
    return out.getvalue()


@pytest.mark.parametrize("argv", [[]] + ACTIONS, ids=" ".join)
def test_help_is_the_same_when_only_the_named_command_is_built(argv, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert _help([*argv, "--help"], build_parser(argv)) == _help([*argv, "--help"], build_parser())


@pytest.mark.parametrize("argv", ACTIONS, ids=" ".join)
def test_every_command_parses_from_its_own_parser(argv):
    """Each command, with what it requires filled in, parses to the same arguments with only its own module built."""
    full = build_parser()
    line = [*argv, *_required(_parser_of(full, argv))]
    assert vars(build_parser(line).parse_args(line)) == vars(full.parse_args(line))


def _parser_of(parser, argv: list[str]):
    for word in argv:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
    return parser


def _funcs(parser) -> set[str]:
    """The modules of the functions ``parser`` and its actions' parsers run."""
    found = {parser.get_default("func").__module__} if parser.get_default("func") else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found |= set().union(*(_funcs(p) for p in action.choices.values()))
    return found


def _required(parser) -> list[str]:
    """Words that give each of ``parser``'s required arguments a value (its first choice, else "1")."""
    words: list[str] = []
    for action in parser._actions:
        if not action.required:
            continue
        value = next(iter(action.choices)) if action.choices else "1"
        if isinstance(action, argparse._SubParsersAction):
            words += [value, *_required(action.choices[value])]
        else:
            words += [*action.option_strings[:1], value]
    return words


def test_help_imports_no_command_module_and_a_command_only_its_own():
    code = ("import sys; from app.cli import build_parser; build_parser(sys.argv[1:]); "
            "print(sorted(m for m in sys.modules if m.startswith('app.commands.')))")
    run = lambda *argv: subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,  # noqa: E731
                                       check=True).stdout.strip()
    assert run("--help") == "[]"
    assert run("hw", "--json") == "['app.commands.hardware']"
    assert run("--online", "pull", "x") == "['app.commands.hub']"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_says_what_it_does(command):
    parser = COMMANDS[command]
    assert [a.dest for a in parser._actions if a.dest != "help" and not a.help] == []


# A command with a bug in it, run the way a user runs quantdesk: a real process, the real main().
CRASHING_COMMAND = """
import sys, types
import app.cli as cli
from app.commands import COMMANDS, Command, add_command

def run(args):
    raise RuntimeError("a bug the tests planted")

def register(subparsers):
    add_command(subparsers, "crash").set_defaults(func=run)

module = types.ModuleType("crashing_command")
module.register = register
sys.modules["crashing_command"] = module
COMMANDS["crash"] = Command("crashing_command", "raise an error nobody expects")
raise SystemExit(cli.main(["crash"]))
"""


def test_an_unexpected_error_is_one_sentence_and_the_traceback_goes_to_the_log(isolated_user_state):
    import os
    import subprocess
    import sys

    from app import logs

    result = subprocess.run([sys.executable, "-c", CRASHING_COMMAND], capture_output=True, text=True, timeout=60,
                            env=os.environ.copy())
    log = logs.log_file()
    assert result.returncode == 1
    assert result.stderr == (f"quantdesk: unexpected error (RuntimeError: a bug the tests planted); "
                             f"the details are in {log}\n")
    assert str(log).startswith(str(isolated_user_state / "state"))  # the user state folder, via platformdirs
    text = log.read_text()
    assert "unexpected error in quantdesk crash" in text
    assert "Traceback (most recent call last)" in text and "in run\nRuntimeError: a bug the tests planted" in text


def test_the_log_rotates(isolated_user_state):
    import logging

    from app import logs

    path = logs.setup()
    for i in range(3 * logs.MAX_BYTES // 1000 + 10):
        logging.getLogger("quantdesk.test").warning("line %d %s", i, "x" * 1000)
    assert path.stat().st_size <= logs.MAX_BYTES
    assert sorted(p.name for p in path.parent.iterdir()) == ["quantdesk.log", "quantdesk.log.1", "quantdesk.log.2",
                                                            "quantdesk.log.3"]


# Ctrl-C while the commands' modules are still loading: a real SIGINT, raised at a known point of the start.
INTERRUPTED_START = """
import signal, sys

class InterruptOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "app.commands.hub":
            signal.raise_signal(signal.SIGINT)  # Python's handler raises KeyboardInterrupt inside this import
        return None

sys.meta_path.insert(0, InterruptOnImport())
from app.cli import main
raise SystemExit(main(["pull", "acme/some-GGUF"]))
"""


def test_ctrl_c_while_the_command_starts_is_one_line_not_a_traceback():
    import os
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", INTERRUPTED_START], capture_output=True, text=True, timeout=60,
                            env=os.environ.copy())
    assert (result.returncode, result.stderr) == (130, "quantdesk: interrupted\n")
