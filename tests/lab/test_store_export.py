"""Past results on disk and the CSV/JSON exports, on a result measured for real."""

from __future__ import annotations

import json

import pytest

from app import paths
from app.lab.export import csv_columns, csv_rows, from_json, read_csv, to_csv, to_json
from app.lab.results import BenchResult, BenchSettings
from app.lab.runner import run_bench
from app.lab.store import ResultNotFound, ResultStore


@pytest.fixture(scope="module")
def measured(tiny_models, tmp_path_factory) -> BenchResult:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        return run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m],
                         BenchSettings(prompt_tokens=32, gen_tokens=4, reps=1, ctx=32, chunks=8))


def test_json_round_trips_to_the_same_result(measured):
    text = to_json(measured)
    assert from_json(text) == measured
    data = json.loads(text)
    assert data["variants"][1]["speed"]["decode_tps"]["median"] == measured.variants[1].speed["decode_tps"].median
    assert data["schema"] == 2 and data["hardware"] == measured.hardware
    q4 = data["variants"][1]["quality"]
    assert q4["kld"]["value"] == measured.variants[1].quality.kld.value and q4["kld"]["se"] > 0
    assert set(q4["kld_percentiles"]) == {"max", "99.9", "99", "95", "90", "median", "10", "5", "1", "0.1", "min"}
    assert data["reference_file"]["positions"] == 8 * 15 and data["corpus"]["sha256"]


def test_a_result_saved_before_the_llama_perplexity_method_keeps_its_speed_and_says_why_quality_is_gone(measured):
    data = json.loads(to_json(measured))
    data["schema"] = 1
    data["settings"] = {**data["settings"], "ppl_tokens": 512}
    del data["settings"]["ctx"]
    for v in data["variants"]:
        v.update(kl_mean=0.01, top1_agreement=0.4, kl_positions=400, ppl_tokens=512, perplexity=900.0)
        del v["quality"]
    old = from_json(json.dumps(data))
    q4 = old.variants[1]
    assert q4.quality is None and q4.perplexity is None and q4.figure("kld_mean") is None
    assert q4.unavailable["kld_mean"].startswith("n/a: measured by an earlier QuantDesk on 8 short prompts")
    assert q4.speed == measured.variants[1].speed and old.settings.ctx == 512


def test_csv_has_one_typed_row_per_variant_and_reads_back(measured):
    text = to_csv(measured)
    assert text.splitlines()[0].split(",") == csv_columns()
    rows = read_csv(text)
    assert rows == csv_rows(measured)
    reference, q4 = rows
    assert reference["variant"] == "tiny-llama-F16" and reference["reference"] is True
    assert reference["kld_mean"] == 0.0 and reference["same_top_p"] == 1.0 and reference["ppl_ratio"] == 1.0
    assert q4["quant"] == "Q4_K_M" and q4["kld_mean"] > 0 and q4["reps"] == 1 and q4["positions"] == 8 * 15
    assert q4["kld_mean_se"] == measured.variants[1].quality.kld.se and q4["kld_99.9"] >= q4["kld_99"]
    assert q4["ppl"] == q4["perplexity"] and q4["ppl_base"] == reference["ppl"]
    assert q4["decode_tps_low"] <= q4["decode_tps_median"] <= q4["decode_tps_high"]


def test_a_missing_figure_is_an_empty_cell_with_its_reason(measured):
    result = from_json(to_json(measured))
    q4 = result.variants[1]
    q4.quality = None
    q4.unavailable["kld_mean"] = "n/a: mlx exposes nothing here"
    (row,) = [r for r in read_csv(to_csv(result)) if r["variant"] == q4.label]
    assert row["kld_mean"] is None and row["unavailable"] == "kld_mean: n/a: mlx exposes nothing here"


def test_the_store_keeps_results_under_the_data_dir_newest_first(measured):
    store = ResultStore()
    assert store.history() == []
    path = store.save(measured)
    assert path.parent == paths.data_dir() / "lab" / "results" and path.name == f"{measured.id}.json"
    older = from_json(to_json(measured))
    older.id, older.created_at = "20200101-000000-abcdef", "2020-01-01T00:00:00+00:00"
    store.save(older)
    (store.root / "garbage.json").write_text("{not json")  # skipped, not fatal
    history = store.history()
    assert [r.id for r in history] == [measured.id, older.id]
    assert history[0].reference == "tiny-llama-F16" and history[0].variants == ("tiny-llama-F16", "tiny-llama-Q4_K_M")
    assert store.load(measured.id) == measured
    store.delete(older.id)
    assert [r.id for r in store.history()] == [measured.id]
    with pytest.raises(ResultNotFound, match="no saved bench result 20200101-000000-abcdef"):
        store.load(older.id)
    with pytest.raises(ResultNotFound, match="is not a bench result id"):
        store.load("../../etc/passwd")
