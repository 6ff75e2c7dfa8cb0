"""The real models through llama.cpp's AMX path, where this CPU has AMX (Sapphire Rapids and later Xeons): llama.cpp
repacks the weights into its AMX buffer type by default, whose kernels crash on some of these CPUs
(ggml-org/llama.cpp#20824). Out of the box, `quantdesk chat` must answer all the same: straight away where the kernels
work, or through the crash guard (app/engine/guard.py), which then says so once and remembers it. Elsewhere the test
skips, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine import guard

ROOT = Path(__file__).resolve().parents[2]


def _has_amx() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in text.split() for flag in ("amx_tile", "amx_int8", "amx_bf16"))


pytestmark = [pytest.mark.real_model,
              pytest.mark.skipif(not _has_amx(), reason="needs a CPU with AMX (`grep amx /proc/cpuinfo` finds none "
                                                        "here): llama.cpp's AMX kernels are not used on this CPU")]


@pytest.mark.parametrize("model", ["smollm2_gguf", "gemma3_gguf"])
def test_a_real_model_answers_out_of_the_box_through_the_amx_path(model, request):
    path = request.getfixturevalue(model)
    run = subprocess.run([sys.executable, "-m", "app", "chat", str(path), "--prompt", "What is the capital of France? Answer in one sentence.",
                          "--temperature", "0", "--max-tokens", "32"], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip()
    if model == "smollm2_gguf":
        assert "Paris" in run.stdout
    notes = [line for line in run.stderr.splitlines() if line.startswith("note: ")]
    learned = guard.learned()
    if learned:  # the kernels crashed: the guard said it once and remembered the safer configuration
        assert len(notes) == 1 and "without llama.cpp's extra buffer types" in notes[0]
        assert [e.rung for e in learned] == [guard.NO_EXTRA_BUFFER_TYPES]
    else:
        assert notes == []
