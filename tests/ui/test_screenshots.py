"""The screenshot tool (tests/bench/render_pages.py) still runs: one page, light and dark, from one window."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

ROOT = Path(__file__).resolve().parents[2]


def mean_lightness(image: QImage) -> float:
    step = 16
    samples = [image.pixelColor(x, y).lightness()
               for x in range(0, image.width(), step) for y in range(0, image.height(), step)]
    return sum(samples) / len(samples)


def test_the_screenshot_tool_renders_a_page_in_both_themes(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    run = subprocess.run([sys.executable, "-m", "tests.bench.render_pages", str(tmp_path), "--pages", "Chat"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    light, dark = QImage(str(tmp_path / "chat.png")), QImage(str(tmp_path / "chat-dark.png"))
    assert (light.width(), light.height()) == (dark.width(), dark.height()) == (1280, 800)
    assert mean_lightness(light) > 160 > 80 > mean_lightness(dark)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat-dark.png", "chat.png"]
