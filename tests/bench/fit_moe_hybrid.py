"""Fit-estimator accuracy for mixture-of-experts and hybrid / recurrent models against llama.cpp itself (a
benchmark script, not a test).

Writes random-weight GGUFs at real architectures' per-layer shapes (tests/fixtures/models.py GgufSpec: fewer
layers, the table says which), quantizes them with llama.cpp's own quantizer, loads each IN A CHILD PROCESS
through QuantDesk's llama.cpp backend (so the MoE experts-in-RAM overrides are the ones the app hands over) at
contexts 2k / 8k / 32k, and for the MoE with no / half / all experts kept in RAM. It compares
app.models.estimate's prediction with the buffers llama.cpp logs: model (CPU_Mapped, CPU_REPACK, CPU, GPU),
KV, recurrent state (RS), compute and output, per side (CPU / GPU); and the expert tensors llama.cpp says it
moved with the ones the estimator put in RAM.

The device is the child's: by default the CPU build in this venv. For a GPU runtime later, point ``--python``
at that runtime's interpreter, give ``--gpu-layers`` and any ``--env NAME=VALUE`` it needs (for example
GGML_VK_VISIBLE_DEVICES=0 for lavapipe); the buffers of every non-CPU device are then compared with the
estimate's GPU side.

    .venv/bin/python -m tests.bench.fit_moe_hybrid [--out DIR] [--ctx 2048,8192,32768] [--gpu-layers 0]
        [--python PATH] [--env NAME=VALUE ...] [--only LABEL-PREFIX] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.models.estimate import LlamaCppSettings, MiB, _layer_of, estimate_llama_cpp, expert_in_ram  # noqa: E402
from app.models.metadata import read_gguf_file  # noqa: E402
from tests.fixtures.models import GgufSpec, build_gguf_set  # noqa: E402

# (label, spec, what was scaled down, quants, experts-in-RAM settings to try)
MODELS = [
    ("Qwen3-30B-A3B (MoE)",
     GgufSpec("qwen3moe-30b-a3b-shape", "qwen3moe", n_embd=2048, n_layer=4, n_head=32, n_head_kv=4, n_ff=6144,
              vocab_size=151936, head_dim=128, n_expert=16, n_expert_used=8, n_ff_exp=768, n_ctx_train=40960),
     "4 of 48 layers, 16 of 128 experts", ("Q4_K_M", "Q8_0"), (0, 2, -1)),
    ("LFM2-1.2B (conv hybrid)",
     GgufSpec("lfm2-1.2b-shape", "lfm2", n_embd=2048, n_layer=6, n_head=32, n_head_kv=8, n_ff=8192,
              vocab_size=65536, attention_layers=(2, 5), n_ctx_train=128000),
     "6 of 16 layers (attention at 2 and 5, as in the real first six)", ("Q4_K_M", "Q8_0"), (0,)),
    ("Granite-4.0-H-Micro (Mamba-2 hybrid)",
     GgufSpec("granite-4.0-h-micro-shape", "granitehybrid", n_embd=2048, n_layer=6, n_head=32, n_head_kv=8,
              n_ff=8192, vocab_size=100352, attention_layers=(3,), ssm_state_size=128, ssm_group_count=1,
              ssm_heads=64, n_ctx_train=131072),
     "6 of 40 layers (1 attention)", ("Q4_K_M", "Q8_0"), (0,)),
    ("Mamba2-2.7B (recurrent)",
     GgufSpec("mamba2-2.7b-shape", "mamba2", n_embd=2560, n_layer=4, n_head=0, n_head_kv=0, n_ff=0,
              vocab_size=50288, ssm_state_size=128, ssm_group_count=1, ssm_heads=80, n_ctx_train=1048576),
     "4 of 64 layers", ("Q8_0",), (0,)),
]

CHILD = r"""
import sys, json, threading
sys.path.insert(0, sys.argv[1])
from backends.llama_cpp import LlamaCppBackend
from backends.base import LoadSettings, Message, SamplingSettings
path, n_ctx, ngl, cpu_moe = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
backend = LlamaCppBackend()
backend.load(path, LoadSettings(n_ctx=n_ctx, gpu_layers=ngl, cpu_moe=cpu_moe, flash_attention=False, threads=2))
list(backend.generate("r", "The quick brown fox", SamplingSettings(max_tokens=4, seed=1), threading.Event()))
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("RSS_BYTES", int(hwm.split()[1]) * 1024, file=sys.stderr)
backend.unload()
"""

_BUFFER = re.compile(r"^(load_tensors|llama_kv_cache|llama_memory_recurrent|sched_reserve|llama_context):\s+(\S+)\s+"
                     r"(model|KV|RS|compute|output) buffer size =\s+([\d.]+) MiB", re.M)
_MOVED = re.compile(r"^tensor (\S+) \(.*\) buffer type overridden to (\S+)", re.M)
KINDS = {"model": "weights", "KV": "kv", "RS": "state", "compute": "compute", "output": "output"}


def quantize(src: Path, dst: Path, quant: str) -> None:
    from tests.fixtures.models import quantize_gguf

    if not dst.exists():
        quantize_gguf(src, dst, quant)


def measure(python: str, env: dict, path: Path, n_ctx: int, ngl: int, cpu_moe: int) -> dict:
    result = subprocess.run([python, "-c", CHILD, str(ROOT), str(path), str(n_ctx), str(ngl), str(cpu_moe)],
                            capture_output=True, text=True, timeout=1200, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"llama.cpp failed on {path.name}: {result.stderr[-3000:]}")
    log = result.stderr
    sides: dict[str, dict[str, float]] = {"cpu": {}, "gpu": {}}
    for _, device, kind, mib in _BUFFER.findall(log):
        side = "cpu" if device.upper().startswith("CPU") else "gpu"
        key = KINDS[kind]
        sides[side][key] = sides[side].get(key, 0.0) + float(mib) * MiB
    rss = re.search(r"RSS_BYTES (\d+)", log)
    moved = sorted(name for name, buft in _MOVED.findall(log) if buft.upper().startswith("CPU"))
    return {"sides": sides, "rss": float(rss[1]) if rss else 0.0, "moved": moved}


def predicted(meta, n_ctx: int, ngl: int, cpu_moe: int) -> dict:
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=n_ctx, gpu_layers=ngl, cpu_moe=cpu_moe))
    sides = {}
    for dev in est.devices:
        side = "cpu" if dev.name == "CPU" else "gpu"
        sides[side] = {"weights": dev.weights_bytes, "kv": dev.kv_bytes, "state": dev.state_bytes,
                       "compute": dev.compute_bytes, "output": dev.output_bytes}
    # llama.cpp logs every tensor an override matched, on a CPU layer too (where it changes nothing)
    in_ram = sorted(t.name for t in meta.tensors if expert_in_ram(t.name, _layer_of(t.name, meta.block_count), cpu_moe))
    return {"sides": sides, "total": sum(d.total_bytes for d in est.devices), "in_ram": in_ram}


def total(parts: dict) -> float:
    return sum(parts.values())


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100 if meas else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to build the models (default: a temp dir)")
    parser.add_argument("--ctx", default="2048,8192,32768")
    parser.add_argument("--gpu-layers", type=int, default=0, help="llama.cpp -ngl for every load (default 0)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose llama_cpp runs the loads")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra environment")
    parser.add_argument("--only", default="", help="run only the models whose label starts with this")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    contexts = [int(c) for c in args.ctx.split(",")]
    out = args.out or Path(tempfile.mkdtemp(prefix="qd-fit-moe-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **dict(item.split("=", 1) for item in args.env)}
    rows = []
    header = (f"{'model':28} {'quant':6} {'ctx':>6} {'moe':>4} | {'weights MiB':>17} | {'KV MiB':>13} | "
              f"{'state MiB':>11} | {'compute MiB':>13} | {'buffers MiB':>17} {'err':>6} | {'moved':>5} | "
              f"{'RSS MiB pred/meas':>17}")
    print(header)
    print("-" * len(header))
    for label, spec, scaled, quants, experts in MODELS:
        if not label.startswith(args.only):
            continue
        built = build_gguf_set(spec, quants=(), cache=out)
        for quant in quants:
            path = built.quant(quant)
            quantize(built.gguf_f16, path, quant)
            meta = read_gguf_file(path)
            for n_ctx in contexts:
                for cpu_moe in experts:
                    pred = predicted(meta, n_ctx, args.gpu_layers, cpu_moe)
                    meas = measure(args.python, env, path, n_ctx, args.gpu_layers, cpu_moe)
                    for side in ("cpu", "gpu"):
                        p, m = pred["sides"].get(side, {}), meas["sides"][side]
                        if not p and not m:
                            continue
                        get = lambda d, k: d.get(k, 0.0)  # noqa: E731
                        row = {"model": label, "scaled": scaled, "quant": quant, "n_ctx": n_ctx, "cpu_moe": cpu_moe,
                               "side": side, "pred": p, "meas": m, "pred_buffers": total(p),
                               "meas_buffers": total(m), "moved_pred": len(pred["in_ram"]),
                               "moved_meas": len(meas["moved"]), "moved_match": pred["in_ram"] == meas["moved"],
                               "rss": meas["rss"], "pred_total": pred["total"]}
                        rows.append(row)
                        moe = {0: "none", -1: "all"}.get(cpu_moe, str(cpu_moe))
                        moved = f"{len(meas['moved']):>2}/{len(pred['in_ram']):<2}" if side == "cpu" else ""
                        print(f"{label[:28]:28} {quant:6} {n_ctx:>6} {moe:>4} | "
                              f"{get(p, 'weights') / MiB:8.1f}/{get(m, 'weights') / MiB:8.1f} | "
                              f"{get(p, 'kv') / MiB:6.1f}/{get(m, 'kv') / MiB:6.1f} | "
                              f"{get(p, 'state') / MiB:5.2f}/{get(m, 'state') / MiB:5.2f} | "
                              f"{get(p, 'compute') / MiB:6.1f}/{get(m, 'compute') / MiB:6.1f} | "
                              f"{total(p) / MiB:8.1f}/{total(m) / MiB:8.1f} {pct(total(p), total(m)):+5.1f}% | "
                              f"{moved:>5} | {pred['total'] / MiB:8.1f}/{meas['rss'] / MiB:8.1f}", flush=True)
    def within(row) -> bool:
        return abs(row["pred_buffers"] - row["meas_buffers"]) <= max(0.03 * row["meas_buffers"], 32 * MiB)

    print()
    worst = max(rows, key=lambda r: abs(r["pred_buffers"] - r["meas_buffers"]), default=None)
    if worst:
        print(f"{len(rows)} loads x sides; worst |error| {abs(worst['pred_buffers'] - worst['meas_buffers']) / MiB:.1f} MiB "
              f"({pct(worst['pred_buffers'], worst['meas_buffers']):+.1f} %: {worst['model']} {worst['quant']} "
              f"ctx {worst['n_ctx']} moe {worst['cpu_moe']})")
    misses = [r for r in rows if not within(r)]
    moved_ok = all(r["moved_match"] for r in rows)
    print(f"goal (every load within max(3 %, 32 MiB)): {'met' if not misses else f'MISSED in {len(misses)}'}; "
          f"expert tensors llama.cpp moved == the estimator's: {'yes' if moved_ok else 'NO'}")
    print("scaled models: " + "; ".join(f"{label}: {scaled}" for label, _, scaled, _, _ in MODELS))
    print(f"device: {'CPU' if args.gpu_layers == 0 else f'-ngl {args.gpu_layers}'} via {args.python}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if not misses and moved_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
