"""Benchmark: the quant lab's quality pass against llama.cpp's own ``llama-perplexity`` on a Qwen2.5-0.5B-shape
model (151,936-token vocabulary), reference F16 against Q8_0, Q4_K_M, IQ4_XS and Q3_K_M, side by side:

- every statistic llama-perplexity prints, the lab's beside it, with how far apart they are;
- wall time: llama-perplexity's base run plus one ``--kl-divergence`` run per quant, against the lab's reference pass
  plus one pass per quant (each in its own engine host: process start, load and scoring counted, as the tool's are);
  the goal is the lab at most 1.2× the tool's time;
- peak RSS of each process (the tool's from wait4, the lab's engine host's from its own ru_maxrss), and what scoring
  added to the lab's host above the model it had loaded;
- the sizes of the two reference files and how much probability the lab's keeps.

Both run flash attention as llama-perplexity's default ``-fa auto`` does on a CPU (on), the same threads, the same
text (the bundled one) and windows. At each step (the reference, then each quant) the tool and the lab run back to
back, the first of the two alternating, ``--reps`` times (the lab's variant steps read the reference its first step
made at that repetition). Peak RSS is each process's own: a child's ru_maxrss starts at its parent's size on Linux, so
this script keeps its own process small (no model is built in it once the set is cached).

    python -m tests.bench.lab_kld [--ctx 512] [--chunks 8] [--threads 2] [--reps 1] [--sharpness S]
                                  [--quants Q8_0 Q4_K_M IQ4_XS Q3_K_M] [--llama-perplexity PATH]

``--sharpness S`` sharpens the model's logits (tests/fixtures/models.build_peaked_set) so it predicts as surely as a
real model does (the default random weights predict nearly uniformly, where a reference must keep nearly every token
and the 4,096 cap decides).
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

from app.machine import detect
from app.lab import corpus
from app.lab.results import BenchSettings, VariantResult
from app.lab.runner import run_bench
from tests.fixtures import llama_perplexity as tool
from tests.fixtures.models import SPECS, build_model_set, build_peaked_set

MiB = 2**20


def run_tool(binary: Path, args: list[str], work: Path) -> tuple[tool.Run, int]:
    """llama-perplexity once (again if its log lost the statistics: tool.LOG_DRAIN_SOURCE), with its peak RSS: its output
    goes to a file, so the process is reaped here with wait4 and its own rusage."""
    for _ in range(3):
        log = work / "llama-perplexity.log"
        started = time.perf_counter()
        with open(log, "w") as out:
            process = subprocess.Popen([str(binary), *args], stdout=out, stderr=subprocess.STDOUT,
                                       env=tool.environment(binary))
            _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        output = log.read_text(errors="replace")
        if process.returncode != 0:
            raise RuntimeError(f"llama-perplexity failed: {output[-2000:]}")
        statistics = tool.parse(output)
        if "--kl-divergence" not in args or len(statistics) == len(tool._LINES):
            return tool.Run(statistics, seconds, output), usage.ru_maxrss * 1024  # Linux: KiB
    raise RuntimeError("llama-perplexity's statistics did not arrive three times")


def model_set(spec: str, sharpness: float, quants: tuple[str, ...]):
    return (build_peaked_set(SPECS[spec], sharpness, quants=quants) if sharpness
            else build_model_set(SPECS[spec], quants=quants, mlx=False))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--sharpness", type=float, default=0.0)
    parser.add_argument("--spec", choices=SPECS, default="qwen2.5-0.5b-shape")
    parser.add_argument("--quants", nargs="+", default=["Q8_0", "Q4_K_M", "IQ4_XS", "Q3_K_M"])
    parser.add_argument("--llama-perplexity", type=Path, default=tool.BUILT)
    args = parser.parse_args()
    if not args.llama_perplexity.is_file():
        raise SystemExit(f"no llama-perplexity at {args.llama_perplexity}: python -m tests.fixtures.llama_perplexity")
    spec = SPECS[args.spec]
    print(f"building the {spec.name} set (F16, {', '.join(args.quants)}), cached after the first time…", flush=True)
    # Built in a child: building holds the weights in this process's memory, and every process it started afterwards
    # would report that as its own peak (see above). Once cached, the call here only finds the files.
    subprocess.run([sys.executable, "-c", f"from tests.bench.lab_kld import model_set; "
                    f"model_set({spec.name!r}, {args.sharpness!r}, {tuple(args.quants)!r})"], check=True)
    models = model_set(spec.name, args.sharpness, tuple(args.quants))
    hardware = detect()
    work = Path(tempfile.mkdtemp(prefix="lab-kld-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")  # a fresh reference cache: the lab makes its reference
    os.environ["XDG_DATA_HOME"] = str(work / "data")
    text = work / "text.txt"
    text.write_text(corpus.perplexity_text(), encoding="utf-8")
    common = ["-c", str(args.ctx), "-t", str(args.threads), "-fa", "on"]
    settings = BenchSettings(ctx=args.ctx, chunks=args.chunks, speed=False, threads=args.threads,
                             flash_attention=True)
    tool_times: dict[str, list[float]] = {}
    lab_times: dict[str, list[float]] = {}
    printed: dict[str, dict[str, tool.Printed]] = {}
    tool_peak: dict[str, int] = {}
    lab_rows: dict[str, VariantResult] = {}
    base = work / "base.kld"
    base_bytes = 0
    info: dict = {}
    for rep in range(args.reps):
        reference_file: str | None = None
        for index, quant in enumerate(["F16", *args.quants]):
            # The tool and the lab take turns at each step, the first of the two alternating, so a machine
            # whose load drifts (other work on it) weighs on both alike.
            for who in (("tool", "lab") if (rep + index) % 2 == 0 else ("lab", "tool")):
                if who == "tool":
                    step = (["-m", str(models.gguf_f16), "-f", str(text), "--chunks", str(args.chunks), *common,
                             "--kl-divergence-base", str(base)] if quant == "F16" else
                            ["-m", str(models.gguf(quant)), "--kl-divergence-base", str(base), "--kl-divergence",
                             *common])
                    run, tool_peak[quant] = run_tool(args.llama_perplexity, step, work)
                    tool_times.setdefault(quant, []).append(run.seconds)
                    if quant != "F16":
                        printed[quant] = run.statistics
                    seconds = run.seconds
                elif quant == "F16":  # the lab's reference pass, into a fresh cache
                    for cached in (work / "cache").rglob("*.qdref"):
                        cached.unlink()
                    result = run_bench([models.gguf_f16], settings, hardware=hardware)
                    reference_file, info = result.reference_file["path"], result.reference_file
                    lab_rows[quant] = result.variants[0]
                    seconds = result.variants[0].quality_ms / 1000
                    lab_times.setdefault(quant, []).append(seconds)
                else:  # a variant against the reference the lab made at this repetition's first step
                    result = run_bench([models.gguf(quant)], settings, reference_file=reference_file,
                                       hardware=hardware)
                    lab_rows[quant] = result.variants[1]
                    seconds = result.variants[1].quality_ms / 1000
                    lab_times.setdefault(quant, []).append(seconds)
                print(f"rep {rep + 1}: {who} {quant} {seconds:.1f} s", flush=True)
        base_bytes = base.stat().st_size
    print(f"\n{spec.name}{f', logits sharpened x{args.sharpness:g}' if args.sharpness else ''}: "
          f"{info['chunks']} windows of {info['n_ctx']} tokens, {info['positions']} positions, "
          f"{args.threads} threads, flash attention on; machine: {hardware.cpu.model}")
    print(f"reference files: llama-perplexity's {base_bytes / MiB:.1f} MiB, the lab's {info['bytes'] / MiB:.1f} MiB "
          f"({info['mean_tokens']:.0f} tokens kept per position on average, {100 * info['mean_left_out']:.3f} % of "
          f"the probability left out, cap of 4096 reached at {100 * info['capped_share']:.0f} % of positions)")
    print("\nwall time, seconds (median over the repetitions; the two alternate at each step)")
    print(f"{'variant':10} {'llama-perplexity':>17} {'lab':>8} {'lab ÷ tool':>11}")
    total_tool = total_lab = 0.0
    for quant in ["F16", *args.quants]:
        t, lab = statistics.median(tool_times[quant]), statistics.median(lab_times[quant])
        total_tool, total_lab = total_tool + t, total_lab + lab
        print(f"{quant:10} {t:17.1f} {lab:8.1f} {lab / t:11.2f}")
    print(f"{'all':10} {total_tool:17.1f} {total_lab:8.1f} {total_lab / total_tool:11.2f}   (goal: at most 1.20)")
    print("\npeak RSS, MiB: the process; for the lab also what scoring added to its host above the loaded model")
    print(f"{'variant':10} {'llama-perplexity':>17} {'lab host':>9} {'model loaded':>13} {'scoring added':>14}")
    for quant in ["F16", *args.quants]:
        v = lab_rows[quant]
        added = v.quality_peak_bytes - v.quality_loaded_bytes
        print(f"{quant:10} {tool_peak[quant] / MiB:17.0f} {v.quality_peak_bytes / MiB:9.0f} "
              f"{v.quality_loaded_bytes / MiB:13.0f} {added / MiB:14.0f}")
    for quant in args.quants:
        q = lab_rows[quant].quality
        print(f"\n{quant}: statistic, lab, llama-perplexity, |difference| ÷ what tests/lab/test_llama_perplexity.py "
              "allows (1 % or one ± of the value, half its last digit, the base file's rounding for a percentile)")
        for name, figure in printed[quant].items():
            value, _ = tool.lab_figure(q, name)
            ratio = abs(value - figure.value) / tool.allowed(name, figure)
            print(f"  {name:16} {value:14.6g} {figure.value:14.6g} {ratio:8.2f}")


if __name__ == "__main__":
    main()
