"""Images kept with a chat: files under ``attachments/`` beside the database, rows in SQLite (schema 3, migrated
in one transaction), deleted with the chat and brought back by its undo; a file that is not an image is refused
before anything is saved."""

from __future__ import annotations

import sqlite3

import pytest

from app.chats import export as chat_export
from app.chats.store import MIGRATIONS, SCHEMA_VERSION, ChatStore
from app.images import ImageError
from tests.fixtures.models import write_test_png


@pytest.fixture
def pictures(tmp_path) -> list[bytes]:
    return [write_test_png(tmp_path / f"{w}.png", w, 30).read_bytes() for w in (40, 64)]


def test_images_are_kept_with_the_message_across_a_reopen(tmp_path, pictures):
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation()
        writer = store.begin_reply(conv.id, prompt="what are these?", images=pictures)
        writer.finish(text="two gradients")
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        asked, answered = store.messages(conv.id)
        assert [(a.width, a.height, a.media_type) for a in asked.images] == [(40, 30, "image/png"), (64, 30, "image/png")]
        assert [a.path.read_bytes() for a in asked.images] == pictures
        assert all(a.path.parent == tmp_path / "attachments" for a in asked.images)
        assert answered.images == () and store.message(asked.id).images == asked.images
        assert f"*(images: {asked.images[0].path.name} (40 × 30)" in chat_export.to_markdown(store, conv.id)
        assert '"width": 64' in chat_export.to_json(store, conv.id)


def test_a_file_that_is_not_an_image_saves_nothing(tmp_path, pictures):
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation()
        with pytest.raises(ImageError, match="not a PNG, JPEG or WebP"):
            store.begin_reply(conv.id, prompt="look", images=[pictures[0], b"%PDF-1.7"])
        assert store.messages(conv.id) == []


def test_deleting_a_chat_keeps_its_images_until_the_undo_is_over(tmp_path, pictures):
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        kept_elsewhere = store.create_conversation()
        store.begin_reply(kept_elsewhere.id, prompt="the same first picture", images=pictures[:1]).finish(text="ok")
        conv = store.create_conversation()
        store.begin_reply(conv.id, prompt="look", images=pictures).finish(text="ok")
        files = [a.path for a in store.messages(conv.id)[0].images]
        deleted = store.delete_conversation(conv.id)
        assert all(f.exists() for f in files)  # the undo may want them
        store.restore_conversation(deleted)
        assert [a.path for a in store.messages(conv.id)[0].images] == files
        store.delete_conversation(conv.id)
        assert store.purge_attachments() == 1  # the undo is over: the second picture goes
        assert files[0].exists() and not files[1].exists()  # the first is still another chat's


def test_a_version_2_database_is_migrated_with_its_messages(tmp_path, pictures):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path)
    for statements in MIGRATIONS[:2]:
        for statement in statements:
            db.execute(statement)
    db.execute("PRAGMA user_version=2")
    db.execute("INSERT INTO conversations(title, created, updated) VALUES ('old', 1, 1)")
    db.execute("INSERT INTO messages(conversation_id, role, content, created) VALUES (1, 'user', 'hello', 1)")
    db.commit()
    db.close()
    with ChatStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        (old,) = store.messages(1)
        assert (old.content, old.images) == ("hello", ())
        store.begin_reply(1, prompt="and now a picture", images=pictures[:1]).finish(text="ok")
        assert len(store.messages(1)[1].images) == 1
