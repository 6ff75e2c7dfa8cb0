"""The conversation store on real SQLite files: CRUD, search, export, presets, migrations, and a
reply that survives a kill -9 of the process writing it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.chats import export as chat_export
from app.chats import store as store_module
from app.chats.messages import Branches
from app.chats.store import SCHEMA_VERSION, ChatStore, ChatStoreError, NotFound

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as s:
        yield s


def test_default_location_is_the_user_data_folder(isolated_user_state):
    with ChatStore() as s:
        assert s.path.is_relative_to(isolated_user_state)
        assert s.path.exists()


def test_database_uses_wal_and_foreign_keys(store):
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.schema_version == SCHEMA_VERSION


def test_conversation_roundtrip_across_reopen(tmp_path):
    path = tmp_path / "c.sqlite3"
    with ChatStore(path) as s:
        conv = s.create_conversation("Rust lifetimes", system_prompt="Be terse.",
                                     sampling={"temperature": 0.2}, model_path="/m/qwen.gguf")
        s.add_message(conv.id, "user", "What is 'a?")
        s.add_message(conv.id, "assistant", "A lifetime.", stats={"decode_tps": 41.5})
    with ChatStore(path) as s:
        [again] = s.conversations()
        assert (again.title, again.system_prompt, again.sampling, again.model_path) == (
            "Rust lifetimes", "Be terse.", {"temperature": 0.2}, "/m/qwen.gguf")
        msgs = s.messages(conv.id)
        assert [(m.role, m.content, m.state) for m in msgs] == [
            ("user", "What is 'a?", "complete"), ("assistant", "A lifetime.", "complete")]
        assert msgs[1].stats == {"decode_tps": 41.5}


def test_newest_activity_comes_first(tmp_path):
    ticks = iter(range(100))
    with ChatStore(tmp_path / "c.sqlite3", clock=lambda: float(next(ticks))) as s:
        old = s.create_conversation("old")
        new = s.create_conversation("new")
        assert [c.title for c in s.conversations()] == ["new", "old"]
        s.add_message(old.id, "user", "bump")
        assert [c.id for c in s.conversations()] == [old.id, new.id]


def test_rename_update_and_delete_cascades(store):
    conv = store.create_conversation()
    msg = store.add_message(conv.id, "user", "hello")
    store.rename(conv.id, "Greetings")
    store.update_settings(conv.id, system_prompt="You are kind.", sampling={"top_k": 10})
    got = store.conversation(conv.id)
    assert (got.title, got.system_prompt, got.sampling) == ("Greetings", "You are kind.", {"top_k": 10})
    store.delete_conversation(conv.id)
    assert store.conversations() == []
    with pytest.raises(NotFound):
        store.message(msg.id)
    with pytest.raises(NotFound):
        store.rename(conv.id, "gone")
    with pytest.raises(NotFound):
        store.add_message(conv.id, "user", "to nowhere")


def _chat(store, *texts):
    """A conversation of alternating user/assistant messages; it and their ids."""
    conv = store.create_conversation()
    return conv, [store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text).id
                  for i, text in enumerate(texts)]


def _shown(store, conv) -> list[str]:
    return [m.content for m in store.messages(conv.id)]


def test_a_reply_written_again_is_a_sibling_branch_and_both_stay(store):
    conv, (a, b, c, d) = _chat(store, "a", "b", "c", "d")
    writer = store.begin_reply(conv.id, after=c)  # write d again
    writer.finish(text="d2")
    assert _shown(store, conv) == ["a", "b", "c", "d2"]
    assert store.branches(writer.message_id) == Branches(2, 2, (d, writer.message_id))
    assert store.branches(b).count == 1
    assert _shown(store, conv) == [m.content for m in store.messages(conv.id)]
    assert [m.content for m in store.show_branch(d)] == ["a", "b", "c", "d"]  # back to the first reply
    assert _shown(store, conv) == ["a", "b", "c", "d"]


def test_an_edited_message_resent_branches_at_its_parent_and_switching_shows_the_newest_descendants(store):
    conv, (a, b, c, d) = _chat(store, "a", "b", "c", "d")
    edited = store.begin_reply(conv.id, prompt="c, edited", after=b)
    edited.finish(text="e")
    store.add_message(conv.id, "user", "f")
    assert _shown(store, conv) == ["a", "b", "c, edited", "e", "f"]
    assert store.branches(edited.prompt_id) == Branches(2, 2, (c, edited.prompt_id))
    assert [m.content for m in store.show_branch(c)] == ["a", "b", "c", "d"]
    assert [m.content for m in store.show_branch(edited.prompt_id)] == ["a", "b", "c, edited", "e", "f"]


def test_a_first_message_edited_starts_a_second_root(store):
    conv, (a, b) = _chat(store, "a", "b")
    other = store.begin_reply(conv.id, prompt="a2", after=None)
    assert store.branches(other.prompt_id) == Branches(2, 2, (a, other.prompt_id))
    assert [m.parent_id for m in store.messages(conv.id)] == [None, other.prompt_id]


def test_deleting_a_branch_deletes_its_descendants_and_shows_a_neighbour(store):
    conv, (a, b, c, d) = _chat(store, "a", "b", "c", "d")
    second = store.begin_reply(conv.id, prompt="c2", after=b)
    second.finish(text="d2")
    third = store.begin_reply(conv.id, prompt="c3", after=b)
    third.finish(text="d3")
    store.show_branch(second.prompt_id)
    assert [m.content for m in store.delete_branch(second.prompt_id)] == ["a", "b", "c", "d"]  # the one before
    assert store.branches(c).ids == (c, third.prompt_id)
    with pytest.raises(NotFound):
        store.message(second.message_id)  # its reply went with it
    # deleting a branch not on show leaves the one on show
    assert [m.content for m in store.delete_branch(third.prompt_id)] == ["a", "b", "c", "d"]
    # the only one left: the branch on show ends at the parent
    assert [m.content for m in store.delete_branch(c)] == ["a", "b"]
    assert store.add_message(conv.id, "user", "next").parent_id == b


def test_branches_are_exported_with_their_parents_and_the_branch_on_show(store):
    conv, (a, b) = _chat(store, "a", "b")
    again = store.begin_reply(conv.id, after=a)
    again.finish(text="b2")
    data = json.loads(chat_export.to_json(store, conv.id))
    assert [(m["content"], m["parent_id"]) for m in data["messages"]] == [("a", None), ("b", a), ("b2", a)]
    assert data["branch_on_show"] == [a, again.message_id] and data["version"] == chat_export.EXPORT_VERSION >= 3
    assert "b2" in chat_export.to_markdown(store, conv.id) and "\nb\n" not in chat_export.to_markdown(store, conv.id)


def test_branches_survive_a_restart_and_a_deleted_chat_restored(tmp_path):
    path = tmp_path / "c.sqlite3"
    with ChatStore(path) as s:
        conv, (a, b) = _chat(s, "a", "b")
        again = s.begin_reply(conv.id, after=a)
        again.finish(text="b2")
        s.show_branch(b)
        deleted = s.delete_conversation(conv.id)
        s.restore_conversation(deleted)
    with ChatStore(path) as s:
        assert [m.content for m in s.messages(conv.id)] == ["a", "b"]
        assert s.branches(b) == Branches(1, 2, (b, again.message_id))


def test_a_deleted_conversation_is_restored_exactly_as_it_was(tmp_path):
    ticks = iter(range(1, 1000))
    with ChatStore(tmp_path / "c.sqlite3", clock=lambda: float(next(ticks))) as s:
        before = s.create_conversation("Before")
        conv = s.create_conversation("Trip", system_prompt="Be brief.", sampling={"temperature": 0.3, "top_k": 7},
                                     model_path="/models/tiny.gguf")
        s.add_message(conv.id, "user", "Where to sleep in Vík?")
        s.add_message(conv.id, "assistant", "A guesthouse.", stats={"generated_tokens": 4, "decode_tps": 31.5})
        s.add_message(conv.id, "user", "And in Höfn?")
        s.add_message(conv.id, "assistant", "A camp", state="interrupted")
        after = s.create_conversation("After")
        conv = s.conversation(conv.id)
        listed, messages, exported = s.conversations(), s.messages(conv.id), chat_export.to_json(s, conv.id)

        deleted = s.delete_conversation(conv.id)
        assert deleted.title == "Trip"
        assert [c.title for c in s.conversations()] == ["After", "Before"]
        assert s.search("guesthouse") == [] and s.messages(conv.id) == []
        s.create_conversation("Made in between")  # takes a new id, never the deleted one's

        assert s.restore_conversation(deleted) == conv
        assert s.messages(conv.id) == messages  # same ids, order, text, stats and states
        assert chat_export.to_json(s, conv.id) == exported
        assert [c.id for c in s.conversations() if c.title != "Made in between"] == [c.id for c in listed]
        assert [c.title for c in s.search("guesthouse")] == ["Trip"]  # searchable again
        assert {before.id, after.id} < {c.id for c in s.conversations()}
        with pytest.raises(ChatStoreError):
            s.restore_conversation(deleted)  # it is there already
    with ChatStore(tmp_path / "c.sqlite3") as s:
        assert s.messages(conv.id) == messages


def test_deleting_a_missing_conversation_is_not_found(store):
    with pytest.raises(NotFound):
        store.delete_conversation(12345)


def test_search_matches_titles_and_message_words(store):
    rust = store.create_conversation("Rust lifetimes")
    pasta = store.create_conversation("Dinner")
    store.add_message(pasta.id, "user", "How long do I boil spaghetti carbonara?")
    store.create_conversation("Empty")
    assert [c.id for c in store.search("spaghet")] == [pasta.id]  # prefix of a word in a message
    assert [c.id for c in store.search("lifetimes")] == [rust.id]  # title
    assert [c.id for c in store.search("boil carbonara")] == [pasta.id]  # every word
    assert store.search("boil rust") == []
    assert len(store.search("  ")) == 3
    # FTS syntax and LIKE wildcards in user input are plain text, never an error.
    assert store.search('"unbalanced AND (') == []
    assert store.search("100%") == []


def test_search_sees_text_written_while_streaming(store):
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, min_interval_s=0)
    writer.append("quokka ")
    assert [c.id for c in store.search("quokka")] == [conv.id]


def test_reply_writer_saves_at_most_once_per_interval(store):
    now = [0.0]
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, min_interval_s=0.25, monotonic=lambda: now[0])
    for i in range(100):  # 100 tokens within 0.2 s: nothing is written yet
        now[0] = i * 0.002
        writer.append("x")
    assert store.message(writer.message_id).content == ""
    now[0] = 0.3
    writer.append("y")
    assert store.message(writer.message_id).content == "x" * 100 + "y"
    assert store.message(writer.message_id).state == "streaming"
    writer.append("z")
    writer.finish({"generated_tokens": 102})
    saved = store.message(writer.message_id)
    assert (saved.content, saved.state, saved.stats) == ("x" * 100 + "yz", "complete", {"generated_tokens": 102})
    assert writer.saves == 1


def test_reply_writer_saves_early_when_much_text_arrives(store):
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, min_interval_s=3600, min_chars=10)
    writer.append("12345")
    assert store.message(writer.message_id).content == ""
    writer.append("67890")
    assert store.message(writer.message_id).content == "1234567890"


def test_interrupt_keeps_the_partial_reply(store):
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, min_interval_s=3600)
    writer.append("half a thou")
    writer.interrupt()
    msg = store.message(writer.message_id)
    assert (msg.content, msg.state) == ("half a thou", "interrupted")
    with pytest.raises(RuntimeError):
        writer.append("more")


CHILD = textwrap.dedent(
    """
    import sys, time
    from app.chats.store import ChatStore

    store = ChatStore(sys.argv[1])
    conv = store.create_conversation("killed mid-reply")
    store.add_message(conv.id, "user", "count")
    writer = store.begin_reply(conv.id, min_interval_s=0)
    for i in range(5):
        writer.append(f"word{i} ")
    print("written", flush=True)
    sys.stdin.readline()  # block until the parent kills us
    writer.append("never saved")
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_reply_of_a_killed_process_is_reopened_as_interrupted(tmp_path):
    path = tmp_path / "chats.sqlite3"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "written"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.stdin.close()
        child.stdout.close()
    with ChatStore(path) as s:
        assert s.recovered_interrupted == 1
        [conv] = s.conversations()
        user, reply = s.messages(conv.id)
        assert (user.content, user.state) == ("count", "complete")
        assert (reply.content, reply.state) == ("word0 word1 word2 word3 word4 ", "interrupted")
    with ChatStore(path) as s:
        assert s.recovered_interrupted == 0  # already marked: nothing left to recover


def _make_v1_database(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for statement in store_module.MIGRATIONS[0]:
        db.execute(statement)
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('from v1', 1, 1)")
    db.execute("INSERT INTO messages(conversation_id, role, content, created) VALUES (1, 'user', 'ancient wombat', 1)")
    db.close()


def test_migrates_an_older_schema_and_keeps_its_data(tmp_path):
    path = tmp_path / "old.sqlite3"
    _make_v1_database(path)
    with ChatStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        [conv] = s.conversations()
        assert conv.title == "from v1"
        assert [c.id for c in s.search("wombat")] == [conv.id]  # backfilled into the new index
        assert [m.content for m in s.messages(conv.id)] == ["ancient wombat"]  # one branch, its leaf set


def test_an_old_linear_chat_becomes_one_branch(tmp_path):
    path = tmp_path / "v2.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    for migration in store_module.MIGRATIONS[:2]:
        for statement in migration:
            db.execute(statement)
    db.execute("PRAGMA user_version=2")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old', 1, 1)")
    for i, role in enumerate(("user", "assistant", "user", "assistant")):
        db.execute("INSERT INTO messages(conversation_id, role, content, created) VALUES (1, ?, ?, ?)", (role, f"m{i}", i))
    db.close()
    with ChatStore(path) as s:
        messages = s.messages(1)
        assert [m.content for m in messages] == ["m0", "m1", "m2", "m3"]
        assert [m.parent_id for m in messages] == [None, 1, 2, 3]
        assert s.add_message(1, "user", "m4").parent_id == 4


def test_a_failing_migration_leaves_the_old_database_untouched(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite3"
    _make_v1_database(path)
    broken = store_module.MIGRATIONS + (("CREATE TABLE half_done (x)", "THIS IS NOT SQL"),)
    monkeypatch.setattr(store_module, "MIGRATIONS", broken)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", len(broken))
    with pytest.raises(ChatStoreError):
        ChatStore(path)
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "half_done" not in tables and "messages_fts" not in tables
    db.close()


def test_refuses_a_database_from_a_newer_version(tmp_path):
    path = tmp_path / "new.sqlite3"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(ChatStoreError, match="newer QuantDesk"):
        ChatStore(path)


def test_a_file_that_is_not_a_database_is_a_readable_error(tmp_path):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ChatStoreError, match="cannot open the chat database"):
        ChatStore(path)


def test_export_markdown_and_json(store):
    conv = store.create_conversation("Primes", system_prompt="Answer in Markdown.", model_path="/m/tiny.gguf")
    store.add_message(conv.id, "user", "First prime?")
    writer = store.begin_reply(conv.id)
    writer.append("It is **2**, and")
    writer.interrupt({"generated_tokens": 5})
    md = chat_export.to_markdown(store, conv.id)
    assert md.startswith("# Primes\n")
    assert "Model: `tiny.gguf`" in md
    assert "## System\n\nAnswer in Markdown." in md
    assert md.index("## You\n\nFirst prime?") < md.index("## Assistant\n\nIt is **2**, and") < md.index(
        "*(reply interrupted)*")
    data = json.loads(chat_export.to_json(store, conv.id))
    assert data["format"] == "quantdesk-chat" and data["version"] == chat_export.EXPORT_VERSION
    assert data["conversation"]["title"] == "Primes"
    assert [(m["role"], m["content"], m["state"]) for m in data["messages"]] == [
        ("user", "First prime?", "complete"), ("assistant", "It is **2**, and", "interrupted")]
    assert data["messages"][1]["stats"] == {"generated_tokens": 5}


def test_presets_save_update_list_delete(store):
    store.save_preset("Coder", system_prompt="Write code.", sampling={"temperature": 0.2})
    store.save_preset("creative", sampling={"temperature": 1.1})
    store.save_preset("Coder", system_prompt="Write Python.", sampling={"temperature": 0.1})
    assert [(p.name, p.system_prompt, p.sampling) for p in store.presets()] == [
        ("Coder", "Write Python.", {"temperature": 0.1}), ("creative", "", {"temperature": 1.1})]
    store.delete_preset("creative")
    assert [p.name for p in store.presets()] == ["Coder"]
    with pytest.raises(NotFound):
        store.delete_preset("creative")
    with pytest.raises(ValueError):
        store.save_preset("  ")


def fill_up(store: ChatStore) -> None:
    """SQLite's own limit, on the store's real connection: the database may not grow past the pages
    it has, so a write that needs a new page gets SQLITE_FULL ("database or disk is full")."""
    store._db.execute("PRAGMA max_page_count=1")  # never below the current size: it stops there


def free_space(store: ChatStore) -> None:
    store._db.execute("PRAGMA max_page_count=1073741823")


BIG = "lorem ipsum dolor " * 400  # needs overflow pages: more than a full database can take


def test_a_write_the_full_database_refuses_is_a_chat_store_error_and_changes_nothing(store):
    conv = store.create_conversation("Notes")
    store.add_message(conv.id, "user", "first")
    before = chat_export.to_json(store, conv.id)
    fill_up(store)
    with pytest.raises(ChatStoreError) as refused:
        store.add_message(conv.id, "user", BIG)
    assert refused.value.message == "cannot save the message: the disk that holds the chat database is full"
    assert refused.value.hint == f"free some space on the disk with {store.path.parent}"
    assert isinstance(refused.value.__cause__, sqlite3.OperationalError)
    with pytest.raises(ChatStoreError, match="cannot save your message: the disk .* is full"):
        store.begin_reply(conv.id, prompt=BIG)  # neither the message nor its reply's row goes in
    assert not store._db.in_transaction
    assert chat_export.to_json(store, conv.id) == before
    free_space(store)
    writer = store.begin_reply(conv.id, prompt=BIG)
    assert [(m.id, m.role, m.content, m.state) for m in store.messages(conv.id)][1:] == [
        (writer.prompt_id, "user", BIG, "complete"), (writer.message_id, "assistant", "", "streaming")]


def test_a_reply_the_full_database_refuses_is_kept_and_saved_on_the_next_try(store):
    now = [0.0]
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, min_interval_s=0.25, min_chars=1000, monotonic=lambda: now[0])
    writer.append("Once upon a time. ")
    now[0] = 1.0
    writer.append("There was a king. ")  # saved
    assert store.message(writer.message_id).content == "Once upon a time. There was a king. "
    fill_up(store)
    writer.append(BIG)  # min_chars reached: a save, refused
    first = writer.error
    assert first is not None and "disk that holds the chat database is full" in first.message
    assert not writer.saved
    writer.append(BIG)  # the full database is not asked again before the interval is up
    assert writer.error is first
    now[0] = 2.0
    writer.append("The end.")
    assert writer.error is not first and writer.error.message == first.message
    assert writer.finish({"generated_tokens": 9}) is False and writer.closed
    saved = store.message(writer.message_id)
    assert (saved.content, saved.state, saved.stats) == ("Once upon a time. There was a king. ", "streaming", None)

    assert writer.save() is False  # still full
    free_space(store)
    assert writer.save() is True and writer.saved and writer.error is None
    saved = store.message(writer.message_id)
    assert saved.content == "Once upon a time. There was a king. " + BIG * 2 + "The end." == writer.text
    assert (saved.state, saved.stats) == ("complete", {"generated_tokens": 9})


def test_errors_that_are_not_the_disks_are_not_dressed_up(store):
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        with store._writing("do something"):
            store._db.execute("THIS IS NOT SQL")
    conv = store.create_conversation()
    with pytest.raises(sqlite3.ProgrammingError):  # a bug in the caller, not a full disk
        store.add_message(conv.id, "user", object())  # type: ignore[arg-type]
    assert not store._db.in_transaction and store.messages(conv.id) == []


def _make_v4_database(path: Path) -> None:
    """A database as the previous QuantDesk left it (schema 4: branches, no thinking), with a branched chat."""
    db = sqlite3.connect(path, isolation_level=None)
    for migration in store_module.MIGRATIONS[:4]:
        for statement in migration:
            db.execute(statement)
    db.execute("PRAGMA user_version=4")
    db.execute("INSERT INTO conversations(title, created, updated, sampling_json) VALUES ('sky', 1, 1, "
               "'{\"temperature\": 0.2}')")
    for id_, parent, role, content, stats in ((1, None, "user", "Why is the sky blue?", None),
                                              (2, 1, "assistant", "Rayleigh scattering.", '{"generated_tokens": 3}'),
                                              (3, 1, "assistant", "Because of the air.", None)):
        db.execute("INSERT INTO messages(id, conversation_id, role, content, created, stats_json, parent_id) "
                   "VALUES (?, 1, ?, ?, ?, ?, ?)", (id_, role, content, id_, stats, parent))
    db.execute("UPDATE conversations SET leaf_id=2")
    db.close()


def test_a_database_of_the_previous_schema_gains_thinking_and_keeps_everything(tmp_path):
    path = tmp_path / "v4.sqlite3"
    _make_v4_database(path)
    with ChatStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 6
        [conv] = s.conversations()
        assert (conv.title, conv.sampling) == ("sky", {"temperature": 0.2})
        assert [(m.id, m.parent_id, m.content, m.stats, m.reasoning) for m in s.all_messages(conv.id)] == [
            (1, None, "Why is the sky blue?", None, ""), (2, 1, "Rayleigh scattering.", {"generated_tokens": 3}, ""),
            (3, 1, "Because of the air.", None, "")]
        assert [m.id for m in s.messages(conv.id)] == [1, 2] and s.branches(2) == Branches(1, 2, (2, 3))
        assert [c.id for c in s.search("Rayleigh")] == [conv.id]  # the search index came through
        writer = s.begin_reply(conv.id, prompt="At dusk?")
        writer.append("", "Longer path")
        writer.finish({"reasoning_tokens": 2}, text="Red.", reasoning="Longer path through air.")
    with ChatStore(path) as s:
        assert s.messages(1)[-1].reasoning == "Longer path through air."


def test_a_failed_upgrade_to_thinking_leaves_the_previous_schema_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "v4.sqlite3"
    _make_v4_database(path)
    broken = store_module.MIGRATIONS + (("THIS IS NOT SQL",),)
    monkeypatch.setattr(store_module, "MIGRATIONS", broken)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", len(broken))
    with pytest.raises(ChatStoreError):
        ChatStore(path)
    db = sqlite3.connect(path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
    assert db.execute("PRAGMA user_version").fetchone()[0] == 4 and "reasoning" not in columns  # one transaction
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 3
    db.close()


def test_a_reply_keeps_its_thinking_apart_from_its_answer_as_it_streams(tmp_path):
    now = [0.0]
    path = tmp_path / "c.sqlite3"
    with ChatStore(path) as s:
        conv = s.create_conversation()
        writer = s.begin_reply(conv.id, prompt="Why?", min_interval_s=0.25, min_chars=1000, monotonic=lambda: now[0])
        writer.append("", "The sky")
        now[0] = 1.0
        writer.append("", " scatters.")  # saved: the interval is up
        assert (s.message(writer.message_id).reasoning, s.message(writer.message_id).content) == (
            "The sky scatters.", "")
        writer.append("Rayleigh", "")
        writer.interrupt()  # the engine died: what arrived of both is kept
        reply = s.message(writer.message_id)
        assert (reply.reasoning, reply.content, reply.state) == ("The sky scatters.", "Rayleigh", "interrupted")
        deleted = s.delete_conversation(conv.id)
        s.restore_conversation(deleted)
        assert s.message(writer.message_id).reasoning == "The sky scatters."  # an undo brings the thinking back
    with ChatStore(path) as s:
        assert s.messages(conv.id)[-1].reasoning == "The sky scatters."


def test_the_thinking_is_exported_with_its_reply(store):
    conv = store.create_conversation("Sky")
    writer = store.begin_reply(conv.id, prompt="Why blue?")
    writer.finish({"generated_tokens": 9, "reasoning_tokens": 6, "reasoning_ms": 12400.0}, text="Rayleigh.",
                  reasoning="Short waves\nscatter more.")
    md = chat_export.to_markdown(store, conv.id)
    assert ("## Assistant\n\n> **Thinking** (12.4 s · 6 tokens)\n>\n> Short waves\n> scatter more.\n\nRayleigh.\n"
            in md)
    assert "## You\n\nWhy blue?\n" in md
    data = json.loads(chat_export.to_json(store, conv.id))
    assert [m.get("reasoning") for m in data["messages"]] == [None, "Short waves\nscatter more."]
    assert data["messages"][1]["stats"]["reasoning_tokens"] == 6
    assert not store.search("scatter")  # a search finds what was said, not what was thought


def test_migration_6_keeps_a_chats_overflow_policy_and_what_a_reply_left_out(tmp_path):
    """Schema 6 (the overflow policy): an older database gains the columns, empty; a chat's own policy and a
    reply's cut are saved, come back, go with undo and stay on their branch."""
    path = tmp_path / "v4.sqlite3"
    _make_v4_database(path)
    with ChatStore(path) as s:
        [conv] = s.conversations()
        assert conv.overflow is None and all(m.context_cut is None for m in s.all_messages(conv.id))
        s.update_settings(conv.id, overflow="compact")
        assert s.conversation(conv.id).overflow == "compact"
        cut = {"policy": "compact", "start": 0, "dropped": 2, "note": "The sky: Rayleigh.", "prompt_tokens": 40}
        writer = s.begin_reply(conv.id, prompt="And at dusk?")
        s.set_context_cut(writer.message_id, cut)
        writer.finish({"generated_tokens": 1}, text="Red.")
        assert s.message(writer.message_id).context_cut == cut
        assert s.message(writer.prompt_id).context_cut is None
        exported = json.loads(chat_export.to_json(s, conv.id))  # the mark goes with the export, where there is one
        assert [m.get("context_cut") for m in exported["messages"]] == [None, None, None, None, cut]
        assert exported["conversation"]["overflow"] == "compact"
        s.show_branch(3)  # the other branch has no cut
        assert all(m.context_cut is None for m in s.messages(conv.id))
        s.update_settings(conv.id, overflow="")  # back to the Settings' default
        assert s.conversation(conv.id).overflow is None
        s.update_settings(conv.id, overflow="drop-oldest")
        restored = s.restore_conversation(s.delete_conversation(conv.id))
        assert restored.overflow == "drop-oldest" and s.message(writer.message_id).context_cut == cut
        with pytest.raises(NotFound):
            s.set_context_cut(10_000, cut)


def test_migration_8_pins_a_message_row_and_keeps_the_pin_in_exports_branches_and_undo(tmp_path):
    """Schema 8 (pins): an older database's messages come back unpinned; a pin is saved on its row, goes with the
    JSON export (``pinned: true`` where set) and with undo, and stays on its own row: an edit beside it (a new
    branch) is not pinned."""
    path = tmp_path / "v4.sqlite3"
    _make_v4_database(path)
    with ChatStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 8
        [conv] = s.conversations()
        assert not any(m.pinned for m in s.all_messages(conv.id))
        s.set_pinned(1, True)
        assert s.message(1).pinned and not s.message(2).pinned
        assert [m.pinned for m in s.messages(conv.id)] == [True, False]
        exported = json.loads(chat_export.to_json(s, conv.id))
        assert exported["version"] == chat_export.EXPORT_VERSION >= 5
        assert [m.get("pinned") for m in exported["messages"]] == [True, None, None]
        edited = s.begin_reply(conv.id, prompt="Why is the sky blue at noon?", after=None)  # a sibling of 1
        edited.finish({}, text="Scattering.")
        assert not s.message(edited.prompt_id).pinned and s.message(1).pinned
        s.show_branch(2)
        assert [m.pinned for m in s.messages(conv.id)] == [True, False]
        restored = s.restore_conversation(s.delete_conversation(conv.id))
        assert s.message(1).pinned and restored.id == conv.id
        s.set_pinned(1, False)
        assert not s.message(1).pinned
        assert "pinned" not in json.loads(chat_export.to_json(s, conv.id))["messages"][0]
        with pytest.raises(NotFound):
            s.set_pinned(10_000, True)
