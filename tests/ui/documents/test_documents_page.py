"""The Documents page (issue 28) on real parts: a folder becomes a collection indexed in the background by the
window's indexer, embedded by the library's tiny embedding model through the Chat's own model pool, its progress
delivered to the page on the GUI thread; the table's figures, the report's lines for the files that could not be
read, pause kept in the database and resume, a new embedding model after asking (the collection embedded again),
files added by hand, and Remove."""

from __future__ import annotations

import threading

import pytest
from app.documents.store import DocumentStore, default_path
from app.engine.pool import ModelPool, PoolLimits
from app.hub.library import Library
from app.ui.chat.engine_bridge import EngineBridge
from app.ui.documents.documents_page import COLUMNS, DocumentsPage
from tests.fixtures.documents import write_binary_txt, write_markdown, write_text_pdf, write_truncated_pdf

pytest.importorskip("llama_cpp")


@pytest.fixture
def window(build_window):
    return build_window(EngineBridge.over(lambda: ModelPool(PoolLimits(max_loaded=3))))


def cells(page: DocumentsPage, row: int) -> dict[str, str]:
    return {column: page.table.item(row, i).text() for i, column in enumerate(COLUMNS)}


def settled(page: DocumentsPage, name: str) -> bool:
    c = page.service.store.collection(name)
    return c.files > 0 and c.pending == 0 and (c.embed_model is None or c.embedded == c.chunks)


def test_a_folder_is_indexed_in_the_background_and_shown_with_its_report(qtbot, window, tiny_embedding_model,
                                                                         tmp_path, monkeypatch):
    [embedding] = Library().import_path(tiny_embedding_model, copy=False)
    folder = tmp_path / "manuals"
    folder.mkdir()
    write_text_pdf(folder / "guide.pdf", 3, tag="guide", words_per_page=40)
    write_markdown(folder / "notes.md")
    write_binary_txt(folder / "program.txt")
    write_truncated_pdf(write_text_pdf(folder / "cut.pdf", 3, tag="cut"))

    window.show_page("Documents")
    page = window.documents
    assert isinstance(page, DocumentsPage) and window.current_page == "Documents"
    assert page.empty_state.isVisible() and page.table.isHidden()
    page.grab().save(str(tmp_path / "documents_empty.png"))

    delivered: list[tuple[str, bool]] = []
    gui = threading.current_thread()
    page.service.progress.connect(lambda p: delivered.append((p.state, threading.current_thread() is gui)))
    assert page.add_folder(folder)
    assert page.table.rowCount() == 1 and page.selected_name() == "manuals"
    assert page.service.store.collection("manuals").embed_model == embedding.path  # the library's first
    qtbot.waitUntil(lambda: settled(page, "manuals"), timeout=180_000)
    qtbot.waitUntil(lambda: cells(page, 0)["State"] == "Ready", timeout=30_000)
    assert delivered and all(on_gui for _state, on_gui in delivered)  # queued to the GUI thread
    assert {"indexing", "embedding"} & {state for state, _ in delivered}
    row = cells(page, 0)
    collection = page.service.store.collection("manuals")
    assert (row["Collection"], row["Files"]) == ("manuals", "4")
    assert row["Chunks"] == str(collection.chunks) and row["Embedded"] == str(collection.chunks)
    assert row["Size on disk"] not in ("", "—")
    assert page.model_box.currentData() == embedding.path
    assert page.progress.value() == 1000 and page.progress_label.text().startswith("Ready")
    report = [page.report.item(i).text() for i in range(page.report.count())]
    assert len(report) == 2 and page.report_title.text() == "Files that could not be read: 2"
    assert any(line.startswith("program.txt — binary") for line in report)  # under the folder: its own name
    assert any(line.startswith("cut.pdf — damaged") for line in report)
    assert page.report.item(0).toolTip().startswith(str(folder))  # the whole path
    page.grab().save(str(tmp_path / "documents_page.png"))

    # Pause is kept in the database (a restart finds it paused); Resume goes on.
    page.pause_button.click()
    assert page.service.store.collection("manuals").paused
    assert page.pause_button.text() == "Resume" and cells(page, 0)["State"] == "Paused"
    with DocumentStore(default_path()) as again:
        assert again.collection("manuals").paused
    page.pause_button.click()
    assert not page.service.store.collection("manuals").paused and page.pause_button.text() == "Pause"

    # Another embedding model: asked first; declined, nothing changes; accepted, the collection is embedded again.
    answers = iter([False, True, True])
    monkeypatch.setattr(page, "confirm_reembed", lambda *_: next(answers))
    words_only = page.model_box.findData("")
    page.model_box.activated.emit(words_only)
    assert page.service.store.collection("manuals").embed_model == embedding.path
    assert page.model_box.currentData() == embedding.path
    page.model_box.activated.emit(words_only)
    assert page.service.store.collection("manuals").embed_model is None
    assert cells(page, 0)["Embedded"] == "words only"
    page.model_box.activated.emit(page.model_box.findData(embedding.path))
    assert page.service.store.collection("manuals").embed_model == embedding.path
    qtbot.waitUntil(lambda: settled(page, "manuals"), timeout=180_000)

    # Files added by hand: a collection of their own.
    (tmp_path / "loose").mkdir()
    extra = write_markdown(tmp_path / "loose" / "extra.md")
    assert page.add_files("loose files", [extra])
    assert sorted(page.table.item(r, 0).text() for r in range(page.table.rowCount())) == ["loose files", "manuals"]
    assert page.selected_name() == "loose files"
    qtbot.waitUntil(lambda: settled(page, "loose files"), timeout=180_000)
    # The store is settled before the page hears of it (the indexer's progress is queued to the GUI thread).
    qtbot.waitUntil(lambda: page.source_label.text() == "Files added by hand: 1 file",  # English plural (quantdesk_en.ts)
                    timeout=30_000)

    page.remove("loose files")
    page.remove("manuals")
    assert page.table.rowCount() == 0 and page.empty_state.isVisible()
    assert page.service.store.collections() == []


def test_the_indexer_starts_after_the_first_paint_only_where_a_collection_has_work(qtbot, make_window, tmp_path):
    """app/ui/main.py asks the window after its first paint: nothing is opened for a user without documents, a
    paused collection waits, one with files not yet read gets the indexer (its words searched: no embedding model)."""
    from dataclasses import replace

    from app import settings

    settings.save(replace(settings.load(), documents_watch_seconds=0, documents_max_file_mb=3))
    window = make_window()
    window.start_documents()
    assert not default_path().exists()  # no database made for a user who never added documents
    folder = tmp_path / "notes"
    folder.mkdir()
    write_markdown(folder / "guide.md")
    with DocumentStore() as store:
        store.create_collection("notes", folder=folder)
        store.set_paused("notes", True)
    window.start_documents()
    service = window.documents_service()
    assert not service.started  # paused across the restart: no work
    service.store.set_paused("notes", False)
    window.start_documents()
    assert service.started
    # Settings' limits: a watch of 0 scans only when asked, the largest file read
    assert (service.indexer.watch_every_s, service.indexer.max_bytes) == (None, 3 * 2**20)
    qtbot.waitUntil(lambda: settled_store(service.store, "notes"), timeout=60_000)
    window.show_page("Documents")
    assert cells(window.documents, 0)["State"] == "Ready" and cells(window.documents, 0)["Embedded"] == "words only"


def settled_store(store: DocumentStore, name: str) -> bool:
    c = store.collection(name)
    return c.files > 0 and c.pending == 0


def test_a_thousand_file_folder_is_indexed_while_the_window_goes_on(qtbot, window, tmp_path):
    """The issue's 1,000-file folder: indexed on the indexer's thread while the GUI thread goes on painting the
    progress as it comes ("N of 1,000 files" seen before the end), never blocked until the indexing is over."""
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(1000):
        (folder / f"note{i:04}.md").write_text(f"# Note {i}\n\nThe word marker{i} stands in note {i}.\n")
    window.show_page("Documents")
    page = window.documents
    labels: list[str] = []
    ticks = 0

    def tick() -> None:  # the GUI thread's own work while the indexer runs
        nonlocal ticks
        ticks += 1
        labels.append(page.progress_label.text())

    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(20)
    assert page.add_folder(folder)
    page.service.store.set_embed_model("many", None)  # words only: the indexing itself, not the engine
    qtbot.waitUntil(lambda: settled_store(page.service.store, "many"), timeout=300_000)
    timer.stop()
    collection = page.service.store.collection("many")
    assert (collection.files, collection.indexed, collection.failed) == (1000, 1000, 0)
    partial = [text for text in labels if " of 1000 files" in text.replace(",", "") and not text.startswith("Ready")]
    assert partial, labels[-5:]  # the page showed the progress while the indexing went on
    assert ticks > 10
    [hit] = page.service.store.text_search(["many"], "marker737", limit=1)
    assert page.service.store.passages([hit.chunk_id])[0].path.endswith("note0737.md")
