"""Schema 9 of the conversation store (issue 28): a reply keeps the passages of the user's documents it was given
(its citations), a chat the collections attached to it; both survive an older database's upgrade, branches, undo
and the exports."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.chats import export as chat_export
from app.chats import store as store_module
from app.chats.store import SCHEMA_VERSION, ChatStore, NotFound

CITED = ({"number": 1, "score": 0.8, "chunk_id": 7, "collection": "manuals", "path": "/docs/guide.pdf",
          "text": "Hold the reset button for five seconds.", "page": 3, "heading": "", "line": None,
          "where": "guide.pdf, page 3"},
         {"number": 2, "score": 0.5, "chunk_id": 9, "collection": "chat-1", "path": "/notes/setup.md",
          "text": "Plug in the cable first.", "page": None, "heading": "Setup › Cables", "line": 12,
          "where": "setup.md, Setup › Cables"})


def _make_v8_database(path: Path) -> None:
    """A database as QuantDesk left it before documents (schema 8), with one exchange."""
    db = sqlite3.connect(path, isolation_level=None)
    for migration in store_module.MIGRATIONS[:8]:
        for statement in migration:
            db.execute(statement)
    db.execute("PRAGMA user_version=8")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('reset', 1, 1)")
    db.execute("INSERT INTO messages(id, conversation_id, role, content, created, parent_id) "
               "VALUES (1, 1, 'user', 'How do I reset it?', 1, NULL)")
    db.execute("INSERT INTO messages(id, conversation_id, role, content, created, parent_id, pinned) "
               "VALUES (2, 1, 'assistant', 'Hold the button.', 2, 1, 1)")
    db.execute("UPDATE conversations SET leaf_id=2")
    db.close()


def test_migration_9_gives_old_chats_no_documents_and_keeps_everything(tmp_path):
    path = tmp_path / "v8.sqlite3"
    _make_v8_database(path)
    with ChatStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 9
        [conv] = s.conversations()
        assert conv.documents == () and conv.title == "reset"
        assert [(m.content, m.citations, m.pinned) for m in s.messages(conv.id)] == [
            ("How do I reset it?", (), False), ("Hold the button.", (), True)]


def test_a_replys_citations_and_a_chats_documents_are_kept(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as s:
        conv = s.create_conversation()
        assert conv.documents == ()
        s.set_documents(conv.id, ["chat-1", "manuals", "chat-1"])
        assert s.conversation(conv.id).documents == ("chat-1", "manuals")  # once each, in the order given
        writer = s.begin_reply(conv.id, prompt="How do I reset it?")
        writer.finish({}, text="Hold the reset button [1], after the cable [2].")
        s.set_citations(writer.message_id, CITED)
        assert s.message(writer.message_id).citations == CITED
        assert s.messages(conv.id)[-1].citations == CITED and s.message(writer.prompt_id).citations == ()
        # A regenerated reply is a new row with its own citations (or none); the first keeps its own.
        again = s.begin_reply(conv.id, after=writer.prompt_id)
        again.finish({}, text="I do not know.")
        assert s.message(again.message_id).citations == ()
        s.set_citations(again.message_id, CITED[1:])
        assert s.message(again.message_id).citations == CITED[1:]
        s.show_branch(writer.message_id)
        assert s.messages(conv.id)[-1].citations == CITED
        # Undo of a deleted chat brings back both.
        restored = s.restore_conversation(s.delete_conversation(conv.id))
        assert restored.documents == ("chat-1", "manuals") and s.message(writer.message_id).citations == CITED
        # Nothing attached any more, no citations: stored as none.
        s.set_documents(conv.id, [])
        s.set_citations(again.message_id, [])
        assert s.conversation(conv.id).documents == () and s.message(again.message_id).citations == ()
        with pytest.raises(NotFound):
            s.set_citations(10_000, CITED)
        with pytest.raises(NotFound):
            s.set_documents(10_000, ["manuals"])


def test_citations_and_documents_are_exported(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as s:
        conv = s.create_conversation("Reset")
        s.set_documents(conv.id, ["manuals"])
        writer = s.begin_reply(conv.id, prompt="How do I reset it?")
        writer.finish({}, text="Hold the reset button [1].")
        s.set_citations(writer.message_id, CITED)
        data = json.loads(chat_export.to_json(s, conv.id))
        assert data["version"] == chat_export.EXPORT_VERSION >= 6
        assert data["conversation"]["documents"] == ["manuals"]
        assert "citations" not in data["messages"][0] and data["messages"][1]["citations"] == list(CITED)
        markdown = chat_export.to_markdown(s, conv.id)
        reply = markdown.split("## Assistant", 1)[1]
        assert "Hold the reset button [1]." in reply
        assert "[1] guide.pdf, page 3" in reply and "[2] setup.md, Setup › Cables" in reply
        assert reply.index("Hold the reset button") < reply.index("**Sources**")
        # A record kept without its "where" still names its file.
        s.set_citations(writer.message_id, [{"number": 1, "path": "/docs/other.txt", "text": "x"}])
        assert "[1] other.txt" in chat_export.to_markdown(s, conv.id)
