"""The quant lab's arithmetic: spreads of repeated measurements, perplexity, KL divergence and top-1
agreement of next-token distributions. Pure numpy on what the engine host wrote; no engine here.

KL is KL(reference || variant) = sum_v p_ref(v) * (log p_ref(v) - log p_variant(v)) per position, as
llama-perplexity's --kl-divergence computes it: how much the variant's predictions lose against the
reference's, in nats. Top-1 agreement is the share of positions where both pick the same most likely token.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import QuantDeskError


class VocabularyMismatch(QuantDeskError):
    """Two variants do not share a vocabulary, so their distributions cannot be compared token by token."""


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


def perplexity(token_logprobs: Sequence[float]) -> float:
    """exp of the mean negative log-likelihood per token (natural log)."""
    if not token_logprobs:
        raise ValueError("perplexity needs at least one scored token")
    return math.exp(-sum(token_logprobs) / len(token_logprobs))


def shared_vocabulary_size(reference: Sequence[str], variant: Sequence[str], *, reference_name: str = "reference",
                           variant_name: str = "variant") -> int:
    """How many leading token ids mean the same text in both vocabularies.

    Variants of one model share the vocabulary; one may list extra ids at the end (padding rows a GGUF
    conversion adds up to the embedding size), and those are left out of the comparison. Any other
    difference means the token ids do not mean the same thing: refuse.
    """
    shared = min(len(reference), len(variant))
    for index in range(shared):
        if reference[index] != variant[index]:
            raise VocabularyMismatch(
                f"{variant_name} does not share {reference_name}'s vocabulary (token {index} is "
                f"{variant[index]!r}, not {reference[index]!r})",
                "KL divergence and top-1 agreement compare variants of one model")
    if shared == 0:
        raise VocabularyMismatch(f"{variant_name} or {reference_name} reports an empty vocabulary")
    return shared


def _renormalized(logprobs, width: int):
    """Log-distributions restricted to the first ``width`` ids and renormalised over them."""
    import numpy as np

    rows = np.asarray(logprobs, dtype=np.float64)[:, :width]
    top = rows.max(axis=1, keepdims=True)
    return rows - (top + np.log(np.exp(rows - top).sum(axis=1, keepdims=True)))


def kl_and_top1(reference_logprobs, variant_logprobs, width: int) -> tuple[list[float], list[bool]]:
    """Per position: KL(reference || variant) in nats, and whether the top tokens agree.

    Both arguments are [positions, vocab] log-probabilities of the same token sequence; only the first
    ``width`` ids (the shared vocabulary) take part.
    """
    import numpy as np

    ref = _renormalized(reference_logprobs, width)
    var = _renormalized(variant_logprobs, width)
    if ref.shape != var.shape:
        raise ValueError(f"the distributions cover {ref.shape[0]} and {var.shape[0]} positions")
    kl = (np.exp(ref) * (ref - var)).sum(axis=1)
    kl = np.maximum(kl, 0.0)  # rounding can leave -1e-17 where the two are identical
    agree = ref.argmax(axis=1) == var.argmax(axis=1)
    return [float(x) for x in kl], [bool(x) for x in agree]


@dataclass(frozen=True)
class DivergenceSummary:
    kl_mean: float
    kl_median: float
    kl_p99: float
    kl_max: float
    top1_agreement: float
    positions: int

    @classmethod
    def of(cls, kl: Sequence[float], agree: Sequence[bool]) -> DivergenceSummary:
        import numpy as np

        if not kl:
            raise ValueError("no positions were compared")
        values = np.asarray(kl, dtype=np.float64)
        return cls(kl_mean=float(values.mean()), kl_median=float(np.median(values)),
                   kl_p99=float(np.percentile(values, 99)), kl_max=float(values.max()),
                   top1_agreement=sum(agree) / len(agree), positions=len(kl))
