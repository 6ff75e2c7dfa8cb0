"""The hook the packaging smoke check relies on, checked from source in the default (fast) run:
QUANTDESK_EXIT_AFTER_SHOWN=1 makes the app report its painted main window and quit by itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gui_reports_its_painted_window_and_quits() -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QUANTDESK_EXIT_AFTER_SHOWN": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "app"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("quantdesk: main window shown")
    assert "Traceback" not in result.stderr, result.stderr[-2000:]  # e.g. a worker finishing at exit
