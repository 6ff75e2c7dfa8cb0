"""The Chat page against the real engine: a child-process host running the tiny GGUF through
llama.cpp. Load → send → tokens stream in → stats → stop → regenerate → restart → history; and the
engine killed mid-reply."""

from __future__ import annotations

import os
import signal
import sys

import pytest
from PySide6.QtCore import Qt

from backends.base import LoadSettings

pytest.importorskip("llama_cpp")
# A fixed seed and many tokens: the reply runs long enough to stop or kill it part-way.
LONG_REPLY = {"max_tokens": 1500, "seed": 1}


def load_tiny(qtbot, window, tiny_models) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        window.chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=2048, gpu_layers=0))
    assert loaded.args[0].backend == "llama.cpp"
    assert "tiny-llama-Q8_0.gguf" in window.chat.model_label.text()


def send(qtbot, window, text: str) -> None:
    qtbot.keyClicks(window.chat.composer, text)
    qtbot.keyClick(window.chat.composer, Qt.Key.Key_Return)


def test_real_engine_stream_stop_regenerate_restart(qtbot, real_window, tiny_models):
    window = real_window()
    chat = window.chat
    load_tiny(qtbot, window, tiny_models)
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=LONG_REPLY)
    send(qtbot, window, "Tell me a long story")
    reply_bubble = chat.view.bubbles[-1]
    # Progressive: the reply is visible and still being written, with live figures.
    qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 3, timeout=60_000)
    assert reply_bubble.body.toPlainText() and reply_bubble.state == "streaming"
    assert chat.stats.ttft.text().endswith("ms") or chat.stats.ttft.text().endswith(" s")
    with qtbot.waitSignal(window.bridge.done, timeout=30_000) as done:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    stats = done.args[0].stats
    assert stats.stop_reason == "cancelled"
    first = chat.store.messages(chat.current.id)[-1]
    assert first.state == "complete" and first.content == done.args[0].text
    assert first.stats["generated_tokens"] == stats.generated_tokens
    assert chat.stats.tokens.text() == str(stats.generated_tokens)
    assert "tok/s" in chat.stats.tps.text() and "peak" in chat.stats.memory.text()

    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 12, "seed": 3})
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as again:
        qtbot.mouseClick(chat.view.bubbles[-1].actions["regenerate"], Qt.MouseButton.LeftButton)
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[-1].content == again.args[0].text and messages[-1].stats["generated_tokens"] <= 12
    conversation_id = chat.current.id
    window.close()

    restarted = real_window()
    restarted.chat.open_conversation(conversation_id)
    assert [b.markdown for b in restarted.chat.view.bubbles] == ["Tell me a long story", messages[-1].content]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_real_engine_killed_mid_reply(qtbot, real_window, tiny_models):
    window = real_window()
    chat = window.chat
    load_tiny(qtbot, window, tiny_models)
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=LONG_REPLY)
    send(qtbot, window, "Keep talking")
    qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 3, timeout=60_000)
    with qtbot.waitSignal(window.bridge.crashed, timeout=30_000) as crashed:
        os.kill(window.bridge.engine_pid, signal.SIGKILL)
    assert "SIGKILL" in str(crashed.args[0])
    assert chat.banner.isVisible() and chat.reload_button.isVisible()
    assert "Your conversation is saved" in chat.banner_text.text()
    user, reply = chat.store.messages(chat.current.id)
    assert (user.content, user.state) == ("Keep talking", "complete")
    assert reply.state == "interrupted" and reply.content  # the partial reply is kept
    assert reply.content == chat.view.bubbles[-1].markdown
    # Reload gives a fresh engine, and the conversation goes on.
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        qtbot.mouseClick(chat.reload_button, Qt.MouseButton.LeftButton)
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 4, "seed": 1})
    with qtbot.waitSignal(window.bridge.done, timeout=60_000):
        send(qtbot, window, "Still there?")
    assert [m.state for m in chat.store.messages(chat.current.id)] == [
        "complete", "interrupted", "complete", "complete"]
