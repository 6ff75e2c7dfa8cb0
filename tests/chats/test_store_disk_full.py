"""The chat database's disk fills up while a reply streams, for real: the database lives on a small
tmpfs mounted in a private mount namespace (``unshare --user --map-root-user --mount``, no privileges
needed where the kernel allows user namespaces), as in tests/hub/test_disk_full.py, and another
writer takes the free space mid-reply. Nothing may raise out of the writer and nothing may be lost:
once space is freed, the whole reply with its stats is in the database, and the database is sound."""

from __future__ import annotations

import json
import textwrap

from tests.fixtures.small_disk import needs_small_disks, run_on_small_disk

# Runs inside the namespace, where argv[1] is a 2 MB tmpfs.
DRIVER = textwrap.dedent("""
    import json, sqlite3, sys
    from pathlib import Path
    from app.chats.store import ChatStore, ChatStoreError

    def described(error):
        return None if error is None else {"type": type(error).__name__, "message": error.message,
                                           "hint": error.hint, "cause": type(error.__cause__).__name__}

    mount = Path(sys.argv[1])
    db = mount / "chats.sqlite3"
    filler = mount / "someone-else.bin"
    store = ChatStore(db)
    conv = store.create_conversation("A long story")
    store.add_message(conv.id, "user", "Tell me a long story")
    writer = store.begin_reply(conv.id, min_interval_s=0)  # every append is a save attempt
    writer.append("Once upon a time. ")

    with open(filler, "wb", buffering=0) as f:  # another program takes every free byte
        for size in (65536, 4096, 1):
            try:
                while True:
                    f.write(b"x" * size)
            except OSError:
                pass

    seen = []
    for i in range(30):
        writer.append(f"Chapter {i}: " + "and then something else happened. " * 90)
        seen.append(described(writer.error))
    stats = {"generated_tokens": 2700, "decode_tps": 31.5, "stop_reason": "eos"}
    finished = writer.finish(stats)
    finish_error = described(writer.error)
    saved_after_finish = writer.saved
    while_full = store.message(writer.message_id)
    try:
        store.add_message(conv.id, "user", "And then?")
        added = None
    except ChatStoreError as exc:
        added = described(exc)
    in_transaction = store._db.in_transaction

    filler.unlink()
    retried = writer.save()
    store.add_message(conv.id, "user", "And then?")
    other = sqlite3.connect(db)  # a second connection reads the same rows through the WAL
    other_sees = other.execute("SELECT content, state, stats_json FROM messages WHERE id=?",
                               (writer.message_id,)).fetchone()
    other.close()
    store.close()
    with ChatStore(db) as again:
        messages = [(m.role, m.content, m.state, m.stats) for m in again.messages(conv.id)]
        recovered = again.recovered_interrupted
        integrity = again._db.execute("PRAGMA integrity_check").fetchone()[0]
        checkpoint = list(again._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
    print(json.dumps({
        "seen": seen, "finished": finished, "finish_error": finish_error, "saved_after_finish": saved_after_finish,
        "while_full": [while_full.content, while_full.state], "added": added, "in_transaction": in_transaction,
        "retried": retried, "error_after": described(writer.error), "text": writer.text, "stats": stats,
        "other_sees": list(other_sees), "messages": messages, "recovered": recovered,
        "integrity": integrity, "checkpoint": checkpoint}))
""")


@needs_small_disks
def test_a_reply_streaming_onto_a_disk_that_fills_up_is_kept_and_saved_whole_once_there_is_room(tmp_path):
    mount = tmp_path / "data"
    out = run_on_small_disk(mount, "2m", DRIVER, str(mount))  # it exits 0: nothing raised out of append/finish

    full = {"type": "ChatStoreError", "message": "cannot save the reply: the disk that holds the chat database is full",
            "hint": f"free some space on the disk with {mount}", "cause": "OperationalError"}
    failures = [error for error in out["seen"] if error is not None]
    assert failures, "the disk never filled"
    assert all(error == full for error in failures)
    assert out["finished"] is False and out["saved_after_finish"] is False and out["finish_error"] == full
    # While the disk is full the database keeps what it had: a clean prefix of the reply, still streaming.
    content, state = out["while_full"]
    assert state == "streaming" and out["text"].startswith(content) and len(content) < len(out["text"])
    # A new message is refused in words and leaves no transaction open.
    assert out["added"] == {**full, "message": "cannot save the message: the disk that holds the chat database is full"}
    assert out["in_transaction"] is False

    # Space freed: the next save puts in the whole reply, its end state and stats, exactly.
    assert out["retried"] is True and out["error_after"] is None
    text = out["text"]
    assert text.startswith("Once upon a time. Chapter 0: ") and text.count("Chapter") == 30
    assert out["other_sees"] == [text, "complete", json.dumps(out["stats"])]
    assert out["messages"] == [["user", "Tell me a long story", "complete", None],
                               ["assistant", text, "complete", out["stats"]],
                               ["user", "And then?", "complete", None]]
    assert out["recovered"] == 0  # nothing was left half-written as "streaming"
    assert out["integrity"] == "ok" and out["checkpoint"][0] == 0
