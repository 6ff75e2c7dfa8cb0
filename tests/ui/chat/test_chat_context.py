"""The Chat's context meter (in the model bar): what the open chat holds of the loaded model's context after its
latest reply, a warning once the next reply may not fit, and no figures of another chat or model."""

from __future__ import annotations

import pytest

from app.datatypes import LoadSettings
from tests.ui.engine_double import EngineDouble
from tests.ui.chat.test_chat_page import load, select_chat, story_beside_another_chat, type_and_send


def send_and_wait(qtbot, window, text: str) -> None:
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, window.chat, text)


def test_the_meter_shows_the_context_used_after_each_reply_and_resets_with_the_chat(qtbot, make_window):
    window = make_window(EngineDouble(["Hello", ",", " world", "!"]))  # the double: 7 prompt tokens, 4 a reply
    chat = window.chat
    meter = chat.model_bar.context_meter
    load(qtbot, window)  # 512 tokens of context
    assert meter.isHidden()  # nothing to say before a reply
    chat.new_conversation()
    send_and_wait(qtbot, window, "hi")
    assert meter.isVisible() and meter.label.text() == "11 / 512 tokens"
    assert meter.bar.value() == round(1000 * 11 / 512)
    assert meter.accessibleName() == "Context used" and meter.bar.accessibleName() == "Context used"
    assert meter.toolTip() == ("The chat holds 11 of the model's 512 context tokens (2%): system prompt, history, "
                               "images, thinking and tools' results. 501 tokens are left for the next message and "
                               "reply.")
    assert meter.accessibleDescription() == meter.toolTip() and not meter.near_full
    assert meter.label.objectName() == "caption"
    first = chat.current.id

    chat.new_conversation()  # a new chat holds nothing yet
    assert meter.isHidden()
    send_and_wait(qtbot, window, "again")
    assert meter.isVisible()
    select_chat(qtbot, chat, chat.store.conversation(first).title)  # another chat: its figures come with its reply
    assert chat.current.id == first and meter.isHidden()


def test_a_context_nearly_full_warns_in_words_and_colour_and_a_new_model_resets_it(qtbot, make_window):
    window = make_window(EngineDouble(["Hello", ",", " world", "!"]))
    chat = window.chat
    meter = chat.model_bar.context_meter
    load(qtbot, window, LoadSettings(n_ctx=16))  # 11 of 16 used leaves 5: under a reply's worth (half of 16)
    chat.new_conversation()
    send_and_wait(qtbot, window, "hi")
    assert meter.near_full and meter.label.text() == "11 / 16 tokens · nearly full"
    assert meter.label.objectName() == "badge_warn"  # the theme's warning tone
    assert meter.toolTip().endswith("The next reply may not fit: when the context is full the model cannot answer. "
                                    "Start a new chat, or load the model with a larger context.")

    load(qtbot, window, LoadSettings(n_ctx=512))  # a larger context: the figures were of the old one
    assert meter.isHidden() and meter.use is None
    send_and_wait(qtbot, window, "more")
    assert not meter.near_full and meter.label.text() == "11 / 512 tokens"
    assert meter.label.objectName() == "caption"


def test_a_reply_that_ends_while_another_chat_is_open_leaves_the_meter_to_that_chat(qtbot, make_window):
    window, engine, story, other = story_beside_another_chat(qtbot, make_window)
    chat = window.chat
    select_chat(qtbot, chat, "Other chat")
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        engine.release.set()
    assert chat.current.id == other and chat.model_bar.context_meter.isHidden()


def test_the_meter_counts_what_the_real_engine_read_and_warns_before_the_context_is_full(qtbot, real_window,
                                                                                        tiny_models):
    pytest.importorskip("llama_cpp")
    window = real_window()
    chat = window.chat
    meter = chat.model_bar.context_meter
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=256, gpu_layers=0))
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 40, "seed": 1})
    used = []
    for text in ("first question", "second question", "third question", "fourth"):
        with qtbot.waitSignal(window.bridge.done, timeout=60_000) as done:
            type_and_send(qtbot, chat, text)
        stats = done.args[0].stats
        used.append(stats.prompt_tokens + stats.generated_tokens)  # the history grows with each turn
        assert meter.use is not None and (meter.use.used, meter.use.n_ctx) == (used[-1], 256)
        assert meter.label.text().startswith(f"{used[-1]} / 256 tokens")
        # under a reply's 40 tokens left, the warning; before, none
        assert meter.near_full == (256 - used[-1] < 40), used
    assert used == sorted(used) and meter.near_full  # as quantdesk chat's test: the fourth reply fills it
