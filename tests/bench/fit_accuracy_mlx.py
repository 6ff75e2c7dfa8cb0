"""MLX fit-estimator accuracy on the CPU (a benchmark script, not a test).

Random-weight MLX models with a real model's shapes (Qwen2.5-0.5B: 896 wide, 14 heads, 2 KV heads of
64, FFN 4864, 151936-token tied embedding), built by tests/fixtures/models.py (write_hf_folder +
mlx_lm.convert, float16 and 4-bit) are loaded with mlx-lm IN A CHILD PROCESS at several context sizes;
app.models.estimate.estimate_mlx's prediction is printed against MLX's own allocator figures
(mx.get_active_memory() after loading = weights, the KV cache's nbytes, mx.get_peak_memory()) and the
child's peak RSS (VmHWM).

MLX's Linux CPU build multiplies matrices with the reference BLAS it bundles (about 1-2 GFLOP/s here),
so a real 24-layer prefill of a few thousand tokens would take an hour. Two kinds of rows keep the run
to a few minutes:
- ``prefill``: a 2-layer model with the real per-layer shapes prefills a real prompt of n_ctx - 4
  tokens (mlx-lm's generate_step, 2048-token chunks) and decodes 4 more, so the peak includes the
  attention scores of prefill, which the estimator's compute term models;
- ``filled``: the full 24-layer model gets its KV cache grown to n_ctx - 4 cells the way prefill grows
  it (KVCache.update_and_fetch in 2048-token chunks, zeros for keys/values: no matmuls), then decodes
  4 tokens for real. This measures weights + KV + decode at large contexts; prefill's transient
  attention scores are absent, so compare those rows' peaks with weights + KV + decode only.

    .venv/bin/python -m tests.bench.fit_accuracy_mlx [--ctx 256,1024,2048] [--fill-ctx 4096,16384,32768]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.models.estimate import MLX_RUNTIME_BYTES, MiB, estimate_mlx  # noqa: E402
from app.models.metadata import read_model_folder  # noqa: E402
from tests.fixtures.models import QWEN2_5_0_5B, build_model_set  # noqa: E402

QWEN_2_LAYERS = dataclasses.replace(QWEN2_5_0_5B, name="qwen2.5-0.5b-shape-2l", n_layer=2)
GEN_TOKENS = 4

CHILD = r"""
import json, sys, time
import mlx.core as mx
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.models.cache import make_prompt_cache

path, mode, n_ctx, gen = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mx.set_default_device(mx.cpu)
status = lambda key: int(next(ln for ln in open("/proc/self/status") if ln.startswith(key)).split()[1]) * 1024
rss_base = status("VmRSS:")  # interpreter + mlx + mlx-lm (and what it imports) before the model
model, _ = load(path)
mx.eval(model.parameters())
weights = mx.get_active_memory()
mx.reset_peak_memory()
cache = make_prompt_cache(model)
t0 = time.time()
n_prompt = n_ctx - gen
if mode == "prefill":
    prompt = mx.array([(i * 7919) % 50000 + 300 for i in range(n_prompt)])
else:  # grow every layer's cache as prefill would, without the matmuls, then decode from a short prompt
    args = model.args
    n_kv = args.num_key_value_heads
    head_dim = getattr(args, "head_dim", None) or args.hidden_size // args.num_attention_heads
    dtype = model.model.embed_tokens.weight.dtype
    if hasattr(model.model.embed_tokens, "scales"):
        dtype = model.model.embed_tokens.scales.dtype
    done = 0
    while done < n_prompt - 1:
        step = min(2048, n_prompt - 1 - done)
        for c in cache:
            k = mx.zeros((1, n_kv, step, head_dim), dtype)
            c.update_and_fetch(k, k)
        mx.eval([c.state for c in cache])
        done += step
    prompt = mx.array([301])
for _ in generate_step(prompt, model, max_tokens=gen, prompt_cache=cache):
    pass
kv = sum(c.keys.nbytes + c.values.nbytes for c in cache)  # the allocated buffers, not the filled part
print("RESULT", json.dumps({"weights": weights, "kv": kv, "peak": mx.get_peak_memory(),
                            "active": mx.get_active_memory(), "rss": status("VmHWM:"), "rss_base": rss_base,
                            "seconds": round(time.time() - t0, 1), "cells": cache[0].keys.shape[2]}))
"""


def measure(path: Path, mode: str, n_ctx: int) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), mode, str(n_ctx), str(GEN_TOKENS)],
                            capture_output=True, text=True, timeout=1200)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if result.returncode != 0 or line is None:
        raise RuntimeError(f"mlx-lm failed on {path.name} at {n_ctx}: {result.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100 if meas else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ctx", default="256,1024,2048", help="prefill rows (2-layer model)")
    parser.add_argument("--fill-ctx", default="4096,16384,32768", help="filled-cache rows (24-layer model)")
    parser.add_argument("--q4", action="store_true", help="also the 4-bit variants (slow on the CPU)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    small = build_model_set(QWEN_2_LAYERS, quants=())
    full = build_model_set(QWEN2_5_0_5B)
    runs = [("prefill", "Qwen2.5-0.5B 2/24 layers", "f16", small.mlx_f16, int(c)) for c in args.ctx.split(",")]
    runs += [("filled", "Qwen2.5-0.5B 24 layers", "f16", full.mlx_f16, int(c)) for c in args.fill_ctx.split(",")]
    if args.q4:
        runs += [("prefill", "Qwen2.5-0.5B 2/24 layers", "4-bit", small.mlx_4bit, int(c))
                 for c in args.ctx.split(",")[:2]]
        runs += [("filled", "Qwen2.5-0.5B 24 layers", "4-bit", full.mlx_4bit, int(c))
                 for c in args.fill_ctx.split(",")]
    header = (f"{'model':25} {'dtype':5} {'mode':7} {'ctx':>6} | {'weights MiB':>15} | {'KV MiB':>13} | "
              f"{'peak MiB pred/meas':>19} {'err':>7} | {'RSS MiB pred/meas':>17} {'err':>7}")
    print(header)
    print("-" * len(header))
    rows = []
    for mode, label, dtype, path, n_ctx in runs:
        est = estimate_mlx(read_model_folder(path), n_ctx)
        dev = est.devices[0]
        m = measure(path, mode, n_ctx)
        # MLX's allocator sees weights + KV + temporaries; the runtime overhead is outside it (RSS only).
        pred_peak = dev.weights_bytes + dev.kv_bytes + dev.compute_bytes
        row = {"mode": mode, "model": label, "dtype": dtype, "n_ctx": n_ctx,
               "pred": dev.to_dict() | {"peak": pred_peak}, "meas": m}
        rows.append(row)
        print(f"{label:25} {dtype:5} {mode:7} {n_ctx:>6} | {dev.weights_bytes / MiB:7.1f}/{m['weights'] / MiB:7.1f} | "
              f"{dev.kv_bytes / MiB:6.1f}/{m['kv'] / MiB:6.1f} | {pred_peak / MiB:9.1f}/{m['peak'] / MiB:9.1f} "
              f"{pct(pred_peak, m['peak']):+6.1f}% | {dev.total_bytes / MiB:8.1f}/{m['rss'] / MiB:8.1f} "
              f"{pct(dev.total_bytes, m['rss']):+6.1f}%   (base RSS {m['rss_base'] / MiB:.0f} MiB, {m['seconds']} s)",
              flush=True)
    prefill = [r for r in rows if r["mode"] == "prefill"]
    under = max((r["meas"]["peak"] - r["pred"]["peak"] for r in prefill), default=0)
    worst = max((abs(pct(r["pred"]["peak"], r["meas"]["peak"])) for r in prefill), default=0)
    rss_under = max((r["meas"]["rss"] - r["pred"]["total_bytes"] for r in rows), default=0)
    off = max((abs(r["pred"][k] - r["meas"][m]) for r in rows for k, m in (("weights_bytes", "weights"),
                                                                            ("kv_bytes", "kv"))), default=0)
    print()
    print(f"weights and KV: largest difference from MLX's own figures {off} bytes")
    print(f"allocator peak, prefill rows: worst |error| {worst:.1f} %, worst under-prediction "
          f"{max(under, 0) / MiB:.1f} MiB (filled rows skip prefill, so their peak lacks the attention scores "
          f"the prediction includes)")
    print(f"RSS, all rows: worst under-prediction {max(rss_under, 0) / MiB:.1f} MiB "
          f"(runtime overhead budgeted: {MLX_RUNTIME_BYTES / MiB:.0f} MiB)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
