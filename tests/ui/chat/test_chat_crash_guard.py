"""The crash guard in the Chat, on real engine hosts that abort in a decode as llama.cpp's AMX kernels do on some Xeons
(QUANTDESK_TEST_CRASH) and a real model: the load or the reply goes on in the safer configuration, the banner says
once what happened, and nothing of the chat is lost."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.datatypes import LoadSettings
from app.engine import guard

pytest.importorskip("llama_cpp")
pytestmark = [pytest.mark.real_model]
QUESTION = "What is the capital of France? Answer in one sentence."


def _load(qtbot, window, model):
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        window.chat.load_model(str(model), LoadSettings(n_ctx=1024, gpu_layers=0))
    return loaded.args[0]


def _send(qtbot, window, text: str):
    window.chat.store.update_settings(window.chat.current.id, sampling={"temperature": 0, "max_tokens": 24})
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        qtbot.keyClicks(window.chat.composer, text)
        qtbot.keyClick(window.chat.composer, Qt.Key.Key_Return)
    return done.args[0]


def test_a_crash_at_load_is_survived_and_said_in_the_banner(qtbot, real_window, monkeypatch, smollm2_gguf):
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", "warm-up")
    window = real_window()
    chat = window.chat
    loaded = _load(qtbot, window, smollm2_gguf)
    assert "crashed (SIGABRT) while loading" in loaded.notice
    assert chat.banner.isVisible() and "without llama.cpp's extra buffer types" in chat.banner_text.text()
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in chat.model_label.text()  # loaded, not "the engine stopped"
    chat.new_conversation()
    done = _send(qtbot, window, QUESTION)
    assert "Paris" in done.text and done.notice == ""
    assert [(m.role, m.state) for m in chat.store.messages(chat.current.id)] == [("user", "complete"),
                                                                                ("assistant", "complete")]
    assert [e.rung for e in guard.learned()] == [guard.NO_EXTRA_BUFFER_TYPES]


def test_a_crash_under_a_reply_is_replayed_and_the_chat_keeps_every_message(qtbot, real_window, monkeypatch,
                                                                           smollm2_gguf):
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", "reply")
    window = real_window()
    chat = window.chat
    _load(qtbot, window, smollm2_gguf)
    chat.new_conversation()
    done = _send(qtbot, window, QUESTION)
    assert "Paris" in done.text and "crashed (SIGABRT) during generation" in done.notice
    assert chat.banner.isVisible() and "it works" in chat.banner_text.text()
    assert not chat.reload_button.isVisible()  # nothing to reload: the engine answered
    messages = chat.store.messages(chat.current.id)
    assert [(m.role, m.state) for m in messages] == [("user", "complete"), ("assistant", "complete")]
    assert messages[-1].content == done.text and chat.view.bubbles[-1].state == "complete"
    second = _send(qtbot, window, "And of Italy?")  # the chat goes on with its history on the revived engine
    assert second.notice == "" and len(chat.store.messages(chat.current.id)) == 4
