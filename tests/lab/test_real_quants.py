"""The quant lab on a real model's quants: SmolLM2-135M-Instruct made F16 from its Q4_1 file (as ``llama-quantize
--allow-requantize`` does), then quantized by llama.cpp's own quantizer to Q8_0, Q6_K, Q4_K_M, Q3_K_S and Q2_K
(tests/fixtures/real_models.quantize_ladder), each scored by the lab against the F16 on the bundled prose, and by
llama.cpp's ``llama-perplexity`` on the same files, text and windows (tests/fixtures/llama_perplexity.py).

Trained weights give what the random test models cannot: sure, peaked distributions over a 49,152-token vocabulary,
where quantization error shows as it does for users, so the quants must rank by their bits, well beyond the
statistics' noise. One pair cannot: SmolLM2's rows are 576 wide, not a multiple of the K-quants' 256, so llama.cpp
quantizes those tensors to its fallback type, Q4_0 for both Q3_K and Q2_K, and ffn_down (1,536 wide) to Q3_K in both
mixes: the Q3_K_S and Q2_K files hold the very same tensors (they differ in the one byte of their file type), and the
lab must give them the very same figures. (Q4_K_M falls back to Q5_0 and Q6_K to Q8_0 the same way; each still keeps
more bits than the quant below it.)

Against llama-perplexity: every statistic it prints, within 1 % or one of its standard errors (plus half its last
digit, plus its base file's 16-bit rounding for single positions' values), as tests/lab/test_llama_perplexity.py asks
of the tiny models; and the lab reads the tool's own base file of this model and agrees with it the same way.

Both found what the random models could not. The tool's per-position KLD leaves out every token the base puts at or
below -16 nats, which a 49,152-token vocabulary of real distributions has tens of thousands of per position: Q3_K_S's
5 % KLD is 0.05652 over the whole vocabulary and 0.05702 as the tool computes it, so the lab leaves the same terms
out (backends.scoring.FLOOR). And the tool's base file clamps those tokens to its rows' minimum: the lab's import kept
their clamped values in its sample of a position's rest but not in the rest's mass, and read every KLD percentile of
Q4_K_M 2-19 % high (the median 0.04336 against 0.04029).
"""

from __future__ import annotations

import itertools
import math

import gguf
import pytest

from app.lab import corpus
from app.lab.results import QUALITY_METRICS, BenchSettings
from app.lab.runner import run_bench
from tests.fixtures import llama_perplexity as tool
from tests.fixtures.real_models import LADDER

pytestmark = pytest.mark.real_model

CTX, CHUNKS = 128, 4
SETTINGS = BenchSettings(ctx=CTX, chunks=CHUNKS, speed=False, threads=2)
STEM = "SmolLM2-135M-Instruct"


def label(quant: str) -> str:
    return f"{STEM}.{quant}"


@pytest.fixture(scope="module")
def lab_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("lab-home")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            mp.setenv(var, str(home / var))
        yield home


@pytest.fixture(scope="module")
def ladder(smollm2_quants, lab_home):
    """The lab's quality pass over the F16 and every quant (the F16 is the reference: the most bits)."""
    return run_bench([*smollm2_quants.files.values(), smollm2_quants.f16], SETTINGS)


@pytest.fixture(scope="module")
def printed(smollm2_quants, llama_perplexity, tmp_path_factory):
    """llama-perplexity's statistics for each quant against its base file of the F16, and that file."""
    work = tmp_path_factory.mktemp("llama-perplexity-real")
    text = work / "text.txt"
    text.write_text(corpus.perplexity_text(), encoding="utf-8")
    base = work / "base.kld"
    common = ["-c", str(CTX), "-t", "2", "-fa", "off"]  # the lab loads without flash attention
    tool.run(llama_perplexity, ["-m", str(smollm2_quants.f16), "-f", str(text), "--chunks", str(CHUNKS), *common,
                                "--kl-divergence-base", str(base)])
    return {q: tool.run(llama_perplexity, ["-m", str(path), "--kl-divergence-base", str(base), "--kl-divergence",
                                           *common]).statistics
            for q, path in smollm2_quants.files.items()}, base


def tensor_types(path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


def test_the_real_quants_rank_by_their_bits_well_beyond_the_noise(ladder, smollm2_quants):
    reference = ladder.variants[0]
    assert reference.label == label("F16") and reference.quality.kld.value == 0.0
    assert reference.quality.positions == CHUNKS * (CTX - 1 - CTX // 2)
    # A trained model reads English prose: far below its 49,152-token vocabulary's uniform guess.
    assert 5 < reference.perplexity < 100
    for v in ladder.variants:
        assert not v.error and not set(v.unavailable) & set(QUALITY_METRICS), (v.label, v.error, v.unavailable)
    quality = {q: ladder.variant(label(q)).quality for q in LADDER}
    ranked = [q for q in LADDER if q != "Q2_K"]  # Q2_K: the same tensors as Q3_K_S here (below)
    for more, fewer in itertools.pairwise(ranked):
        a, b = quality[more], quality[fewer]
        noise = math.hypot(a.kld.se, b.kld.se)
        assert b.kld.value - a.kld.value > 4 * noise, f"{more} KLD {a.kld} vs {fewer} {b.kld}"
        assert b.same_top.value < a.same_top.value, f"{more} same top {a.same_top} vs {fewer} {b.same_top}"
        assert b.kld_percentiles["99"] > a.kld_percentiles["99"]
    assert quality["Q8_0"].kld.value > 0 and quality["Q8_0"].same_top.value < 1  # even Q8_0 moves some tokens


def test_q2_k_and_q3_k_s_of_a_576_wide_model_are_one_file_and_score_the_same(ladder, smollm2_quants):
    q3, q2 = tensor_types(smollm2_quants["Q3_K_S"]), tensor_types(smollm2_quants["Q2_K"])
    assert q2 == q3, "llama.cpp's fallback for rows not a multiple of 256 changed: rank Q2_K below Q3_K_S again"
    assert q3["blk.0.attn_q.weight"] == "Q4_0" and q3["blk.0.ffn_down.weight"] == "Q3_K"
    assert smollm2_quants["Q2_K"].read_bytes() != smollm2_quants["Q3_K_S"].read_bytes()  # the file type byte
    a, b = ladder.variant(label("Q3_K_S")).quality, ladder.variant(label("Q2_K")).quality
    assert (b.kld.value, b.kld.se, b.same_top.value, b.ppl.value) == (a.kld.value, a.kld.se, a.same_top.value,
                                                                       a.ppl.value)
    assert b.kld_percentiles == a.kld_percentiles and b.dp_percentiles == a.dp_percentiles


def test_every_statistic_is_llama_perplexitys_on_the_real_quants(ladder, printed):
    figures, _ = printed
    for quant in LADDER:
        variant = ladder.variant(label(quant))
        assert variant.quality.positions == CHUNKS * (CTX - 1 - CTX // 2)
        tool.assert_agree(variant.quality, figures[quant], f"SmolLM2 {quant}")


def test_the_lab_reads_llama_perplexitys_base_file_of_the_real_model_and_agrees(smollm2_quants, printed, lab_home):
    figures, base = printed
    imported = run_bench([smollm2_quants["Q4_K_M"]], SETTINGS, reference_file=base)
    assert imported.variants[0].format == "reference file"
    assert imported.reference_file["n_vocab"] == 49152 and imported.reference_file["chunks"] == CHUNKS
    tool.assert_agree(imported.variant(label("Q4_K_M")).quality, figures["Q4_K_M"], "SmolLM2 Q4_K_M, imported base")
