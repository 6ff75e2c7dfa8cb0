"""The Chat page driven like a user would: keys and buttons, a real store, the engine bridge."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QAbstractButton, QApplication

from backends.base import LoadSettings
from tests.ui.engine_double import EngineDouble

MODEL = "/models/tiny-q8_0.gguf"


def load(qtbot, window, settings: LoadSettings | None = None) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        window.chat.load_model(MODEL, settings or LoadSettings(n_ctx=512))


class _DialogAnswerer(QObject):
    """Clicks a button of the modal dialog once it is open (exec() blocks the test until then)."""

    def __init__(self, button_text: str) -> None:
        super().__init__()
        self.button_text = button_text

    @Slot()
    def answer(self) -> None:
        dialog = QApplication.activeModalWidget()
        if dialog is None:
            QTimer.singleShot(10, self.answer)
            return
        [button] = [b for b in dialog.findChildren(QAbstractButton) if b.text().replace("&", "") == self.button_text]
        button.click()


def answer_with(button_text: str) -> _DialogAnswerer:
    """Keep the returned object until the dialog is answered."""
    answerer = _DialogAnswerer(button_text)
    QTimer.singleShot(0, answerer.answer)
    return answerer


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


def test_edit_and_resend_replaces_the_later_messages(qtbot, make_window):
    engine = EngineDouble(["ok"])
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Frist question")
    qtbot.mouseClick(chat.view.bubbles[0].actions["edit"], Qt.MouseButton.LeftButton)
    assert chat.composer.toPlainText() == "Frist question"
    chat.composer.selectAll()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "First question")
    assert [(m.role, m.content) for m in chat.store.messages(chat.current.id)] == [
        ("user", "First question"), ("assistant", "ok")]


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

    # The confirmation is a real modal dialog; answer it the way a user would, once each way.
    answerer = answer_with("Cancel")
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    assert len(chat.store.conversations()) == 2
    answerer = answer_with("Delete")
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    assert [c.title for c in chat.store.conversations()] == ["Rust questions"]
    assert chat.conversation_list.count() == 1
    del answerer


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
            from backends.base import Loaded

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
