"""Fit-estimator accuracy per device on a GPU runtime (a benchmark script, not a test).

Loads random-weight GGUFs at real architectures' shapes (tests/fixtures/models.py, Q4_K_M made by
llama.cpp's quantizer) through a llama.cpp runtime (default: the user's Vulkan runtime, `quantdesk
runtime build vulkan`) with 0, half and all layers on its first GPU, at several contexts, each load IN A
CHILD PROCESS, and compares app.models.estimate's prediction per device with the buffers llama.cpp logs
(backends/llama_cpp/log.py: model, KV, compute and output buffers; the GPU and the host side).

Goal per device and load: within max(3 %, 32 MiB) of what llama.cpp allocated, and never under by more
than 16 MiB. On a machine without a GPU, Mesa's lavapipe stands in (a real Vulkan device on the CPU,
2 GiB heap), opted in with QUANTDESK_TEST_SOFTWARE_VULKAN=1 (set here).

    .venv/bin/python -m tests.bench.fit_accuracy_vulkan [--runtime NAME] [--ctx 2048,8192,32768]
        [--models qwen2.5-0.5b-shape,llama-3.2-1b-shape] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.models.estimate import LlamaCppSettings, MiB, estimate_llama_cpp  # noqa: E402
from app.models.metadata import read_gguf_file  # noqa: E402
from app.runtimes import catalog, devices  # noqa: E402
from backends.llama_cpp import log as llama_cpp_log  # noqa: E402
from tests.fixtures.models import SPECS, build_model_set  # noqa: E402

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[4])
import llama_cpp
from llama_cpp import _ggml
lib = llama_cpp.llama_cpp._lib  # libllama: dlsym reaches the libggml it uses (_ggml.libggml is a second copy)
if not lib.ggml_backend_reg_count():  # a portable runtime: its backends loaded as llama.cpp's tools do
    lib.ggml_backend_load_all_from_path(str(_ggml.libggml_base_path).encode())
path, n_ctx, ngl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_gpu_layers=ngl, swa_full=False, flash_attn=False,
                n_batch=512, n_ubatch=512, n_threads=2, verbose=True)
"""


def measure(site: Path, env: dict[str, str], path: Path, n_ctx: int, ngl: int, n_layer: int):
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(n_ctx), str(ngl), str(site)],
                          capture_output=True, text=True, timeout=1800, env={**os.environ, **env})
    if done.returncode != 0:
        last = [ln for ln in done.stderr.splitlines() if ln.strip()][-3:]
        return None, " | ".join(last)
    log = llama_cpp_log.parse(done.stderr)
    return {d.name: d for d in log.device_loads(n_layer)}, ""


def within_goal(pred: int, meas: int) -> bool:
    return abs(pred - meas) <= max(0.03 * meas, 32 * MiB) and meas - pred <= 16 * MiB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="vulkan", help="runtime name (quantdesk runtime ls)")
    parser.add_argument("--ctx", default="2048,8192,32768")
    parser.add_argument("--models", default="qwen2.5-0.5b-shape,llama-3.2-1b-shape")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    os.environ[devices.SOFTWARE_VULKAN_VAR] = "1"
    runtime = catalog.find(args.runtime)
    if runtime is None or runtime.site is None:
        print(f"no {args.runtime} runtime folder: build it with `quantdesk runtime build {args.runtime}`")
        return 2
    probe = devices.probe(runtime.lib_dir)
    gpus = probe.gpus(allow_software=True)
    if not probe.ok or not gpus:
        print(f"the {args.runtime} runtime sees no GPU: {probe.error or [d.description for d in probe.devices]}")
        return 2
    gpu = gpus[0]
    print(f"{runtime.describe()} on {gpu.name}: {gpu.description}, {gpu.memory_free / MiB:.0f} MiB free")
    contexts = [int(c) for c in args.ctx.split(",")]
    header = (f"{'model':20} {'ngl':>7} {'ctx':>6} | {'GPU pred/meas MiB':>19} {'err':>7} | "
              f"{'host pred/meas MiB':>19} {'err':>7} | goal")
    print(header)
    print("-" * len(header))
    rows, misses = [], 0
    for name in args.models.split(","):
        spec = SPECS[name]
        path = build_model_set(spec, quants=("Q4_K_M",), mlx=False).gguf_q4_k_m
        meta = read_gguf_file(path)
        n_layer = meta.block_count
        for ngl in (0, (n_layer + 1) // 2, n_layer + 1):
            for n_ctx in contexts:
                settings = LlamaCppSettings(n_ctx=n_ctx, gpu_layers=ngl, gpu_runtime=True,
                                            gpu_max_tensor_bytes=gpu.max_tensor_bytes,
                                            gpu_chunk_bytes=gpu.max_buffer_bytes,
                                            host_chunk_bytes=gpu.host_max_buffer_bytes)
                est = estimate_llama_cpp(meta, settings, gpu.name)
                pred = {d.name: d.buffer_bytes for d in est.devices}
                t0 = time.monotonic()
                measured, error = measure(runtime.site, probe.env, path, n_ctx, ngl, n_layer)
                seconds = time.monotonic() - t0
                label = f"{spec.name[:20]:20} {ngl:>3}/{n_layer + 1:<3} {n_ctx:>6}"
                if measured is None:
                    print(f"{label} | load failed: {error[:150]}")
                    rows.append({"model": name, "ngl": ngl, "n_ctx": n_ctx, "error": error, "pred": pred})
                    continue
                meas = {k: d.total_bytes for k, d in measured.items()}
                cells, ok = [], True
                for device in (gpu.name, "CPU"):
                    p, m = pred.get(device, 0), meas.get(device, 0)
                    good = within_goal(p, m)
                    ok &= good
                    err = (p - m) / m * 100 if m else 0.0
                    cells.append(f"{p / MiB:9.1f}/{m / MiB:9.1f} {err:+6.1f}%")
                misses += not ok
                print(f"{label} | {cells[0]} | {cells[1]} | {'ok' if ok else 'MISSED'} ({seconds:.0f} s)", flush=True)
                rows.append({"model": name, "ngl": ngl, "n_ctx": n_ctx, "pred": pred, "meas": meas,
                             "buffers": {k: vars(d) for k, d in measured.items()}, "ok": ok})
    loads = [r for r in rows if "meas" in r]
    diffs = [(r["pred"].get(d, 0) - m, m) for r in loads for d, m in r["meas"].items()]
    print()
    if diffs:
        under = max(m - p for p, m in ((d + m, m) for d, m in diffs))
        over = max(diffs, key=lambda dm: dm[0])
        print(f"per device: worst under-prediction {max(under, 0) / MiB:.1f} MiB; worst over-prediction "
              f"{over[0] / MiB:.1f} MiB ({over[0] / over[1] * 100 if over[1] else 0:.1f} %)")
    print(f"{len(loads)} loads, {len(rows) - len(loads)} failed to load; per-device goal (within max(3 %, 32 MiB), "
          f"never under by more than 16 MiB) missed in {misses}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if misses == 0 and len(loads) == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
