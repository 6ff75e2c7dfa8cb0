"""A thinking model in the Chat, steered exactly by the engine double: the Thinking block streams above the answer,
folds to one line when the answer starts, opens and closes by mouse and keyboard, survives a restart; the thinking
goes back to the engine with its turn; the stats strip shows the thinking apart. (The real engine on a tiny model
with a thinking template: tests/ui/chat/test_chat_real_engine.py.)"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.ui.chat.chat_settings import ChatSettingsDialog
from app.datatypes import Message
from tests.ui.engine_double import EngineDouble
from tests.ui.chat.test_chat_page import load, type_and_send
from tests.ui.common.test_translations import language  # noqa: F401 - fixture: a language installed for one test

THOUGHTS = ["The sky", " scatters", " blue light", " most."]
ANSWER = ["Because of ", "Rayleigh ", "scattering."]


def thinking_engine(**options) -> EngineDouble:
    return EngineDouble(ANSWER, reasoning=THOUGHTS, **options)


def asked_while_thinking(qtbot, make_window, hold_after: int):
    """A window whose engine thinks, asked "Why?"; the engine waits after ``hold_after`` pieces. (engine, chat)"""
    engine = thinking_engine(hold_after=hold_after)
    window = make_window(engine)
    load(qtbot, window)
    type_and_send(qtbot, window.chat, "Why?")
    return engine, window.chat


def look(window, path) -> None:
    """A picture of the window as the user sees it, once the layouts the last changes asked for have run."""
    QApplication.processEvents()
    window.grab().save(str(path))


def test_the_thinking_streams_open_then_folds_when_the_answer_starts(qtbot, make_window, tmp_path):
    engine = thinking_engine(hold_after=2)  # two pieces of thinking, then the engine waits
    window = make_window(engine)
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window)
    type_and_send(qtbot, chat, "Why is the sky blue?")
    bubble = chat.view.bubbles[-1]
    qtbot.waitUntil(lambda: bubble.thinking is not None and bubble.thinking.text.toPlainText() == "The sky scatters",
                    timeout=10_000)
    block = bubble.thinking
    assert block.is_open and block.text.isVisible() and block.summary.startswith("Thinking… ")
    assert not bubble.body.isVisible() and bubble.markdown == ""  # no empty answer box under the thinking
    assert chat.stats.thinking_row.isVisible() and chat.stats.first_answer.text() == "…"
    assert chat.stats.thinking.text().startswith("2 tok · ")
    # what the reply's writer saves as it streams: the thinking apart from the (empty) answer
    assert (chat.reply.writer.reasoning, chat.reply.writer.text) == ("The sky scatters", "")
    look(window, tmp_path / "thinking-streams.png")

    with qtbot.waitSignal(window.bridge.done, timeout=10_000) as done:
        engine.release.set()
    stats = done.args[0].stats
    assert not block.is_open and not block.text.isVisible() and bubble.body.isVisible()
    assert block.summary == "Thought for < 0.1 s · 4 tokens" and stats.reasoning_tokens == 4
    assert bubble.markdown == "Because of Rayleigh scattering."
    assert bubble.body.toPlainText() == "Because of Rayleigh scattering."  # the thinking stays out of the answer
    assert chat.stats.first_answer.text() == "30 ms" and chat.stats.thinking.text() == "4 tok · < 0.1 s"
    assert chat.stats.answer.text() == "3 tok · < 0.1 s" and chat.stats.tokens.text() == "7"
    saved = chat.store.messages(chat.current.id)[-1]
    assert (saved.content, saved.reasoning) == ("Because of Rayleigh scattering.", "The sky scatters blue light most.")
    assert saved.stats["reasoning_tokens"] == 4 and saved.stats["first_answer_ms"] == 30.0
    look(window, tmp_path / "thinking-folded.png")

    # A click opens it, another closes it; the keyboard does the same from the focus.
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)
    assert block.is_open and block.text.isVisible() and block.toggle.toolTip() == "Hide the thinking"
    look(window, tmp_path / "thinking-opened.png")
    qtbot.mouseClick(block.toggle, Qt.MouseButton.LeftButton)
    assert not block.is_open and not block.text.isVisible()
    block.toggle.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.keyClick(block.toggle, Qt.Key.Key_Space)
    assert block.is_open and block.text.isVisible()
    assert block.toggle.accessibleName() == "Thought for < 0.1 s · 4 tokens"
    assert block.toggle.accessibleDescription()


def test_the_summary_says_how_long_it_thought_as_soon_as_the_answer_starts(qtbot, make_window):
    engine, chat = asked_while_thinking(qtbot, make_window, 5)  # all the thinking, the first piece of the answer
    bubble = chat.view.bubbles[-1]
    qtbot.waitUntil(lambda: bubble.markdown == "Because of ", timeout=10_000)
    assert not bubble.thinking.is_open and bubble.thinking.summary == "Thought for < 0.1 s"
    assert chat.stats.first_answer.text() == "30 ms"
    with qtbot.waitSignal(chat.bridge.done, timeout=10_000):
        engine.release.set()


def test_a_block_the_user_opened_stays_open_when_the_answer_starts(qtbot, make_window):
    engine, chat = asked_while_thinking(qtbot, make_window, 2)
    bubble = chat.view.bubbles[-1]
    qtbot.waitUntil(lambda: bubble.thinking is not None, timeout=10_000)
    qtbot.mouseClick(bubble.thinking.toggle, Qt.MouseButton.LeftButton)  # closed by hand while it thinks
    qtbot.mouseClick(bubble.thinking.toggle, Qt.MouseButton.LeftButton)  # and opened again, to read along
    with qtbot.waitSignal(chat.bridge.done, timeout=10_000):
        engine.release.set()
    assert bubble.thinking.is_open and bubble.thinking.summary.startswith("Thought for ")


def test_a_reply_that_only_thinks_shows_its_thinking_open(qtbot, make_window):
    engine = EngineDouble([], reasoning=THOUGHTS)  # out of tokens before the answer
    window = make_window(engine, thinking_engine(hold_after=2))
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Think about it")
    bubble = chat.view.bubbles[-1]
    assert bubble.thinking.is_open and bubble.thinking.text.toPlainText() == "The sky scatters blue light most."
    assert bubble.thinking.summary == "Thought for < 0.1 s · 4 tokens" and not bubble.body.isVisible()
    assert chat.stats.first_answer.text() == "no answer"


def test_a_reply_stopped_while_it_thinks_keeps_its_thinking_open(qtbot, make_window):
    _, chat = asked_while_thinking(qtbot, make_window, 2)
    qtbot.waitUntil(lambda: chat.view.bubbles[-1].thinking is not None, timeout=10_000)
    with qtbot.waitSignal(chat.bridge.done, timeout=10_000):
        qtbot.keyClick(chat.window(), Qt.Key.Key_Escape)
    bubble = chat.view.bubbles[-1]
    assert bubble.thinking.is_open and bubble.thinking.text.toPlainText() == "The sky scatters"
    assert "stopped" in bubble.meta.text()
    saved = chat.store.messages(chat.current.id)[-1]
    assert (saved.content, saved.reasoning, saved.state) == ("", "The sky scatters", "complete")


def test_the_thinking_survives_a_restart_folded_and_goes_back_with_its_turn(qtbot, make_window, tmp_path):
    db = tmp_path / "thinking.sqlite3"
    engine = thinking_engine()
    window = make_window(engine, db=db)
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Why is the sky blue?")
    summary = chat.view.bubbles[-1].thinking.summary
    conversation = chat.current.id
    window.close()

    again = make_window(thinking_engine(), db=db)
    again.chat.open_conversation(conversation)
    bubble = again.chat.view.bubbles[-1]
    assert bubble.thinking.summary == summary and not bubble.thinking.is_open
    assert bubble.thinking.text.toPlainText() == "The sky scatters blue light most."
    assert bubble.markdown == "Because of Rayleigh scattering."
    assert again.chat.view.bubbles[0].thinking is None  # the user's message has none
    load(qtbot, again)
    with qtbot.waitSignal(again.bridge.done, timeout=10_000):
        type_and_send(qtbot, again.chat, "And at dusk?")
    sent = again.bridge.client.current.requests[-1]
    # the engine gets the thinking with its turn; the model's template decides whether the model sees it again
    assert sent[:2] == [Message("user", "Why is the sky blue?"),
                        Message("assistant", "Because of Rayleigh scattering.",
                                reasoning="The sky scatters blue light most.")]
    assert sent[2] == Message("user", "And at dusk?")


def test_each_version_of_a_reply_keeps_its_own_thinking(qtbot, make_window):
    engine = thinking_engine()
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Why?")
    engine.reasoning, engine.reply = ["Another", " thought."], ["Another ", "answer."]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.mouseClick(chat.view.bubbles[-1].actions["regenerate"], Qt.MouseButton.LeftButton)
    newer = chat.view.bubbles[-1]
    assert newer.thinking.text.toPlainText() == "Another thought." and newer.branches.index == 2
    assert newer.thinking.summary == "Thought for < 0.1 s · 2 tokens"
    qtbot.mouseClick(newer.previous_branch, Qt.MouseButton.LeftButton)
    older = chat.view.bubbles[-1]
    assert older.thinking.text.toPlainText() == "The sky scatters blue light most."
    assert older.markdown == "Because of Rayleigh scattering." and older.branches.index == 1


def test_a_reply_without_thinking_shows_no_block_and_no_thinking_figures(qtbot, make_window):
    window = make_window(EngineDouble())
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Hi")
    assert chat.view.bubbles[-1].thinking is None and chat.view.bubbles[-1].body.isVisible()
    assert not chat.stats.thinking_row.isVisible() and chat.stats.tokens.text() == "4"


def test_the_chat_settings_turn_thinking_off_and_set_a_budget(qtbot, make_window):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    chat.new_conversation()
    dialog = ChatSettingsDialog(chat.store, chat.current, window)
    qtbot.addWidget(dialog)
    assert (dialog.thinking.currentText(), dialog.effort.currentText(), dialog.budget.text()) == (
        "Model default", "Model default", "no limit")
    dialog.thinking.setCurrentIndex(dialog.thinking.findText("Off"))
    dialog.effort.setCurrentIndex(dialog.effort.findText("High"))
    dialog.budget.setValue(256)
    dialog.accept()
    sampling = chat.store.conversation(chat.current.id).sampling
    assert (sampling["enable_thinking"], sampling["reasoning_effort"], sampling["reasoning_budget"]) == (
        False, "high", 256)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Quick: 2+2?")
    asked = engine.samplings[-1]
    assert (asked.enable_thinking, asked.reasoning_effort, asked.reasoning_budget) == (False, "high", 256)
    reopened = ChatSettingsDialog(chat.store, chat.store.conversation(chat.current.id), window)
    qtbot.addWidget(reopened)
    assert (reopened.thinking.currentText(), reopened.effort.currentText(), reopened.budget.value()) == (
        "Off", "High", 256)
    # a preset carries them too
    reopened.save_preset("Fast")
    other = ChatSettingsDialog(chat.store, chat.store.create_conversation("other"), window)
    qtbot.addWidget(other)
    other.apply_preset("Fast")
    assert (other.thinking.currentData(), other.effort.currentData(), other.budget.value()) == (False, "high", 256)


def test_the_effort_is_offered_only_where_the_model_reads_it(qtbot, make_window, tmp_path, tiny_thinking_model,
                                                            llama_cpp_sources):
    """Qwen3.5's template has no reasoning_effort (a GGUF's header says so); gpt-oss's has (a model folder's
    chat_template.jinja); a remote model's server is sent it and decides."""
    store = make_window().chat.store
    qwen = ChatSettingsDialog(store, store.create_conversation("qwen", model_path=str(tiny_thinking_model)))
    gpt_oss_folder = tmp_path / "gpt-oss-mlx"
    gpt_oss_folder.mkdir()
    (gpt_oss_folder / "chat_template.jinja").write_text(llama_cpp_sources.templates["openai-gpt-oss-120b.jinja"],
                                                        encoding="utf-8")
    gpt_oss = ChatSettingsDialog(store, store.create_conversation("oss", model_path=str(gpt_oss_folder)))
    remote = ChatSettingsDialog(store, store.create_conversation("far", model_path="remote:lab/gpt-oss-20b"))
    for dialog in (qwen, gpt_oss, remote):
        qtbot.addWidget(dialog)
    assert not qwen.effort.isEnabled() and not qwen.effort_note.isHidden()
    assert qwen.effort_note.text().startswith(f"{tiny_thinking_model.name} does not read a thinking effort")
    assert qwen.effort.toolTip() == qwen.effort.accessibleDescription() == qwen.effort_note.text()
    assert gpt_oss.effort.isEnabled() and remote.effort.isEnabled() and gpt_oss.effort_note.isHidden()
    assert qwen.thinking.isEnabled() and qwen.budget.isEnabled()  # on / off and the budget work for every model


def test_a_thinking_reply_has_accessible_names_and_is_announced_once(qtbot, make_window, monkeypatch):
    from tests.ui.test_accessibility import unnamed_controls

    said = []
    monkeypatch.setattr("app.ui.chat.chat_stream.announce", lambda _widget, text: said.append(text))
    window = make_window(thinking_engine(), EngineDouble([], reasoning=THOUGHTS))
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Why?")
    assert unnamed_controls(window) == []
    block = chat.view.bubbles[-1].thinking
    assert block.text.accessibleName() == "Thinking text" and block.toggle.accessibleName() == block.summary
    assert said == ["Reply done: Because of Rayleigh scattering."]  # the answer, not the thinking


def test_the_thinking_block_speaks_german(qtbot, make_window, language):  # noqa: F811 (the fixture imported)
    language("de")
    window = make_window(thinking_engine())
    chat = window.chat
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, chat, "Warum?")
    block = chat.view.bubbles[-1].thinking
    assert block.summary == "< 0,1 s nachgedacht · 4 Tokens"
    assert block.toggle.toolTip() == "Nachdenken zeigen"
    assert chat.stats.thinking.text() == "4 Tok. · < 0,1 s"


def test_a_chat_reopened_while_its_reply_thinks_shows_the_thinking_so_far_and_goes_on(qtbot, make_window):
    from tests.ui.chat.test_chat_page import select_chat

    engine = thinking_engine(hold_after=2)
    window = make_window(engine)
    chat = window.chat
    load(qtbot, window)
    chat.store.create_conversation("Other chat")
    chat.new_conversation()
    type_and_send(qtbot, chat, "Why?")
    qtbot.waitUntil(lambda: engine.holding.is_set() and chat.view.bubbles[-1].thinking is not None
                    and chat.view.bubbles[-1].thinking.text.toPlainText() == "The sky scatters", timeout=10_000)
    select_chat(qtbot, chat, "Other chat")
    select_chat(qtbot, chat, "Why?")
    bubble = chat.view.bubbles[-1]
    assert bubble.thinking.text.toPlainText() == "The sky scatters" and bubble.thinking.is_open
    assert not bubble.body.isVisible()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert bubble.thinking.text.toPlainText() == "The sky scatters blue light most." and not bubble.thinking.is_open
    assert bubble.markdown == "Because of Rayleigh scattering." and bubble.body.isVisible()
