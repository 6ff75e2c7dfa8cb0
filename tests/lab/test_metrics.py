"""The lab's arithmetic on hand-made distributions, where the answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.lab.metrics import (DivergenceSummary, Spread, VocabularyMismatch, kl_and_top1, perplexity,
                             shared_vocabulary_size)


def log(rows):
    return np.log(np.asarray(rows, dtype=np.float64))


def test_spread_is_the_median_with_the_range():
    assert Spread.of([3.0, 1.0, 10.0]) == Spread(3.0, 1.0, 10.0, 3)
    assert Spread.of([2.0, 4.0]) == Spread(3.0, 2.0, 4.0, 2)
    assert Spread.of([]) is None


def test_perplexity_of_a_uniform_guess_is_the_number_of_choices():
    assert perplexity([math.log(1 / 50)] * 7) == pytest.approx(50)
    assert perplexity([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError):
        perplexity([])


def test_kl_is_zero_for_identical_distributions_and_matches_the_formula_otherwise():
    p = [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]
    q = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]
    kl, agree = kl_and_top1(log(p), log(p), 3)
    assert kl == [0.0, 0.0] and agree == [True, True]
    kl, agree = kl_and_top1(log(p), log(q), 3)
    expected = 0.7 * math.log(0.7 / 0.5) + 0.2 * math.log(0.2 / 0.3) + 0.1 * math.log(0.1 / 0.2)
    assert kl[0] == pytest.approx(expected) and kl[1] == pytest.approx(0.0, abs=1e-12)
    assert agree == [True, True]
    _, agree = kl_and_top1(log(p), log([[0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]), 3)
    assert agree == [False, True]


def test_kl_over_a_shared_prefix_renormalises_both_sides():
    # The variant has one padding id more; over the shared two ids both are the same distribution.
    reference = log([[0.75, 0.25]])
    variant = log([[0.6, 0.2, 0.2]])
    kl, agree = kl_and_top1(reference, variant, 2)
    assert kl[0] == pytest.approx(0.0, abs=1e-12) and agree == [True]


def test_summary_reports_mean_percentile_max_and_agreement():
    summary = DivergenceSummary.of([0.0, 0.1, 0.2, 0.3], [True, True, False, True])
    assert summary.kl_mean == pytest.approx(0.15) and summary.kl_max == pytest.approx(0.3)
    assert summary.kl_median == pytest.approx(0.15) and 0.29 < summary.kl_p99 <= 0.3
    assert summary.top1_agreement == 0.75 and summary.positions == 4


def test_vocabularies_must_agree_on_every_shared_id():
    base = ["a", "b", "c"]
    assert shared_vocabulary_size(base, base) == 3
    assert shared_vocabulary_size(base, [*base, "[PAD3]", "[PAD4]"]) == 3  # conversion padding at the end
    with pytest.raises(VocabularyMismatch) as err:
        shared_vocabulary_size(base, ["a", "x", "c"], reference_name="F16", variant_name="other")
    assert "other does not share F16's vocabulary (token 1 is 'x', not 'b')" in str(err.value)
    with pytest.raises(VocabularyMismatch):
        shared_vocabulary_size([], base)
