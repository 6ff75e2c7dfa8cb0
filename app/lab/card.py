"""A quant card: one bench's quality figures in Markdown (for a model repo's README or a bug report) and JSON (for
tools), with what they were measured on — the machine, the engines, the text, the windows and the reference — so a
reader can judge them and measure again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.files import write_text_atomic
from app.lab import report
from app.lab.export import quality_row
from app.lab.results import BenchResult, VariantResult

GB = 1e9


def _machine(result: BenchResult) -> dict[str, Any]:
    hardware = result.hardware
    cpu = hardware.get("cpu", {})
    return {"os": hardware.get("os"), "arch": hardware.get("arch"), "cpu": cpu.get("model"),
            "cores": cpu.get("physical_cores"), "ram_bytes": hardware.get("ram_total_bytes"),
            "gpus": [g.get("name") for g in hardware.get("gpus", [])]}


def _method(result: BenchResult) -> str:
    info, s = result.reference_file, result.settings
    windows = f"{info.get('chunks', '?')} windows of {info.get('n_ctx', s.ctx)} tokens"
    return (f"as llama.cpp's llama-perplexity --kl-divergence measures it: {windows} of the text, each from an empty "
            f"cache, the second half scored ({info.get('positions', '?')} positions); KL(reference || variant) in "
            "nats per token over the reference's token ids; ± one standard error")


def card_json(result: BenchResult) -> dict[str, Any]:
    variants = []
    for v in result.variants:
        variants.append({"label": v.label, "quant": v.quant, "format": v.format, "backend": v.backend,
                         "bits_per_weight": v.bits_per_weight, "size_bytes": v.size_bytes,
                         "reference": v.is_reference, "error": v.error or None,
                         "unavailable": v.unavailable or None, "statistics": quality_row(v.quality),
                         "decode_tps": v.figure("decode_tps"), "peak_memory_bytes": v.figure("peak_memory_bytes")})
    return {"quant_card": 1, "result_id": result.id, "created_at": result.created_at,
            "quantdesk": result.quantdesk_version, "engines": result.engines, "machine": _machine(result),
            "corpus": result.corpus, "method": _method(result), "settings": {"ctx": result.settings.ctx,
                                                                             "chunks": result.settings.chunks,
                                                                             "threads": result.settings.threads},
            "reference": {"label": result.reference, **{k: result.reference_file.get(k) for k in (
                "producer", "n_vocab", "tail", "mean_tokens", "mean_left_out", "capped_share")}},
            "variants": variants,
            "ranking": [{"label": r.label, "kld_mean": r.kld.value, "kld_mean_se": r.kld.se,
                         "not_significantly_different_from_previous": r.tied_with_previous}
                        for r in report.ranking(result)]}


def _cell(v: VariantResult, metric: str, digits: int, scale: float = 1.0, unit: str = "") -> str:
    estimate = v.estimate(metric)
    if estimate is None:
        return "n/a"
    text = f"{estimate.value * scale:.{digits}f}"
    return text + unit if not estimate.se else f"{text} ± {estimate.se * scale:.{digits}f}{unit}"


def card_markdown(result: BenchResult) -> str:
    machine = _machine(result)
    engines = ", ".join(f"{name} {version}" for name, version in result.engines.items()) or "n/a"
    corpus = result.corpus
    lines = [f"# Quant card: {result.reference} and its quants", "",
             f"Measured with QuantDesk {result.quantdesk_version} on {result.created_at[:10]} (result {result.id}).",
             "",
             f"- **Machine**: {machine['cpu']} ({machine['cores']} cores), "
             f"{(machine['ram_bytes'] or 0) / 2**30:.0f} GiB RAM, {machine['os']} {machine['arch']}"
             + (f", GPUs: {', '.join(str(g) for g in machine['gpus'])}" if machine["gpus"] else ""),
             f"- **Engines**: {engines}",
             f"- **Text**: {corpus.get('name')} ({corpus.get('source')}; {corpus.get('chars')} characters, sha256 "
             f"{str(corpus.get('sha256', ''))[:16]}…)",
             f"- **Method**: {_method(result)}",
             f"- **Reference**: {result.reference}; its file keeps {result.reference_file.get('mean_tokens', 0):.0f} "
             f"tokens per position on average ({100 * result.reference_file.get('mean_left_out', 0):.3f} % of the "
             "probability left out)", "",
             "| variant | quant | size | bpw | mean KLD | KLD 99% | same top p | PPL(Q)/PPL(base) | gen tok/s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for v in result.variants:
        if v.error:
            lines.append(f"| {v.label} | {v.quant} | {v.size_bytes / GB:.2f} GB | | not measured: {v.error} "
                         "| | | | |")
            continue
        speed = v.figure("decode_tps")
        lines.append(f"| {v.label}{' (reference)' if v.is_reference else ''} | {v.quant} | {v.size_bytes / GB:.2f} GB"
                     f" | {v.bits_per_weight or ''} | {_cell(v, 'kld_mean', 6)} | {_cell(v, 'kld_p99', 5)} | "
                     f"{_cell(v, 'same_top_p', 2, 100, ' %')} | {_cell(v, 'ppl_ratio', 4)} | "
                     f"{'n/a' if speed is None else f'{speed:.1f}'} |")
    if len(report.ranking(result)) > 1:
        lines += ["", "Ranked by mean KLD (lower is closer to the reference):", "", report.ranking_text(result)]
    for v in result.variants:
        if v.quality is not None and not v.is_reference:
            lines += ["", f"<details><summary>{v.label}: every statistic</summary>", "", "```",
                      report.statistics_text(v.quality), "```", "", "</details>"]
    notes = [f"{v.label}: {why}" for v in result.variants for why in dict.fromkeys(v.unavailable.values())]
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def write_card(result: BenchResult, path: str | Path) -> tuple[Path, Path]:
    """``path`` as Markdown and the same name with .json beside it; both written atomically."""
    markdown = Path(path).expanduser()
    if markdown.suffix.lower() != ".md":
        markdown = markdown.with_name(markdown.name + ".md")
    data = markdown.with_suffix(".json")
    write_text_atomic(markdown, card_markdown(result))
    write_text_atomic(data, json.dumps(card_json(result), indent=2, ensure_ascii=False) + "\n")
    return markdown, data
