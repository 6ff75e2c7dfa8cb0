"""What the lab has measured on this machine, for the recommender's reasons: "KLD 0.012 ± 0.001 measured here, 1.4× the
generation speed of Q8_0". Read from the saved bench results (app/lab/store), newest first; Qt-free."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import QuantDeskError
from app.lab.results import BenchResult, VariantResult
from app.lab.store import ResultStore


@dataclass(frozen=True)
class Measured:
    result_id: str
    created_at: str
    variant: VariantResult
    reference: VariantResult

    def sentence(self) -> str:
        q = self.variant.quality
        assert q is not None
        kld = f"{q.kld.value:.3g}" + (f" ± {q.kld.se:.1g}" if q.kld.se else "")
        words = f"KLD {kld} from {self.reference.quant} measured here ({self.created_at[:10]})"
        mine, theirs = self.variant.figure("decode_tps"), self.reference.figure("decode_tps")
        if mine and theirs:
            words += f", {mine / theirs:.1f}× the generation speed of {self.reference.quant}"
        return words


def _file_name(label_or_path: str) -> str:
    return Path(label_or_path.split(":")[-1]).name.lower()


def latest(label_or_path: str, store: ResultStore | None = None) -> Measured | None:
    """The newest saved measurement of the model file named like ``label_or_path`` (a path, a file name, or a Hub
    candidate's label), against a reference: None when the lab has not measured it here."""
    wanted = _file_name(label_or_path)
    store = store or ResultStore()
    for saved in store.history():
        try:
            result: BenchResult = store.load(saved.id)
        except QuantDeskError:  # a damaged or foreign result file only means: not measured
            continue
        for v in result.variants:
            if v.quality is not None and not v.is_reference and not v.kv_cache_type \
                    and _file_name(v.path) == wanted:
                return Measured(result.id, result.created_at, v, result.variants[0])
    return None
