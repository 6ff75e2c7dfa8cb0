"""The quant lab through the crash guard: engine hosts that abort in their first decode after the load
(QUANTDESK_TEST_CRASH=reply, as llama.cpp's AMX kernels do on some Xeons) are revived in the safer configuration; the
bench measures every variant, its figures equal a bench without crashes, and the variants' notes say what happened."""

from __future__ import annotations

import pytest

from app.engine import guard
from app.lab.results import BenchSettings
from app.lab.runner import run_bench

pytest.importorskip("llama_cpp")
SMALL = BenchSettings(prompt_tokens=32, gen_tokens=4, reps=1, ctx=64, chunks=2)


def test_a_bench_whose_engine_crashes_measures_every_variant_as_without_crashes(monkeypatch, tiny_models):
    models = [tiny_models.gguf_q4_k_m, tiny_models.gguf_q8_0]
    calm = run_bench(models, SMALL)
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", "reply")
    result = run_bench(models, SMALL)
    for ours, theirs in zip(result.variants, calm.variants, strict=True):
        assert not ours.error and ours.runs and ours.quality is not None
        # The same figures within the lab's own tolerance: without the extra buffer types llama.cpp runs other (not
        # repacked) kernels, whose sums round differently.
        assert ours.quality.kld.overlaps(theirs.quality.kld)
        assert ours.perplexity == pytest.approx(theirs.perplexity, rel=0.01)
        assert any("crashed (SIGABRT)" in note or "as learned after an engine crash" in note for note in ours.notes)
    assert {e.quant for e in guard.learned()} == {"Q4_K_M", "Q8_0"}
    assert all(e.rung == guard.NO_EXTRA_BUFFER_TYPES for e in guard.learned())
