"""The CLI's surface: every command and option says what it does in --help."""

import pytest

from app.cli import build_parser

COMMANDS = next(a for a in build_parser()._actions if a.dest == "command").choices


def test_the_commands_are_all_listed():
    assert {"chat", "search", "show", "pull", "ls", "rm", "import", "login", "hw", "inspect", "fit", "recommend",
            "serve", "bench"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_says_what_it_does(command):
    parser = COMMANDS[command]
    assert [a.dest for a in parser._actions if a.dest != "help" and not a.help] == []


# A command with a bug in it, run the way a user runs quantdesk: a real process, the real main().
CRASHING_COMMAND = """
import sys, types
import app.cli as cli

def run(args):
    raise RuntimeError("a bug the tests planted")

def register(subparsers):
    subparsers.add_parser("crash", help="raise an error nobody expects").set_defaults(func=run)

module = types.ModuleType("crashing_command")
module.register = register
sys.modules["crashing_command"] = module
cli.COMMAND_MODULES += ("crashing_command",)
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
