"""The Chat resumes a long chat from its saved model state (app/engine/states.py): after each reply the state is
saved; the app restarted, the chat reopened, its next message reads only what is new. Real engine hosts on the tiny
model, a real store, the real cache folder (isolated per test)."""

from __future__ import annotations

import pytest

from app.datatypes import LoadSettings
from app.engine import states
from tests.ui.chat.test_chat_real_engine import send

pytest.importorskip("llama_cpp")
GREEDY = {"temperature": 0.0, "max_tokens": 16, "seed": 1}


def load(qtbot, window, model) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        window.chat.load_model(str(model), LoadSettings(n_ctx=1024, gpu_layers=0))


def test_a_reopened_chat_after_a_restart_resumes_from_its_saved_state(qtbot, real_window, tiny_models):
    window = real_window()
    chat = window.chat
    load(qtbot, window, tiny_models.gguf_q8_0)
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=GREEDY)
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as first:
        send(qtbot, window, "Tell me about lighthouses and the keepers who lived in them " * 6)
    cache = states.default_cache()
    qtbot.waitUntil(lambda: cache.count() == 1, timeout=30_000)  # saved after the reply, on the bridge's worker
    conversation = chat.current.id
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as second:  # the same host: its KV cache holds it
        send(qtbot, window, "And then?")
    warm = second.args[0]
    newest = cache.path(str(tiny_models.gguf_q8_0), states.chat_key(conversation,
                                                                     chat.store.messages(conversation)[-1].id))
    # the branch's newer state replaces the older one: written by the engine, then the older deleted once the engine
    # says it is written (app/engine/states.send_save), so the file shows a moment before the count is 1 again
    qtbot.waitUntil(lambda: newest.exists() and cache.count() == 1, timeout=30_000)
    window.close()

    restarted = real_window()  # QuantDesk restarted: a new engine host
    load(qtbot, restarted, tiny_models.gguf_q8_0)
    restarted.chat.open_conversation(conversation)
    with qtbot.waitSignal(restarted.bridge.done, timeout=60_000) as resumed:
        send(qtbot, restarted, "And after that?")
    stats = resumed.args[0].stats
    assert stats.cached_tokens > warm.stats.prompt_tokens > first.args[0].stats.prompt_tokens, stats
    assert stats.prompt_tokens - stats.cached_tokens < 40  # only the new message (and its turn's markers) read
    roles = [m.role for m in restarted.chat.store.messages(conversation)]
    assert roles == ["user", "assistant"] * 3
