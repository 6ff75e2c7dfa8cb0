"""The quant card of a bench measured for real: Markdown for a model repo, JSON for tools, with what the figures were
measured on."""

from __future__ import annotations

import json

import pytest

from app.lab.card import write_card
from app.lab.results import BenchSettings
from app.lab.runner import run_bench


@pytest.fixture(scope="module")
def measured(tiny_models, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        return run_bench([tiny_models.gguf_f16, tiny_models.gguf_q8_0, tiny_models.gguf_q4_k_m],
                         BenchSettings(ctx=64, chunks=6, speed=False, threads=2))


def test_the_card_says_what_was_measured_on_what(measured, tmp_path):
    markdown, data = write_card(measured, tmp_path / "card")
    assert (markdown.name, data.name) == ("card.md", "card.json")
    text = markdown.read_text(encoding="utf-8")
    assert text.startswith("# Quant card: tiny-llama-F16 and its quants")
    assert f"(result {measured.id})" in text and measured.hardware["cpu"]["model"] in text
    assert f"llama-cpp-python {measured.engines['llama-cpp-python']}" in text
    assert "pride-and-prejudice-1-3.txt" in text and measured.corpus["sha256"][:16] in text
    assert "6 windows of 64 tokens" in text and "186 positions" in text
    q4 = measured.variant("tiny-llama-Q4_K_M").quality
    assert "| tiny-llama-Q4_K_M | Q4_K_M |" in text and f"{q4.kld.value:.6f} ± {q4.kld.se:.6f}" in text
    assert "Ranked by mean KLD" in text and "1. tiny-llama-Q8_0: mean KLD" in text
    assert text.count("<details>") == 2 and "Mean PPL(Q)/PPL(base)" in text  # every statistic, folded


def test_the_json_card_carries_every_statistic(measured, tmp_path):
    _, data = write_card(measured, tmp_path / "card.md")
    card = json.loads(data.read_text(encoding="utf-8"))
    assert card["quant_card"] == 1 and card["result_id"] == measured.id
    assert card["machine"]["cores"] == measured.hardware["cpu"]["physical_cores"]
    q4 = next(v for v in card["variants"] if v["quant"] == "Q4_K_M")
    quality = measured.variant("tiny-llama-Q4_K_M").quality
    assert q4["statistics"]["kld_mean"] == quality.kld.value and q4["statistics"]["kld_99.9"] is not None
    assert q4["statistics"]["same_top_p_se"] == quality.same_top.se
    assert [r["label"] for r in card["ranking"]] == ["tiny-llama-Q8_0", "tiny-llama-Q4_K_M"]
    assert card["reference"]["label"] == "tiny-llama-F16" and card["reference"]["n_vocab"] == 1024
