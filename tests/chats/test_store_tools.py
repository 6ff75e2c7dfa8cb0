"""Tool cards in the conversation store (schema 6): a reply's tool calls and their results kept with it, on real
SQLite files: the migration from schema 5 with its data kept, the round trip, branches, undo, export, and the
turns the engine gets back next time."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from app.chats import export as chat_export
from app.chats import store as store_module
from app.chats.export import EXPORT_VERSION
from app.chats.messages import NOT_RUN, ToolCard
from app.chats.store import SCHEMA_VERSION, ChatStore, ChatStoreError

LISTED = ToolCard("call_1", "list_directory", '{"path": "/srv/notes"}', server="files",
                  result="[FILE] a.txt\n[DIR] old", decision="allowed", seconds=0.42)
DENIED = ToolCard("call_2", "write_file", '{"path": "/etc/passwd", "content": "x"}', server="files",
                  result="The user denied this call.", decision="denied")
CUT = ToolCard("call_3", "read_file", '{"path": "/srv/big.log"}', server="files", result="line\n" * 5,
               is_error=False, cut=True, decision="allowed", seconds=1.5)


@pytest.fixture
def store(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as s:
        yield s


def _make_v5_database(path: Path) -> None:
    """A database as the previous QuantDesk left it (schema 5: branches and thinking, no tool cards)."""
    db = sqlite3.connect(path, isolation_level=None)
    for migration in store_module.MIGRATIONS[:5]:
        for statement in migration:
            db.execute(statement)
    db.execute("PRAGMA user_version=5")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('notes', 1, 1)")
    for id_, parent, role, content, reasoning in ((1, None, "user", "What is in my notes?", ""),
                                                  (2, 1, "assistant", "Two files.", "Let me think."),
                                                  (3, 1, "assistant", "I cannot see them.", "")):
        db.execute("INSERT INTO messages(id, conversation_id, role, content, created, parent_id, reasoning) "
                   "VALUES (?, 1, ?, ?, ?, ?, ?)", (id_, role, content, id_, parent, reasoning))
    db.execute("UPDATE conversations SET leaf_id=2")
    db.close()


def test_a_database_of_schema_5_gains_tool_cards_and_keeps_everything(tmp_path):
    path = tmp_path / "v5.sqlite3"
    _make_v5_database(path)
    with ChatStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 6
        [conv] = s.conversations()
        assert [(m.id, m.parent_id, m.content, m.reasoning, m.tools) for m in s.all_messages(conv.id)] == [
            (1, None, "What is in my notes?", "", ()), (2, 1, "Two files.", "Let me think.", ()),
            (3, 1, "I cannot see them.", "", ())]
        assert [m.id for m in s.messages(conv.id)] == [1, 2]
        assert [c.id for c in s.search("notes")] == [conv.id]
        s.update_message(2, tools=[LISTED])
    with ChatStore(path) as s:
        assert s.message(2).tools == (LISTED,)


def test_a_failed_upgrade_to_tool_cards_leaves_schema_5_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "v5.sqlite3"
    _make_v5_database(path)
    broken = store_module.MIGRATIONS + (("THIS IS NOT SQL",),)
    monkeypatch.setattr(store_module, "MIGRATIONS", broken)
    monkeypatch.setattr(store_module, "SCHEMA_VERSION", len(broken))
    with pytest.raises(ChatStoreError):
        ChatStore(path)
    db = sqlite3.connect(path)
    columns = {r[1] for r in db.execute("PRAGMA table_info(messages)")}
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5 and "tools_json" not in columns
    db.close()


def test_tool_cards_round_trip_through_branches_and_undo(tmp_path):
    path = tmp_path / "c.sqlite3"
    with ChatStore(path) as s:
        conv = s.create_conversation()
        writer = s.begin_reply(conv.id, prompt="List my notes")
        writer.finish({"generated_tokens": 30}, text="")
        call_id = writer.message_id
        pending = ToolCard("call_1", "list_directory", '{"path": "/srv/notes"}', server="files")
        s.update_message(call_id, tools=[pending])  # saved as soon as the model asks, before the approval
        assert s.message(call_id).tools == (pending,) and not pending.answered
        s.update_message(call_id, tools=[LISTED, DENIED, CUT])  # each answer saves the whole list again
        follow = s.begin_reply(conv.id)  # the reply goes on after the results: a child of the call
        follow.finish({}, text="You have a.txt and a folder.")
        # Regenerating the first reply makes a sibling without calls; the old one keeps its cards.
        other = s.begin_reply(conv.id, after=s.message(call_id).parent_id)
        other.finish({}, text="No tools this time.")
        assert [m.tools for m in s.messages(conv.id)] == [(), ()]
        s.show_branch(call_id)
        assert [m.tools for m in s.messages(conv.id)] == [(), (LISTED, DENIED, CUT), ()]
        assert s.messages(conv.id)[-1].content == "You have a.txt and a folder."
        deleted = s.delete_conversation(conv.id)
        s.restore_conversation(deleted)  # undo brings the cards back
        assert s.message(call_id).tools == (LISTED, DENIED, CUT)
        s.update_message(call_id, tools=[])  # none left: the column is cleared
        assert s.message(call_id).tools == ()
        s.update_message(call_id, tools=[LISTED])
    with ChatStore(path) as s:
        assert s.message(call_id).tools == (LISTED,)


def test_the_engine_gets_the_calls_and_results_back_as_the_chat_format_expects(store):
    conv = store.create_conversation()
    writer = store.begin_reply(conv.id, prompt="List my notes")
    writer.finish({}, text="Looking.", reasoning="I should list them.")
    unrun = ToolCard("call_4", "read_file", '{"path": "/srv/notes/a.txt"}', server="files")
    store.update_message(writer.message_id, tools=[LISTED, DENIED, unrun])
    turns = store.message(writer.message_id).engine_turns()
    assert [t.role for t in turns] == ["assistant", "tool", "tool", "tool"]
    assert turns[0].content == "Looking." and turns[0].reasoning == "I should list them."
    assert turns[0].tool_calls[0] == {"id": "call_1", "type": "function",
                                      "function": {"name": "list_directory", "arguments": {"path": "/srv/notes"}}}
    assert [(t.tool_call_id, t.name, t.content) for t in turns[1:]] == [
        ("call_1", "list_directory", "[FILE] a.txt\n[DIR] old"), ("call_2", "write_file", "The user denied this call."),
        ("call_4", "read_file", NOT_RUN)]  # a call the user never answered still gets its answer
    assert turns[0].template_dict()["tool_calls"][1]["function"]["arguments"] == {"path": "/etc/passwd", "content": "x"}
    plain = store.message(writer.prompt_id).engine_turns()
    assert [(t.role, t.content, t.tool_calls) for t in plain] == [("user", "List my notes", ())]


def test_a_tool_goes_back_under_the_name_the_model_called_it_by():
    card = replace(LISTED, function="files__list_directory")
    assert card.template_call()["function"]["name"] == "files__list_directory"
    assert card.tool_message().name == "files__list_directory" and card.name == "list_directory"


def test_arguments_that_are_not_an_object_reach_the_template_as_an_empty_object():
    for text in ("", "not json", "[1, 2]"):
        assert ToolCard("c", "t", text).template_call()["function"]["arguments"] == {}


def test_tool_cards_are_exported(store):
    conv = store.create_conversation("Notes")
    writer = store.begin_reply(conv.id, prompt="List my notes")
    writer.finish({}, text="")
    store.update_message(writer.message_id, tools=[LISTED, DENIED, CUT])
    data = json.loads(chat_export.to_json(store, conv.id))
    assert data["version"] == EXPORT_VERSION
    assert "tool_calls" not in data["messages"][0]
    assert [ToolCard.from_dict(c) for c in data["messages"][1]["tool_calls"]] == [LISTED, DENIED, CUT]
    md = chat_export.to_markdown(store, conv.id)
    assert "> **Tool** `list_directory` (files): done, 0.4 s\n" in md
    assert '> ```json\n> {"path": "/srv/notes"}\n> ```' in md
    assert "> Result:\n> ```\n> [FILE] a.txt\n> [DIR] old\n> ```" in md
    assert "> **Tool** `write_file` (files): denied\n" in md and "(denied by the user)" in md
    assert "> **Tool** `read_file` (files): done, cut, 1.5 s\n" in md


def test_a_card_saved_by_a_newer_version_keeps_what_this_one_knows():
    card = ToolCard.from_dict({**LISTED.to_dict(), "icon": "folder"})
    assert card == LISTED


def test_a_chat_keeps_which_servers_tools_its_model_sees(tmp_path):
    path = tmp_path / "v5.sqlite3"
    _make_v5_database(path)
    with ChatStore(path) as s:
        assert s.conversation(1).tool_servers is None  # an old chat: every server
        s.set_tool_servers(1, ["files"])
        s.update_settings(1, system_prompt="Be brief.")  # other settings leave the choice alone
        assert s.conversation(1).tool_servers == ("files",)
        new = s.create_conversation()
        assert new.tool_servers is None
        s.set_tool_servers(new.id, [])
        deleted = s.delete_conversation(new.id)
        assert s.restore_conversation(deleted).tool_servers == ()
        s.set_tool_servers(new.id, None)  # every server again
        assert s.conversation(new.id).tool_servers is None
    with ChatStore(path) as s:
        assert s.conversation(1).tool_servers == ("files",)
