"""The Chat's session without Qt (app/chats/session.py), on a real chat store: the open chat, a delete and its undo
(also of a chat whose reply streams: deleted once the reply stops), edits and regenerates, branches, pins, the
overflow cut a reply keeps, and the rule by which a reply starts a tool step."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.chats.session import ChatSession, title_from
from app.chats.store import ChatStore, ReplyWriter
from app.datatypes import ContextCut, Done, GenerationStats, ToolCall

STATS = GenerationStats(prompt_tokens=1, prompt_ms=1.0, ttft_ms=1.0, generated_tokens=1, decode_ms=1.0,
                        stop_reason="eos", peak_memory_bytes=0)


class Replies:
    """The page's replies as the session sees them (app.ui.chat.reply_session.ReplySession's part of it, without its
    retry timer): the reply streaming now, and the writers the store refused so far."""

    def __init__(self) -> None:
        self.writer: ReplyWriter | None = None
        self.conversation_id: int | None = None
        self.unsaved: list[ReplyWriter] = []

    @property
    def streaming(self) -> bool:
        return self.writer is not None

    def streams_in(self, conversation_id: int) -> bool:
        return self.writer is not None and self.conversation_id == conversation_id

    def save_pending(self) -> bool:
        self.unsaved = [w for w in self.unsaved if not w.save()]
        return not self.unsaved

    def forget(self, conversation_id: int) -> list[ReplyWriter]:
        gone = [w for w in self.unsaved if w.conversation_id == conversation_id]
        self.unsaved = [w for w in self.unsaved if w not in gone]
        return gone

    def keep(self, writers: list[ReplyWriter]) -> None:
        self.unsaved += writers

    def drop_deleted(self, conversation_id: int, kept: set[int]) -> None:
        self.unsaved = [w for w in self.unsaved if w.conversation_id != conversation_id or w.message_id in kept]


@pytest.fixture
def session(tmp_path):
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        yield ChatSession(store, Replies())


def test_a_chat_is_made_opened_renamed_exported_and_its_titles_read(session, tmp_path):
    conv = session.create("/m.gguf")
    store = session.store
    store.add_message(conv.id, "user", "hello")
    assert session.current == conv and [m.content for m in session.open(conv.id)] == ["hello"]
    session.rename("Greetings")
    assert session.current.title == "Greetings" == session.title_of(conv.id)
    assert session.title_of(None) is None and session.title_of(999) is None
    target = session.export(str(tmp_path / "out"), "json")
    assert target.suffix == ".json" and json.loads(target.read_text())["conversation"]["title"] == "Greetings"
    assert session.export(str(tmp_path / "notes.md"), "md").read_text().startswith("# Greetings")
    assert title_from("  a   long\nline ", 48) == "a long line" and title_from("x" * 60, 10) == "xxxxxxxxx…"


def test_a_deleted_chat_comes_back_with_undo_and_its_files_go_once_the_undo_expires(session):
    conv = session.create(None)
    session.store.add_message(conv.id, "user", "keep me")
    undo = session.delete_current()
    assert undo is not None and undo.deleted is not None and session.current is None
    assert [c.id for c in session.store.conversations()] == []
    assert session.undo_delete() == conv.id and session.current.id == conv.id
    assert [m.content for m in session.store.messages(conv.id)] == ["keep me"]
    assert session.undo_delete() is None  # nothing more to undo
    session.delete_current()
    assert session.undo_expired() == conv.id and session.undo is None


def test_a_chat_whose_reply_streams_is_deleted_once_the_reply_stops(session):
    conv = session.create(None)
    replies = session.replies
    replies.writer = session.store.begin_reply(conv.id, prompt="write")
    replies.conversation_id = conv.id
    undo = session.delete_current()
    assert undo is not None and undo.deleted is None and session.pending_delete == conv.id
    assert session.title_of(conv.id) is None  # being deleted: no title to show
    replies.writer.append("half")
    replies.writer.interrupt()
    replies.writer = None
    assert session.delete_stopped() and session.pending_delete is None
    assert undo.deleted is not None and session.store.conversations() == []
    assert session.undo_delete() == conv.id  # and back, with the reply as it stopped
    assert [m.content for m in session.store.messages(conv.id)] == ["write", "half"]
    assert not session.delete_stopped()  # nothing pending


def test_edit_regenerate_branches_and_pins(session):
    conv = session.create(None)
    store = session.store
    question = store.add_message(conv.id, "user", "first")
    answer = store.add_message(conv.id, "assistant", "one")
    session.open(conv.id)
    assert session.edit(question.id).content == "first" and session.edit_after == (conv.id, None)
    session.open(conv.id)
    assert session.edit_after is None  # an edit not resent is abandoned
    session.tool_steps, session.tool_problems = 3, ["x"]
    assert session.regenerate_after(answer.id) == question.id and (session.tool_steps, session.tool_problems) == (0, [])
    again = store.begin_reply(conv.id, after=question.id)
    again.finish(text="two")
    assert [m.content for m in store.messages(conv.id)] == ["first", "two"]
    session.show_branch(answer.id)
    assert [m.content for m in store.messages(conv.id)] == ["first", "one"]
    session.delete_branch(answer.id)
    assert [m.content for m in store.messages(conv.id)] == ["first", "two"]
    assert session.pin(question.id, True) and store.message(question.id).pinned
    assert not session.pin(999, True)  # gone: nothing to pin


def test_a_reply_keeps_a_new_cut_and_not_the_one_it_goes_on_from(session):
    conv = session.create(None)
    writer = session.store.begin_reply(conv.id, prompt="hi")
    before = ContextCut("drop", start=1, dropped=2)
    session.cut_context = (1, before)  # a system prompt first; the branch's last cut
    assert session.keep_cut(writer.message_id, before) == (None, None)
    stored, refused = session.keep_cut(writer.message_id, ContextCut("drop", start=1, dropped=4))
    assert refused is None and stored == session.store.message(writer.message_id).context_cut
    assert stored["start"] == 0 and stored["dropped"] == 4  # kept without the system prompt


def test_a_reply_starts_a_tool_step_by_the_loop_rule_up_to_the_limit(session):
    calls = Done("r", "", STATS, tool_calls=(ToolCall("c1", "files__list", "{}"),))
    stopped = Done("r", "", GenerationStats(**{**STATS.__dict__, "stop_reason": "cancelled"}),
                   tool_calls=calls.tool_calls)
    assert session.tool_step_after(calls, 8) == ""  # the reply was given no tools
    session.offered = ["a tool"]
    assert session.tool_step_after(calls, 8) == "step" and session.tool_step_after(stopped, 8) == ""
    assert session.tool_step_after(Done("r", "words", STATS), 8) == ""
    session.tool_steps = 8
    assert session.tool_step_after(calls, 8) == "limit"
    session.replies.writer = object()  # type: ignore[assignment] - a reply under way keeps its troubles
    assert session.tool_problem("A.") == "A." and session.tool_problem("B.") == "A. B."


def test_the_session_imports_without_qt():
    code = "import sys; sys.modules['PySide6'] = None; import app.chats.session; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_replys_request_is_the_branch_with_its_system_prompt_pins_cut_settings_and_keys(session):
    """``reply_turn``: the branch's turns after the chat's system prompt, the pinned message's index shifted by it, the
    last cut going on (its start stored without the system prompt), the chat's own sampling and overflow policy over
    the default, the tools' last step, and the saved states' keys of the branch."""
    store = session.store
    conv = store.create_conversation(system_prompt="Be brief.", sampling={"temperature": 0.3, "max_tokens": 77})
    store.update_settings(conv.id, overflow="drop-oldest")
    question = store.add_message(conv.id, "user", "first")
    answer = store.add_message(conv.id, "assistant", "one")
    store.set_pinned(question.id, True)
    store.set_context_cut(answer.id, ContextCut(policy="drop-oldest", start=0, dropped=1).to_dict())
    writer = store.begin_reply(conv.id, prompt="second")
    conv = store.conversation(conv.id)
    turn = session.reply_turn(conv, writer, None, [], max_steps=3, default_overflow="stop")
    assert [(m.role, m.content) for m in turn.messages] == [
        ("system", "Be brief."), ("user", "first"), ("assistant", "one"), ("user", "second")]
    assert turn.sampling.temperature == 0.3 and turn.sampling.max_tokens == 77 == session.reply_max_tokens
    policy, previous, keep = turn.overflow
    assert policy == "drop-oldest" == session.reply_overflow and keep == frozenset({1})
    assert previous is not None and previous.start == 1 and session.cut_context == (1, previous)
    assert turn.keys.save  # the reply's own state is saved after it
    store.update_settings(conv.id, overflow="")
    plain = session.reply_turn(store.conversation(conv.id), writer, None, [], max_steps=3, default_overflow="stop")
    assert plain.overflow[0] == "stop"  # the chat's own policy gone: the default
