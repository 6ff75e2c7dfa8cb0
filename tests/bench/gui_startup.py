"""Cold start to a shown main window, side by side with a bare PySide6 window (a benchmark script, not a test).

Each run of the app is ``python -m app`` with no arguments, as a user's launch of ``quantdesk`` is: the parent
measures the wall time until the app reports the first paint of its main window (the line
QUANTDESK_EXIT_AFTER_SHOWN prints, the packaging smoke check's hook, then it quits). The bare window is a
QApplication and an empty QMainWindow timed the same way: the floor any Qt app starts from on this machine. The two
(and, with ``--before``, the same app from another checkout) run in turn, A B A B …, so that a machine busy with
other work slows them alike; the medians and their ratios are printed. The user's folders are redirected to a temp
dir so a real history does not change the figure.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tests.bench.gui_startup [--runs 9] [--before ../main]

The goal (issue 29): the app shown within 4× the bare window's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOAL_RATIO = 4.0

# The floor: what a PySide6 app takes to put an empty main window on screen, reported at its first paint.
BARE_WINDOW = """
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

class Shown(QObject):
    def eventFilter(self, watched, event):
        if event.type() == QEvent.Type.Paint:
            watched.removeEventFilter(self)
            print("bare window shown", flush=True)
            QTimer.singleShot(0, QApplication.quit)
        return False

app = QApplication([])
window = QMainWindow()
window.setWindowTitle("bare")
window.resize(1280, 800)
shown = Shown()
window.installEventFilter(shown)
window.show()
app.exec()
"""


def time_until_line(argv: list[str], cwd: Path, env: dict[str, str], expected: str) -> float:
    """Seconds from starting ``argv`` until it prints its first line, which must start with ``expected``."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = child.stdout.readline()
    elapsed = time.perf_counter() - start
    child.wait(timeout=60)
    child.stdout.close()
    if not line.startswith(expected):
        raise RuntimeError(f"{argv} did not print {expected!r} (exit {child.returncode}, printed {line!r})")
    return elapsed


def alternate(runs: int, contenders: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Each contender once to warm the file cache, then ``runs`` rounds of each in turn."""
    for measure in contenders.values():
        measure()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, measure in contenders.items():
            times[name].append(measure())
    return times


def report(times: dict[str, list[float]], against: str) -> dict[str, float]:
    """Print each contender's median and range, and its median's ratio to ``against``'s; returns the medians."""
    medians = {name: statistics.median(values) for name, values in times.items()}
    width = max(map(len, times))
    for name, values in times.items():
        ratio = "" if name == against else f"  {medians[name] / medians[against]:.2f}× {against}"
        print(f"  {name:<{width}}  median {medians[name] * 1000:6.0f} ms  (min {min(values) * 1000:.0f}, "
              f"max {max(values) * 1000:.0f}){ratio}")
    return medians


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--before", type=Path, help="another checkout of QuantDesk to time alongside (e.g. main)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quantdesk-startup-") as tmp:
        env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
               "QUANTDESK_EXIT_AFTER_SHOWN": "1", "HF_HUB_OFFLINE": "1",
               **{var: str(Path(tmp) / sub) for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                                                             ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"))}}
        app = [sys.executable, "-m", "app"]
        contenders = {"bare PySide6 window": lambda: time_until_line([sys.executable, "-c", BARE_WINDOW], ROOT, env,
                                                                     "bare window shown"),
                      "quantdesk": lambda: time_until_line(app, ROOT, env, "quantdesk: main window shown")}
        if args.before is not None:
            before = args.before.resolve()
            contenders[f"quantdesk ({before.name})"] = lambda: time_until_line(app, before, env,
                                                                               "quantdesk: main window shown")
        times = alternate(args.runs, contenders)
    print(f"cold start to the first paint of the main window, {args.runs} runs each, in turn:")
    medians = report(times, "bare PySide6 window")
    ratio = medians["quantdesk"] / medians["bare PySide6 window"]
    print(f"quantdesk / bare window: {ratio:.2f}× (goal ≤ {GOAL_RATIO:.0f}×)")
    if args.before is not None:
        print(f"quantdesk / before: {medians['quantdesk'] / medians[f'quantdesk ({before.name})']:.2f}×")
    return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
