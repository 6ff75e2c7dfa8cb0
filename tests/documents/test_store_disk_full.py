"""The documents database's disk fills up while a folder is indexed, for real: the database lives on a small tmpfs
in a private mount namespace (tests/fixtures/small_disk.py, as the chat database's test), another program has
taken nearly all of it. The index stops with a sentence (never a traceback, never half a file stored); once space
is freed it goes on where it stopped, and the database is sound."""

from __future__ import annotations

import textwrap

from tests.fixtures.small_disk import needs_small_disks, run_on_small_disk

# Runs inside the namespace, where argv[1] is a small tmpfs and argv[2] the folder of documents.
DRIVER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from app.documents.indexer import index_collection
    from app.documents.passages import DocumentsError
    from app.documents.store import DocumentStore

    mount, folder = Path(sys.argv[1]), Path(sys.argv[2])
    store = DocumentStore(mount / "documents.sqlite3")
    store.create_collection("docs", folder=folder)
    filler = mount / "someone-else.bin"
    with open(filler, "wb", buffering=0) as f:  # another program takes every free byte...
        for size in (65536, 4096, 1):
            try:
                while True:
                    f.write(b"x" * size)
            except OSError:
                pass
    os.truncate(filler, os.path.getsize(filler) - 300 * 1024)  # ...but 300 KiB: a few files' worth

    try:
        index_collection(store, "docs", None)
        error = None
    except DocumentsError as exc:
        error = {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint,
                 "cause": type(exc.__cause__).__name__}
    in_transaction = store.db.in_transaction
    before = store.collection("docs")
    consistent = store.db.execute("SELECT (SELECT count(*) FROM chunks), (SELECT sum(chunks) FROM files)").fetchone()

    filler.unlink()
    after = index_collection(store, "docs", None)
    integrity = store.db.execute("PRAGMA integrity_check").fetchone()[0]
    hits = store.text_search(["docs"], "unique39")
    found = sorted({Path(p.path).name for p in store.passages([h.chunk_id for h in hits])})
    store.close()
    print(json.dumps({"error": error, "in_transaction": in_transaction, "indexed_before": before.indexed,
                      "consistent": list(consistent), "added": after.added, "unchanged": after.unchanged,
                      "state": after.state, "indexed_after": after.files_done, "integrity": integrity,
                      "found": found}))
""")


@needs_small_disks
def test_a_disk_that_fills_up_mid_index_stops_it_in_words_and_it_goes_on_once_there_is_room(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(40):
        words = " ".join(f"word{n}x{i} unique{n}" for i in range(1500))
        (folder / f"f{n:02d}.txt").write_text(f"File {n}.\n\n{words}\n")
    mount = tmp_path / "data"
    out = run_on_small_disk(mount, "16m", DRIVER, str(mount), str(folder))

    assert out["error"] is not None, "the disk never filled"
    assert out["error"]["type"] == "DocumentsError" and out["error"]["cause"] in ("OperationalError", "DatabaseError")
    assert out["error"]["message"].endswith("the disk that holds the documents database is full")
    assert out["error"]["hint"] == f"free some space on the disk with {mount}"
    assert out["in_transaction"] is False
    assert 0 < out["indexed_before"] < 40  # it stopped part way
    assert out["consistent"][0] == out["consistent"][1]  # no file half stored
    # room again: it goes on where it stopped
    assert out["state"] == "done" and out["indexed_after"] == 40
    assert out["unchanged"] == out["indexed_before"] and out["added"] == 40 - out["indexed_before"]
    assert out["integrity"] == "ok" and out["found"] == ["f39.txt"]
