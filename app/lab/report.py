"""llama-perplexity's statistics as it prints them (the labels and decimals of tools/perplexity/perplexity.cpp's
``kl_divergence``), for the CLI's report, the Lab page's statistics table and the quant card: a reader can set the
lab's figures beside the tool's line by line. The labels stay the tool's, untranslated: they name its figures."""

from __future__ import annotations

from dataclasses import dataclass

from app.lab.metrics import DP_PERCENTILES, KLD_PERCENTILES, Estimate, KldStatistics
from app.lab.results import BenchResult

SECTIONS = ("Perplexity statistics", "KL divergence statistics", "Token probability statistics")
_NAMES = {"max": "Maximum", "median": "Median", "min": "Minimum"}


def _pm(estimate: Estimate, digits: int, scale: float = 1.0, unit: str = "") -> str:
    value = f"{estimate.value * scale:.{digits}f}"
    error = "n/a" if estimate.se is None else f"{estimate.se * scale:.{digits}f}"
    return f"{value} ± {error}{unit}"


def _percentile_label(name: str, what: str) -> str:
    return f"{_NAMES[name]} {what}" if name in _NAMES else f"{float(name):.1f}% {what}"


def statistics(q: KldStatistics) -> list[tuple[str, str, str]]:
    """(section, label, text) for every statistic, in llama-perplexity's order."""
    correlation = "n/a" if q.ppl_correlation is None else f"{100 * q.ppl_correlation:.2f}%"
    perplexity = [("Mean PPL(Q)", _pm(q.ppl, 6)), ("Mean PPL(base)", _pm(q.ppl_base, 6)),
                  ("Cor(ln(PPL(Q)), ln(PPL(base)))", correlation),
                  ("Mean ln(PPL(Q)/PPL(base))", _pm(q.ln_ppl_ratio, 6)),
                  ("Mean PPL(Q)/PPL(base)", _pm(q.ppl_ratio, 6)), ("Mean PPL(Q)-PPL(base)", _pm(q.ppl_diff, 6))]
    kld = [("Mean KLD", _pm(q.kld, 6))]
    kld += [(_percentile_label(name, "KLD"), f"{q.kld_percentiles[name]:.6f}") for name in KLD_PERCENTILES]
    tokens = [("Mean Δp", _pm(q.dp, 3, 100, " %"))]
    tokens += [(_percentile_label(name, "Δp"), f"{100 * q.dp_percentiles[name]:.3f}%") for name in DP_PERCENTILES]
    tokens += [("RMS Δp", _pm(q.rms_dp, 3, 100, " %")), ("Same top p", _pm(q.same_top, 3, 100, " %"))]
    if len(q.kld_by_position) > 1:
        kld += [(f"Mean KLD, positions {bucket}", _pm(estimate, 6)) for bucket, estimate in q.kld_by_position.items()]
    return [(section, label, text) for section, rows in zip(SECTIONS, (perplexity, kld, tokens), strict=True)
            for label, text in rows]


def statistics_text(q: KldStatistics) -> str:
    """The statistics in llama-perplexity's layout: a heading per section, then "label: value" lines."""
    lines: list[str] = []
    section = ""
    for heading, label, text in statistics(q):
        if heading != section:
            lines += ([""] if lines else []) + [f"====== {heading} ======"]
            section = heading
        lines.append(f"{label:<30}: {text}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Ranked:
    label: str
    kld: Estimate
    size_bytes: int
    tied_with_previous: bool  # its ± one-error interval overlaps the one ranked above: not told apart by this text

    @property
    def kld_gb(self) -> Estimate:
        """Mean KLD times the file's size in GB, ± the same share: the loss and the bytes paid for it in one figure
        (lower is better; of two files with one KLD, the smaller scores lower)."""
        gb = self.size_bytes / 1e9
        return Estimate(self.kld.value * gb, None if self.kld.se is None else self.kld.se * gb)


def ranking(result: BenchResult) -> list[Ranked]:
    """The compared variants from the lowest mean KLD up (the file's size beside: of one quant name, the smaller
    file with the same KLD is the better buy)."""
    compared = sorted(((v.quality.kld, v.size_bytes, v.label) for v in result.variants
                       if v.quality is not None and not v.is_reference), key=lambda c: (c[0].value, c[1]))
    ranked: list[Ranked] = []
    for kld, size, label in compared:
        ranked.append(Ranked(label, kld, size, bool(ranked) and ranked[-1].kld.overlaps(kld)))
    return ranked


def ranking_text(result: BenchResult) -> str:
    """The ranking in words, one line per variant: "2. B: mean KLD 0.0091 ± 0.0003, 4.68 GB, 0.0426 ± 0.0014 KLD×GB
    — not significantly different from A"."""
    lines = []
    ranked = ranking(result)
    for i, r in enumerate(ranked):
        line = f"{i + 1}. {r.label}: mean KLD {_pm(r.kld, 6)}, {r.size_bytes / 1e9:.2f} GB"
        if r.size_bytes:
            line += f", {_pm(r.kld_gb, 6)} KLD×GB"
        if r.tied_with_previous:
            line += f" — not significantly different from {ranked[i - 1].label} (the ± intervals overlap)"
        lines.append(line)
    return "\n".join(lines)
