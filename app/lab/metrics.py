"""The quant lab's arithmetic: spreads of repeated speed measurements, and llama-perplexity's quality statistics
from the per-position figures the engine host wrote (backends.scoring.POSITIONS). Pure numpy; no engine here.

The statistics are the ones ``llama-perplexity --kl-divergence`` prints (llama.cpp tools/perplexity/perplexity.cpp,
``kl_divergence``), with its definitions, so the lab's figures can be set beside published tables:
- a mean with its standard error is ``mean ± sqrt((mean(x²) - mean(x)²) / (n - 1))`` (``mean_and_uncertainty``;
  no error below 11 positions, where llama-perplexity prints 0);
- PPL(Q) = exp(mean NLL) ± PPL · SE(NLL), the same for PPL(base); their covariance
  ``(mean(ab) - mean(a)·mean(b)) / (n - 1)`` (none below 10 positions) gives the correlation, the error of
  ln(PPL(Q)/PPL(base)) = sqrt(SE_q² + SE_base² - 2 cov), of the ratio (ratio · that) and of PPL(Q) - PPL(base);
- KLD is KL(base || Q) per position in nats, over its mean, percentiles (linear between neighbours), minimum and
  maximum; Δp = p_Q(token) - p_base(token), RMS Δp = sqrt(mean(Δp²)) ± SE(Δp²) / (2 RMS); "same top p" is the share
  of positions where both put the same token on top, ± sqrt(p(1 - p) / (n - 1)).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where the arithmetic runs: the GUI starts without it
    import numpy as np


@dataclass(frozen=True)
class Spread:
    """The median of repeated measurements with their range: one run's noise shows as a wide range."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


@dataclass(frozen=True)
class Estimate:
    """A figure with its standard error (None where too few positions give none)."""

    value: float
    se: float | None = None

    def overlaps(self, other: Estimate) -> bool:
        """Whether the two ± one-error intervals touch: the difference is not significant then."""
        a, b = self.se or 0.0, other.se or 0.0
        return abs(self.value - other.value) <= a + b


def perplexity(token_logprobs: Sequence[float]) -> float:
    """exp of the mean negative log-likelihood per token (natural log)."""
    if not token_logprobs:
        raise ValueError("perplexity needs at least one scored token")
    return math.exp(-sum(token_logprobs) / len(token_logprobs))


def mean_and_uncertainty(values: np.ndarray) -> Estimate:
    """llama-perplexity's mean_and_uncertainty: the mean and its standard error."""
    import numpy as np

    n = len(values)
    mean = float(np.mean(values))
    variance = float(np.mean(np.square(values))) - mean * mean
    return Estimate(mean, math.sqrt(variance / (n - 1)) if variance > 0 and n > 10 else None)


def _covariance(a: np.ndarray, b: np.ndarray) -> float | None:
    import numpy as np

    n = len(a)
    if n < 10:
        return None
    return (float(np.mean(a * b)) - float(np.mean(a)) * float(np.mean(b))) / (n - 1)


def percentile(sorted_values: np.ndarray, fraction: float) -> float:
    """llama-perplexity's percentile: linear between the two nearest of the sorted values."""
    if fraction <= 0:
        return float(sorted_values[0])
    if fraction >= 1:
        return float(sorted_values[-1])
    p = fraction * (len(sorted_values) - 1)
    i = int(p)
    p -= i
    return float((1 - p) * sorted_values[i] + p * sorted_values[min(i + 1, len(sorted_values) - 1)])


# The percentiles llama-perplexity prints, by name (the median is the middle value, or the mean of the middle two).
KLD_PERCENTILES = ("max", "99.9", "99", "95", "90", "median", "10", "5", "1", "0.1", "min")
DP_PERCENTILES = ("max", "99.9", "99", "95", "90", "75", "median", "25", "10", "5", "1", "0.1", "min")
# Where a scored token sits in its window: long-context damage shows in the later buckets.
POSITION_BUCKETS = (("0-2k", 0, 2048), ("2k-8k", 2048, 8192), ("8k+", 8192, None))


def _percentiles(values: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    import numpy as np

    ordered = np.sort(values)
    n = len(ordered)
    out = {}
    for name in names:
        if name == "median":
            out[name] = float(ordered[n // 2] if n % 2 else (ordered[n // 2] + ordered[n // 2 - 1]) / 2)
        else:
            out[name] = percentile(ordered, 1.0 if name == "max" else 0.0 if name == "min" else float(name) / 100)
    return out


@dataclass(frozen=True)
class KldStatistics:
    """llama-perplexity's statistics of one variant against the reference, over ``positions`` scored tokens."""

    positions: int
    ppl: Estimate  # PPL(Q)
    ppl_base: Estimate  # PPL(base)
    ppl_correlation: float | None  # Cor(ln PPL(Q), ln PPL(base))
    ln_ppl_ratio: Estimate
    ppl_ratio: Estimate
    ppl_diff: Estimate  # PPL(Q) - PPL(base)
    kld: Estimate  # mean KLD
    kld_percentiles: dict[str, float]
    dp: Estimate  # mean Δp (a probability, not a percentage)
    dp_percentiles: dict[str, float]
    rms_dp: Estimate
    same_top: Estimate  # a share, not a percentage
    kld_by_position: dict[str, Estimate]  # mean KLD of the tokens in each POSITION_BUCKETS bucket that has any

    @classmethod
    def of(cls, rows: np.ndarray) -> KldStatistics:
        """From the per-position figures (backends.scoring.POSITIONS)."""
        import numpy as np

        n = len(rows)
        if n < 2:
            raise ValueError(f"statistics need at least 2 scored positions, not {n}")
        nll, nll_base = rows["nll"], rows["nll_base"]
        log_ppl, log_ppl_base = mean_and_uncertainty(nll), mean_and_uncertainty(nll_base)
        ppl, ppl_base = math.exp(log_ppl.value), math.exp(log_ppl_base.value)
        cov = _covariance(nll, nll_base)
        se_q, se_base = log_ppl.se, log_ppl_base.se
        correlation = cov / (se_q * se_base) if cov is not None and se_q and se_base else None
        ratio_se = None
        if se_q is not None and se_base is not None:
            ratio_se = math.sqrt(max(se_q ** 2 + se_base ** 2 - 2 * (cov or 0.0), 0.0))
        ln_ratio = log_ppl.value - log_ppl_base.value
        diff_se = None
        if se_q is not None and se_base is not None:
            ppl_cov = ppl * ppl_base * (cov or 0.0)
            diff_se = math.sqrt(max((ppl * se_q) ** 2 + (ppl_base * se_base) ** 2 - 2 * ppl_cov, 0.0))
        mse = mean_and_uncertainty(np.square(rows["p_diff"]))
        rms = math.sqrt(mse.value)
        same = float(np.mean(rows["same_top"]))
        buckets = {}
        for name, low, high in POSITION_BUCKETS:
            inside = rows["kld"][(rows["position"] >= low) & (rows["position"] < (high or 2 ** 31))]
            if len(inside) >= 2:
                buckets[name] = mean_and_uncertainty(inside)
        return cls(
            positions=n,
            ppl=Estimate(ppl, ppl * se_q if se_q is not None else None),
            ppl_base=Estimate(ppl_base, ppl_base * se_base if se_base is not None else None),
            ppl_correlation=correlation,
            ln_ppl_ratio=Estimate(ln_ratio, ratio_se),
            ppl_ratio=Estimate(math.exp(ln_ratio), math.exp(ln_ratio) * ratio_se if ratio_se is not None else None),
            ppl_diff=Estimate(ppl - ppl_base, diff_se),
            kld=mean_and_uncertainty(rows["kld"]),
            kld_percentiles=_percentiles(rows["kld"], KLD_PERCENTILES),
            dp=mean_and_uncertainty(rows["p_diff"]),
            dp_percentiles=_percentiles(rows["p_diff"], DP_PERCENTILES),
            rms_dp=Estimate(rms, 0.5 / rms * mse.se if rms > 0 and mse.se is not None else None),
            same_top=Estimate(same, math.sqrt(same * (1 - same) / (n - 1))),
            kld_by_position=buckets,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KldStatistics:
        values = dict(data)
        for name in ("ppl", "ppl_base", "ln_ppl_ratio", "ppl_ratio", "ppl_diff", "kld", "dp", "rms_dp", "same_top"):
            values[name] = Estimate(**values[name])
        values["kld_by_position"] = {k: Estimate(**v) for k, v in values.get("kld_by_position", {}).items()}
        return cls(**values)

    def estimate(self, metric: str) -> Estimate | None:
        """A quality metric by its name in results.QUALITY_METRICS (``kld_p99``, ``kld_median``, ``kld_max``: the
        percentiles, which have no error), or None for a name it does not know."""
        if metric in _FIELDS:
            named: Estimate = getattr(self, _FIELDS[metric])  # _FIELDS names Estimate fields only
            return named
        key = metric.removeprefix("kld_").removeprefix("p") if metric.startswith("kld_") else ""
        return Estimate(self.kld_percentiles[key]) if key in self.kld_percentiles else None


_FIELDS = {"perplexity": "ppl", "ppl_base": "ppl_base", "ln_ppl_ratio": "ln_ppl_ratio", "ppl_ratio": "ppl_ratio",
           "kld_mean": "kld", "dp_mean": "dp", "rms_dp": "rms_dp", "same_top_p": "same_top"}
