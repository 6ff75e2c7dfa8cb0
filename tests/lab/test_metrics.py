"""The lab's statistics on hand-made per-position figures, checked against textbook formulas computed another way
(numpy's own percentile, correlation and standard deviation): llama-perplexity's definitions are those."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.lab.metrics import Estimate, KldStatistics, Spread, mean_and_uncertainty, perplexity
from app.lab.results import QUALITY_METRICS
from backends.scoring import POSITIONS


def positions(n: int, seed: int = 7, start: int = 256) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = np.zeros(n, dtype=POSITIONS)
    rows["position"] = start + np.arange(n) % 255
    rows["nll_base"] = rng.gamma(2.0, 1.5, n)
    rows["nll"] = rows["nll_base"] + rng.normal(0.02, 0.1, n)  # correlated, a little worse
    rows["kld"] = rng.gamma(0.5, 0.02, n)
    rows["p_diff"] = rng.normal(-0.001, 0.03, n)
    rows["same_top"] = rng.random(n) < 0.9
    return rows


def test_spread_is_the_median_with_the_range():
    assert Spread.of([3.0, 1.0, 10.0]) == Spread(3.0, 1.0, 10.0, 3)
    assert Spread.of([2.0, 4.0]) == Spread(3.0, 2.0, 4.0, 2)
    assert Spread.of([]) is None


def test_perplexity_of_a_uniform_guess_is_the_number_of_choices():
    assert perplexity([math.log(1 / 50)] * 7) == pytest.approx(50)
    assert perplexity([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError):
        perplexity([])


def test_a_mean_has_the_standard_error_of_the_mean_and_none_below_eleven_values():
    values = np.arange(40, dtype=np.float64) ** 1.5
    estimate = mean_and_uncertainty(values)
    assert estimate.value == pytest.approx(values.mean())
    assert estimate.se == pytest.approx(values.std(ddof=0) / math.sqrt(len(values) - 1))
    assert mean_and_uncertainty(values[:10]).se is None and mean_and_uncertainty(values[:11]).se is not None
    assert mean_and_uncertainty(np.full(20, 3.0)).se is None  # no spread, no error


def test_perplexity_statistics_follow_llama_perplexitys_definitions():
    rows = positions(2000)
    q = KldStatistics.of(rows)
    a, b = rows["nll"], rows["nll_base"]
    n = len(rows)
    assert q.positions == n
    assert q.ppl.value == pytest.approx(math.exp(a.mean())) and q.ppl_base.value == pytest.approx(math.exp(b.mean()))
    assert q.ppl.se == pytest.approx(q.ppl.value * a.std() / math.sqrt(n - 1))
    assert q.ppl_correlation == pytest.approx(np.corrcoef(a, b)[0, 1])  # cov / (SE · SE) is Pearson's r
    assert q.ln_ppl_ratio.value == pytest.approx(a.mean() - b.mean())
    assert q.ln_ppl_ratio.se == pytest.approx((a - b).std() / math.sqrt(n - 1))  # the error of a paired difference
    assert q.ppl_ratio.value == pytest.approx(math.exp(a.mean() - b.mean()))
    assert q.ppl_ratio.se == pytest.approx(q.ppl_ratio.value * q.ln_ppl_ratio.se)
    assert q.ppl_diff.value == pytest.approx(q.ppl.value - q.ppl_base.value) and 0 < q.ppl_diff.se < q.ppl.se


def test_kld_and_token_probability_statistics_follow_llama_perplexitys_definitions():
    rows = positions(1001)
    q = KldStatistics.of(rows)
    kld, dp = rows["kld"], rows["p_diff"]
    assert q.kld.value == pytest.approx(kld.mean()) and q.kld.se == pytest.approx(kld.std() / math.sqrt(1000))
    for name, fraction in (("99.9", 0.999), ("99", 0.99), ("95", 0.95), ("90", 0.9), ("10", 0.1), ("5", 0.05),
                           ("1", 0.01), ("0.1", 0.001)):
        assert q.kld_percentiles[name] == pytest.approx(np.percentile(kld, 100 * fraction)), name
        assert q.dp_percentiles[name] == pytest.approx(np.percentile(dp, 100 * fraction)), name
    assert q.kld_percentiles["median"] == np.median(kld) and q.dp_percentiles["75"] == pytest.approx(
        np.percentile(dp, 75))
    assert (q.kld_percentiles["max"], q.kld_percentiles["min"]) == (kld.max(), kld.min())
    assert list(q.kld_percentiles) == ["max", "99.9", "99", "95", "90", "median", "10", "5", "1", "0.1", "min"]
    assert q.dp.value == pytest.approx(dp.mean())
    assert q.rms_dp.value == pytest.approx(math.sqrt((dp ** 2).mean()))
    assert q.rms_dp.se == pytest.approx((dp ** 2).std() / math.sqrt(1000) / (2 * q.rms_dp.value))
    share = rows["same_top"].mean()
    assert q.same_top == Estimate(pytest.approx(share), pytest.approx(math.sqrt(share * (1 - share) / 1000)))
    assert list(q.kld_by_position) == ["0-2k"]


def test_kld_by_position_bucket_shows_where_long_contexts_hurt():
    rows = np.concatenate([positions(300, seed=1, start=1000), positions(300, seed=2, start=4000),
                           positions(300, seed=3, start=9000)])
    rows["kld"][600:] *= 10  # the far end of a long window diverges most
    q = KldStatistics.of(rows)
    assert list(q.kld_by_position) == ["0-2k", "2k-8k", "8k+"]
    assert q.kld_by_position["8k+"].value == pytest.approx(rows["kld"][600:].mean())
    assert q.kld_by_position["8k+"].value > 5 * q.kld_by_position["0-2k"].value


def test_every_quality_metric_has_a_value_and_a_round_trip():
    q = KldStatistics.of(positions(500))
    for metric in QUALITY_METRICS:
        assert isinstance(q.estimate(metric), Estimate), metric
    assert q.estimate("kld_p99").value == q.kld_percentiles["99"] and q.estimate("kld_p99").se is None
    assert q.estimate("nonsense") is None
    import dataclasses

    assert KldStatistics.from_dict(dataclasses.asdict(q)) == q


def test_errors_overlap_when_the_difference_is_within_them():
    assert Estimate(0.010, 0.001).overlaps(Estimate(0.0115, 0.001))
    assert not Estimate(0.010, 0.001).overlaps(Estimate(0.013, 0.001))
    with pytest.raises(ValueError, match="at least 2 scored positions"):
        KldStatistics.of(positions(1))
