"""backends/scoring.py on hand-made logits, where the whole-vocabulary answer is computed directly: the reference's
kept tokens, the KL divergence against them, the reference file and what a damaged one gets."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from backends import scoring
from app.datatypes import WindowScoring


def logits(rows: int, vocab: int, sharpness: float, seed: int = 3) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((rows, vocab)) * sharpness).astype(np.float32)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def block_of(rows: np.ndarray, targets: np.ndarray, tail: float, max_tokens: int = 10**9) -> scoring.ReferenceBlock:
    return scoring.ReferenceBlock.of(*scoring.reference_rows(rows, targets, tail, max_tokens))


def test_the_kept_tokens_are_the_fewest_likeliest_that_leave_at_most_tail_out():
    rows = logits(20, 500, 3.0)
    p = np.exp(log_softmax(rows))
    for tail in (0.1, 1e-3, 1e-6):
        kept, _ = scoring.reference_rows(rows, np.zeros(20, dtype=np.int64), tail, 10**9)
        for r, k in enumerate(kept):
            ids, values, left_out = k.ids, k.logprobs, k.rest
            assert k.top == len(ids) and k.weight == 0.0
            ranked = np.argsort(-p[r], kind="stable")
            assert list(ids) == list(ranked[:len(ids)])  # likeliest first
            assert values == pytest.approx(np.log(p[r, ids]), abs=1e-5)
            assert left_out == pytest.approx(1 - p[r, ids].sum(), abs=1e-6) and left_out <= tail
            assert 1 - p[r, ids[:-1]].sum() > tail  # one fewer would leave more out: the set is the smallest


def test_ties_go_to_the_lower_id_and_a_cap_keeps_the_top_half_and_samples_the_rest():
    row = np.array([[1.0, 3.0, 3.0, 0.0, 3.0, -1.0]], dtype=np.float32)
    (whole,), _ = scoring.reference_rows(row, np.array([0]), 0.0, 10)
    assert list(whole.ids) == [1, 2, 4, 0, 3, 5] and whole.rest == 0.0  # tail 0: the whole vocabulary
    (capped,), _ = scoring.reference_rows(row, np.array([0]), 0.0, 4)
    p = np.exp(log_softmax(row))[0]
    assert capped.top == 2 and list(capped.ids[:2]) == [1, 2]  # of the three likeliest (a tie), the lower ids
    # One of each two of the other four ranked by probability (4 0, 3 5), listed by id.
    assert list(capped.ids[2:]) == [0, 5] and capped.weight == 2.0
    assert capped.rest == pytest.approx(p[[0, 3, 4, 5]].sum())


def test_against_the_whole_distribution_every_figure_is_exact():
    reference, variant = logits(32, 300, 1.0), logits(32, 300, 1.0, seed=4)
    variant = reference + 0.3 * variant  # a noisy copy, as a quant is
    targets = np.random.default_rng(5).integers(0, 300, 32)
    out = scoring.compare_rows(variant, targets, block_of(reference, targets, 0.0))
    lp, lq = log_softmax(reference), log_softmax(variant)
    assert out["kld"] == pytest.approx((np.exp(lp) * (lp - lq)).sum(axis=1), rel=1e-5)
    assert out["nll"] == pytest.approx(-lq[np.arange(32), targets], rel=1e-6)
    assert out["nll_base"] == pytest.approx(-lp[np.arange(32), targets], rel=1e-6)
    assert out["p_diff"] == pytest.approx(np.exp(lq[np.arange(32), targets]) - np.exp(lp[np.arange(32), targets]),
                                          abs=1e-7)
    assert list(out["same_top"]) == list(reference.argmax(axis=1) == variant.argmax(axis=1))
    assert not out["same_top"].all()


def test_merging_the_left_out_tokens_underestimates_kl_by_about_the_mass_left_out():
    reference = logits(64, 2000, 4.0)  # peaked, as a real model is
    variant = reference + logits(64, 2000, 0.2, seed=9)
    targets = np.zeros(64, dtype=np.int64)
    exact = scoring.compare_rows(variant, targets, block_of(reference, targets, 0.0))["kld"]
    for tail in (1e-2, 1e-3):
        block = block_of(reference, targets, tail)
        merged = scoring.compare_rows(variant, targets, block)["kld"]
        assert np.all(merged <= exact + 1e-9)  # merging tokens never adds divergence
        assert abs(merged.mean() / exact.mean() - 1) < 3 * tail
        assert np.diff(block.offsets).mean() < 0.5 * 2000  # far fewer tokens than the vocabulary


def test_on_a_flat_distribution_a_sample_of_the_rest_stands_for_it():
    # Random weights: every token about as likely as the next, so no small set holds all but 1e-4 of the probability.
    reference = logits(16, 20000, 0.3)
    variant = reference + logits(16, 20000, 0.05, seed=8)
    targets = np.zeros(16, dtype=np.int64)
    exact = scoring.compare_rows(variant, targets, block_of(reference, targets, 0.0))["kld"]
    block = block_of(reference, targets, 1e-4, max_tokens=2048)
    assert set(block.weight) == {(20000 - 1024) / 1024} and set(block.top) == {1024}
    sampled = scoring.compare_rows(variant, targets, block)["kld"]
    assert abs(sampled.mean() / exact.mean() - 1) < 0.03  # merging the rest into one token would find a tenth


def write(path, chunks: int = 2, n_ctx: int = 16, vocab: int = 50, tail: float = 1e-3):
    rows = logits(chunks * scoring.scored_per_chunk(n_ctx), vocab, 2.0)
    tokens = np.random.default_rng(1).integers(0, vocab, chunks * n_ctx).astype(np.int32)
    writer = scoring.ReferenceWriter(path, {"n_ctx": n_ctx, "n_chunks": chunks, "n_vocab": vocab, "tail": tail,
                                            "model": {"label": "m"}}, tokens)
    per = scoring.scored_per_chunk(n_ctx)
    for c in range(chunks):
        targets = tokens[c * n_ctx + n_ctx // 2 + 1:(c + 1) * n_ctx]
        writer.add_chunk(*scoring.reference_rows(rows[c * per:(c + 1) * per], targets, tail, 10**9))
    return writer.close(), rows, tokens


def test_a_reference_file_reads_back_chunk_by_chunk(tmp_path):
    path, rows, tokens = write(tmp_path / "ref.qdref")
    reference = scoring.Reference(path)
    assert (reference.n_ctx, reference.n_chunks, reference.n_vocab, reference.positions) == (16, 2, 50, 14)
    assert list(reference.window(1)) == list(tokens[16:])
    per = scoring.scored_per_chunk(16)
    for c in range(2):
        block = reference.chunk(c)
        targets = tokens[c * 16 + 9:(c + 1) * 16]
        expected = block_of(rows[c * per:(c + 1) * per], targets, 1e-3)
        assert list(block.top) == list(expected.top) and list(block.weight) == list(expected.weight)
        assert list(block.ids) == list(expected.ids) and list(block.offsets) == list(expected.offsets)
        assert block.logprob_next == pytest.approx(expected.logprob_next)
    assert reference.header["model"] == {"label": "m"} and reference.coverage()["capped_share"] == 0.0
    assert reference.own_positions()["nll"] == pytest.approx(-reference.logprob_next)
    reference.close()
    assert not (tmp_path / "ref.qdref.part").exists()


@pytest.mark.parametrize("damage, sentence", [
    (lambda b: b[:-40], "is cut short or damaged"),
    (lambda b: b[:len(b) // 2] + b[len(b) // 2 + 40:], "is cut short or damaged"),
    (lambda b: b"XXXXXXXX" + b[8:], "is not a QuantDesk KL reference file"),
    (lambda b: b[:16] + b"}" + b[17:], "has an unreadable header"),
    (lambda b: b"", "is not a QuantDesk KL reference file"),
])
def test_a_damaged_reference_is_refused_in_words(tmp_path, damage, sentence):
    path, _, _ = write(tmp_path / "ref.qdref")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(scoring.ReferenceError, match=sentence):
        scoring.Reference(path)


def test_token_ids_outside_the_vocabulary_are_refused(tmp_path):
    path, _, _ = write(tmp_path / "ref.qdref")
    data = bytearray(path.read_bytes())
    reference = scoring.Reference(path)
    at = int(reference.chunk_offsets[0])
    reference.close()
    data[at:at + 4] = struct.pack("<i", 10_000)
    path.write_bytes(bytes(data))
    with pytest.raises(scoring.ReferenceError, match="names tokens outside the vocabulary"):
        scoring.Reference(path).chunk(0)


def test_a_llama_perplexity_base_file_of_the_wrong_size_is_refused(tmp_path):
    path = tmp_path / "base.kld"
    path.write_bytes(b"_logits_" + struct.pack("<Iii", 16, 50, 2) + b"\0" * 100)
    with pytest.raises(scoring.ReferenceError, match="should be .* bytes for its header, not 120: cut short or damaged"):
        scoring.LlamaPerplexityBase.open(path)
    path.write_bytes(b"something else entirely")
    with pytest.raises(scoring.ReferenceError, match="is not a llama-perplexity --kl-divergence-base file"):
        scoring.LlamaPerplexityBase.open(path)


def test_scoring_settings_are_checked():
    with pytest.raises(ValueError, match="an even number of tokens"):
        WindowScoring(n_ctx=33, reference_out="x").validate()
    with pytest.raises(ValueError, match="reads a reference or writes one"):
        WindowScoring(n_ctx=32).validate()
    assert scoring.chunk_count(1000, 128) == 7 and scoring.chunk_count(1000, 128, 3) == 3
    assert scoring.vocabulary_check(["a", "b"], ["a", "b", "pad"], 2, 3) == ""
    assert "token 1 is 'x', not 'b'" in scoring.vocabulary_check(["a", "b"], ["a", "x"], 2, 2)
    assert "has 2 tokens, the reference 3" in scoring.vocabulary_check(None, ["a", "b"], 3, 2)


def tool_kld(lp_base: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """llama-perplexity's per-position KLD (perplexity.cpp): only the tokens the base puts above -16 nats count."""
    counted = lp_base > -16
    return np.where(counted, np.exp(lp_base) * (lp_base - lq), 0.0).sum(axis=1)


def test_tokens_the_reference_puts_at_or_below_minus_16_take_no_part_as_in_llama_perplexity():
    reference = logits(16, 3000, 6.0)  # sure predictions: most of the vocabulary far below -16 nats
    variant = reference + logits(16, 3000, 1.0, seed=8)
    targets = np.zeros(16, dtype=np.int64)
    lp, lq = log_softmax(reference), log_softmax(variant)
    assert (lp <= -16).mean() > 0.5
    out = scoring.compare_rows(variant, targets, block_of(reference, targets, 0.0))["kld"]
    assert out == pytest.approx(tool_kld(lp, lq), rel=1e-4)  # float32 log-probabilities at the boundary
    assert not np.allclose(out, (np.exp(lp) * (lp - lq)).sum(axis=1), rtol=1e-3)  # the whole vocabulary's differs


def write_llama_perplexity_base(path, rows: np.ndarray, tokens: np.ndarray, n_ctx: int) -> np.ndarray:
    """A --kl-divergence-base file as perplexity.cpp's log_softmax writes it (16 bits over at most 16 nats, each
    token more than 16 below the likeliest clamped to the row's minimum); the log-probabilities it stores."""
    n_vocab = rows.shape[1]
    nv = 2 * ((n_vocab + 1) // 2) + 4
    out = np.zeros((len(rows), nv), dtype="<u2")
    stored = np.zeros(rows.shape, dtype=np.float32)
    for r, row in enumerate(rows):
        top = row.max()
        low = max(row.min(), top - 16)
        lse = np.float32(np.log(np.exp(row - top).astype(np.float64).sum()))
        scale, minimum = np.float32((top - low) / 65535), np.float32(low - top - lse)
        out[r, :4] = np.array([scale, minimum], dtype="<f4").view("<u2")
        out[r, 4:4 + n_vocab] = np.where(row > low, np.rint((row - low) / scale), 0)
        stored[r] = scale * out[r, 4:4 + n_vocab].astype(np.float32) + minimum
    path.write_bytes(b"_logits_" + struct.pack("<Iii", n_ctx, n_vocab, len(tokens) // n_ctx)
                     + tokens.astype("<i4").tobytes() + out.tobytes())
    return stored


@pytest.mark.parametrize("max_tokens", [4096, 512])
def test_an_imported_llama_perplexity_base_gives_the_tools_own_kld(tmp_path, max_tokens):
    # 512: fewer than the tokens above -16, so the rest is sampled, its clamped tokens at their stored values.
    n_ctx, chunks, vocab = 16, 2, 3000
    per = scoring.scored_per_chunk(n_ctx)
    reference = logits(chunks * per, vocab, 3.0)
    variant = reference + logits(chunks * per, vocab, 0.3, seed=8)
    tokens = np.random.default_rng(1).integers(0, vocab, chunks * n_ctx).astype(np.int32)
    stored = write_llama_perplexity_base(tmp_path / "base.kld", reference, tokens, n_ctx)
    assert ((stored <= -16).mean() > 0.05) and (((stored > -16).sum(axis=1) > 512).all())
    converted = scoring.LlamaPerplexityBase.open(tmp_path / "base.kld").convert(tmp_path / "base.qdref", {},
                                                                                   max_tokens=max_tokens)
    imported = scoring.Reference(converted)
    expected = tool_kld(stored.astype(np.float64), log_softmax(variant))
    out = np.concatenate([scoring.compare_rows(variant[c * per:(c + 1) * per],
                                               tokens[c * n_ctx + n_ctx // 2 + 1:(c + 1) * n_ctx],
                                               imported.chunk(c))["kld"] for c in range(chunks)])
    imported.close()
    if max_tokens >= vocab:  # every token above -16 kept: the tool's sum itself
        assert out == pytest.approx(expected, rel=1e-5)
    else:  # a sample of the rest: each position near it, their mean nearer
        assert out == pytest.approx(expected, rel=0.05) and out.mean() == pytest.approx(expected.mean(), rel=0.01)
