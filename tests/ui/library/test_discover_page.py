"""The Discover page against the local Hub stand-in: the starting list, search with filters and paging, every
quant of a model with its fit for a given machine (checked against the recommender run on the local files), the
best pick, Download, and the offline and unreachable-Hub messages."""

from __future__ import annotations

import json
import os
from importlib import resources

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from app.models.metadata import read_model
from app.models.recommend import fit_model
from app.hub.discover import badge, starter_list, starters_for
from app.ui.library.discover_page import PAGE_SIZE, DiscoverPage
from tests.ui.tiny_hub import TINY_REPO, cpu_only, nvidia, tiny_hub_fixture  # noqa: F401 - the tiny_hub fixture


def make_page(qtbot, profile=None) -> DiscoverPage:
    page = DiscoverPage()
    qtbot.addWidget(page)
    if profile is not None:
        page.set_profile(profile)
    return page


def listed(page: DiscoverPage) -> list[str]:
    return [page.results.item(i).data(Qt.ItemDataRole.UserRole) for i in range(page.results.count())]


def open_and_wait(qtbot, page: DiscoverPage, repo_id: str) -> None:
    with qtbot.waitSignal(page.answered, timeout=60_000):
        page.open_model(repo_id)


def test_the_first_screen_is_the_curated_starting_list_and_says_so(qtbot):
    page = make_page(qtbot, cpu_only(16))
    data = json.loads(resources.files("resources").joinpath("catalog", "starter_models.json").read_text())
    assert sorted(listed(page)) == sorted(m["repo_id"] for m in data["models"])
    assert "starting list" in page.list_title.text() and "not a ranking" in page.list_title.text()
    formats = [m.format for m in starter_list().models]
    assert {"gguf", "mlx"} <= set(formats) and all(m.why for m in starter_list().models)
    # Not a Mac: of the models likely to fit, GGUF first and MLX after, then those likely too large; a 120B
    # is marked as likely too large for 3 GiB of RAM.
    order = listed(page)
    fitting = [m for m, likely in starters_for(cpu_only(16), starter_list()) if likely]
    assert max(order.index(m.repo_id) for m in fitting if m.format == "gguf") < min(
        order.index(m.repo_id) for m in fitting if m.format == "mlx")
    assert {m.format for m in fitting} == {"gguf", "mlx"} and order[:len(fitting)] == [m.repo_id for m in fitting]
    small = make_page(qtbot, cpu_only(4))
    texts = {small.results.item(i).data(Qt.ItemDataRole.UserRole): small.results.item(i).text()
             for i in range(small.results.count())}
    assert "likely too large" in texts["ggml-org/gpt-oss-120b-GGUF"]
    assert "likely fits" in texts["LiquidAI/LFM2-2.6B-GGUF"] and "for small machines" in texts["LiquidAI/LFM2-2.6B-GGUF"]
    assert "reads images" in texts["ggml-org/gemma-3-4b-it-GGUF"]
    embedder = texts["Qwen/Qwen3-Embedding-0.6B-GGUF"]  # the documents' embedding model, said to be one
    assert "search your documents by meaning" in embedder and "reads images" not in embedder


def test_search_filters_sorts_and_pages(qtbot, hub_env):
    for i in range(PAGE_SIZE + 5):
        hub_env.add_repo(f"acme/chat-{i:02d}-GGUF", files={"README.md": b"x"}, tags=["gguf"], downloads=100 + i)
    hub_env.add_repo("acme/chat-mlx-4bit", files={"README.md": b"x"}, tags=["mlx"], downloads=1)
    page = make_page(qtbot, cpu_only())
    page.search_box.setText("chat")
    page.format_box.setCurrentIndex(page.format_box.findData("gguf"))
    with qtbot.waitSignal(page.answered, timeout=30_000):
        qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    first = listed(page)
    assert len(first) == PAGE_SIZE and first[0] == f"acme/chat-{PAGE_SIZE + 4:02d}-GGUF"  # most downloaded first
    assert not page.more_button.isHidden()
    with qtbot.waitSignal(page.answered, timeout=30_000):
        qtbot.mouseClick(page.more_button, Qt.MouseButton.LeftButton)
    everything = listed(page)
    assert len(everything) == PAGE_SIZE + 5 and len(set(everything)) == len(everything)
    assert "acme/chat-mlx-4bit" not in everything and page.more_button.isHidden()
    page.format_box.setCurrentIndex(page.format_box.findData("mlx"))
    with qtbot.waitSignal(page.answered, timeout=30_000):
        page.search()
    assert listed(page) == ["acme/chat-mlx-4bit"]


def test_every_quant_with_its_fit_memory_speed_size_and_the_best_pick(qtbot, tiny_hub, tiny_models):
    profile = cpu_only(16)
    page = make_page(qtbot, profile)
    open_and_wait(qtbot, page, TINY_REPO)
    choices = {c.quant: c for c in page.choices.choices}
    assert set(choices) == {"Q8_0", "Q4_K_M"}
    table = {page.table.item(r, 0).text(): [page.table.item(r, c).text() for c in range(6)]
             for r in range(page.table.rowCount())}
    for quant, path in (("Q8_0", tiny_models.gguf_q8_0), ("Q4_K_M", tiny_models.gguf_q4_k_m)):
        local = fit_model(read_model(path), profile)  # the same question asked of the local file
        assert table[quant][2] == badge(local.verdict) == "CPU"
        assert choices[quant].download_bytes == path.stat().st_size
        assert table[quant][4].endswith("tok/s") and "MiB" in table[quant][3]
        assert choices[quant].request.files == (path.name,)
    best = page.choices.best
    assert best.quant == "Q8_0"  # both fit in RAM: the higher precision wins
    best_row = next(r for r in range(page.table.rowCount()) if page.table.item(r, 0).text() == "Q8_0")
    assert page.table.item(best_row, 0).font().bold()
    assert not page.table.item(1 - best_row, 0).font().bold()
    assert "Q8_0" in page.best_label.text() and "highest-precision" in page.best_label.text()
    assert "tiny llama for tests" in page.summary_label.text()


def test_fit_badges_follow_the_machine(qtbot, tiny_hub):
    gpu_page = make_page(qtbot, nvidia(8))
    open_and_wait(qtbot, gpu_page, TINY_REPO)
    assert {c.badge for c in gpu_page.choices.choices} == {"Full GPU"}
    tiny_page = make_page(qtbot, cpu_only(0.001))
    open_and_wait(qtbot, tiny_page, TINY_REPO)
    assert {c.badge for c in tiny_page.choices.choices} == {"Too large"}
    assert tiny_page.choices.best is None and "No quant" in tiny_page.best_label.text()


def test_a_model_opened_before_detection_is_fitted_once_the_hardware_is_known(qtbot, tiny_hub):
    page = make_page(qtbot)
    page.open_model(TINY_REPO)
    assert "Waiting for hardware detection" in page.status_label.text()
    with qtbot.waitSignal(page.answered, timeout=60_000):
        page.set_profile(cpu_only())
    assert page.table.rowCount() == 2


def test_download_queues_the_chosen_quant(qtbot, tiny_hub):
    page = make_page(qtbot, cpu_only())
    open_and_wait(qtbot, page, TINY_REPO)
    with qtbot.waitSignal(page.download_requested) as requested:
        qtbot.mouseClick(page.download_button("Q4_K_M"), Qt.MouseButton.LeftButton)
    request, label = requested.args
    assert (request.repo_id, request.files) == (TINY_REPO, ("tiny-llama-Q4_K_M.gguf",))
    assert label == f"{TINY_REPO} · Q4_K_M"


def test_offline_mode_from_settings_says_where_to_switch_it_off(qtbot, monkeypatch):
    from app import settings

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(settings, "_set_by_app", False)
    settings.apply_offline(True)
    try:
        page = make_page(qtbot, cpu_only())
        text = page.offline_label.text()
        assert "offline mode is on in QuantDesk's Settings" in text and "HF_HUB_OFFLINE" not in text
        assert text.endswith("or switch it off on the app's Settings page.")
    finally:
        settings.apply_offline(False)
    assert "HF_HUB_OFFLINE" not in os.environ


def test_offline_says_so_and_offers_import(qtbot, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page = make_page(qtbot, cpu_only())
    assert not page.offline_label.isHidden() and "(HF_HUB_OFFLINE is set)" in page.offline_label.text()
    assert page.offline_label.text().endswith("or unset HF_HUB_OFFLINE to go online.")
    assert not page.import_button.isHidden()
    page.search_box.setText("llama")
    page.search()
    assert "offline" in page.list_title.text() and page.results.count() == 0
    page.open_model("acme/anything")
    assert "Offline" in page.status_label.text()
    with qtbot.waitSignal(page.import_requested):
        qtbot.mouseClick(page.import_button, Qt.MouseButton.LeftButton)


def test_an_unreachable_hub_is_a_sentence_and_offers_import(qtbot, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    page = make_page(qtbot, cpu_only())
    page.search_box.setText("llama")
    with qtbot.waitSignal(page.answered, timeout=30_000):
        page.search()
    assert "Cannot reach http://127.0.0.1:9" in page.offline_label.text(), page.list_title.text()
    assert not page.import_button.isHidden() and page.results.count() == 0


def test_a_missing_repo_is_a_sentence(qtbot, hub_env):
    page = make_page(qtbot, cpu_only())
    with qtbot.waitSignal(page.answered, timeout=30_000):
        page.open_model("acme/no-such-model")
    assert "acme/no-such-model was not found" in page.status_label.text()


def test_badges_name_the_moe_split():
    assert badge("MoE split: experts of 12 of 48 layers in RAM") == "GPU + experts in RAM"
    assert badge("partial: 20 of 49 layers, experts in RAM") == "Partial: 20 of 49 layers on GPU, experts in RAM"
    assert badge("partial: 3 of 5 layers") == "Partial: 3 of 5 layers on GPU"


def _api_calls(hub, repo_id: str) -> dict[str, int]:
    """model_info calls per revision ("" for the default one) and refs calls, as the Hub stand-in saw them."""
    counts: dict[str, int] = {}
    for r in hub.log:
        if r.path == f"/api/models/{repo_id}/refs":
            counts["refs"] = counts.get("refs", 0) + 1
        elif r.path == f"/api/models/{repo_id}" or r.path.startswith(f"/api/models/{repo_id}/revision/"):
            revision = r.path.removeprefix(f"/api/models/{repo_id}").removeprefix("/revision/")
            counts[revision] = counts.get(revision, 0) + 1
    return counts


def test_opening_a_repo_asks_the_hub_once_for_the_repo_and_once_for_its_branches(qtbot, tiny_hub):
    page = make_page(qtbot, cpu_only())
    open_and_wait(qtbot, page, TINY_REPO)
    assert page.table.rowCount() == 2
    assert _api_calls(tiny_hub, TINY_REPO) == {"": 1, "refs": 1}
    headers = [r for r in tiny_hub.log if r.file and r.file.endswith(".gguf")]
    assert {r.file for r in headers} == {"tiny-llama-Q8_0.gguf", "tiny-llama-Q4_K_M.gguf"}
    assert all(r.headers.get("range") for r in headers)  # headers only, by Range


def test_opening_an_exl_repo_lists_each_branch_once(qtbot, hub_env):
    from tests.fixtures.hub_server import LLAMA_3_8B

    repo = "turbo/Llama-3-8B-exl2"
    commits = hub_env.add_exl_repo(repo, "exl2", {"4.0bpw": 4.0, "6.0bpw": 6.0}, shape=LLAMA_3_8B, tags=["exl2"],
                                   with_data=False)
    page = make_page(qtbot, nvidia(24))
    open_and_wait(qtbot, page, repo)
    assert {c.quant for c in page.choices.choices} == {"4.0bpw", "6.0bpw"}
    assert _api_calls(hub_env, repo) == {"": 1, "refs": 1, commits["4.0bpw"]: 1, commits["6.0bpw"]: 1}


def test_a_card_shows_the_fit_badge_the_recommender_gave_its_repo(qtbot, tiny_hub):
    from app.hub.discover import model_choices

    page = make_page(qtbot, cpu_only())
    page.search_box.setText("tiny")
    with qtbot.waitSignal(page.answered, timeout=30_000):
        page.search()
    card = page.card(TINY_REPO)
    assert card is not None and card.title.text() == TINY_REPO and card.badge.isHidden()  # not checked yet
    assert [chip.text() for chip in card.findChildren(QLabel, "chip")][:3] == ["GGUF", "1,234 downloads", "5 likes"]
    open_and_wait(qtbot, page, TINY_REPO)
    expected = model_choices(TINY_REPO, cpu_only()).fit_badge  # the recommender, run again on the same repo
    assert expected == "Fits in RAM"
    assert card.badge.text() == expected and not card.badge.isHidden() and card.badge.objectName() == "badge_warn"
    assert any(chip.text().startswith("best: ") for chip in card.findChildren(QLabel, "chip"))
    page.results.setCurrentRow(0)  # the card stands in for the item's highlight
    assert card.property("selected") is (page.results.item(0).data(Qt.ItemDataRole.UserRole) == TINY_REPO)
    tiny_machine = make_page(qtbot, cpu_only(0.001))
    open_and_wait(qtbot, tiny_machine, TINY_REPO)
    assert tiny_machine.fit_badges[TINY_REPO][0] == "Too large"


def test_a_quant_the_lab_measured_here_says_so_in_its_reason(qtbot, tiny_hub, tiny_models):
    from app.hub.download import download
    from app.hub.plan import DownloadRequest
    from app.lab.results import BenchSettings
    from app.lab.runner import run_bench
    from app.lab.store import ResultStore

    # Another uploader's file of the very same name: the lab's figures of one are not the other's.
    tiny_hub.add_repo("other/tiny-llama-GGUF", files={"tiny-llama-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                      tags=["gguf"])
    fetched = [download(DownloadRequest(TINY_REPO, quant=quant)).path for quant in ("Q8_0", "Q4_K_M")]
    result = run_bench(fetched, BenchSettings(ctx=64, chunks=3, speed=False))
    ResultStore().save(result)
    q4 = result.variant("tiny-llama-Q4_K_M")
    assert q4.origin == f"{TINY_REPO}/tiny-llama-Q4_K_M.gguf" and result.variants[0].quant == "Q8_0"

    page = make_page(qtbot, cpu_only(16))
    open_and_wait(qtbot, page, TINY_REPO)
    rows = {page.table.item(r, 0).text(): r for r in range(page.table.rowCount())}
    assert set(rows) == {"Q8_0", "Q4_K_M · measured here"}  # the reference itself has no KLD of its own
    tip = page.table.item(rows["Q4_K_M · measured here"], 2).toolTip()
    choice = next(c for c in page.choices.choices if c.quant == "Q4_K_M")
    kld = f"KLD {q4.quality.kld.value:.3g} ± {q4.quality.kld.se:.1g} from Q8_0 measured here"
    assert tip.startswith(f"{choice.reason}; {kld} (") and choice.reason
    assert "measured here" not in page.table.item(rows["Q8_0"], 2).toolTip()
    assert "measured here" not in page.best_label.text()  # the best pick (Q8_0) was the reference

    open_and_wait(qtbot, page, "other/tiny-llama-GGUF")
    assert [page.table.item(r, 0).text() for r in range(page.table.rowCount())] == ["Q4_K_M"]
    assert "measured here" not in page.table.item(0, 2).toolTip()
