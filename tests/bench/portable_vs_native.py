"""Benchmark: decode tok/s of the portable llama.cpp build ÷ the native one, on this machine's CPU.

The native build is this environment's own llama-cpp-python (pip builds it with GGML_NATIVE on: this CPU's every
instruction); the portable one a runtime folder built the app's way (app/runtimes/cpu_variants.py: one libggml-cpu
per instruction-set level, the best chosen when it starts; default: the one tests/fixtures/portable_runtime.py
builds). Each run is a child process of its own that imports one build (the portable one first on sys.path, as the
engine host puts a runtime), loads the model with llama.cpp's extra buffer types off (``use_extra_bufts = False``:
the configuration that does not crash on AMX CPUs) and times greedy decoding of the same prompt; runs alternate
native / portable (the order swapped every round) so the drift of a shared machine hits both. Decode tok/s =
(tokens - 1) / (last token - first token): the first token comes out of prompt processing; also per second of
the process's CPU time (one thread: the decode's own), which leaves out the time it waited for a core.

    python -m tests.bench.portable_vs_native [--runs 8] [--tokens 128] [--threads 1] [--runtime FOLDER]
                                             [--models smollm2,gemma3]

Goal: ratio >= 0.95 on each model (docs/facts.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def child(model: str, tokens: int, threads: int, site: str) -> None:
    if site:
        sys.path.insert(0, site)  # as the engine host does for a runtime (app/engine/host.py)
    import llama_cpp

    from backends.llama_cpp import load as loading

    variant = loading.load_ggml_backends()  # a portable build's best CPU variant; "" for a native build
    with loading._default_model_params(llama_cpp, use_extra_bufts=False):
        llm = llama_cpp.Llama(model, n_ctx=512, n_threads=threads, n_gpu_layers=0, verbose=False)
    prompt = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    times: list[tuple[float, float]] = []
    for _token in llm.generate(prompt, temp=0.0, top_k=1):
        times.append((time.perf_counter(), time.process_time()))
        if len(times) >= tokens:
            break
    (wall0, cpu0), (wall1, cpu1) = times[0], times[-1]
    print(json.dumps({"tps": (len(times) - 1) / (wall1 - wall0), "cpu_tps": (len(times) - 1) / (cpu1 - cpu0),
                      "variant": variant, "llama_cpp": llama_cpp.__file__}), flush=True)


def run(model: Path, tokens: int, threads: int, site: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    done = subprocess.run([sys.executable, "-m", "tests.bench.portable_vs_native", "--child", str(model), str(tokens),
                           str(threads), site], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"the {'portable' if site else 'native'} run failed ({done.returncode}): "
                         f"{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        model, tokens, threads, site = sys.argv[2:6]
        child(model, int(tokens), int(threads), site)
        return 0
    from tests.fixtures import portable_runtime
    from tests.fixtures.real_models import REAL_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    # One thread by default: on a shared machine a waiting thread stalls every token of a multi-threaded decode,
    # and what is compared is the instructions, not the threading.
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runtime", type=Path, help="a portable runtime folder (default: "
                                                     "tests/fixtures/portable_runtime.py's)")
    parser.add_argument("--models", default="smollm2,gemma3")
    args = parser.parse_args()
    folder = args.runtime or portable_runtime.folder()
    if args.runtime is None and portable_runtime.problem():
        raise SystemExit(portable_runtime.problem())
    site = str(folder / "site")
    print(f"native: this environment's llama-cpp-python; portable: {folder}; {args.threads} threads, "
          f"{args.tokens} tokens, {args.runs} runs each, alternating")
    for key in args.models.split(","):
        model = REAL_MODELS[key].path()
        if not model.is_file():
            raise SystemExit(f"{model} is missing: python -m tests.fixtures.real_models")
        rates: dict[str, list[float]] = {"native": [], "portable": []}
        cpu_rates: dict[str, list[float]] = {"native": [], "portable": []}
        variant = ""
        for i in range(args.runs):
            order = ["native", "portable"] if i % 2 == 0 else ["portable", "native"]
            for build in order:
                answer = run(model, args.tokens, args.threads, site if build == "portable" else "")
                rates[build].append(answer["tps"])
                cpu_rates[build].append(answer["cpu_tps"])
                variant = answer["variant"] or variant
        native, portable = statistics.median(rates["native"]), statistics.median(rates["portable"])
        best_native, best_portable = max(rates["native"]), max(rates["portable"])
        print(f"{key}: native {native:.1f} tok/s {[round(r, 1) for r in rates['native']]}, portable "
              f"({variant or 'no variant'}) {portable:.1f} tok/s {[round(r, 1) for r in rates['portable']]}; "
              f"portable / native = {portable / native:.3f} (medians), {best_portable / best_native:.3f} (best runs: "
              f"the least disturbed on a shared machine)", flush=True)
        cpu_native, cpu_portable = statistics.median(cpu_rates["native"]), statistics.median(cpu_rates["portable"])
        print(f"{key}: per CPU second (tokens / the process's CPU time: the time it waited for a core left out): "
              f"native {cpu_native:.1f}, portable {cpu_portable:.1f}; portable / native = "
              f"{cpu_portable / cpu_native:.3f} (medians)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
