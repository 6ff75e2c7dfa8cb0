"""Per-model presets in the Chat: a llama-server preset applied when the real engine loads the model, and the
chat settings' "Save as this model's defaults" kept for the model, shown as "this model's preset" between the
chat's own values and the model's."""

from __future__ import annotations

import os
import shutil

import pytest
from PySide6.QtCore import Qt

from app.datatypes import LoadSettings
from app.hub import preset_ini, presets
from app.ui.chat.chat_settings import ChatSettingsDialog
from tests.ui.engine_double import EngineDouble


def send(qtbot, chat, text: str) -> None:
    qtbot.keyClicks(chat.composer, text)
    qtbot.keyClick(chat.composer, Qt.Key.Key_Return)


def test_a_preset_imported_from_llama_servers_ini_applies_when_the_real_engine_loads(qtbot, real_window,
                                                                                      tiny_models, tmp_path):
    pytest.importorskip("llama_cpp")
    ini = tmp_path / "models.ini"
    ini.write_text(f"version = 1\n\n[*]\nngl = 0\n\n[tiny]\nmodel = {tiny_models.gguf_q8_0}\nctx-size = 768\n"
                   "ctk = q8_0\nctv = q8_0\ntemp = 0.25\nn-predict = 5\n", encoding="utf-8")
    section, = preset_ini.import_file(ini).imported
    assert section.preset is not None
    assert section.preset.load == {"n_ctx": 768, "gpu_layers": 0, "kv_cache_type": "q8_0"}
    window = real_window()
    chat = window.chat
    chat.set_profile(None)
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.open_model(str(tiny_models.gguf_q8_0))
    assert chat.loaded.n_ctx == 768 and chat.loaded.gpu_layers == 0  # what the engine made of the preset
    assert chat.model_bar.context_box.value() == 768 and chat.model_bar.kv_box.currentText() == "KV q8_0"
    assert chat.loader.request[1].flash_attention is True  # a quantized V cache needs it
    assert "this model's preset" in chat.model_bar.estimate_label.toolTip()
    chat.new_conversation()
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as done:
        send(qtbot, chat, "hello")
    assert done.args[0].stats.generated_tokens <= 5  # the preset's reply length


def test_a_change_saved_as_the_models_defaults_is_kept_per_model_and_a_chats_own_value_wins(
        qtbot, make_window, tiny_sampling_model, tiny_models, tmp_path):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model(str(tiny_sampling_model), LoadSettings(n_ctx=1024, gpu_layers=0))
    chat.new_conversation()
    dialog = ChatSettingsDialog(chat.store, chat.current, window, load=chat.loader.request[1])
    qtbot.addWidget(dialog)
    # The GGUF's general.sampling.*: each value "from the model" until the user changes it.
    assert {label.text() for label in dialog.sources.values()} == {"from the model"}
    dialog.temperature.setValue(1.0)
    dialog.top_k.setValue(5)
    dialog.system_prompt.setPlainText("Answer in French.")
    assert dialog.sources["temperature"].text() == "your setting"
    dialog.save_model_defaults.click()
    assert dialog.sources["temperature"].text() == "this model's preset"
    assert dialog.sources["top_k"].text() == "this model's preset"
    assert dialog.sources["top_p"].text() == "from the model"
    dialog.show()
    _keep(dialog, "chat-settings-model-preset.png", tmp_path)
    dialog.accept()
    assert "temperature" not in chat.store.conversation(chat.current.id).sampling  # the model's now, not the chat's
    saved = presets.for_model(tiny_sampling_model)
    assert saved is not None and saved.load == {"n_ctx": 1024, "gpu_layers": 0, "kv_cache_type": "f16"}
    assert saved.sampling["temperature"] == 1.0 and saved.sampling["top_k"] == 5
    assert saved.system_prompt == "Answer in French."

    # Another chat with the model, after reopening the settings: the model's preset, the chat's own value winning.
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, system_prompt="", sampling={})
    again = ChatSettingsDialog(chat.store, chat.store.conversation(chat.current.id), window)
    qtbot.addWidget(again)
    assert again.temperature.value() == 1.0 and again.sources["temperature"].text() == "this model's preset"
    assert again.sources["min_p"].text() == "from the model"
    assert "Answer in French." in again.system_prompt.placeholderText()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        send(qtbot, chat, "Hi")
    used = engine.samplings[-1]
    assert (used.temperature, used.top_k, used.top_p) == (1.0, 5, 0.9)
    assert engine.requests[-1][0].role == "system" and engine.requests[-1][0].content == "Answer in French."
    again.temperature.setValue(0.3)
    assert again.sources["temperature"].text() == "your setting"
    again.accept()
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        send(qtbot, chat, "Again")
    assert engine.samplings[-1].temperature == 0.3 and engine.samplings[-1].top_k == 5
    # Reopened (a new window over the same store and config folder, as after a restart): the model's preset stays.
    window.close()
    reopened = make_window(EngineDouble())
    fresh = ChatSettingsDialog(reopened.chat.store, reopened.chat.store.create_conversation(
        "after a restart", model_path=str(tiny_sampling_model)), reopened)
    qtbot.addWidget(fresh)
    assert fresh.temperature.value() == 1.0 and fresh.sources["temperature"].text() == "this model's preset"
    assert fresh.top_k.value() == 5 and fresh.sources["top_p"].text() == "from the model"
    # Another model has its own (none): its values stay the model's or QuantDesk's.
    other = ChatSettingsDialog(chat.store, chat.store.create_conversation(
        "other", model_path=str(tiny_models.gguf_q8_0)), window)
    qtbot.addWidget(other)
    assert other.temperature.value() == 0.8 and other.sources["temperature"].text() == "QuantDesk default"


def test_the_models_preset_sets_the_load_settings_the_bar_fills_in(qtbot, make_window, tiny_models):
    presets.update(tiny_models.gguf_q4_k_m, load_values={"n_ctx": 640, "gpu_layers": 0, "kv_cache_type": "q4_0"})
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    chat.set_profile(None)
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000):
        chat.open_model(str(tiny_models.gguf_q4_k_m))
    path, settings = chat.loader.request
    assert (settings.n_ctx, settings.gpu_layers, settings.kv_cache_type) == (640, 0, "q4_0")
    assert chat.model_bar.kv_box.currentText() == "KV q4_0" and settings.flash_attention is True


def _keep(widget, name: str, tmp_path) -> None:
    assert widget.grab().save(str(tmp_path / name))
    if folder := os.environ.get("QUANTDESK_SCREENSHOTS"):
        shutil.copy(tmp_path / name, folder)
