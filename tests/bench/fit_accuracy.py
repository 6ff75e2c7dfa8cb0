"""Fit-estimator accuracy against llama.cpp itself (a benchmark script, not a test).

Builds random-weight GGUFs with the exact tensor shapes of real architectures, quantizes them with
llama.cpp's own quantizer (Q4_K_M, Q8_0), loads each IN A CHILD PROCESS on the CPU at several context
sizes, and compares app.models.estimate's prediction with the buffer sizes llama.cpp logs (model,
KV, compute, output) and with the child's peak RSS.

To finish in minutes on a 2-core machine, some models keep their real per-layer shapes but fewer
layers (the estimator's per-layer math is what is checked) and the MoE keeps its real expert shape
with 16 instead of 128 experts; the table says which.

    .venv/bin/python -m tests.bench.fit_accuracy [--out DIR] [--ctx 1024,4096,16384]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.models.estimate import CPU_RUNTIME_BYTES, LlamaCppSettings, MiB, estimate_llama_cpp  # noqa: E402
from app.models.metadata import read_gguf_file  # noqa: E402
from tests.models.gguf_builder import ArchSpec, write_gguf  # noqa: E402

MODELS = [
    # (label, spec, what was scaled down)
    ("Mistral-7B-v0.1 (GQA)", ArchSpec("llama", n_layer=2, n_embd=4096, n_head=32, n_head_kv=8, n_ff=14336,
                                       n_vocab=32000, n_ctx_train=32768, name="mistral-shape"), "2 of 32 layers"),
    ("Gemma-3-1B (SWA 5:1)", ArchSpec("gemma3", n_layer=7, n_embd=1152, n_head=4, n_head_kv=1, n_ff=6912,
                                      n_vocab=262144, head_dim=256, sliding_window=512, tied=True,
                                      n_ctx_train=32768, name="gemma3-shape"), "7 of 26 layers"),
    ("Qwen3-30B-A3B (MoE)", ArchSpec("qwen3moe", n_layer=2, n_embd=2048, n_head=32, n_head_kv=4, n_ff=6144,
                                     n_vocab=151936, head_dim=128, n_expert=16, n_expert_used=8, n_ff_exp=768,
                                     n_ctx_train=40960, name="qwen3moe-shape"), "2 of 48 layers, 16 of 128 experts"),
    ("Qwen2.5-0.5B (tied)", ArchSpec("qwen2", n_layer=6, n_embd=896, n_head=14, n_head_kv=2, n_ff=4864,
                                     n_vocab=151936, tied=True, n_ctx_train=32768, name="qwen25-shape"),
     "6 of 24 layers"),
]
QUANTS = {"Q4_K_M": 15, "Q8_0": 7}  # llama_ftype values

CHILD = r"""
import sys
import llama_cpp
path, n_ctx = sys.argv[1], int(sys.argv[2])
llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_gpu_layers=0, swa_full=False, flash_attn=False,
                      n_batch=512, n_ubatch=512, n_threads=2, verbose=True)
llm.eval(list(range(10, 26)))  # touch every weight page once
# ru_maxrss survives execve on Linux (it would report the parent's peak); VmHWM belongs to this image.
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("RSS_BYTES", int(hwm.split()[1]) * 1024, file=sys.stderr)
"""

_PATTERNS = {
    "weights": re.compile(r"^load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB", re.M),
    "kv": re.compile(r"^llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB", re.M),
    "compute": re.compile(r"^sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB", re.M),
    "output": re.compile(r"^llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB", re.M),
}


def quantize(src: Path, dst: Path, ftype: int) -> None:
    code = ("import llama_cpp, sys\n"
            "p = llama_cpp.llama_model_quantize_default_params()\n"
            f"p.ftype = {ftype}\np.nthread = 2\n"
            f"rc = llama_cpp.llama_model_quantize({str(src).encode()!r}, {str(dst).encode()!r}, p)\n"
            "sys.exit(rc)\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def measure(path: Path, n_ctx: int) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), str(n_ctx)], capture_output=True,
                            text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"llama.cpp failed on {path.name}: {result.stderr[-2000:]}")
    log = result.stderr
    measured = {k: sum(float(m[1]) for m in p.findall(log)) * MiB for k, p in _PATTERNS.items()}
    rss = re.search(r"RSS_BYTES (\d+)", log)
    measured["rss"] = float(rss[1]) if rss else 0.0
    return measured


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100 if meas else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to build the models (default: a temp dir)")
    parser.add_argument("--ctx", default="1024,4096,16384")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    contexts = [int(c) for c in args.ctx.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="qd-fit-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    header = (f"{'model':24} {'quant':7} {'ctx':>6} | {'weights MiB':>17} | {'KV MiB':>15} | "
              f"{'compute MiB':>15} | {'buffers total MiB':>19} {'err':>6} | {'RSS MiB pred/meas':>17}")
    print(header)
    print("-" * len(header))
    for label, spec, scaled in MODELS:
        f16 = out / f"{spec.name}-F16.gguf"
        if not f16.exists():
            write_gguf(f16, spec)
        for quant, ftype in QUANTS.items():
            path = out / f"{spec.name}-{quant}.gguf"
            if not path.exists():
                quantize(f16, path, ftype)
            meta = read_gguf_file(path)
            for n_ctx in contexts:
                est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=n_ctx, gpu_layers=0))
                cpu = est.devices[0]
                output_pred = meta.vocab_size * 4
                pred_buffers = cpu.weights_bytes + cpu.kv_bytes + cpu.compute_bytes + output_pred
                m = measure(path, n_ctx)
                meas_buffers = m["weights"] + m["kv"] + m["compute"] + m["output"]
                row = {"model": label, "scaled": scaled, "quant": quant, "n_ctx": n_ctx,
                       "pred": {"weights": cpu.weights_bytes, "kv": cpu.kv_bytes, "compute": cpu.compute_bytes,
                                "output": output_pred, "buffers": pred_buffers, "total": cpu.total_bytes},
                       "meas": m | {"buffers": meas_buffers}}
                rows.append(row)
                print(f"{label[:24]:24} {quant:7} {n_ctx:>6} | {cpu.weights_bytes / MiB:8.1f}/{m['weights'] / MiB:8.1f} | "
                      f"{cpu.kv_bytes / MiB:7.1f}/{m['kv'] / MiB:7.1f} | "
                      f"{cpu.compute_bytes / MiB:7.1f}/{m['compute'] / MiB:7.1f} | "
                      f"{pred_buffers / MiB:9.1f}/{meas_buffers / MiB:9.1f} {pct(pred_buffers, meas_buffers):+5.1f}% | "
                      f"{cpu.total_bytes / MiB:8.1f}/{m['rss'] / MiB:8.1f}", flush=True)
    errors = sorted(abs(r["pred"]["buffers"] - r["meas"]["buffers"]) for r in rows)
    rel = sorted(abs(pct(r["pred"]["buffers"], r["meas"]["buffers"])) for r in rows)
    p95 = errors[min(len(errors) - 1, int(round(0.95 * (len(errors) - 1))))]
    p95_rel = rel[min(len(rel) - 1, int(round(0.95 * (len(rel) - 1))))]
    worst_under = max((r["meas"]["buffers"] - r["pred"]["buffers"] for r in rows), default=0)
    print()
    print(f"CPU device, {len(rows)} loads: p95 |error| = {p95 / MiB:.1f} MiB ({p95_rel:.1f} %); "
          f"worst under-prediction = {max(worst_under, 0) / MiB:.1f} MiB")
    goal = all(abs(r["pred"]["buffers"] - r["meas"]["buffers"]) <= max(0.03 * r["meas"]["buffers"], 256 * MiB)
               for r in rows) and worst_under <= 64 * MiB
    print(f"goal (every load within max(3 %, 256 MiB), never under by > 64 MiB): {'met' if goal else 'MISSED'}")
    print(f"(runtime overhead budgeted in 'other': {CPU_RUNTIME_BYTES / MiB:.0f} MiB; RSS column compares the "
          f"predicted device total with the child's peak RSS after loading and evaluating 16 tokens)")
    print("scaled models: " + "; ".join(f"{label}: {scaled}" for label, _, scaled in MODELS))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if goal else 1


if __name__ == "__main__":
    raise SystemExit(main())
