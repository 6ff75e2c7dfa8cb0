"""The Chat page against the real engine: a child-process host running the tiny GGUF through
llama.cpp. Load → send → tokens stream in → stats → stop → regenerate → restart → history; and the
engine killed mid-reply."""

from __future__ import annotations

import os
import signal
import sys

import pytest
from PySide6.QtCore import Qt

from app.datatypes import LoadSettings
from tests.ui.held_reply import HeldReply

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
    with HeldReply(window.bridge) as held:
        send(qtbot, window, "Tell me a long story")
        reply_bubble = chat.view.bubbles[-1]
        # Progressive: the reply is visible and still being written, with live figures.
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 1, timeout=60_000)
        assert reply_bubble.body.toPlainText() and reply_bubble.state == "streaming"
        assert chat.stats.ttft.text().endswith("ms") or chat.stats.ttft.text().endswith(" s")
        with qtbot.waitSignal(window.bridge.done, timeout=30_000) as done:
            qtbot.keyClick(window, Qt.Key.Key_Escape)
            held.release()
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
    with HeldReply(window.bridge):
        send(qtbot, window, "Keep talking")
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text()) >= 1, timeout=60_000)
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


# The tiny model with Qwen3.5's real template: its generation prompt opens <think>, and a random model never closes
# it, so the thinking budget does (the engine writes </think> for it) and the answer follows. The engine sends the
# first token at once and the page shows it at once, so the thinking is on screen before the answer can start.
THINK = {"max_tokens": 120, "reasoning_budget": 100, "seed": 1, "temperature": 0.0}


def test_real_engine_thinking_streams_folds_survives_a_restart_and_branches(qtbot, real_window, tiny_thinking_model,
                                                                           tmp_path):
    import json

    from app.ui.common.formatting import human_seconds

    window = real_window()
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_thinking_model), LoadSettings(n_ctx=2048, gpu_layers=0))
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=THINK)
    seen = []  # what the reply's bubble showed after each update the engine sent (after the page's own slot)

    def watch(chunk) -> None:
        bubble = chat.view.bubbles[-1]
        block = bubble.thinking
        seen.append((bool(chunk.reasoning), bubble.markdown, block is not None and block.is_open,
                     block.summary if block is not None else ""))

    window.bridge.tokens.connect(watch)
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        send(qtbot, window, "Why is the sky blue?")
    window.bridge.tokens.disconnect(watch)
    reply = done.args[0]
    stats = reply.stats
    assert reply.reasoning and reply.text and 100 <= stats.reasoning_tokens < stats.generated_tokens
    # it streamed: open, the live "Thinking… 0.2 s", no answer yet …
    thinking = [s for s in seen if s[0] and not s[1]]
    assert thinking and all(is_open and summary.startswith("Thinking… ") for _, _, is_open, summary in thinking)
    # … then folded to how long it thought as soon as the answer started
    answering = next(s for s in seen if s[1])
    assert not answering[2] and answering[3].startswith("Thought for ")
    bubble = chat.view.bubbles[-1]
    summary = f"Thought for {human_seconds(stats.reasoning_ms)} · {stats.reasoning_tokens} tokens"
    assert bubble.thinking.summary == summary and not bubble.thinking.is_open
    assert bubble.thinking.text.toPlainText() == reply.reasoning and bubble.markdown == reply.text
    assert "</think>" not in bubble.body.toPlainText()
    assert chat.stats.thinking_row.isVisible() and chat.stats.first_answer.text() != "no answer"
    qtbot.mouseClick(bubble.thinking.toggle, Qt.MouseButton.LeftButton)
    assert bubble.thinking.is_open and bubble.thinking.text.isVisible()

    # The next turn goes to the real template with the thinking given back (Qwen3.5's drops it from the prompt).
    chat.store.update_settings(chat.current.id, sampling={**THINK, "max_tokens": 8, "reasoning_budget": 2})
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as dusk:
        send(qtbot, window, "And at dusk?")
    # A new version of the first reply, with its own (shorter) thinking; the first keeps its own.
    first_reply = chat.store.messages(chat.current.id)[1]
    chat.store.update_settings(chat.current.id, sampling={**THINK, "max_tokens": 16, "reasoning_budget": 6})
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as again:
        qtbot.mouseClick(chat.view.bubbles[1].actions["regenerate"], Qt.MouseButton.LeftButton)
    second = again.args[0]
    assert second.reasoning and second.reasoning != reply.reasoning and 6 <= second.stats.reasoning_tokens < 16
    assert chat.view.bubbles[-1].thinking.text.toPlainText() == second.reasoning
    versions = [m for m in chat.store.all_messages(chat.current.id) if m.parent_id == first_reply.parent_id]
    assert [(m.reasoning, m.content) for m in versions] == [(reply.reasoning, reply.text),
                                                            (second.reasoning, second.text)]
    exported = json.loads(chat.export_current(str(tmp_path / "chat.json"), "json").read_text(encoding="utf-8"))
    assert [m.get("reasoning") for m in exported["messages"]] == [None, reply.reasoning, None,
                                                                 dusk.args[0].reasoning, second.reasoning]
    markdown = chat.export_current(str(tmp_path / "chat.md"), "md").read_text(encoding="utf-8")
    assert f"> **Thinking** ({second.stats.reasoning_ms / 1000:.1f} s · {second.stats.reasoning_tokens} tokens)" \
        in markdown
    qtbot.mouseClick(chat.view.bubbles[1].previous_branch, Qt.MouseButton.LeftButton)  # back to the first version
    assert chat.view.bubbles[1].thinking.text.toPlainText() == reply.reasoning
    conversation_id = chat.current.id
    window.close()

    restarted = real_window()  # a new store on the same file, as after a restart
    restarted.chat.open_conversation(conversation_id)
    bubbles = restarted.chat.view.bubbles
    assert [b.markdown for b in bubbles[:2]] == ["Why is the sky blue?", reply.text]
    assert bubbles[1].thinking.summary == summary and not bubbles[1].thinking.is_open  # folded again
    assert bubbles[1].thinking.text.toPlainText() == reply.reasoning
    assert bubbles[1].branches.count == 2
