"""The system libraries of Qt's xcb plugin that minimal Linux installs lack, said the same way wherever a user
looks: the .deb depends on them, the tar.gz's README.txt and the repository's README give the install command,
and QuantDesk's start-up check (app/ui/platform_check.py) knows the package of each."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.ui import platform_check

ROOT = Path(__file__).resolve().parents[2]
# The ones issue 21 met on a fresh Debian desktop, and their xcb-util siblings (docs/facts.md).
COMMONLY_MISSING = ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-image.so.0",
                    "libxcb-render-util.so.0", "libxkbcommon-x11.so.0"]
COMMANDS = {0: "sudo apt install", 1: "sudo dnf install", 2: "sudo pacman -S"}


def _packages(column: int) -> str:
    return " ".join(dict.fromkeys(platform_check.PACKAGES[lib][column] for lib in COMMONLY_MISSING))


def test_they_are_what_the_xcb_plugin_links():
    listing = subprocess.run(["ldd", str(platform_check.plugin_file("xcb", {}))], capture_output=True,
                             text=True).stdout
    linked = {line.split()[0] for line in listing.splitlines() if line.strip()}
    assert set(COMMONLY_MISSING) <= linked


def test_the_deb_depends_on_them():
    control = (ROOT / "packaging" / "linux" / "control.in").read_text()
    depends = next(line for line in control.splitlines() if line.startswith("Depends:"))
    names = {item.strip().split(" ")[0] for item in depends.removeprefix("Depends:").split(",")}
    assert set(_packages(0).split()) <= names


@pytest.mark.parametrize("column", sorted(COMMANDS))
def test_the_tarballs_readme_gives_the_command_for_each_distribution(column):
    readme = (ROOT / "packaging" / "linux" / "README.txt").read_text()
    assert f"{COMMANDS[column]} {_packages(column)}\n" in readme
    assert 'packaging/linux/README.txt "$APP/README.txt"' in (ROOT / "packaging" / "build_linux.sh").read_text()


def test_the_readme_gives_the_debian_command():
    assert f"`{COMMANDS[0]} {_packages(0)}`" in (ROOT / "README.md").read_text()
