"""The Chat page driven like a user would: keys and buttons, a real store, the engine bridge."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication

from app.chats import export as chat_export
from app.chats.store import ChatStoreError
from app.datatypes import LoadSettings
from tests.ui.engine_double import EngineDouble

MODEL = "/models/tiny-q8_0.gguf"


def load(qtbot, window, settings: LoadSettings | None = None) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        window.chat.load_model(MODEL, settings or LoadSettings(n_ctx=512))


def type_and_send(qtbot, chat, text: str) -> None:
    qtbot.keyClicks(chat.composer, text)
    qtbot.keyClick(chat.composer, Qt.Key.Key_Return)


def test_stream_stop_regenerate_and_history_after_restart(qtbot, make_window, tmp_path):
    engine = EngineDouble(["The ", "answer ", "is ", "**42**", "."], hold_after=2)
    window = make_window(engine)
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window)
    assert "tiny-q8_0.gguf" in chat.model_label.text() and "context 512" in chat.model_label.text()

    type_and_send(qtbot, chat, "What is the answer?")
    # Tokens show while the reply is still being written (the engine holds after two).
    qtbot.waitUntil(lambda: chat.view.bubbles[-1].body.toPlainText() == "The answer ", timeout=10_000)
    assert chat.stats.tokens.text() == "2"
    assert chat.stop_button.isEnabled() and not chat.send_button.isEnabled()
    saved = chat.store.messages(chat.current.id)
    assert [(m.role, m.state) for m in saved] == [("user", "complete"), ("assistant", "streaming")]
    assert engine.requests[-1][-1].content == "What is the answer?"

    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    reply = chat.store.messages(chat.current.id)[-1]
    assert (reply.content, reply.state, reply.stats["stop_reason"]) == ("The answer ", "complete", "cancelled")
    assert "stopped" in chat.view.bubbles[-1].meta.text()
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()

    engine.hold_after = None
    bubble = chat.view.bubbles[-1]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(bubble.actions["regenerate"], Qt.MouseButton.LeftButton)
    msgs = chat.store.messages(chat.current.id)
    assert [(m.role, m.content, m.state) for m in msgs] == [
        ("user", "What is the answer?", "complete"), ("assistant", "The answer is **42**.", "complete")]
    assert [m.content for m in engine.requests[-1]] == ["What is the answer?"]  # the old reply is not resent
    assert chat.view.bubbles[-1].body.toPlainText() == "The answer is 42."  # rendered as Markdown once done
    assert chat.stats.tokens.text() == "5"
    conversation_id = chat.current.id
    window.close()

    again = make_window(EngineDouble())
    again.chat.open_conversation(conversation_id)
    assert [b.markdown for b in again.chat.view.bubbles] == ["What is the answer?", "The answer is **42**."]
    assert again.chat.conversation_list.item(0).text() == "What is the answer?"


def test_engine_crash_mid_reply_keeps_history_and_offers_reload(qtbot, make_window):
    crashing = EngineDouble(["Partial ", "reply ", "lost"], crash_after=2)
    window = make_window(crashing, EngineDouble(["fresh"]))
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.crashed, timeout=10_000):
        type_and_send(qtbot, chat, "Tell me")
    assert chat.banner.isVisible()
    assert "The engine stopped unexpectedly" in chat.banner_text.text()
    assert chat.reload_button.isVisible()
    msgs = chat.store.messages(chat.current.id)
    assert [(m.role, m.content, m.state) for m in msgs] == [
        ("user", "Tell me", "complete"), ("assistant", "Partial reply ", "interrupted")]
    assert "interrupted" in chat.view.bubbles[-1].meta.text()
    assert chat.loaded is None
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        qtbot.mouseClick(chat.reload_button, Qt.MouseButton.LeftButton)
    assert not chat.banner.isVisible()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Again")
    assert chat.store.messages(chat.current.id)[-1].content == "fresh"


def test_sending_without_a_model_says_what_to_do(qtbot, make_window):
    window = make_window()
    type_and_send(qtbot, window.chat, "hello?")
    assert window.chat.banner.isVisible() and "Load a model first" in window.chat.banner_text.text()
    assert window.chat.composer.toPlainText() == "hello?"  # nothing the user typed is lost
    assert window.chat.store.conversations() == []


def test_shift_enter_is_a_new_line_not_a_send(qtbot, make_window):
    engine = EngineDouble()
    window = make_window(engine)
    load(qtbot, window)
    composer = window.chat.composer
    qtbot.keyClicks(composer, "line one")
    qtbot.keyClick(composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(composer, "line two")
    assert composer.toPlainText() == "line one\nline two"
    assert engine.requests == []
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClick(composer, Qt.Key.Key_Enter)
    assert engine.requests[0][-1].content == "line one\nline two"


def test_system_prompt_and_sampling_of_the_chat_are_used(qtbot, make_window):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    conv = chat.store.create_conversation("Pirate", system_prompt="Talk like a pirate.",
                                          sampling={"temperature": 0.3, "unknown_future_key": 1})
    chat.refresh_conversations()
    chat.open_conversation(conv.id)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Hi")
    assert [(m.role, m.content) for m in engine.requests[0]] == [("system", "Talk like a pirate."), ("user", "Hi")]


def test_edit_and_resend_makes_a_new_version_beside_the_old_one(qtbot, make_window):
    engine = EngineDouble(["ok"])
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Frist question")
    qtbot.mouseClick(chat.view.bubbles[0].actions["edit"], Qt.MouseButton.LeftButton)
    assert chat.composer.toPlainText() == "Frist question" and chat.view.bubbles == []
    chat.composer.selectAll()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "First question")
    assert [(m.role, m.content) for m in chat.store.messages(chat.current.id)] == [
        ("user", "First question"), ("assistant", "ok")]
    assert [m.content for m in engine.requests[-1]] == ["First question"]  # the old version is not sent
    first = chat.view.bubbles[0]
    assert first.branch_bar.isVisible() and first.branch_position.text() == "2/2"
    assert not chat.view.bubbles[1].branch_bar.isVisible()  # one reply to this version


def test_branches_switch_delete_and_survive_a_restart(qtbot, make_window):
    engine = EngineDouble(["first ", "reply"])
    window = make_window(engine)
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Tell me a story")
    for pieces in (["second ", "reply"], ["third ", "reply"]):  # written again twice: three versions
        engine.reply = pieces
        with qtbot.waitSignal(window.bridge.done, timeout=10_000):
            qtbot.mouseClick(chat.view.bubbles[-1].actions["regenerate"], Qt.MouseButton.LeftButton)
    reply = chat.view.bubbles[-1]
    assert reply.markdown == "third reply" and reply.branch_position.text() == "3/3"
    assert not reply.next_branch.isEnabled() and reply.previous_branch.isEnabled()
    assert [m.content for m in engine.requests[-1]] == ["Tell me a story"]  # no old version is sent

    qtbot.mouseClick(reply.previous_branch, Qt.MouseButton.LeftButton)
    reply = chat.view.bubbles[-1]
    assert reply.markdown == "second reply" and reply.branch_position.text() == "2/3"
    # The next message follows the version on show.
    engine.reply = ["fine"]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Shorter please")
    assert [m.content for m in engine.requests[-1]] == ["Tell me a story", "second reply", "Shorter please"]

    qtbot.mouseClick(chat.view.bubbles[1].delete_branch, Qt.MouseButton.LeftButton)  # "second reply" and after
    assert [b.markdown for b in chat.view.bubbles] == ["Tell me a story", "first reply"]
    assert chat.view.bubbles[1].branch_position.text() == "1/2"
    qtbot.mouseClick(chat.view.bubbles[1].next_branch, Qt.MouseButton.LeftButton)
    assert [b.markdown for b in chat.view.bubbles] == ["Tell me a story", "third reply"]
    conversation_id = chat.current.id
    window.close()

    again = make_window(EngineDouble())
    again.chat.open_conversation(conversation_id)
    bubbles = again.chat.view.bubbles
    assert [b.markdown for b in bubbles] == ["Tell me a story", "third reply"]
    assert bubbles[1].branch_position.text() == "2/2"
    qtbot.mouseClick(bubbles[1].previous_branch, Qt.MouseButton.LeftButton)
    assert [b.markdown for b in again.chat.view.bubbles] == ["Tell me a story", "first reply"]


def test_new_rename_search_and_delete_conversations(qtbot, make_window):
    window = make_window()
    chat = window.chat
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page == "Chat" and chat.current is not None
    first = chat.current.id
    chat.rename_current("Trip to Iceland")
    chat.store.add_message(first, "user", "pack a wool sweater")
    chat.new_conversation()
    chat.rename_current("Rust questions")
    assert [chat.conversation_list.item(i).text() for i in range(chat.conversation_list.count())] == [
        "Rust questions", "Trip to Iceland"]
    qtbot.keyClicks(chat.search_box, "sweat")
    assert [chat.conversation_list.item(i).text() for i in range(chat.conversation_list.count())] == [
        "Trip to Iceland"]
    chat.search_box.clear()
    chat.conversation_list.setCurrentRow(1)
    assert chat.current.id == first

    # Delete happens at once (no dialog); the bar offers it back, exactly as it was.
    chat.store.update_settings(first, system_prompt="Be brief.", sampling={"temperature": 0.2})
    before = chat_export.to_json(chat.store, first)
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    assert [c.title for c in chat.store.conversations()] == ["Rust questions"]
    assert chat.conversation_list.count() == 1 and chat.current.title == "Rust questions"
    assert chat.undo_bar.isVisible() and chat.undo_bar.label.text() == "Chat “Trip to Iceland” deleted"
    assert chat.undo_bar.timer.isActive() and chat.undo_bar.timer.interval() == 10_000
    qtbot.mouseClick(chat.undo_bar.undo_button, Qt.MouseButton.LeftButton)
    assert not chat.undo_bar.isVisible()
    assert chat.current.id == first and chat_export.to_json(chat.store, first) == before
    assert [b.markdown for b in chat.view.bubbles] == ["pack a wool sweater"]
    assert [chat.conversation_list.item(i).text() for i in range(chat.conversation_list.count())] == [
        "Trip to Iceland", "Rust questions"]

    # Left alone, the offer lapses and the delete stands.
    chat.undo_bar.timer.setInterval(50)
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.undo_bar.isVisible(), timeout=5_000)
    chat.undo_bar.undo_requested.emit()  # a late undo (e.g. a queued click) brings nothing back
    assert [c.title for c in chat.store.conversations()] == ["Rust questions"]
    assert chat.conversation_list.count() == 1


def test_copy_code_link_copies_just_the_code(qtbot, make_window):
    engine = EngineDouble(["Try:\n\n```python\nprint('hi')\n```\n\nDone."])
    window = make_window(engine)
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, window.chat, "code please")
    bubble = window.chat.view.bubbles[-1]
    assert "Copy code" in bubble.body.toPlainText()
    bubble.body.anchorClicked.emit(QUrl("quantdesk-copy:0"))
    assert QGuiApplication.clipboard().text() == "print('hi')"


def test_a_partial_gpu_load_warns_that_layers_spilled(qtbot, make_window):
    class PartialGpu(EngineDouble):
        def load(self, model_path, settings, on_progress=None):
            from app.datatypes import Loaded

            return Loaded("llama.cpp", model_path, settings.n_ctx, 32, 20, True, {"cuda:0": 6 * 2**30}, 900.0)

    window = make_window(PartialGpu())
    load(qtbot, window, LoadSettings(n_ctx=8192, gpu_layers=-1))
    assert window.chat.banner.isVisible()
    assert "Only 20 of 32 layers fit on the GPU" in window.chat.banner_text.text()
    assert "20/32 layers on GPU" in window.chat.model_label.text()


def test_a_failed_load_keeps_the_model_that_was_loaded(qtbot, make_window):
    class FailsSecondLoad(EngineDouble):
        def load(self, model_path, settings, on_progress=None):
            if self.loads:
                from app.errors import EngineError

                raise EngineError("this file is not a GGUF model", kind="load")
            return super().load(model_path, settings)

    window = make_window(FailsSecondLoad())
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.failed, timeout=10_000):
        chat.load_model("/models/notes.txt", LoadSettings())
    assert "not a GGUF model" in chat.banner_text.text() and not chat.reload_button.isVisible()
    assert "tiny-q8_0.gguf" in chat.model_label.text() and chat.loaded is not None
    assert chat.load_button.isEnabled() and not chat.load_progress.isVisible()


def select_chat(qtbot, chat, title: str) -> None:
    """Click the conversation called ``title`` in the list, as a user would."""
    chats = chat.conversation_list
    [item] = [chats.item(i) for i in range(chats.count()) if chats.item(i).text() == title]
    qtbot.mouseClick(chats.viewport(), Qt.MouseButton.LeftButton, pos=chats.visualItemRect(item).center())


HELD_STORY = ["Once ", "upon ", "a ", "time", "."]


def story_beside_another_chat(qtbot, make_window, engine_class=None, **engine_options):
    """A window with a chat "Other chat" holding one message, and a reply held mid-way (after "Once upon ") in a
    chat "Tell a story": (window, engine, story id, other id)."""
    engine = (engine_class or EngineDouble)(HELD_STORY, hold_after=2, **engine_options)
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    other = chat.store.create_conversation("Other chat")
    chat.store.add_message(other.id, "user", "unrelated")
    chat.new_conversation()
    type_and_send(qtbot, chat, "Tell a story")
    qtbot.waitUntil(lambda: engine.holding.is_set() and chat.view.bubbles[-1].markdown == "Once upon ",
                    timeout=10_000)
    return window, engine, chat.current.id, other.id


def test_a_reply_keeps_streaming_into_its_own_chat_while_another_is_open(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window)
    chat = window.chat
    reply_id = chat.store.messages(story)[-1].id

    select_chat(qtbot, chat, "Other chat")
    assert chat.current.id == other
    assert [b.markdown for b in chat.view.bubbles] == ["unrelated"]
    assert chat.stop_button.isEnabled() and not chat.send_button.isEnabled()
    assert "Tell a story" in chat.stats.source.text()  # the live figures say whose they are

    # Back while it is still held: the text so far (more than the store has saved yet) is there...
    select_chat(qtbot, chat, "Tell a story")
    assert [b.markdown for b in chat.view.bubbles] == ["Tell a story", "Once upon "]
    assert chat.view.bubbles[-1].state == "streaming"
    assert not chat.stats.source.isVisible()
    # ...and the rest streams live into that bubble.
    seen: list[str] = []
    window.bridge.tokens.connect(lambda *_: seen.append(chat.view.bubble(reply_id).markdown))
    select_chat(qtbot, chat, "Other chat")
    select_chat(qtbot, chat, "Tell a story")
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert seen and seen[-1] == "Once upon a time."
    assert chat.view.bubbles[-1].markdown == "Once upon a time."
    assert "5 tok" in chat.view.bubbles[-1].meta.text() or "tok/s" in chat.view.bubbles[-1].meta.text()
    assert chat.stats.tokens.text() == "5"
    reply = chat.store.message(reply_id)
    assert (reply.content, reply.state, reply.stats["generated_tokens"]) == ("Once upon a time.", "complete", 5)
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()


def test_a_reply_that_finishes_while_another_chat_is_open_is_all_there_on_return(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window)
    chat = window.chat

    select_chat(qtbot, chat, "Other chat")
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert [b.markdown for b in chat.view.bubbles] == ["unrelated"]  # nothing leaked into the open chat
    assert [m.content for m in chat.store.messages(other)] == ["unrelated"]
    assert chat.send_button.isEnabled()

    select_chat(qtbot, chat, "Tell a story")
    assert [b.markdown for b in chat.view.bubbles] == ["Tell a story", "Once upon a time."]
    assert chat.view.bubbles[-1].state == "complete" and "tok/s" in chat.view.bubbles[-1].meta.text()
    assert chat.stats.tokens.text() == "5" and not chat.stats.source.isVisible()
    assert [(m.content, m.state) for m in chat.store.messages(story)] == [
        ("Tell a story", "complete"), ("Once upon a time.", "complete")]


def test_stop_stops_a_reply_streaming_in_another_chat(qtbot, make_window):
    window, engine, story, _other = story_beside_another_chat(qtbot, make_window)
    chat = window.chat
    select_chat(qtbot, chat, "Other chat")
    assert chat.current.id == _other
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    reply = chat.store.messages(story)[-1]
    assert (reply.content, reply.state, reply.stats["stop_reason"]) == ("Once upon ", "complete", "cancelled")
    select_chat(qtbot, chat, "Tell a story")
    assert "stopped" in chat.view.bubbles[-1].meta.text()


def test_sending_in_another_chat_while_a_reply_streams_waits_and_says_why(qtbot, make_window):
    window, engine, _story, other = story_beside_another_chat(qtbot, make_window)
    chat = window.chat
    select_chat(qtbot, chat, "Other chat")
    type_and_send(qtbot, chat, "And another thing")
    assert len(engine.requests) == 1
    assert chat.composer.toPlainText() == "And another thing"  # kept for later
    assert chat.banner.isVisible() and "Tell a story" in chat.banner_text.text()
    assert "Tell a story" in chat.send_button.toolTip()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert not chat.banner.isVisible()  # the notice is gone with its reason
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert [m.content for m in chat.store.messages(other)][:2] == ["unrelated", "And another thing"]


class SlowToStop(EngineDouble):
    """Holds on after the first Stop until the test releases it, so the test sees the time in
    between; a second Stop (the bridge shutting down) releases it."""

    def cancel(self, request_id: str | None = None) -> None:
        if self._cancelled.is_set():
            self.release.set()
        self._cancelled.set()


def test_deleting_the_chat_that_streams_stops_the_reply_then_deletes_and_undo_brings_it_back(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window, SlowToStop)
    chat = window.chat
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    # Gone from the list at once; in the store until the engine has stopped and the reply is saved.
    assert [chat.conversation_list.item(i).text() for i in range(chat.conversation_list.count())] == ["Other chat"]
    assert chat.current.id == other and chat.undo_bar.isVisible()
    assert story in [c.id for c in chat.store.conversations()]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert [c.id for c in chat.store.conversations()] == [other]
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()
    assert [b.markdown for b in chat.view.bubbles] == ["unrelated"]

    qtbot.mouseClick(chat.undo_bar.undo_button, Qt.MouseButton.LeftButton)
    assert chat.current.id == story
    assert [(m.content, m.state, (m.stats or {}).get("stop_reason")) for m in chat.store.messages(story)] == [
        ("Tell a story", "complete", None), ("Once upon ", "complete", "cancelled")]
    assert [b.markdown for b in chat.view.bubbles] == ["Tell a story", "Once upon "]
    assert "stopped" in chat.view.bubbles[-1].meta.text()


def test_undo_before_the_streaming_chat_has_stopped_keeps_it(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window, SlowToStop)
    chat = window.chat
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(chat.undo_bar.undo_button, Qt.MouseButton.LeftButton)
    assert chat.current.id == story
    assert [b.markdown for b in chat.view.bubbles] == ["Tell a story", "Once upon "]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert {c.id for c in chat.store.conversations()} == {story, other}
    reply = chat.store.messages(story)[-1]
    assert (reply.content, reply.stats["stop_reason"]) == ("Once upon ", "cancelled")  # the delete's stop stands
    assert "stopped" in chat.view.bubbles[-1].meta.text()


def test_a_chat_deleted_while_it_streams_stays_deleted_when_the_window_closes(qtbot, make_window):
    window, engine, _story, other = story_beside_another_chat(qtbot, make_window, SlowToStop)
    chat = window.chat
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    window.close()
    engine.release.set()
    assert [c.id for c in chat.store.conversations()] == [other]


def test_what_the_engine_sends_after_the_window_closed_does_not_reach_the_closed_store(qtbot, make_window):
    """The app closes the chat store right after the window; the engine may still be ending the stopped reply
    (it ended after the store closed, and the page read the store for its Stop button's tooltip)."""
    window, engine, _story, _other = story_beside_another_chat(qtbot, make_window, SlowToStop)
    select_chat(qtbot, window.chat, "Other chat")  # the reply streams in a chat that is not open
    window.close()
    window.chat.store.close()
    with qtbot.waitSignal(window.bridge.busy_changed, timeout=10_000):
        engine.release.set()


def test_an_engine_crash_while_another_chat_is_open_keeps_the_reply_so_far_in_its_chat(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window, crash_after=3)
    chat = window.chat
    select_chat(qtbot, chat, "Other chat")
    with qtbot.waitSignal(window.bridge.crashed, timeout=10_000):
        engine.release.set()
    assert [b.markdown for b in chat.view.bubbles] == ["unrelated"]
    assert "interrupted" in chat.banner_text.text()
    select_chat(qtbot, chat, "Tell a story")
    assert [(m.content, m.state) for m in chat.store.messages(story)][-1] == ("Once upon a ", "interrupted")
    assert chat.view.bubbles[-1].markdown == "Once upon a " and "interrupted" in chat.view.bubbles[-1].meta.text()


# --- a full disk under the chat database ---------------------------------------------------------
# SQLite's own limit on the store's real connection: the database may not grow past the pages it has
# (PRAGMA max_page_count), so SQLite itself refuses writes with SQLITE_FULL, "database or disk is
# full", exactly as on a full disk (tests/chats/test_store_disk_full.py does that on a real one).

STORY = ["Once ", "upon ", "a time. " + "la " * 700, "The end."]  # the third is long enough to be saved at once


def fill_up(store) -> None:
    """Take every page the database has, then forbid new ones."""
    filler = store.create_conversation("Filler")
    store._db.execute("PRAGMA max_page_count=1")  # never below the current size: it stops there
    for size in (4000, 1000, 250, 60, 15, 1):
        try:
            while True:
                store.add_message(filler.id, "user", "f" * size)
        except (ChatStoreError, sqlite3.OperationalError):  # the latter from a store that does not say it in words
            pass


def free_space(store) -> None:
    store._db.execute("PRAGMA max_page_count=1073741823")


def start_story_on_a_filling_disk(qtbot, window, engine) -> int:
    """A reply held after "Once upon " in a chat "Tell a story"; then the disk fills. Returns the reply's id."""
    chat = window.chat
    load(qtbot, window)
    type_and_send(qtbot, chat, "Tell a story")
    qtbot.waitUntil(lambda: engine.holding.is_set() and chat.view.bubbles[-1].markdown == "Once upon ", timeout=10_000)
    fill_up(chat.store)
    return chat.view.bubbles[-1].message_id


def test_a_reply_the_full_disk_refuses_streams_on_says_so_and_save_now_saves_it_whole(qtbot, make_window):
    engine = EngineDouble(STORY, hold_after=2)
    window = make_window(engine)
    chat = window.chat
    reply_id = start_story_on_a_filling_disk(qtbot, window, engine)
    story = chat.current.id
    seen: list[tuple[str, bool]] = []
    window.bridge.tokens.connect(lambda *_: seen.append((chat.view.bubble(reply_id).markdown, chat.banner.isVisible())))
    with qtbot.waitSignal(window.bridge.done, timeout=10_000) as done:
        engine.release.set()
    text = "".join(STORY)
    stats = done.args[0].stats.to_public_dict()

    # The reply streamed on into the view and the banner said so while it did; it ended normally.
    assert seen and seen[-1] == (text, True)
    bubble = chat.view.bubble(reply_id)
    assert bubble.markdown == text and bubble.state == "complete" and "tok/s" in bubble.meta.text()
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()
    assert chat.banner.isVisible() and chat.save_button.isVisible()
    notice = chat.banner_text.text()
    assert notice.startswith("Cannot save the reply: the disk that holds the chat database is full.")
    assert "not saved yet" in notice and f"free some space on the disk with {chat.store.path.parent}" in notice
    saved = chat.store.message(reply_id)
    assert saved.state == "streaming" and text.startswith(saved.content) and saved.content != text

    # Opening the chat again shows the reply as it is, not as the store still has it.
    select_chat(qtbot, chat, "Filler")
    select_chat(qtbot, chat, "Tell a story")
    assert chat.current.id == story
    assert chat.view.bubbles[-1].markdown == text and chat.view.bubbles[-1].state == "complete"

    qtbot.mouseClick(chat.save_button, Qt.MouseButton.LeftButton)  # still full: nothing changes
    assert chat.banner.isVisible() and chat.store.message(reply_id).state == "streaming"
    free_space(chat.store)
    qtbot.mouseClick(chat.save_button, Qt.MouseButton.LeftButton)
    assert not chat.banner.isVisible()
    saved = chat.store.message(reply_id)
    assert (saved.content, saved.state, saved.stats) == (text, "complete", stats)
    assert not chat.reply.retry_timer.isActive()


def test_a_message_the_full_disk_refuses_is_not_sent_and_stays_in_the_composer(qtbot, make_window):
    engine = EngineDouble(["ok"])
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "First question")
    conv = chat.current.id
    before = chat.store.messages(conv)
    fill_up(chat.store)
    select_chat(qtbot, chat, "First question")

    type_and_send(qtbot, chat, "Second question")
    assert chat.composer.toPlainText() == "Second question"
    assert len(engine.requests) == 1
    assert chat.banner.isVisible() and not chat.save_button.isVisible()
    assert chat.banner_text.text() == (
        "Cannot save your message: the disk that holds the chat database is full. It stays in the box below: "
        f"free some space on the disk with {chat.store.path.parent}, then send it again.")
    assert [b.markdown for b in chat.view.bubbles] == ["First question", "ok"]
    assert chat.store.messages(conv) == before
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()

    free_space(chat.store)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert not chat.banner.isVisible() and chat.composer.toPlainText() == ""
    assert [(m.role, m.content) for m in chat.store.messages(conv)] == [
        ("user", "First question"), ("assistant", "ok"), ("user", "Second question"), ("assistant", "ok")]


def test_send_saves_the_reply_the_full_disk_refused_first(qtbot, make_window):
    engine = EngineDouble(STORY, hold_after=2)
    window = make_window(engine)
    chat = window.chat
    reply_id = start_story_on_a_filling_disk(qtbot, window, engine)
    story = chat.current.id
    with qtbot.waitSignal(window.bridge.done, timeout=10_000) as done:
        engine.release.set()
    engine.reply, engine.hold_after = ["Sure."], None

    type_and_send(qtbot, chat, "Another one")  # still full: neither the reply nor this can be saved
    assert chat.composer.toPlainText() == "Another one" and len(engine.requests) == 1
    notice = chat.banner_text.text()
    assert notice.startswith("Your message is not sent yet: it stays in the box below.")
    assert "Cannot save the reply: the disk that holds the chat database is full." in notice
    assert chat.save_button.isVisible()

    free_space(chat.store)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(chat.send_button, Qt.MouseButton.LeftButton)
    assert not chat.banner.isVisible()
    assert [(m.id == reply_id, m.content, m.state, m.stats) for m in chat.store.messages(story)][1:] == [
        (True, "".join(STORY), "complete", done.args[0].stats.to_public_dict()),
        (False, "Another one", "complete", None),
        (False, "Sure.", "complete", chat.store.messages(story)[-1].stats)]
    assert [m.content for m in engine.requests[-1]] == ["Tell a story", "".join(STORY), "Another one"]


def test_a_crash_on_a_full_disk_keeps_the_reply_and_the_retry_saves_it_once_there_is_room(qtbot, make_window):
    engine = EngineDouble(STORY, hold_after=2, crash_after=3)
    window = make_window(engine)
    chat = window.chat
    reply_id = start_story_on_a_filling_disk(qtbot, window, engine)
    with qtbot.waitSignal(window.bridge.crashed, timeout=10_000):
        engine.release.set()
    kept = "".join(STORY[:3])
    notice = chat.banner_text.text()
    assert "The engine stopped unexpectedly" in notice and "The reply so far is kept and marked interrupted." in notice
    assert "Your conversation is saved" not in notice  # it is not, yet
    assert "Cannot save the reply: the disk that holds the chat database is full." in notice
    assert chat.reload_button.isVisible() and chat.save_button.isVisible()
    assert chat.view.bubble(reply_id).markdown == kept and "interrupted" in chat.view.bubble(reply_id).meta.text()
    assert chat.reply.retry_timer.isActive()

    chat.reply.retry_timer.setInterval(20)
    free_space(chat.store)
    qtbot.waitUntil(lambda: not chat.save_button.isVisible(), timeout=5_000)
    assert "not saved" not in chat.banner_text.text() and "The engine stopped unexpectedly" in chat.banner_text.text()
    assert chat.reload_button.isVisible()
    saved = chat.store.message(reply_id)
    assert (saved.content, saved.state) == (kept, "interrupted")
    assert not chat.reply.retry_timer.isActive()
