"""The KL reference the lab keeps (backends.scoring, app/lab/references): each position's likeliest tokens only, yet
the same KL divergence as the whole vocabulary; made once, reused, exported and imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.lab import references
from app.lab.references import ReferenceFileError
from app.lab.results import BenchSettings
from app.lab.runner import run_bench
from app.datatypes import DEFAULT_TAIL

QUALITY_ONLY = BenchSettings(ctx=128, chunks=8, speed=False, threads=2)


@pytest.mark.parametrize("models_name", ["tiny_peaked_models", "tiny_models"])
def test_the_kept_tokens_give_the_whole_vocabularys_kld_within_one_percent(request, models_name):
    models = request.getfixturevalue(models_name)
    variants = [models.gguf_f16, models.gguf_q8_0, models.gguf_q4_k_m]
    kept = run_bench(variants, QUALITY_ONLY)
    whole = run_bench(variants, BenchSettings(ctx=128, chunks=8, speed=False, threads=2, tail=0.0))
    assert kept.reference_file["tail"] == DEFAULT_TAIL and whole.reference_file["tail"] == 0.0
    assert whole.reference_file["mean_tokens"] == 1024 and whole.reference_file["mean_left_out"] == 0.0
    assert kept.reference_file["mean_left_out"] <= DEFAULT_TAIL and kept.reference_file["capped_share"] == 0.0
    for quant in ("Q8_0", "Q4_K_M"):
        a, b = (r.variant(f"tiny-llama-{quant}").quality for r in (kept, whole))
        error = abs(a.kld.value / b.kld.value - 1)
        print(f"{models_name} {quant}: mean KLD {a.kld.value:.6g} with {kept.reference_file['mean_tokens']:.1f} "
              f"tokens per position, {b.kld.value:.6g} with all 1024: {100 * error:.3f} % apart; reference files "
              f"{kept.reference_file['bytes']} and {whole.reference_file['bytes']} bytes")
        assert error < 0.01
        assert a.kld.value <= b.kld.value  # merging the left-out tokens never adds divergence
        # What does not depend on the kept tokens is the same to the last bit.
        assert (a.ppl, a.ppl_base, a.same_top, a.dp, a.rms_dp) == (b.ppl, b.ppl_base, b.same_top, b.dp, b.rms_dp)
    if models_name == "tiny_peaked_models":  # a real model's sure predictions: a small share of the vocabulary
        assert kept.reference_file["mean_tokens"] < 0.1 * 1024
        assert kept.reference_file["bytes"] < 0.15 * whole.reference_file["bytes"]


def test_a_saved_reference_compares_new_quants_without_the_reference_model(tiny_models, tmp_path):
    first = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m], QUALITY_ONLY)
    shared = references.export(Path(first.reference_file["path"]), tmp_path / "f16.qdref")
    later = run_bench([tiny_models.gguf_q8_0, tiny_models.gguf_q4_k_m], BenchSettings(speed=False, threads=2),
                      reference_file=shared)
    reference = later.variants[0]
    assert reference.label == "tiny-llama-F16" and reference.format == "reference file" and reference.quant == "F16"
    assert later.settings.ctx == 128  # the file's windows, whatever --ctx said
    assert any("as the reference file's" in note for note in later.notes)
    assert later.corpus == first.corpus and later.reference_file["path"] == str(shared)
    assert later.variant("tiny-llama-Q4_K_M").quality == first.variant("tiny-llama-Q4_K_M").quality
    assert later.variant("tiny-llama-Q8_0").quality.kld.value < later.variant("tiny-llama-Q4_K_M").quality.kld.value


def test_a_reference_file_that_is_not_one_is_refused_before_anything_runs(tiny_models, tmp_path):
    bad = tmp_path / "notes.qdref"
    bad.write_text("these are my notes")
    with pytest.raises(ReferenceFileError, match="notes.qdref is not a QuantDesk KL reference file"):
        run_bench([tiny_models.gguf_q8_0], QUALITY_ONLY, reference_file=bad)
    with pytest.raises(ReferenceFileError, match="no reference file at"):
        run_bench([tiny_models.gguf_q8_0], QUALITY_ONLY, reference_file=tmp_path / "missing.qdref")
    assert bad.read_text() == "these are my notes"  # bad input loses nothing
