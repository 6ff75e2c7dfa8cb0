"""Quant-lab results as JSON (everything, round-trips to a BenchResult) and CSV (one row per variant,
for spreadsheets; ``read_csv`` gives the rows back typed). PNG charts are the GUI page's export."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from app.lab.metrics import DP_PERCENTILES, KLD_PERCENTILES, POSITION_BUCKETS, KldStatistics
from app.lab.results import SPEED_METRICS, BenchResult

_IDENTITY_COLUMNS = ("result_id", "created_at", "variant", "reference", "backend", "format", "quant",
                     "kv_cache_type", "ctx", "bits_per_weight", "size_bytes", "path")
# llama-perplexity's statistics, each with its standard error where it has one ("_se").
_ESTIMATES = (("ppl", "ppl"), ("ppl_base", "ppl_base"), ("ln_ppl_ratio", "ln_ppl_ratio"), ("ppl_ratio", "ppl_ratio"),
              ("ppl_diff", "ppl_diff"), ("kld_mean", "kld"), ("dp_mean", "dp"), ("rms_dp", "rms_dp"),
              ("same_top_p", "same_top"))
_COUNT_COLUMNS = ("reps", "prompt_tokens", "generated_tokens", "positions")
_TEXT_COLUMNS = ("unavailable", "notes", "error")


def _quality_columns() -> list[str]:
    columns = ["perplexity", "ppl_correlation", "quality_ms", "quality_loaded_bytes", "quality_peak_bytes"]
    for name, _ in _ESTIMATES:
        columns += [name, f"{name}_se"]
    columns += [f"kld_{p}" for p in KLD_PERCENTILES] + [f"dp_{p}" for p in DP_PERCENTILES]
    for bucket, _, _ in POSITION_BUCKETS:
        columns += [f"kld_mean_{bucket}", f"kld_mean_{bucket}_se"]
    return columns


def quality_row(q: KldStatistics | None) -> dict[str, float | None]:
    """llama-perplexity's statistics as flat columns (None where a figure has no value)."""
    row: dict[str, float | None] = dict.fromkeys(_quality_columns())
    if q is None:
        return row
    row["ppl_correlation"] = q.ppl_correlation
    for name, attribute in _ESTIMATES:
        estimate = getattr(q, attribute)
        row[name], row[f"{name}_se"] = estimate.value, estimate.se
    row.update({f"kld_{p}": v for p, v in q.kld_percentiles.items()})
    row.update({f"dp_{p}": v for p, v in q.dp_percentiles.items()})
    for bucket, estimate in q.kld_by_position.items():
        row[f"kld_mean_{bucket}"], row[f"kld_mean_{bucket}_se"] = estimate.value, estimate.se
    return row


def csv_columns() -> list[str]:
    speed = [f"{m}_{part}" for m in SPEED_METRICS for part in ("median", "low", "high")]
    return [*_IDENTITY_COLUMNS, *speed, *_quality_columns(), *_COUNT_COLUMNS, *_TEXT_COLUMNS]


def csv_rows(result: BenchResult) -> list[dict[str, Any]]:
    """One flat row per variant; a missing figure is None, and ``unavailable`` says why."""
    rows = []
    for v in result.variants:
        row: dict[str, Any] = {
            "result_id": result.id, "created_at": result.created_at, "variant": v.label,
            "reference": v.is_reference, "backend": v.backend, "format": v.format, "quant": v.quant,
            "kv_cache_type": v.kv_cache_type, "ctx": result.window(v),
            "bits_per_weight": v.bits_per_weight, "size_bytes": v.size_bytes, "path": v.path,
        }
        for metric in SPEED_METRICS:
            spread = v.speed.get(metric)
            for part in ("median", "low", "high"):
                row[f"{metric}_{part}"] = getattr(spread, part) if spread else None
        row.update(quality_row(v.quality))
        row.update(perplexity=v.perplexity, quality_ms=v.quality_ms, quality_loaded_bytes=v.quality_loaded_bytes,
                   quality_peak_bytes=v.quality_peak_bytes)
        row.update(reps=len(v.runs),
                   prompt_tokens=max((r.prompt_tokens for r in v.runs), default=None),
                   generated_tokens=max((r.generated_tokens for r in v.runs), default=None),
                   positions=v.quality.positions if v.quality else None,
                   unavailable="; ".join(f"{k}: {why}" for k, why in v.unavailable.items()),
                   notes="; ".join(v.notes), error=v.error)
        rows.append(row)
    return rows


def to_csv(result: BenchResult) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=csv_columns(), lineterminator="\n")
    writer.writeheader()
    for row in csv_rows(result):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def _typed(column: str, text: str) -> Any:
    if column in (*_TEXT_COLUMNS, "result_id", "created_at", "variant", "backend", "format", "quant", "path",
                  "kv_cache_type"):
        return text
    if text == "":
        return None
    if column == "reference":
        return text == "True"
    if column in (*_COUNT_COLUMNS, "ctx", "size_bytes", "quality_loaded_bytes", "quality_peak_bytes"):
        return int(text)
    return float(text)


def read_csv(text: str) -> list[dict[str, Any]]:
    """The rows of ``to_csv`` with their types back (numbers, booleans, None for an empty figure)."""
    return [{k: _typed(k, v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def to_json(result: BenchResult) -> str:
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False)


def from_json(text: str) -> BenchResult:
    return BenchResult.from_dict(json.loads(text))
