"""The documents database on real SQLite files: collections, files and chunks, full-text search made safe for any
text, vector search, passages, pause kept across a restart, refusals as sentences."""

from __future__ import annotations

import math
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from app.documents.passages import Chunk, DocumentsError
from app.documents.store import SCHEMA_VERSION, DocumentStore, ReportLine, default_path, fts_terms


@pytest.fixture
def store(tmp_path):
    with DocumentStore(tmp_path / "documents.sqlite3") as opened:
        yield opened


def _unit(values: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def _add_file(store: DocumentStore, name: str, path: str, texts: list[str], *, page: int | None = None) -> int:
    chunks = [Chunk(text, i, page=page if page is not None else i + 1, heading="Intro", line=10 * i + 1)
              for i, text in enumerate(texts)]
    return store.store_file(name, path, size=100, mtime_ns=1, sha256="x", chunks=chunks, pages=len(texts))


def test_the_default_database_is_under_the_user_data_folder():
    from app import paths

    assert default_path() == paths.data_dir() / "documents.sqlite3"
    with DocumentStore() as opened:
        assert opened.path.is_file()
        assert opened.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert opened.schema_version == SCHEMA_VERSION


def test_collections_are_created_listed_counted_and_removed(store, tmp_path):
    folder = tmp_path / "manuals"
    folder.mkdir()
    made = store.create_collection("manuals", folder=folder, embed_model="/m/embed.gguf")
    assert (made.name, made.folder, made.embed_model, made.paused) == ("manuals", str(folder), "/m/embed.gguf", False)
    assert (made.files, made.indexed, made.chunks, made.embedded) == (0, 0, 0, 0)
    store.create_collection("Notes")
    assert [c.name for c in store.collections()] == ["manuals", "Notes"]
    with pytest.raises(DocumentsError, match="already"):
        store.create_collection("manuals")
    with pytest.raises(DocumentsError, match="no collection named “nope”"):
        store.collection("nope")
    with pytest.raises(DocumentsError, match="is not a folder"):
        store.create_collection("x", folder=tmp_path / "missing")
    with pytest.raises(DocumentsError, match="needs a name"):
        store.create_collection("   ")

    ids = _add_file(store, "manuals", str(folder / "a.txt"), ["alpha beta", "gamma delta"])
    store.fail_file("manuals", str(folder / "b.pdf"), "b.pdf is encrypted", size=5, mtime_ns=2)
    store.put_pending("manuals", [(str(folder / "c.txt"), 3, 3)])
    chunk_ids = [h.chunk_id for h in store.text_search(["manuals"], "alpha gamma")]
    store.put_vectors("manuals", "/m/embed.gguf", [(chunk_ids[0], [1.0, 0.0])])
    got = store.collection("manuals")
    assert (got.files, got.indexed, got.failed, got.pending, got.chunks, got.embedded) == (3, 1, 1, 1, 2, 1)
    assert store.report("manuals") == [ReportLine(str(folder / "b.pdf"), "b.pdf is encrypted")]
    assert store.size_on_disk("manuals") > len("alpha betagamma delta")
    assert ids > 0

    store.remove_collection("manuals")
    assert [c.name for c in store.collections()] == ["Notes"]
    # the files, chunks, full-text rows and vectors went with it
    assert store.db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
    assert store.db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'alpha'").fetchone()[0] == 0


def test_paths_added_by_hand_are_the_collections_sources(store, tmp_path):
    a, sub = tmp_path / "a.md", tmp_path / "sub"
    a.write_text("# A")
    sub.mkdir()
    store.create_collection("mine")
    store.add_paths("mine", [a, sub, a])
    assert store.collection("mine").sources == (str(a), str(sub))
    assert store.roots("mine") == [a, sub]
    with pytest.raises(DocumentsError, match="does not exist"):
        store.add_paths("mine", [tmp_path / "gone.txt"])
    store.remove_paths("mine", [str(sub)])
    assert store.roots("mine") == [a]


def test_a_paused_collection_stays_paused_after_a_restart(tmp_path):
    path = tmp_path / "documents.sqlite3"
    with DocumentStore(path) as first:
        first.create_collection("big")
        first.set_paused("big", True)
    with DocumentStore(path) as second:
        assert second.collection("big").paused is True
        second.set_paused("big", False)
        assert second.collection("big").paused is False


def test_a_changed_file_replaces_its_chunks_and_their_vectors(store):
    store.create_collection("c", embed_model="e")
    _add_file(store, "c", "/f.txt", ["old words here"])
    old = store.text_search(["c"], "old")[0].chunk_id
    store.put_vectors("c", "e", [(old, [1.0, 0.0])])
    _add_file(store, "c", "/f.txt", ["new words here", "and more"])
    assert store.text_search(["c"], "old") == []
    assert len(store.text_search(["c"], "new")) == 1
    assert store.vector_search(["c"], [1.0, 0.0]) == []  # the old chunk's vector went with it
    assert store.collection("c").chunks == 2
    assert store.put_vectors("c", "e", [(old, [1.0, 0.0])]) == 0  # a chunk gone meanwhile: left out
    assert [text for _id, text in store.unembedded("c", "e", 10)] == ["new words here", "and more"]


def test_text_search_finds_a_phrase_ranks_every_word_first_and_stays_in_its_collections(store):
    store.create_collection("a")
    store.create_collection("b")
    _add_file(store, "a", "/guide.pdf", ["The pump needs priming before the first start.",
                                         "Priming is described elsewhere.",
                                         "Nothing to see here."])
    _add_file(store, "b", "/other.txt", ["The pump needs priming too."])
    hits = store.text_search(["a"], "pump priming")
    texts = [p.text for p in store.passages([h.chunk_id for h in hits])]
    assert texts == ["The pump needs priming before the first start.", "Priming is described elsewhere."]
    assert [p.page for p in store.passages([hits[0].chunk_id])] == [1]
    assert hits[0].score > hits[1].score
    both = store.text_search(["a", "b"], '"needs priming"')
    assert sorted(p.path for p in store.passages([h.chunk_id for h in both])) == ["/guide.pdf", "/other.txt"]
    # accents folded: "prímíng" finds "priming"
    assert len(store.text_search(["b"], "prímíng")) == 1


@pytest.mark.parametrize("query", ['"', "AND", "pump AND", "NEAR(pump", "text:pump", "*", "pump*", "(", ")", "-pump",
                                   "^pump", "pump OR", '"unclosed phrase', "'; DROP TABLE chunks; --", "\x00",
                                   "pump" * 500, " ".join(["w"] * 1000), "ü ß 中文", ""])
def test_any_user_text_is_a_safe_query(store, query):
    store.create_collection("a")
    _add_file(store, "a", "/g.txt", ["The pump AND the text NEAR the end."])
    hits = store.text_search(["a"], query)  # never an FTS5 syntax error
    assert all(h.chunk_id > 0 for h in hits)
    assert store.db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 1


def test_fts_terms_quote_every_word():
    assert fts_terms('pump "needs priming" AND x"y') == ['"needs priming"', '"pump"', '"AND"', '"x"', '"y"']
    assert fts_terms("*()") == []


def test_vector_search_is_cosine_over_each_collections_own_model(store):
    store.create_collection("a", embed_model="e1")
    store.create_collection("b", embed_model="e2")
    _add_file(store, "a", "/a.txt", ["north", "east", "north-east"])
    _add_file(store, "b", "/b.txt", ["b-north"])
    ids = {p.text: p.chunk_id for p in store.collection_passages(["a", "b"], 10)}
    store.put_vectors("a", "e1", [(ids["north"], [0.0, 1.0]), (ids["east"], [1.0, 0.0]),
                                  (ids["north-east"], _unit([1.0, 1.0]))])
    store.put_vectors("b", "e2", [(ids["b-north"], [0.0, 1.0])])
    hits = store.vector_search(["a"], _unit([0.2, 1.0]), limit=2)
    assert [h.chunk_id for h in hits] == [ids["north"], ids["north-east"]]
    assert hits[0].score == pytest.approx(1.0 / math.sqrt(1.04), abs=1e-6)
    both = store.vector_search(["a", "b"], [0.0, 1.0], limit=5)
    assert both[0].score == pytest.approx(1.0) and {both[0].chunk_id, both[1].chunk_id} == {ids["north"],
                                                                                          ids["b-north"]}
    assert [h.chunk_id for h in store.vector_search(["a", "b"], [0.0, 1.0], model="e2")] == [ids["b-north"]]
    assert store.vector_search(["a"], [0.0, 1.0, 0.0]) == []  # another length: never compared
    # a write drops the collection's vectors kept in memory: the new vector is found
    _add_file(store, "a", "/a2.txt", ["south"])
    south = store.text_search(["a"], "south")[0].chunk_id
    store.put_vectors("a", "e1", [(south, [0.0, -1.0])])
    assert store.vector_search(["a"], [0.0, -1.0], limit=1)[0].chunk_id == south
    # another embedding model: the old vectors are no longer searched, every chunk needs embedding again
    store.set_embed_model("a", "e3")
    assert store.vector_search(["a"], [0.0, 1.0]) == []
    assert store.collection("a").embedded == 0
    assert len(store.unembedded("a", "e3", 10)) == 4
    assert store.db.execute("SELECT count(*) FROM vectors WHERE model = 'e1'").fetchone()[0] == 0


def test_vectors_are_stored_as_float32_blobs(store):
    store.create_collection("a", embed_model="e")
    chunk = _add_file(store, "a", "/a.txt", ["x"])
    chunk_id = store.collection_passages(["a"], 1)[0].chunk_id
    store.put_vectors("a", "e", [(chunk_id, [0.6, 0.8])])
    blob = store.db.execute("SELECT vector FROM vectors").fetchone()[0]
    assert np.frombuffer(blob, dtype=np.float32).tolist() == pytest.approx([0.6, 0.8])
    assert chunk > 0


def test_passages_come_in_the_order_asked_with_where_they_are(store):
    store.create_collection("a")
    _add_file(store, "a", "/docs/guide.pdf", ["one", "two", "three"])
    ids = [p.chunk_id for p in store.collection_passages(["a"], 10)]
    got = store.passages([ids[2], ids[0], 999_999, ids[2]])
    assert [p.text for p in got] == ["three", "one"]
    assert (got[0].collection, got[0].path, got[0].page, got[0].heading, got[0].line) == ("a", "/docs/guide.pdf",
                                                                                          3, "Intro", 21)
    assert got[0].where == "guide.pdf, page 3"
    assert [p.text for p in store.collection_passages(["a"], 2)] == ["one", "two"]


def test_the_scans_report_lines_replace_the_last_scans(store):
    store.create_collection("a")
    store.set_skipped("a", [ReportLine("/big.bin", "too large")])
    store.fail_file("a", "/x.pdf", "encrypted")
    assert [line.reason for line in store.report("a")] == ["too large", "encrypted"]
    store.set_skipped("a", [])
    assert store.report("a") == [ReportLine("/x.pdf", "encrypted")]
    store.remove_files("a", ["/x.pdf"])
    assert store.report("a") == []


def test_threads_share_the_store(store):
    store.create_collection("a", embed_model="e")
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(20):
                _add_file(store, "a", f"/{n}/{i}.txt", [f"word{n} number{i}"])
                store.text_search(["a"], f"word{n}")
                store.vector_search(["a"], [1.0, 0.0])
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.collection("a").files == 80


def test_a_damaged_database_is_a_sentence(tmp_path):
    path = tmp_path / "documents.sqlite3"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(DocumentsError, match="cannot open the documents database") as caught:
        DocumentStore(path)
    assert "move the file aside" in caught.value.hint


def test_a_newer_schema_is_refused_in_words(tmp_path):
    path = tmp_path / "documents.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(DocumentsError, match="newer QuantDesk"):
        DocumentStore(path)


def test_a_locked_database_is_a_sentence_and_nothing_is_half_written(tmp_path):
    path = tmp_path / "documents.sqlite3"
    with DocumentStore(path) as store:
        store.create_collection("a")
        store.db.execute("PRAGMA busy_timeout=50")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another program holds the write lock
        try:
            with pytest.raises(DocumentsError, match="another program is using the documents database"):
                _add_file(store, "a", "/f.txt", ["text"])
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert not store.db.in_transaction
        assert store.collection("a").files == 0
        _add_file(store, "a", "/f.txt", ["text"])
        assert store.collection("a").files == 1


def test_a_read_only_database_is_a_sentence(tmp_path):
    path = tmp_path / "documents.sqlite3"
    DocumentStore(path).close()
    uri = f"file:{path}?mode=ro"
    store = DocumentStore(path)
    store._db.close()
    store._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        with pytest.raises(DocumentsError, match="read-only"):
            store.create_collection("a")
    finally:
        store.close()
    assert isinstance(Path(path), Path)


def test_vectors_added_while_searching_are_found_without_reading_every_vector_again(store):
    store.create_collection("a", embed_model="e")
    _add_file(store, "a", "/a.txt", ["one", "two"])
    ids = [p.chunk_id for p in store.collection_passages(["a"], 10)]
    store.put_vectors("a", "e", [(ids[0], [1.0, 0.0])])
    assert [h.chunk_id for h in store.vector_search(["a"], [1.0, 0.0])] == [ids[0]]
    kept = store._matrices[(store.collection("a").id, "e")]
    store.put_vectors("a", "e", [(ids[1], [0.0, 1.0])])
    _add_file(store, "a", "/b.txt", ["three"])  # a new file: no vector of the collection's changes
    grown = store._matrices[(store.collection("a").id, "e")]
    assert grown is not kept and len(grown[0]) == 2
    assert [h.chunk_id for h in store.vector_search(["a"], [0.0, 1.0], limit=1)] == [ids[1]]
    # a vector replaced: the matrix is read again, never two rows for one chunk
    store.put_vectors("a", "e", [(ids[1], [0.6, 0.8])])
    hits = store.vector_search(["a"], [0.0, 1.0])
    assert [h.chunk_id for h in hits] == [ids[1], ids[0]] and hits[0].score == pytest.approx(0.8)
    # a changed file: its chunks' vectors leave the matrix
    _add_file(store, "a", "/a.txt", ["uno"])
    assert store.vector_search(["a"], [0.0, 1.0]) == []


def test_the_query_benchmark_runs(capsys):
    """tests/bench/documents_query.py at a small size: it fills a store, searches it and prints its figures."""
    from tests.bench import documents_query

    documents_query.main(["--chunks", "300", "--dims", "16", "--queries", "4"])
    out = capsys.readouterr().out
    assert "300 chunks × 16 dims" in out and "text (FTS5, bm25)" in out and "vectors (numpy)" in out
