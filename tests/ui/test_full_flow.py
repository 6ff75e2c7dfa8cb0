"""The issue's acceptance flow through the whole window, against the local Hub stand-in serving the tiny GGUF as
one repo with two quants, and the real engine (a child process running llama.cpp): search → pick a quant →
download → chat with it (load) → send → tokens appear progressively → stats update → stop → regenerate →
restart the app on the same data folders and the history is there → the engine killed mid-reply: a message,
the history intact."""

from __future__ import annotations

import os
import signal
import sys

import pytest
from PySide6.QtCore import Qt

from tests.ui.held_reply import HeldReply
from tests.ui.chat.test_chat_real_engine import LONG_REPLY, send
from tests.ui.tiny_hub import TINY_REPO, tiny_hub_fixture  # noqa: F401 - the tiny_hub fixture


def find_and_download(qtbot, window) -> str:
    """Search the Hub for the tiny model, open it, download its best quant; returns that quant."""
    discover = window.discover
    with qtbot.waitSignal(window._probe.succeeded, timeout=30_000):
        window.detect_hardware()  # this machine, as detected
    window.show_page("Discover")
    qtbot.keyClicks(discover.search_box, "tiny-llama")
    with qtbot.waitSignal(discover.answered, timeout=30_000):
        qtbot.keyClick(discover.search_box, Qt.Key.Key_Return)
    assert discover.results.count() == 1
    with qtbot.waitSignal(discover.answered, timeout=60_000):
        discover.results.setCurrentRow(0)  # the user clicks the result
    quants = {c.quant: c for c in discover.choices.choices}
    assert set(quants) == {"Q8_0", "Q4_K_M"} and all(c.fits for c in quants.values())
    best = discover.choices.best
    assert best is not None and best.quant in discover.best_label.text()
    qtbot.mouseClick(discover.download_button(best.quant), Qt.MouseButton.LeftButton)
    assert window.current_page == "Downloads"
    return best.quant


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_search_download_chat_stop_regenerate_restart_and_a_killed_engine(qtbot, real_window, tiny_hub,  # noqa: F811
                                                                          tiny_models):
    window = real_window()
    quant = find_and_download(qtbot, window)
    (row,) = window.downloads.rows.values()
    qtbot.waitUntil(lambda: row.task.state == "done" and row.buttons["chat"].isVisibleTo(row), timeout=60_000)
    model_path = str(row.task.result.path)
    assert model_path.endswith(f"tiny-llama-{quant}.gguf") and row.detail.text() == f"Saved to {model_path}"
    chat = window.chat
    chat.context_box.setValue(2048)  # the tiny model's trained length
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        qtbot.mouseClick(row.buttons["chat"], Qt.MouseButton.LeftButton)
    assert window.current_page == "Chat" and loaded.args[0].model_path == model_path

    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=LONG_REPLY)
    with HeldReply(window.bridge) as held:
        send(qtbot, window, "Tell me a long story")
        reply_bubble = chat.view.bubbles[-1]
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 1, timeout=60_000)
        assert reply_bubble.body.toPlainText() and reply_bubble.state == "streaming"  # progressive, still writing
        seen = int(chat.stats.tokens.text())
        held.release(hold_again=True)
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) > seen, timeout=30_000)  # the figures keep moving
        with qtbot.waitSignal(window.bridge.done, timeout=30_000) as done:
            qtbot.keyClick(window, Qt.Key.Key_Escape)
            held.release()
    assert done.args[0].stats.stop_reason == "cancelled"
    assert chat.stats.tokens.text() == str(done.args[0].stats.generated_tokens) and "tok/s" in chat.stats.tps.text()

    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 12, "seed": 3})
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as again:
        qtbot.mouseClick(chat.view.bubbles[-1].actions["regenerate"], Qt.MouseButton.LeftButton)
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant"] and messages[-1].content == again.args[0].text
    conversation_id = chat.current.id
    window.close()

    restarted = real_window()  # same chat database, settings and models folder
    restarted.chat.open_conversation(conversation_id)
    assert [b.markdown for b in restarted.chat.view.bubbles] == ["Tell me a long story", messages[-1].content]
    assert restarted.offer_first_run() is None  # chats and a model exist: no welcome
    assert restarted.downloads.rows == {}  # nothing was left half-done

    chat = restarted.chat
    with qtbot.waitSignal(restarted.bridge.loaded, timeout=120_000):
        chat.load_model(model_path, chat.load_settings())
    chat.store.update_settings(conversation_id, sampling=LONG_REPLY)
    with HeldReply(restarted.bridge):
        send(qtbot, restarted, "Keep talking")
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 1, timeout=60_000)
        with qtbot.waitSignal(restarted.bridge.crashed, timeout=30_000):
            os.kill(restarted.bridge.engine_pid, signal.SIGKILL)
    assert chat.banner.isVisible() and "Your conversation is saved" in chat.banner_text.text()
    history = chat.store.messages(conversation_id)
    assert [m.content for m in history[:3]] == ["Tell me a long story", messages[-1].content, "Keep talking"]
    assert history[-1].state == "interrupted" and history[-1].content == chat.view.bubbles[-1].markdown
