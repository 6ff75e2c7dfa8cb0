"""The fit estimator (app/models/estimate.py) against llama.cpp's own log of the real files' buffers: each file loaded
by plain llama-cpp-python in a child process, as QuantDesk loads it on the CPU (window-sized sliding-window caches,
f16 KV), and its logged model, KV, compute and output buffers read by backends/llama_cpp/log.py; the estimate is
within max(3 %, 32 MiB) of each, and of their sum. Two contexts: Gemma 3's sliding-window layers cap their cache
at the window from 8k on, SmolLM2's grows with the context."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.models.estimate import LlamaCppSettings, MiB, estimate_llama_cpp
from app.models.metadata import read_gguf_file
from backends.llama_cpp import log

pytestmark = pytest.mark.real_model
pytest.importorskip("llama_cpp")

LOAD = r"""
import sys
import llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_gpu_layers=0, swa_full=False, type_k=1, type_v=1,
                n_threads=2, verbose=True)
"""
KINDS = {"weights": "model_bytes", "KV": "kv_bytes", "compute": "compute_bytes", "output": "output_bytes"}


def _close(estimated: int, logged: int) -> bool:
    return abs(estimated - logged) <= max(0.03 * logged, 32 * MiB)


@pytest.mark.parametrize("n_ctx", [2048, 8192])
@pytest.mark.parametrize("model", ["smollm2_gguf", "gemma3_gguf"])
def test_the_estimate_is_within_3_percent_or_32_mib_of_llama_cpps_buffers(request, model, n_ctx):
    path = request.getfixturevalue(model)
    meta = read_gguf_file(path)
    done = subprocess.run([sys.executable, "-c", LOAD, str(path), str(n_ctx)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    [logged] = log.parse(done.stderr).device_loads(meta.block_count)
    [estimated] = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=n_ctx, gpu_layers=0)).devices
    assert logged.name == "CPU" and logged.layers == meta.block_count
    figures = {"weights": estimated.weights_bytes, "KV": estimated.kv_bytes, "compute": estimated.compute_bytes,
               "output": estimated.output_bytes}
    said = {kind: (figures[kind] / MiB, getattr(logged, field) / MiB) for kind, field in KINDS.items()}
    for kind, field in KINDS.items():
        assert _close(figures[kind], getattr(logged, field)), f"{kind}: estimated / logged MiB {said}"
    total = sum(getattr(logged, field) for field in KINDS.values())
    assert estimated.state_bytes == 0 and total > 100 * MiB  # no recurrent layers: four kinds are all
    assert _close(estimated.buffer_bytes, total), said
