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
