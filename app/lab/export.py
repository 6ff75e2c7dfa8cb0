"""Quant-lab results as JSON (everything, round-trips to a BenchResult) and CSV (one row per variant,
for spreadsheets; ``read_csv`` gives the rows back typed). PNG charts are the GUI page's export."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from app.lab.results import QUALITY_METRICS, SPEED_METRICS, BenchResult

_IDENTITY_COLUMNS = ("result_id", "created_at", "variant", "reference", "backend", "format", "quant",
                     "bits_per_weight", "size_bytes", "path")
_COUNT_COLUMNS = ("reps", "prompt_tokens", "generated_tokens", "ppl_tokens", "kl_positions")
_TEXT_COLUMNS = ("unavailable", "notes", "error")


def csv_columns() -> list[str]:
    speed = [f"{m}_{part}" for m in SPEED_METRICS for part in ("median", "low", "high")]
    return [*_IDENTITY_COLUMNS, *speed, *QUALITY_METRICS, *_COUNT_COLUMNS, *_TEXT_COLUMNS]


def csv_rows(result: BenchResult) -> list[dict[str, Any]]:
    """One flat row per variant; a missing figure is None, and ``unavailable`` says why."""
    rows = []
    for v in result.variants:
        row: dict[str, Any] = {
            "result_id": result.id, "created_at": result.created_at, "variant": v.label,
            "reference": v.is_reference, "backend": v.backend, "format": v.format, "quant": v.quant,
            "bits_per_weight": v.bits_per_weight, "size_bytes": v.size_bytes, "path": v.path,
        }
        for metric in SPEED_METRICS:
            spread = v.speed.get(metric)
            for part in ("median", "low", "high"):
                row[f"{metric}_{part}"] = getattr(spread, part) if spread else None
        for metric in QUALITY_METRICS:
            row[metric] = getattr(v, metric)
        row.update(reps=len(v.runs),
                   prompt_tokens=max((r.prompt_tokens for r in v.runs), default=None),
                   generated_tokens=max((r.generated_tokens for r in v.runs), default=None),
                   ppl_tokens=v.ppl_tokens or None, kl_positions=v.kl_positions or None,
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
    if column in (*_TEXT_COLUMNS, "result_id", "created_at", "variant", "backend", "format", "quant", "path"):
        return text
    if text == "":
        return None
    if column == "reference":
        return text == "True"
    if column in (*_COUNT_COLUMNS, "size_bytes"):
        return int(text)
    return float(text)


def read_csv(text: str) -> list[dict[str, Any]]:
    """The rows of ``to_csv`` with their types back (numbers, booleans, None for an empty figure)."""
    return [{k: _typed(k, v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]


def to_json(result: BenchResult) -> str:
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False)


def from_json(text: str) -> BenchResult:
    return BenchResult.from_dict(json.loads(text))
