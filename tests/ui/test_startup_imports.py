"""What the app imports before its main window shows: only what the first screen needs. The pages not on screen,
the model pool, the local server, the quant lab, the Hub and the command modules are imported on first use, and
the hardware probe starts after the window has painted (app/ui/main.py, app/ui/window.py).

A real start in a child process (``quantdesk`` with no arguments, on a fresh user state), stopped at the first
paint of the main window: there the modules imported so far and whether the probe has started are written down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]

# Stopped where app.ui.main would start what waits for the window (the probe, the first-run check).
AT_FIRST_PAINT = """
import json, sys
from PySide6.QtWidgets import QApplication
import app.ui.main as main
from app.ui.window import MainWindow

probe_started = []
detect = MainWindow.detect_hardware
MainWindow.detect_hardware = lambda self, *a: (probe_started.append(True), detect(self, *a))[1]

def at_first_paint(window):
    print(json.dumps({"modules": sorted(sys.modules), "probe_started": bool(probe_started),
                      "page": window.current_page, "shown": window.isVisible()}), flush=True)
    QApplication.quit()

main._after_shown = at_first_paint
from app.cli import main as cli_main
raise SystemExit(cli_main([]))
"""

NOT_BEFORE_SHOWN = (
    "app.server",  # the local server: when switched on
    "app.engine.pool", "app.engine.client",  # the model pool: made by the first load
    "app.lab", "app.hub", "app.remote",  # the homes of pages not on screen
    *sorted({command.module for command in COMMANDS.values()}),  # the CLI's command modules
    "backends.registry",  # engines: only the engine host loads one
    "app.ui.library.discover_page", "app.ui.library.downloads_page", "app.ui.library.library_page", "app.ui.hardware.hardware_page",
    "app.ui.lab.lab_page", "app.ui.lab.lab_chart", "app.ui.server.server_page", "app.ui.settings.settings_page", "app.ui.library.first_run",
    "app.documents", "app.ui.documents.documents_page", "app.ui.documents.documents_service",  # the user's documents: after the paint
)


def _start(page: str | None, tmp_path: Path) -> dict:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1"}
    if page is not None:  # the page the window opens on is the one it showed last
        ini = Path(env["XDG_CONFIG_HOME"]) / "QuantDesk" / "window.ini"
        ini.parent.mkdir(parents=True, exist_ok=True)
        ini.write_text(f"[window]\npage={page}\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-c", AT_FIRST_PAINT], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def _imported(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_the_window_shows_with_the_chat_page_alone_and_the_probe_waits_for_it(tmp_path):
    started = _start(None, tmp_path)
    assert (started["page"], started["shown"]) == ("Chat", True)
    assert _imported(started["modules"], NOT_BEFORE_SHOWN) == []
    assert not started["probe_started"]  # it starts after the first paint, on its own thread


@pytest.mark.parametrize(("page", "not_imported"), [
    ("Lab", ("app.ui.chat.chat_page", "app.ui.server.server_page", "app.server", "app.engine.pool")),
    ("Server", ("app.ui.chat.chat_page", "app.ui.lab.lab_page", "app.lab", "app.server")),  # the server: when switched on
])
def test_a_window_opening_on_another_page_builds_that_one(page, not_imported, tmp_path):
    started = _start(page, tmp_path)
    assert started["page"] == page
    assert f"app.ui.{page.lower()}.{page.lower()}_page" in started["modules"]
    assert _imported(started["modules"], not_imported) == []
