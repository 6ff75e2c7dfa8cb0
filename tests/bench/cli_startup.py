"""How long ``quantdesk --help`` and ``quantdesk hw --json`` take as whole processes (a benchmark script, not a test).

Each is ``python -m app ...`` from this checkout and, with ``--before``, from another (e.g. main), run in turn
(A B A B …) so that a machine busy with other work slows them alike; the medians and the after/before ratios are
printed. ``hw --json`` probes the machine, so its figure includes the probe (llama.cpp runtimes, NVML), not only the
start; the user's folders are redirected to a temp dir.

    .venv/bin/python -m tests.bench.cli_startup [--runs 9] [--before ../main]

The goals (issue 29, on a quiet machine): ``--help`` ≤ 0.25 s, ``hw --json`` ≤ 0.4 s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.gui_startup import ROOT, alternate, report

GOALS_S = {"--help": 0.25, "hw --json": 0.4}


def time_command(words: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "app", *words], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=120)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--before", type=Path, help="another checkout of QuantDesk to time alongside (e.g. main)")
    args = parser.parse_args()
    met = True
    with tempfile.TemporaryDirectory(prefix="quantdesk-cli-") as tmp:
        env = {**os.environ, "HF_HUB_OFFLINE": "1",
               **{var: str(Path(tmp) / sub) for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                                                             ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"))}}
        checkouts = {"quantdesk": ROOT}
        if args.before is not None:
            checkouts[f"quantdesk ({args.before.resolve().name})"] = args.before.resolve()
        for command, goal in GOALS_S.items():
            words = command.split()
            times = alternate(args.runs, {name: (lambda cwd=cwd, words=words: time_command(words, cwd, env))
                                          for name, cwd in checkouts.items()})
            print(f"quantdesk {command}, {args.runs} runs each, in turn (goal ≤ {goal * 1000:.0f} ms):")
            medians = report(times, "quantdesk")
            met &= medians["quantdesk"] <= goal
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
