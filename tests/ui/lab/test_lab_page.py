"""The Quant lab page against the real engine: a bench on two tiny GGUF variants run through the page,
its table, charts and exports, the saved history, and cancel."""

from __future__ import annotations

import csv
import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QMessageBox, QPushButton

from app.lab.results import BenchResult
from app.lab.store import ResultStore
from app.ui.lab.lab_chart import nice_ticks, speed_quality_points
from app.ui.lab.lab_page import HEADERS, LabPage

pytest.importorskip("llama_cpp")


@pytest.fixture
def page(qtbot):
    page = LabPage()
    qtbot.addWidget(page)
    page.resize(1130, 800)
    page.show()
    yield page
    page.shutdown()


def column(name: str) -> int:
    return HEADERS.index(name)


def small_settings(page: LabPage, reps: int = 1) -> None:
    page.prompt_tokens.setValue(32)
    page.gen_tokens.setValue(4)
    page.reps.setValue(reps)
    page.ctx.setValue(32)
    page.chunks.setValue(8)
    page.quality.setChecked(True)


def test_a_bench_through_the_page_fills_the_table_charts_history_and_exports(qtbot, page, tiny_models, tmp_path):
    page.add_paths([tiny_models.gguf_q4_k_m, tiny_models.gguf_f16])
    assert len(page.checked_paths()) == 2
    assert page.reference.currentText() == "Highest precision (automatic)"
    assert page.reference.count() == 3  # automatic, and each ticked variant
    small_settings(page)
    with qtbot.waitSignal(page.bench_finished, timeout=240_000) as finished:
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
        assert not page.run_button.isEnabled() and page.cancel_button.isEnabled()
        qtbot.waitUntil(lambda: page.progress.maximum() > 1, timeout=120_000)
        assert page.progress.maximum() == (2 + 2) * 100  # a speed run and a quality pass per variant, in hundredths
    result: BenchResult = finished.args[0]
    assert page.run_button.isEnabled() and not page.cancel_button.isEnabled()
    assert page.progress.value() == page.progress.maximum()
    assert "Finished and saved" in page.status.text()

    # The table: the reference (F16, the highest precision) first, scoring KL 0 and same top p 100 % against itself.
    assert page.table.rowCount() == 2
    assert page.table.item(0, 0).text() == "F16  (reference)"  # the shared "tiny-llama-" is said once, below
    assert page.table.item(1, 0).text() == "Q4_K_M"
    assert page.notes.text().startswith("Variants of tiny-llama-…")
    assert page.table.item(0, column("Mean KLD")).text() == "0"
    assert page.table.item(0, column("Same top p")).text() == "100.00%"
    q4 = result.variant("tiny-llama-Q4_K_M").quality
    q4_kld = page.table.item(1, column("Mean KLD"))
    assert " ± " in q4_kld.text() and "120 positions" in q4_kld.toolTip()
    value, error = (float(x) for x in q4_kld.text().split(" ± "))
    assert value == pytest.approx(q4.kld.value, rel=0.01) and error == pytest.approx(q4.kld.se, rel=0.05)
    assert " ± " in page.table.item(1, column("Same top p")).text()
    assert " ± " in page.table.item(1, column("PPL ratio")).text()
    for row in range(2):
        for name in ("Load", "Prompt tok/s", "TTFT", "Peak memory", "Perplexity", "KLD 99%", "Backend"):
            item = page.table.item(row, column(name))
            assert item.text() not in ("", "n/a", "failed"), (row, name, item.toolTip())
        assert "min–max" in page.table.item(row, column("Load")).toolTip()
    assert page.table.item(1, column("Quant")).text() == "Q4_K_M"

    # Every statistic llama-perplexity prints, for the compared variant.
    labels = [page.statistics.verticalHeaderItem(r).text() for r in range(page.statistics.rowCount())]
    assert page.statistics.columnCount() == 1 and page.statistics.horizontalHeaderItem(0).text() == "Q4_K_M"
    assert labels[:2] == ["Mean PPL(Q)", "Mean PPL(base)"] and "99.9% KLD" in labels and labels[-1] == "Same top p"
    assert page.statistics.item(labels.index("Mean KLD"), 0).text() == f"{q4.kld.value:.6f} ± {q4.kld.se:.6f}"
    assert "99.9% KLD" in labels and "Maximum Δp" in labels and "Cor(ln(PPL(Q)), ln(PPL(base)))" in labels

    # The charts plot both variants, with error bars; the saved history lists the run.
    axis, points, _missing = speed_quality_points(result)
    assert axis.metric == "kld_mean" and {p.label for p in points} <= {"tiny-llama-F16", "tiny-llama-Q4_K_M"}
    assert [p.y_error for p in points if p.label == "tiny-llama-Q4_K_M"] == [q4.kld.se]
    assert [(r.label, r.error) for r in page.charts.kld.rows] == [("tiny-llama-Q4_K_M", q4.kld.se)]
    assert page.charts.memory.rows and len(page.charts.memory.rows) == 2
    assert page.saved_ids() == [result.id]
    assert ResultStore().load(result.id).variant("tiny-llama-F16").quality.kld.value == 0.0

    # Exports: CSV and JSON through app.lab.export, PNG grabbed from the chart widget.
    csv_path = page.export(tmp_path / "bench.csv", "csv")
    rows = list(csv.DictReader(csv_path.read_text(encoding="utf-8").splitlines()))
    assert [r["variant"] for r in rows] == ["tiny-llama-F16", "tiny-llama-Q4_K_M"]
    assert float(rows[0]["kld_mean"]) == 0.0 and float(rows[0]["same_top_p"]) == 1.0
    assert float(rows[1]["kld_mean_se"]) == q4.kld.se
    data = json.loads(page.export(tmp_path / "bench.json", "json").read_text(encoding="utf-8"))
    assert data["id"] == result.id and len(data["variants"]) == 2
    card = page.export(tmp_path / "card.md", "md")
    assert card.read_text(encoding="utf-8").startswith("# Quant card: tiny-llama-F16")
    assert json.loads(card.with_suffix(".json").read_text(encoding="utf-8"))["result_id"] == result.id
    png = page.export(tmp_path / "charts.png", "png")
    image = QImage(str(png))
    assert image.width() >= 400 and image.height() >= 200


def test_past_results_open_and_delete_with_confirmation(qtbot, page, tiny_models):
    page.add_paths([tiny_models.gguf_f16])
    small_settings(page)
    page.quality.setChecked(False)
    with qtbot.waitSignal(page.bench_finished, timeout=240_000) as finished:
        page.run()
    result = finished.args[0]
    assert page.table.item(0, column("Mean KLD")).text() == "n/a"
    assert "skipped" in page.table.item(0, column("Mean KLD")).toolTip()
    page.show_result(None)
    assert page.table.rowCount() == 0 and not page.export_buttons[0].isEnabled()

    page.history.setCurrentRow(0)
    qtbot.mouseClick(page.open_button, Qt.MouseButton.LeftButton)
    assert page.result is not None and page.result.id == result.id and page.table.rowCount() == 1

    qtbot.mouseClick(page.delete_button, Qt.MouseButton.LeftButton)
    assert page.confirm.isVisible()
    with qtbot.waitSignal(page.history_changed):
        page.confirm.button(QMessageBox.StandardButton.Yes).click()
    assert page.saved_ids() == [] and ResultStore().history() == []
    assert page.result is None and "Deleted" in page.status.text()


def test_cancel_stops_the_bench_and_saves_nothing(qtbot, page, tiny_models):
    page.add_paths([tiny_models.gguf_q4_k_m, tiny_models.gguf_f16])
    small_settings(page, reps=3)
    page.run()
    qtbot.waitUntil(lambda: page.progress.maximum() > 1, timeout=120_000)  # the first step has begun
    with qtbot.waitSignal(page.bench_stopped, timeout=120_000) as stopped:
        qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)
    assert stopped.args == ["cancelled"]
    assert page.status.text() == "Cancelled: nothing was saved."
    assert page.run_button.isEnabled() and not page.running
    assert ResultStore().history() == [] and page.saved_ids() == []


def test_a_sweep_of_caches_and_contexts_on_another_text_runs_from_the_page_and_is_charted(qtbot, page, tiny_models):
    page.add_paths([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m])
    small_settings(page)
    page.chunks.setValue(2)
    page.speed.setChecked(False)
    page.text.setCurrentIndex(page.text.findData("code"))
    page.kv_types["f16"].setChecked(True)
    page.kv_types["q4_0"].setChecked(True)
    page.contexts.setText("32, 2k")  # bad input: a sentence, and nothing is lost
    page.run()
    assert not page.running and page.status.text() == ("Cannot run: context lengths are whole numbers separated by "
                                                       "commas, such as “512, 2048, 8192”, not “32, 2k”.")
    assert page.contexts.text() == "32, 2k" and page.kv_types["q4_0"].isChecked()
    page.contexts.setText("32, 64")
    with qtbot.waitSignal(page.bench_finished, timeout=240_000) as finished:
        page.run()
        assert not page.contexts.isEnabled() and not page.kv_types["f16"].isEnabled()
    result: BenchResult = finished.args[0]
    assert result.settings.kv_types == ("f16", "q4_0") and result.settings.contexts == (32, 64)
    assert result.corpus["name"] == "quantdesk-code.txt"
    assert [page.table.item(row, 0).text() for row in range(page.table.rowCount())] == [
        "F16  (reference)", "Q4_K_M · KV f16 · ctx 32", "Q4_K_M · KV f16 · ctx 64", "Q4_K_M · KV q4_0 · ctx 32",
        "Q4_K_M · KV q4_0 · ctx 64"]
    sweep = page.charts.sweep
    assert not sweep.isHidden() and sweep.sweep.axis == "ctx" and sweep.sweep.ticks == ("32", "64")
    assert [line.name for line in sweep.sweep.lines] == ["tiny-llama-Q4_K_M · KV f16", "tiny-llama-Q4_K_M · KV q4_0"]
    assert [y for _x, y, _e in sweep.sweep.lines[1].points] == [
        result.variant(f"tiny-llama-Q4_K_M · KV q4_0 · ctx {c}").quality.kld.value for c in (32, 64)]
    assert "tiny-llama-Q4_K_M · KV q4_0: 32 " in sweep.accessibleDescription()
    page.show_result(None)
    assert page.charts.sweep.isHidden()


def test_a_window_long_enough_shows_the_kld_by_position_in_it(qtbot, page, tiny_models):
    page.add_paths([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m])
    small_settings(page)
    page.speed.setChecked(False)
    page.ctx.setValue(4000)  # its second half, scored: positions 2000 to 3999, either side of 2k
    page.chunks.setValue(1)
    with qtbot.waitSignal(page.bench_finished, timeout=240_000) as finished:
        page.run()
    q4 = finished.args[0].variant("tiny-llama-Q4_K_M").quality
    assert list(q4.kld_by_position) == ["0-2k", "2k-8k"]
    tip = page.table.item(1, column("Mean KLD")).toolTip()
    assert tip.splitlines()[-1].startswith("by position in the window: 0-2k ") and ", 2k-8k " in tip
    labels = [page.statistics.verticalHeaderItem(r).text() for r in range(page.statistics.rowCount())]
    assert "Mean KLD, positions 0-2k" in labels and "Mean KLD, positions 2k-8k" in labels


def test_running_with_nothing_ticked_says_what_to_do(qtbot, page):
    page.run()
    assert not page.running and "Tick at least one variant" in page.status.text()


def test_nice_ticks_cover_the_range_with_round_steps():
    assert nice_ticks(0, 47) == [0, 10, 20, 30, 40, 50]
    ticks = nice_ticks(0, 0.0031)
    assert ticks[0] == 0 and ticks[-1] >= 0.0031 and len(ticks) <= 6


def test_uploaders_found_on_the_hub_are_fetched_compared_ranked_and_cleaned_up(qtbot, page, tiny_models, hub_env,
                                                                               tmp_path):
    from app.lab import uploaders
    from app.ui.lab.lab_uploaders import UploadersDialog
    from tests.lab.uploaders_hub import BASE, add_uploaders

    made = add_uploaders(hub_env, tiny_models, tmp_path)
    qtbot.mouseClick(next(b for b in page.findChildren(QPushButton) if b.text() == "From uploaders…"),
                     Qt.MouseButton.LeftButton)
    dialog: UploadersDialog = page.uploaders_dialog
    assert dialog.isVisible() and not dialog.add_button.isEnabled()
    dialog.base.setText("not a repo")
    dialog.search()
    assert dialog.status.text() == "Name the base model as owner/name and a quant, such as Q4_K_M."
    dialog.base.setText(BASE)
    with qtbot.waitSignal(dialog._finder.succeeded, timeout=60_000):
        qtbot.mouseClick(dialog.find_button, Qt.MouseButton.LeftButton)
    rows = {dialog.table.item(r, 0).text(): dialog.table.item(r, 3).text() for r in range(dialog.table.rowCount())}
    assert {name.split("/")[0] for name in rows} == {"careful", "pure", "q4-output", "mixup", "spm"}
    assert rows["mixup/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf"].startswith("left out: its architecture is starcoder2")
    assert rows["pure/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf"] == "same model: llama, 1024 tokens"
    assert dialog.status.text() == ("3 files of Q4_K_M can be compared (checked against "
                                    "careful/tiny-llama-GGUF/tiny-llama-F16.gguf).")
    assert "eights/tiny-llama-GGUF has no Q4_K_M (it has: Q8_0)" in dialog.skipped.text()
    assert dialog.use_precise.isVisibleTo(dialog) and dialog.use_precise.isChecked()
    assert [c.repo_id for c in dialog.chosen()] == list(made)  # what can be compared comes ticked; the rest cannot
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert [c.name for c in page.checked_hub()] == ["careful/tiny-llama-GGUF/tiny-llama-F16",
                                                    *(f"{repo}/tiny-llama-Q4_K_M" for repo in made)]
    assert page.reference.currentText() == "careful/tiny-llama-GGUF/tiny-llama-F16" and page.checked_paths() == []

    small_settings(page)
    page.speed.setChecked(False)
    statuses = []
    page._bench.progressed.connect(lambda _ticket, _p: statuses.append(page.status.text()))  # after the page's slot
    with qtbot.waitSignal(page.bench_finished, timeout=240_000) as finished:
        page.run()
    result: BenchResult = finished.args[0]
    assert any(text.startswith("Fetching — fetching pure/tiny-llama-GGUF/tiny-llama-Q4_K_M") for text in statuses)
    assert result.reference == "careful/tiny-llama-GGUF/tiny-llama-F16"
    assert {v.origin for v in result.variants} == {f"{repo}/tiny-llama-Q4_K_M.gguf" for repo in made} | {
        "careful/tiny-llama-GGUF/tiny-llama-F16.gguf"}
    notes = page.notes.text().splitlines()
    ranked = notes.index("Ranked by mean KLD (± one standard error; KLD×GB: the loss times the file's size, lower "
                         "is better):")
    assert notes[ranked + 1].startswith("1. careful/tiny-llama-GGUF/tiny-llama-Q4_K_M: mean KLD ")
    assert [r.label for r in page.charts.kld.rows] == [f"{repo}/tiny-llama-Q4_K_M" for repo in made]
    assert not any(p.is_file() for p in uploaders.cache_root().rglob("*"))  # fetched for the bench, removed after
