"""Cold start to a shown main window (a benchmark script, not a test).

Each run is ``python -m app`` with no arguments, as a user's launch of ``quantdesk`` is: the parent
measures the wall time until the app reports the first paint of its main window
(QUANTDESK_EXIT_AFTER_SHOWN, the packaging smoke check's hook, then quits it). The user's folders
are redirected to a temp dir so a real history does not change the figure.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tests.bench.gui_startup [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET_S = 1.5


def one_run(home: Path) -> float:
    env = {**os.environ, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
           "QUANTDESK_EXIT_AFTER_SHOWN": "1",
           **{var: str(home / sub) for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                                                    ("XDG_CACHE_HOME", "cache"))}}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    line = child.stdout.readline()
    elapsed = time.perf_counter() - start
    child.wait(timeout=60)
    child.stdout.close()
    if not line.startswith("quantdesk: main window shown"):
        raise RuntimeError(f"the app did not show its window (exit {child.returncode})")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quantdesk-startup-") as tmp:
        one_run(Path(tmp))  # warm the OS file cache once, as a second launch of an installed app would
        times = [one_run(Path(tmp)) for _ in range(args.runs)]
    median = statistics.median(times)
    print(f"cold start to first paint of the main window, {args.runs} runs: median {median * 1000:.0f} ms, "
          f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms (target < {TARGET_S * 1000:.0f} ms)")
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
