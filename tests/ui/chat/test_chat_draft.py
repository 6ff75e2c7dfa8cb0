"""Speculative decoding from the Chat: the chat's settings offer off, prompt lookup and the library's models that can
draft for the chat's model; the choice is kept with the chat and used when the model loads (only where it fits);
the reply's stats line says how much of the draft was accepted. Against the real engine and the tiny draft pair."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest
from PySide6.QtCore import Qt

from app.ui.chat.chat_settings import ChatSettingsDialog
from app.datatypes import PROMPT_LOOKUP
from tests.fixtures.models import TINY, build_draft_pair

pytest.importorskip("llama_cpp")


def _keep(widget, name: str, tmp_path) -> None:
    assert widget.grab().save(str(tmp_path / name))
    if folder := os.environ.get("QUANTDESK_SCREENSHOTS"):
        shutil.copy(tmp_path / name, folder)


def test_a_chat_drafts_with_the_library_model_it_chose(qtbot, real_window, tmp_path):
    from app.hub.library import Library

    pair = build_draft_pair(dataclasses.replace(TINY, n_layer=8), 1, quiet=0.0)
    draft_entry, = Library().import_path(pair.draft, copy=False)
    window = real_window()
    chat = window.chat
    chat.set_profile(None)
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.open_model(str(pair.target))
    chat.new_conversation()
    assert chat.current.model_path == str(pair.target)

    dialog = ChatSettingsDialog(chat.store, chat.current, window)
    qtbot.addWidget(dialog)
    offered = [dialog.draft.itemData(i) for i in range(dialog.draft.count())]
    assert offered == ["", PROMPT_LOOKUP, str(pair.draft)]
    assert dialog.draft.itemText(2) == f"{draft_entry.name} (draft model)"
    dialog.draft.setCurrentIndex(2)
    dialog.temperature.setValue(0)
    dialog.max_tokens.setValue(24)
    dialog.show()
    _keep(dialog, "chat-settings-draft.png", tmp_path)
    dialog.accept()
    chat.current = chat.store.conversation(chat.current.id)
    assert chat.current.sampling["draft"] == str(pair.draft)

    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):  # the draft loads with the model
        chat.load_model(str(pair.target), chat.load_settings())
    assert chat.loaded.details["draft"]["model"] == str(pair.draft)
    assert f"draft {pair.draft.name}" in chat.model_label.text()
    qtbot.keyClicks(chat.composer, "Tell me a story.")
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    stats = done.args[0].stats
    assert stats.draft_tokens > 0 and stats.acceptance_rate > 0.9  # its second..eighth layers add nothing
    assert f"draft {stats.acceptance_rate:.0%} accepted" in chat.view.bubbles[-1].meta.text()
    _keep(window, "chat-draft-stats.png", tmp_path)
    window.close()


def test_a_draft_that_does_not_fit_the_model_stays_off(qtbot, make_window, tiny_draft_pair, tiny_other_vocab_models):
    """A chat keeps its draft while other models load for it: one of another vocabulary loads without it, and prompt
    lookup only drafts for a GGUF."""
    from tests.ui.engine_double import EngineDouble

    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"draft": str(tiny_draft_pair.draft)})
    chat.current = chat.store.conversation(chat.current.id)
    for model, expected in ((tiny_draft_pair.target, str(tiny_draft_pair.draft)), (tiny_other_vocab_models[0], "")):
        with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
            chat.load_model(str(model), chat.load_settings())
        assert engine.loads[-1][1].draft == expected
    chat.store.update_settings(chat.current.id, sampling={"draft": PROMPT_LOOKUP})
    chat.current = chat.store.conversation(chat.current.id)
    for model, expected in ((tiny_draft_pair.target, PROMPT_LOOKUP), (tiny_draft_pair.mlx_target, "")):
        with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
            chat.load_model(str(model), chat.load_settings())
        assert engine.loads[-1][1].draft == expected
