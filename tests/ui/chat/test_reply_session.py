"""app.ui.chat.reply_session: the streaming reply and the replies a full database refused, saved again until saved.
A real SQLite store, made to refuse writes the way a full disk does (no new pages)."""

from __future__ import annotations

import pytest

from app.chats.store import ChatStore
from app.ui.chat.reply_session import ReplySession
from tests.ui.chat.test_chat_page import fill_up, free_space


@pytest.fixture
def store(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as chats:
        yield chats


def test_a_reply_streams_ends_and_is_saved(qtbot, store):
    session = ReplySession()
    conv = store.create_conversation("Hello")
    writer = store.begin_reply(conv.id, prompt="Hi", min_interval_s=0)
    session.begin(writer, conv.id)
    assert session.streaming and session.conversation_id == conv.id
    session.append("Hel")
    session.append("lo")
    session.finish({"generated_tokens": 2}, "Hello")
    session.end()
    assert not session.streaming and session.unsaved == [] and session.save_error is None
    assert store.message(writer.message_id).content == "Hello"


def test_a_refused_reply_is_kept_said_and_saved_once_there_is_room(qtbot, store):
    session = ReplySession()
    problems = []
    session.save_problem_changed.connect(problems.append)
    conv = store.create_conversation("Story")
    writer = store.begin_reply(conv.id, prompt="Tell a story", min_interval_s=0)
    session.begin(writer, conv.id)
    fill_up(store)
    session.append("Once upon a time " * 50)
    assert session.save_error is not None and session.retry_timer.isActive()
    session.finish({}, writer.text)
    session.end()
    (kept,) = session.unsaved
    assert session.as_written(store.message(kept.message_id)).content == kept.text != ""
    assert not session.save_pending() and [str(p) for p in problems] == [str(session.save_error)]  # said once
    free_space(store)
    session.retry_timer.setInterval(10)
    qtbot.waitUntil(lambda: session.save_error is None, timeout=5_000)
    assert problems[-1] is None and session.unsaved == [] and not session.retry_timer.isActive()
    assert store.message(kept.message_id).content == kept.text


def test_a_deleted_chat_takes_its_unsaved_replies_and_an_undo_brings_them_back(qtbot, store):
    session = ReplySession()
    conv = store.create_conversation("Gone")
    writer = store.begin_reply(conv.id, prompt="Hi", min_interval_s=0)
    session.begin(writer, conv.id)
    fill_up(store)
    session.append("words " * 100)
    session.end()
    assert session.forget(conv.id) == [writer] and session.save_error is None
    free_space(store)
    session.keep([writer])
    assert session.unsaved == [] and store.message(writer.message_id).content == writer.text
