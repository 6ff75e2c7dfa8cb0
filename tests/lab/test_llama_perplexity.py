"""The lab's quality statistics against llama.cpp's own ``llama-perplexity`` (tests/fixtures/llama_perplexity.py:
built from the llama.cpp that llama-cpp-python vendors), on the same files, text, windows and chunks.

llama-perplexity makes its base file from the F16 model (--kl-divergence-base), then compares Q8_0 and Q4_K_M with
it (--kl-divergence); the lab makes its own reference from the same F16 and compares the same files. Every statistic
llama-perplexity prints must come out the same, within 1 % of its value or one of its standard errors, plus half the
last digit it prints; its standard errors within 1 % too. Twice: on the tiny test models (random weights: nearly
flat distributions, where the lab's reference keeps nearly every token), and on the same weights with a real model's
sure predictions (where it keeps a few dozen of 1024). The lab also reads llama-perplexity's own base file, and then
agrees with it the same way.

Two things differ by design, and the test allows for them:
- llama-perplexity's default ``-fa auto`` turns flash attention on where it can; the lab's engine loads without it
  unless told, so the tool runs with ``-fa off``: both then compute the same logits (with it on, the tiny Q8_0's
  PPL(Q) moves by 0.004 % and its same top p by 0.2 points);
- llama-perplexity keeps the base's log-probabilities in 16 bits spread over at most 16 nats, so each of its
  per-position KLD and Δp values is off by up to 8/65535; its means average that out, its percentiles do not. And a
  token more than 16 nats below the base's likeliest is kept as exactly 16 below: where the actual token is one of
  those, its PPL(base) and what follows from it (the correlation, the ratio, the difference) are the base file's,
  not the model's. A real model on real text stays inside; the sharpened random model on Jane Austen is so sure and
  so wrong that it often does not, so there the lab's own reference is checked on everything else, and the PPL
  figures against the tool's base file, imported.
"""

from __future__ import annotations

import math

import pytest

from app.lab import corpus
from app.lab.results import BenchSettings
from app.lab.runner import run_bench
from tests.fixtures import llama_perplexity as tool

CTX, CHUNKS = 128, 8
SETTINGS = BenchSettings(ctx=CTX, chunks=CHUNKS, speed=False, threads=2)
FROM_PPL_BASE = ("ppl_base", "ppl_correlation", "ln_ppl_ratio", "ppl_ratio", "ppl_diff")


@pytest.fixture(scope="module", params=["tiny_models", "tiny_peaked_models"])
def both(request, llama_perplexity, tmp_path_factory):
    """llama-perplexity's and the lab's figures for Q8_0 and Q4_K_M against F16, and the tool's base file."""
    models = request.getfixturevalue(request.param)
    work = tmp_path_factory.mktemp("llama-perplexity")
    text = work / "text.txt"
    text.write_text(corpus.perplexity_text(), encoding="utf-8")
    base = work / "base.kld"
    common = ["-c", str(CTX), "-t", "2", "-fa", "off"]
    tool.run(llama_perplexity, ["-m", str(models.gguf_f16), "-f", str(text), "--chunks", str(CHUNKS), *common,
                                "--kl-divergence-base", str(base)])
    printed = {q: tool.run(llama_perplexity, ["-m", str(models.gguf(q)), "--kl-divergence-base", str(base),
                                              "--kl-divergence", *common]).statistics for q in ("Q8_0", "Q4_K_M")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(work / "cache"))
        mp.setenv("XDG_DATA_HOME", str(work / "data"))
        lab = run_bench([models.gguf_f16, models.gguf_q8_0, models.gguf_q4_k_m], SETTINGS)
        imported = run_bench([models.gguf_q8_0, models.gguf_q4_k_m], SETTINGS, reference_file=base)
    return request.param, printed, lab, imported


def test_the_labs_statistics_are_llama_perplexitys(both):
    name, printed, lab, _ = both
    reference = lab.variants[0]
    assert reference.label == "tiny-llama-F16" and reference.quality.kld.value == 0.0
    saturated = FROM_PPL_BASE if name == "tiny_peaked_models" else ()
    for quant in ("Q8_0", "Q4_K_M"):
        variant = lab.variant(f"tiny-llama-{quant}")
        assert variant.quality.positions == CHUNKS * (CTX - 1 - CTX // 2)
        tool.assert_agree(variant.quality, printed[quant], f"{name} {quant}", leave_out=saturated)
    q8, q4 = lab.variant("tiny-llama-Q8_0").quality, lab.variant("tiny-llama-Q4_K_M").quality
    assert 0 < q8.kld.value < q4.kld.value and q4.same_top.value < 1  # the quants really differ, and in order
    assert math.isclose(q4.ppl_base.value, reference.quality.ppl.value, rel_tol=1e-9)


def test_the_lab_reads_llama_perplexitys_base_file_and_agrees_with_it(both):
    name, printed, lab, imported = both
    reference = imported.variants[0]
    assert reference.format == "reference file" and reference.label == "base" and not reference.runs
    assert imported.reference_file["producer"].startswith("llama-perplexity")
    assert imported.reference_file["chunks"] == CHUNKS and imported.reference_file["n_ctx"] == CTX
    for quant in ("Q8_0", "Q4_K_M"):
        tool.assert_agree(imported.variant(f"tiny-llama-{quant}").quality, printed[quant], f"{name} {quant}, imported base")
