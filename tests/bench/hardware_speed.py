"""How long ``quantdesk hw --json`` takes, wall clock (a benchmark script, not a test). Goal: < 0.5 s.

Runs the real command as a child process several times, side by side with a bare interpreter start
(the floor no command can beat) and ``quantdesk --version`` (the CLI's own start-up), then times each
probe alone in this process so a slow one is easy to spot.

    .venv/bin/python -m tests.bench.hardware_speed [--runs 10]
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOAL_S = 0.5


def wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ)
        for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
            env[var] = os.path.join(home, var.lower())
        py = sys.executable
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "quantdesk --version": [py, "-m", "app", "--version"],
            "quantdesk hw --json": [py, "-m", "app", "hw", "--json"],
        }
        wall(commands["quantdesk hw --json"], env)  # warm the OS file cache once
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved, so drift in machine load hits every command alike
            for name, argv in commands.items():
                times[name].append(wall(argv, env))

    print(f"wall time over {args.runs} runs (seconds)")
    print(f"{'command':<22}{'median':>8}{'min':>8}{'max':>8}")
    for name, ts in times.items():
        print(f"{name:<22}{statistics.median(ts):>8.3f}{min(ts):>8.3f}{max(ts):>8.3f}")
    hw = statistics.median(times["quantdesk hw --json"])
    floor = statistics.median(times["python -c pass"])
    cli = statistics.median(times["quantdesk --version"])
    print(f"\nhw / bare interpreter: {hw / floor:.1f}x   hw / CLI start-up: {hw / cli:.2f}x")
    print(f"detection itself (hw minus CLI start-up): {hw - cli:.3f} s")

    from app.hardware.detect import PROBES
    from app.hardware.sources import Sources

    src = Sources()
    print("\neach probe alone, in process (first call: imports included)")
    for name, probe in PROBES.items():
        t0 = time.perf_counter()
        try:
            probe(src)
            outcome = "ok"
        except Exception as exc:  # a probe that finds nothing raises; its time still counts
            outcome = type(exc).__name__
        print(f"  {name:<10}{(time.perf_counter() - t0) * 1000:>8.1f} ms  {outcome}")
    print(f"\ngoal: median < {GOAL_S} s -> {'met' if hw < GOAL_S else 'NOT met'} ({hw:.3f} s)")


if __name__ == "__main__":
    main()
