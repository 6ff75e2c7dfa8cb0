"""Past quant-lab results, one JSON file each under data_dir()/lab/results, so runs on this machine can
be compared later (and a file can be copied to another machine and opened there)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from app import paths
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.lab.export import from_json, to_json
from app.lab.results import BenchResult

_ID = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")


class ResultNotFound(QuantDeskError):
    """No saved bench result has that id."""


@dataclass(frozen=True)
class SavedResult:
    """One line of the history: enough to list it without reading every figure."""

    id: str
    created_at: str
    reference: str
    variants: tuple[str, ...]
    path: Path


class ResultStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.data_dir() / "lab" / "results"

    def _path(self, result_id: str) -> Path:
        if not _ID.match(result_id):
            raise ResultNotFound(f"{result_id!r} is not a bench result id", "list them with: quantdesk bench --history")
        return self.root / f"{result_id}.json"

    def save(self, result: BenchResult) -> Path:
        """Write atomically: a crash mid-write leaves the previous state, never half a file."""
        return write_text_atomic(self._path(result.id), to_json(result))

    def load(self, result_id: str) -> BenchResult:
        path = self._path(result_id)
        try:
            return from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ResultNotFound(f"no saved bench result {result_id}",
                                 "list them with: quantdesk bench --history") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise QuantDeskError(f"the saved bench result {path} cannot be read: {exc}") from None

    def history(self) -> list[SavedResult]:
        """Every saved result, newest first; unreadable files are skipped (a later version may read them)."""
        found = []
        for path in self.root.glob("*.json") if self.root.is_dir() else ():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                found.append(SavedResult(data["id"], data["created_at"], data["reference"],
                                         tuple(v["label"] for v in data["variants"]), path))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(found, key=lambda r: (r.created_at, r.id), reverse=True)

    def delete(self, result_id: str) -> None:
        path = self._path(result_id)
        if not path.exists():
            raise ResultNotFound(f"no saved bench result {result_id}")
        path.unlink()
