"""The Downloads page with the real download manager against the local Hub stand-in: a finished job says where
the model is and offers "Chat with it"; pause/resume continues with a Range request; cancel deletes and retry
starts over; errors are sentences; a job paused by the previous run is listed and resumes; progress is coalesced."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt

from app import settings
from app.hub.download import STAGING_DIR_NAME, Progress, Settings
from app.hub.download_queue import DownloadTask
from app.hub.plan import DownloadRequest
from app.ui.library.downloads_page import DownloadsPage
from tests.ui.tiny_hub import TINY_REPO, tiny_hub_fixture  # noqa: F401 - the tiny_hub fixture

Q8 = "tiny-llama-Q8_0.gguf"
REQUEST = DownloadRequest(TINY_REPO, files=(Q8,))
FAST = Settings(backoff_base=0.01, backoff_max=0.05, stall_timeout=60, max_retries=2, disk_reserve=0)


def make_page(qtbot) -> DownloadsPage:
    page = DownloadsPage(FAST)
    qtbot.addWidget(page)
    return page


def click(qtbot, row, action: str) -> None:
    assert row.buttons[action].isVisibleTo(row), (f"{action} is not offered: the task is {row.task.state}, "
                                                  f"{row.task.progress}, {row.task.error!r}")
    qtbot.mouseClick(row.buttons[action], Qt.MouseButton.LeftButton)


def wait_state(qtbot, row, state: str, timeout: int = 60_000) -> None:
    qtbot.waitUntil(lambda: row.task.state == state and row.state_label.text() ==
                    {"done": "Finished", "paused": "Paused", "failed": "Failed", "cancelled": "Cancelled"}[state],
                    timeout=timeout)


def stall_part_way(hub, qtbot, page) -> object:
    hub.faults.add(Q8, "stall", after_bytes=600_000, seconds=60)
    row = page.enqueue(REQUEST, "tiny Q8_0")
    # the row shows the bytes that arrived (repaints trail the worker by up to one repaint interval)
    qtbot.waitUntil(lambda: row.bar.value() >= 600_000 * 1000 // tiny_size(), timeout=30_000)
    return row


def tiny_size() -> int:
    from tests.fixtures.models import TINY, build_model_set

    return build_model_set(TINY).gguf_q8_0.stat().st_size


def staging() -> Path:
    return settings.models_dir() / STAGING_DIR_NAME / REQUEST.key()


def test_a_finished_download_says_where_and_offers_chat(qtbot, tiny_hub, tiny_models):
    page = make_page(qtbot)
    row = page.enqueue(REQUEST, "tiny Q8_0")
    wait_state(qtbot, row, "done")
    model = Path(row.task.result.path)
    assert model.read_bytes() == tiny_models.gguf_q8_0.read_bytes()
    assert row.detail.text() == f"Saved to {model}" and row.bar.value() == row.bar.maximum()
    assert row.buttons["chat"].isVisibleTo(row) and not row.buttons["pause"].isVisibleTo(row)
    with qtbot.waitSignal(page.chat_requested) as chat:
        click(qtbot, row, "chat")
    assert chat.args == [str(model)]
    assert page.enqueue(REQUEST) is row and len(page.rows) == 1  # one row per job


def test_pause_keeps_the_bytes_and_resume_continues_with_a_range_request(qtbot, tiny_hub, tiny_models):
    page = make_page(qtbot)
    row = stall_part_way(tiny_hub, qtbot, page)
    assert "of" in row.detail.text() and row.bar.value() > 0
    click(qtbot, row, "pause")
    wait_state(qtbot, row, "paused")
    assert "kept" in row.detail.text() and staging().is_dir()
    click(qtbot, row, "resume")
    wait_state(qtbot, row, "done")
    ranges = [r.headers.get("range") for r in tiny_hub.requests_for(Q8)]
    assert ranges[-1] is not None and ranges[-1].startswith("bytes=") and ranges[-1] != "bytes=0-"
    assert Path(row.task.result.path).read_bytes() == tiny_models.gguf_q8_0.read_bytes()


def test_cancel_deletes_the_partial_and_retry_starts_over(qtbot, tiny_hub):
    page = make_page(qtbot)
    row = stall_part_way(tiny_hub, qtbot, page)
    click(qtbot, row, "cancel")
    wait_state(qtbot, row, "cancelled")
    assert not staging().exists() and "deleted" in row.detail.text()
    click(qtbot, row, "retry")
    wait_state(qtbot, row, "done")
    assert tiny_hub.requests_for(Q8)[-1].headers.get("range") is None


def test_an_error_is_a_sentence_and_can_be_retried(qtbot, tiny_hub):
    fault = tiny_hub.faults.add(Q8, "401", times=-1)
    page = make_page(qtbot)
    row = page.enqueue(REQUEST)
    wait_state(qtbot, row, "failed")
    assert "The Hub refused tiny-llama-Q8_0.gguf" in row.detail.text() and "Traceback" not in row.detail.text()
    fault.times = 0
    click(qtbot, row, "retry")
    wait_state(qtbot, row, "done")


def test_a_job_paused_by_the_last_run_is_listed_and_resumes(qtbot, tiny_hub, tiny_models):
    first = make_page(qtbot)
    stall_part_way(tiny_hub, qtbot, first)
    first.shutdown()  # the app closes: the running job is paused, its files stay
    assert staging().is_dir()
    again = make_page(qtbot)
    row = again.rows[REQUEST.key()]
    assert row.task.state == "paused" and row.state_label.text() == "Paused"
    assert "kept" in row.detail.text() and TINY_REPO in row.title.text()
    click(qtbot, row, "resume")
    wait_state(qtbot, row, "done")
    assert Path(row.task.result.path).read_bytes() == tiny_models.gguf_q8_0.read_bytes()


def test_a_burst_of_progress_repaints_a_row_once(qtbot):
    page = make_page(qtbot)
    task = DownloadTask(id=99, request=REQUEST, state="running",
                        progress=Progress("downloading", TINY_REPO, done=0, total=1000, speed=10.0, eta=100))
    row = page._add_row(task, "burst")
    before = row.repaints

    def flood() -> None:  # the manager's worker thread reports every chunk
        for done in range(1, 501):
            task.progress = Progress("downloading", TINY_REPO, done=done * 2, total=1000, speed=10.0, eta=1)
            page._relay.push(task)

    worker = threading.Thread(target=flood)
    worker.start()
    worker.join()  # all 500 reports are in before the GUI thread handles any of them
    qtbot.waitUntil(lambda: row.detail.text().startswith("1.0 KB of 1.0 KB"), timeout=5_000)
    assert row.repaints - before == 1
