"""The indexer on real files and a real SQLite store: incremental (counted), the report's lines for every bad input,
a file deleted mid-index, pause kept across a restart and resumed where it stopped, a watched folder, progress
with time left; vectors through the real engine host (the tiny embedding model in a real pool)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from app.documents import indexer as indexer_module
from app.documents.embedder import LOAD_SETTINGS, pool_embedder
from app.documents.indexer import DELETED, IndexProgress, Indexer, index_collection
from app.documents.store import DocumentStore
from app.engine.pool import ModelPool
from tests.fixtures.documents import (
    make_symlink_loops, page_phrase, write_binary_txt, write_code, write_encrypted_pdf, write_image_pdf,
    write_markdown, write_sparse_file, write_text_pdf, write_truncated_pdf,
)


@pytest.fixture
def store(tmp_path):
    with DocumentStore(tmp_path / "documents.sqlite3") as opened:
        yield opened


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_text_pdf(folder / "guide.pdf", 3, tag="g-")
    write_markdown(folder / "notes.md")
    write_code(folder / "tool.py")
    (folder / "plain.txt").write_text("The pump needs priming before the first start.\n\nThen it runs.\n")
    return folder


def _pages_of(store: DocumentStore, name: str, query: str) -> list[tuple[str, int | None]]:
    hits = store.text_search([name], query, 5)
    return [(Path(p.path).name, p.page) for p in store.passages([h.chunk_id for h in hits])]


def test_a_folder_is_indexed_and_a_phrase_finds_its_page(store, tmp_path):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    seen: list[IndexProgress] = []
    result = index_collection(store, "docs", None, on_progress=seen.append)
    assert (result.state, result.files_done, result.files_total, result.failed) == ("done", 4, 4, 0)
    assert (result.added, result.changed, result.unchanged, result.removed) == (4, 0, 0, 0)
    assert result.pages == 3 and result.chunks >= 4 and result.size_bytes > 0
    assert result.bytes_done == result.bytes_total == sum(p.stat().st_size for p in folder.iterdir())
    assert seen[0].state == "scanning" and seen[-1] == result
    assert [p.files_done for p in seen] == sorted(p.files_done for p in seen)  # never backwards
    assert _pages_of(store, "docs", page_phrase(2, "g-"))[0] == ("guide.pdf", 2)
    assert _pages_of(store, "docs", "pump priming")[0] == ("plain.txt", None)
    collection = store.collection("docs")
    assert (collection.files, collection.indexed, collection.failed) == (4, 4, 0)
    assert store.report("docs") == []


def test_a_re_index_touches_only_what_changed(store, tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    index_collection(store, "docs", None)
    plain_ids = [h.chunk_id for h in store.text_search(["docs"], "pump")]
    read: list[str] = []
    real_sections = indexer_module.extract.sections

    def counting(path, **kwargs):
        read.append(Path(path).name)
        return real_sections(path, **kwargs)

    monkeypatch.setattr(indexer_module.extract, "sections", counting)

    again = index_collection(store, "docs", None)
    assert (again.added, again.changed, again.unchanged, again.removed, again.chunks) == (0, 0, 4, 0, 0)
    assert read == []

    (folder / "notes.md").write_text("# Changed\n\nA brand new paragraph about valves.\n")
    os.utime(folder / "plain.txt", ns=(1_000_000_000, 1_000_000_000))  # touched: new time, same content
    (folder / "guide.pdf").unlink()
    third = index_collection(store, "docs", None)
    assert (third.added, third.changed, third.unchanged, third.removed) == (0, 1, 2, 1)  # plain.txt: touched
    assert read == ["notes.md"]  # only the changed file was read again
    assert [h.chunk_id for h in store.text_search(["docs"], "pump")] == plain_ids  # its chunks untouched
    assert _pages_of(store, "docs", "valves") == [("notes.md", None)]
    assert store.text_search(["docs"], page_phrase(2, "g-")) == []  # the deleted file's chunks went with it
    assert store.collection("docs").files == 3

    (folder / "new.txt").write_text("A new file about gaskets.\n")
    fourth = index_collection(store, "docs", None)
    assert (fourth.added, fourth.changed, fourth.unchanged) == (1, 0, 3)
    assert read == ["notes.md", "new.txt"]


def test_every_bad_input_is_a_report_line_and_the_index_goes_on(store, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    write_text_pdf(folder / "good.pdf", 2, tag="ok-")
    write_encrypted_pdf(folder / "locked.pdf")
    write_image_pdf(folder / "scan.pdf")
    write_truncated_pdf(folder / "cut.pdf")
    write_sparse_file(folder / "huge.log")
    write_binary_txt(folder / "program.txt")
    make_symlink_loops(folder / "loops")
    store.create_collection("bad", folder=folder)
    result = index_collection(store, "bad", None, max_bytes=100 * 2**20)
    assert result.state == "done"
    report = {Path(line.path).name: line.reason for line in store.report("bad")}
    assert "encrypted" in report["locked.pdf"]
    assert "scan.pdf" in report and "cut.pdf" in report
    assert "too large" in report["huge.log"]
    assert "binary" in report["program.txt"]
    assert "loop" in report["back"] and "self.txt" in report
    assert _pages_of(store, "bad", page_phrase(2, "ok-"))[0] == ("good.pdf", 2)
    assert _pages_of(store, "bad", "loop-kept")[0][0] == "kept.txt"
    assert result.failed == store.collection("bad").failed >= 4
    # an unchanged failed file is not read again; its line stays in the report
    again = index_collection(store, "bad", None, max_bytes=100 * 2**20)
    assert again.changed == 0 and again.added == 0
    assert {Path(line.path).name for line in store.report("bad")} == set(report)
    # a failed file replaced by a readable one: read again, out of the report, counted so while the index runs
    write_text_pdf(folder / "locked.pdf", 1, tag="open-")
    seen: list[IndexProgress] = []
    third = index_collection(store, "bad", None, max_bytes=100 * 2**20, on_progress=seen.append)
    assert third.changed == 1 and "locked.pdf" not in {Path(line.path).name for line in store.report("bad")}
    assert third.failed == result.failed - 1 == store.collection("bad").failed
    assert [p.failed for p in seen if p.state == "indexing"][-1] == third.failed


def test_a_file_deleted_mid_index_is_a_report_line_then_leaves(store, tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    real_sections = indexer_module.extract.sections

    def deleting(path, **kwargs):
        for n, section in enumerate(real_sections(path, **kwargs)):
            if n == 0 and Path(path).name == "guide.pdf":
                Path(path).unlink()  # the user deletes it while it is read
            yield section

    monkeypatch.setattr(indexer_module.extract, "sections", deleting)
    result = index_collection(store, "docs", None)
    assert result.state == "done" and result.failed == 1 and result.files_done == 4
    assert [(Path(line.path).name, line.reason) for line in store.report("docs")] == [("guide.pdf", DELETED)]
    assert store.text_search(["docs"], page_phrase(1, "g-")) == []  # nothing of it kept
    monkeypatch.setattr(indexer_module.extract, "sections", real_sections)
    after = index_collection(store, "docs", None)
    assert after.removed == 1 and store.report("docs") == []


def test_any_failure_in_one_file_is_its_report_line(store, tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    real_chunks = indexer_module.chunking.chunks

    def failing(sections, **kwargs):
        sections = list(sections)
        if any("priming" in s.text for s in sections):
            raise RuntimeError("a bug in a parser")
        return real_chunks(sections, **kwargs)

    monkeypatch.setattr(indexer_module.chunking, "chunks", failing)
    result = index_collection(store, "docs", None)
    assert result.state == "done" and result.files_done == 4 and result.failed == 1
    assert [(Path(line.path).name, line.reason) for line in store.report("docs")] == [
        ("plain.txt", "unreadable: a bug in a parser")]


def test_files_added_by_hand_and_a_missing_one(store, tmp_path):
    folder = _folder(tmp_path)
    store.create_collection("mine")
    store.add_paths("mine", [folder / "plain.txt", folder / "guide.pdf"])
    result = index_collection(store, "mine", None)
    assert (result.files_total, result.failed) == (2, 0)
    (folder / "guide.pdf").unlink()
    again = index_collection(store, "mine", None)
    # a source that is gone is a line of the report; what was indexed from it is kept until it is back
    assert again.removed == 0
    assert [Path(line.path).name for line in store.report("mine")] == ["guide.pdf"]
    assert "kept until it is back" in store.report("mine")[0].reason


def test_a_stop_between_files_leaves_a_consistent_index_that_goes_on(store, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(30):
        (folder / f"f{n:02d}.txt").write_text(f"File number {n} about topic{n}.\n")
    store.create_collection("many", folder=folder)
    def stop_after_some() -> bool:
        return store.collection("many").indexed >= 15

    first = index_collection(store, "many", None, should_stop=stop_after_some)
    assert first.state == "paused" and first.files_done == 15
    assert store.collection("many").indexed == 15 and store.collection("many").pending == 15
    second = index_collection(store, "many", None)
    assert (second.added, second.unchanged, second.state) == (15, 15, "done")
    assert store.collection("many").indexed == 30


# --- the background indexer -------------------------------------------------------------------------------------

def test_the_indexer_pauses_and_a_pause_outlives_a_restart_then_resumes_where_it_stopped(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(120):
        (folder / f"f{n:03d}.md").write_text(f"# File {n}\n\nText about subject{n} in a paragraph.\n")
    path = tmp_path / "documents.sqlite3"
    store = DocumentStore(path)
    store.create_collection("many", folder=folder)
    seen: list[IndexProgress] = []
    indexer = Indexer(store, None, on_progress=seen.append, watch_every_s=None)

    def pause_midway(progress: IndexProgress) -> None:
        seen.append(progress)
        if progress.state == "indexing" and progress.files_done >= 20 and not store.collection("many").paused:
            indexer.pause("many")

    indexer.on_progress = pause_midway
    indexer.start()
    assert indexer.wait_idle(30)
    assert seen[-1].state == "paused"
    done_before = store.collection("many").indexed
    assert 20 <= done_before < 120
    indexer.close()
    store.close()

    # a restart: the collection is still paused, and the new indexer leaves it so
    store = DocumentStore(path)
    assert store.collection("many").paused
    seen.clear()
    indexer = Indexer(store, None, on_progress=seen.append, watch_every_s=None).start()
    assert indexer.wait_idle(30)
    assert store.collection("many").indexed == done_before and seen[-1].state == "paused"
    indexer.resume("many")
    assert indexer.wait_idle(30) and seen[-1].state == "done"
    done = seen[-1]
    assert (done.unchanged, done.added, done.files_done, done.files_total) == (done_before, 120 - done_before, 120, 120)
    assert any(p.state == "indexing" and p.eta_s is not None and p.eta_s > 0 for p in seen)
    assert not store.collection("many").paused and store.collection("many").indexed == 120
    indexer.close()
    store.close()


def test_a_watched_folder_picks_up_new_changed_and_deleted_files(store, tmp_path):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    rescanned = threading.Event()  # the watch's run that found the new file and the deleted one

    def on_progress(progress: IndexProgress) -> None:
        if progress.state == "done" and (progress.added, progress.removed) == (1, 1):
            rescanned.set()

    indexer = Indexer(store, None, on_progress=on_progress, watch_every_s=0.2).start()
    try:
        assert indexer.wait_idle(20) and store.collection("docs").indexed == 4
        (folder / "later.txt").write_text("Written later, about flanges.\n")
        (folder / "plain.txt").unlink()
        assert rescanned.wait(20)
        assert store.text_search(["docs"], "flanges") != [] and store.collection("docs").files == 4
        assert store.text_search(["docs"], "pump") == []
    finally:
        indexer.close()
    assert indexer.last["docs"].state == "done"


def test_a_watch_of_zero_seconds_scans_only_when_asked(store, tmp_path):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder)
    indexer = Indexer(store, None, watch_every_s=0).start()  # Settings' documents_watch_seconds = 0
    try:
        assert indexer.wait_idle(30) and store.collection("docs").indexed == 4
        (folder / "later.txt").write_text("Written later, about flanges.\n")
        time.sleep(0.6)  # that nothing happens can only be shown by waiting: longer than a 0.2 s watch waits
        assert store.text_search(["docs"], "flanges") == [] and not indexer.busy()
        indexer.index("docs")
        assert indexer.wait_idle(30) and store.text_search(["docs"], "flanges") != []
    finally:
        indexer.close()


def test_the_indexer_survives_a_collection_removed_while_it_runs(store, tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(60):
        (folder / f"f{n:03d}.txt").write_text(f"File {n}.\n")
    store.create_collection("gone", folder=folder)
    store.create_collection("stays", folder=_folder(tmp_path))
    indexer = Indexer(store, None, watch_every_s=None)

    def remove_midway(progress: IndexProgress) -> None:
        if progress.collection == "gone" and progress.files_done == 10:
            indexer.forget("gone")
            store.remove_collection("gone")

    indexer.on_progress = remove_midway
    indexer.start()
    try:
        assert indexer.wait_idle(30)
        assert [c.name for c in store.collections()] == ["stays"]
        assert store.collection("stays").indexed == 4
        indexer.index("stays")  # and it still answers
        assert indexer.wait_idle(30)
    finally:
        indexer.close()


# --- vectors through the real engine ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool(tiny_embedding_model):
    with_pool = ModelPool()
    with_pool.release(with_pool.acquire(str(tiny_embedding_model), LOAD_SETTINGS))
    yield with_pool
    with_pool.close()


def test_vectors_for_every_chunk_and_a_new_model_embeds_again(store, tmp_path, pool, tiny_embedding_model):
    folder = _folder(tmp_path)
    model = str(tiny_embedding_model)
    store.create_collection("docs", folder=folder, embed_model=model)
    embedder = pool_embedder(pool, model)
    first_seen: list[IndexProgress] = []
    result = index_collection(store, "docs", embedder, on_progress=first_seen.append)
    collection = store.collection("docs")
    assert result.state == "done" and not result.problem
    assert collection.embedded == collection.chunks == result.embedded == result.to_embed > 0
    assert any(p.state == "indexing" and p.to_embed > 0 for p in first_seen)  # the vectors counted as it goes
    # a passage's own text, embedded, finds that passage first
    passage = store.passages([store.text_search(["docs"], "pump priming")[0].chunk_id])[0]
    hits = store.vector_search(["docs"], embedder.embed([passage.text])[0], 3)
    assert hits[0].chunk_id == passage.chunk_id and hits[0].score == pytest.approx(1.0, abs=1e-3)

    # another embedding model (the same weights under another name): every chunk embedded again, with progress
    other = tmp_path / "other-embed.gguf"
    shutil.copyfile(tiny_embedding_model, other)
    store.set_embed_model("docs", str(other))
    assert store.collection("docs").embedded == 0
    seen: list[IndexProgress] = []
    again = index_collection(store, "docs", pool_embedder(pool, str(other)), on_progress=seen.append)
    assert again.unchanged == 4 and again.chunks == 0  # no file read again
    assert any(p.state == "embedding" for p in seen)
    assert store.collection("docs").embedded == collection.chunks
    pool.unload(str(other))


def test_no_embedding_model_is_text_search_with_a_sentence(store, tmp_path):
    folder = _folder(tmp_path)
    store.create_collection("docs", folder=folder, embed_model=str(tmp_path / "missing.gguf"))
    result = index_collection(store, "docs", None)
    assert result.state == "done" and "not available" in result.problem
    assert store.text_search(["docs"], "pump")


def test_a_pause_in_the_middle_of_a_long_file_stores_nothing_of_it_and_it_is_read_whole_next_time(store, tmp_path):
    folder = tmp_path / "long"
    folder.mkdir()
    write_text_pdf(folder / "book.pdf", 20, tag="book-")
    store.create_collection("long", folder=folder)
    calls = {"n": 0}

    def stop_in_the_middle() -> bool:
        calls["n"] += 1
        return calls["n"] > 6  # the scan asks once, the file loop once, then once per page

    paused = index_collection(store, "long", None, should_stop=stop_in_the_middle)
    assert paused.state == "paused" and paused.files_done == 0
    assert store.collection("long").chunks == 0 and store.collection("long").pending == 1
    done = index_collection(store, "long", None)
    assert (done.state, done.added, done.pages) == ("done", 1, 20)
    assert _pages_of(store, "long", page_phrase(17, "book-"))[0] == ("book.pdf", 17)
