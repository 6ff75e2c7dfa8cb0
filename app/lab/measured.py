"""What the lab has measured on this machine, for the recommender's reasons: "KLD 0.012 ± 0.001 measured here, 1.4× the
generation speed of Q8_0". Read from the saved bench results (app/lab/store), newest first; Qt-free. ``quantdesk
recommend`` and the Discover page ask it.

A model is found by what names it: a local path (the file itself, else a file of the same name: the user's own copy),
or a Hub model as the recommender names it ("owner/repo/file.gguf"), which only a file downloaded from that very repo
answers (VariantResult.origin): files of one quant name from two uploaders differ, and one's figures are not the
other's."""

from __future__ import annotations

from collections.abc import Iterable
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


def _answers(v: VariantResult, wanted: str) -> bool:
    """Whether the measured variant ``v`` is the model ``wanted`` names (see the module)."""
    if v.origin and v.origin == wanted:
        return True
    local = Path(wanted).expanduser()
    if not local.exists():  # a Hub model: its own download only
        return False
    return Path(v.path) == local.resolve() or _file_name(v.path) == _file_name(wanted)


def find(labels_or_paths: Iterable[str], store: ResultStore | None = None) -> dict[str, Measured]:
    """For each model named (a path, or a Hub model's label), its newest saved measurement against a reference;
    models the lab has not measured here are left out. Every saved result is read once."""
    wanted = list(dict.fromkeys(labels_or_paths))
    found: dict[str, Measured] = {}
    store = store or ResultStore()
    for saved in store.history():
        if len(found) == len(wanted):
            break
        try:
            result: BenchResult = store.load(saved.id)
        except QuantDeskError:  # a damaged or foreign result file only means: not measured
            continue
        for v in result.variants:
            if v.quality is None or v.is_reference or v.kv_cache_type or v.ctx:  # a sweep's row is no plain load
                continue
            for name in wanted:
                if name not in found and _answers(v, name):
                    found[name] = Measured(result.id, result.created_at, v, result.variants[0])
    return found


def latest(label_or_path: str, store: ResultStore | None = None) -> Measured | None:
    """The newest saved measurement of the model ``label_or_path`` names: None when the lab has not measured it
    here."""
    return find([label_or_path], store).get(label_or_path)
