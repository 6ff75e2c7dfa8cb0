"""Per-chat system prompt and sampling, presets, and export, through the real dialog and store."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.ui.chat.chat_settings import ChatSettingsDialog
from app.datatypes import LoadSettings
from tests.ui.engine_double import EngineDouble


def test_settings_dialog_saves_to_the_chat_and_the_next_reply_uses_them(qtbot, make_window):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model("/models/tiny.gguf", LoadSettings())
    chat.new_conversation()
    dialog = ChatSettingsDialog(chat.store, chat.current, window)
    qtbot.addWidget(dialog)
    dialog.system_prompt.setPlainText("Answer in haiku.")
    dialog.temperature.setValue(0.3)
    dialog.max_tokens.setValue(64)
    dialog.seed.setValue(7)
    dialog.accept()
    saved = chat.store.conversation(chat.current.id)
    assert saved.system_prompt == "Answer in haiku."
    assert saved.sampling["temperature"] == 0.3 and saved.sampling["max_tokens"] == 64 and saved.sampling["seed"] == 7
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClicks(chat.composer, "Spring?")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert engine.requests[0][0].role == "system" and engine.requests[0][0].content == "Answer in haiku."


def test_presets_save_and_apply(qtbot, make_window):
    window = make_window()
    store = window.chat.store
    first = store.create_conversation("one")
    dialog = ChatSettingsDialog(store, first)
    qtbot.addWidget(dialog)
    dialog.system_prompt.setPlainText("You review code.")
    dialog.temperature.setValue(0.1)
    dialog.save_preset("Reviewer")
    assert [p.name for p in store.presets()] == ["Reviewer"]
    other = ChatSettingsDialog(store, store.create_conversation("two"))
    qtbot.addWidget(other)
    assert other.preset_box.findText("Reviewer") > 0
    other.apply_preset("Reviewer")
    assert other.system_prompt.toPlainText() == "You review code." and other.temperature.value() == 0.1
    assert other.seed.value() == -1 and other.seed.text() == "random"


def test_export_markdown_and_json_files(qtbot, make_window, tmp_path):
    window = make_window()
    chat = window.chat
    chat.new_conversation()
    chat.rename_current("Export me")
    chat.store.add_message(chat.current.id, "user", "Hi *there*")
    md = chat.export_current(str(tmp_path / "chat"), "md")
    assert md.name == "chat.md" and md.read_text(encoding="utf-8").startswith("# Export me")
    js = chat.export_current(str(tmp_path / "chat.json"), "json")
    assert json.loads(js.read_text(encoding="utf-8"))["messages"][0]["content"] == "Hi *there*"


def test_settings_a_full_disk_refuses_keep_the_dialog_open_with_what_was_typed(qtbot, make_window):
    window = make_window()
    store = window.chat.store
    conv = store.create_conversation("one")
    dialog = ChatSettingsDialog(store, conv, window)
    qtbot.addWidget(dialog)
    dialog.show()
    prompt = "Answer at length, citing sources. " * 300  # needs new pages in the database
    dialog.system_prompt.setPlainText(prompt)
    store._db.execute("PRAGMA max_page_count=1")  # SQLite's own SQLITE_FULL, as on a full disk
    dialog.accept()
    assert dialog.isVisible() and dialog.result() != dialog.DialogCode.Accepted
    assert dialog.error.isVisible() and "Not saved" in dialog.error.text() and "full" in dialog.error.text()
    assert dialog.system_prompt.toPlainText() == prompt and store.conversation(conv.id).system_prompt == ""
    store._db.execute("PRAGMA max_page_count=1073741823")  # space freed
    dialog.accept()
    assert not dialog.isVisible() and not dialog.error.isVisible()
    assert store.conversation(conv.id).system_prompt == prompt


PICK = {"type": "object", "properties": {"colour": {"enum": ["red", "green"]}}, "required": ["colour"]}


def test_answer_as_json_saves_the_schema_and_the_next_reply_is_held_to_it(qtbot, make_window, tmp_path):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model("/models/tiny.gguf", LoadSettings())
    chat.new_conversation()
    dialog = ChatSettingsDialog(chat.store, chat.current, window)
    qtbot.addWidget(dialog)
    dialog.show()
    assert not dialog.json_answer.isChecked() and not dialog.json_schema.isEnabled()
    dialog.json_answer.setChecked(True)
    assert dialog.json_schema.isEnabled()
    dialog.json_schema.setPlainText(json.dumps(PICK))
    dialog.grab().save(str(tmp_path / "chat_settings_json.png"))
    dialog.accept()
    assert chat.store.conversation(chat.current.id).sampling["json_schema"] == PICK
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClicks(chat.composer, "Pick one.")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert engine.samplings[0].json_schema == PICK  # what the engine was asked to hold the reply to
    reopened = ChatSettingsDialog(chat.store, chat.store.conversation(chat.current.id), window)
    qtbot.addWidget(reopened)
    assert reopened.json_answer.isChecked() and json.loads(reopened.json_schema.toPlainText()) == PICK


def test_a_schema_that_is_not_json_keeps_the_dialog_open_and_says_why(qtbot, make_window):
    window = make_window()
    store = window.chat.store
    conv = store.create_conversation("one")
    dialog = ChatSettingsDialog(store, conv, window)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.json_answer.setChecked(True)
    dialog.json_schema.setPlainText('{"type": "object",')
    dialog.accept()
    assert dialog.isVisible() and "Not saved: the JSON schema is not valid JSON" in dialog.error.text()
    assert dialog.json_schema.toPlainText() == '{"type": "object",' and "json_schema" not in store.conversation(
        conv.id).sampling


TAGS = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
REFUSAL = ("the grammar cannot hold replies to this JSON schema: it does not enforce schema.properties.tags: "
           "uniqueItems")  # the server's 400 and `quantdesk chat --json-schema` say the same


def test_a_schema_the_grammar_cannot_hold_keeps_the_dialog_open_with_the_servers_sentence(qtbot, make_window):
    window = make_window()
    store = window.chat.store
    conv = store.create_conversation("one")
    dialog = ChatSettingsDialog(store, conv, window)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.json_answer.setChecked(True)
    dialog.json_schema.setPlainText(json.dumps(TAGS))
    dialog.accept()
    assert dialog.isVisible() and dialog.error.text() == f"Not saved: {REFUSAL}."
    assert "json_schema" not in store.conversation(conv.id).sampling


def test_a_saved_schema_the_grammar_cannot_hold_is_refused_before_anything_is_sent(qtbot, make_window):
    """A schema saved before the check (an older version, a preset, another client of the database): the Chat says
    the server's sentence, keeps the message in the box, saves nothing and asks the engine for nothing."""
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model("/models/tiny.gguf", LoadSettings())
    conv = chat.store.create_conversation("tags", sampling={"json_schema": TAGS})
    chat.refresh_conversations()
    chat.open_conversation(conv.id)
    qtbot.keyClicks(chat.composer, "Tag this.")
    qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert chat.banner.isVisible() and chat.banner_text.text() == REFUSAL[0].upper() + REFUSAL[1:] + "."
    assert chat.composer.toPlainText() == "Tag this."
    assert chat.store.messages(conv.id) == [] and engine.requests == []


def test_writing_a_reply_again_under_such_a_schema_is_refused_and_the_reply_stays(qtbot, make_window):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model("/models/tiny.gguf", LoadSettings())
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClicks(chat.composer, "Tag this.")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    chat.store.update_settings(chat.current.id, sampling={"json_schema": TAGS})
    before = [m.id for m in chat.store.all_messages(chat.current.id)]
    qtbot.mouseClick(chat.view.bubbles[-1].actions["regenerate"], Qt.MouseButton.LeftButton)
    assert chat.banner.isVisible() and chat.banner_text.text() == REFUSAL[0].upper() + REFUSAL[1:] + "."
    assert len(engine.requests) == 1 and len(chat.view.bubbles) == 2
    assert [m.id for m in chat.store.all_messages(chat.current.id)] == before


def test_the_models_recommended_sampling_shows_as_from_the_model_and_a_users_change_wins(
        qtbot, make_window, tiny_sampling_model):
    engine = EngineDouble()
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model(str(tiny_sampling_model), LoadSettings())
    chat.new_conversation()
    dialog = ChatSettingsDialog(chat.store, chat.current, window)
    qtbot.addWidget(dialog)
    # The GGUF's general.sampling.* (tests/fixtures/models.py RECOMMENDED_SAMPLING), each marked as the model's.
    assert (dialog.temperature.value(), dialog.top_p.value(), dialog.top_k.value(), dialog.min_p.value(),
            dialog.repeat_penalty.value()) == (0.6, 0.9, 20, 0.0, 1.05)
    assert {knob: label.text() for knob, label in dialog.sources.items()} == dict.fromkeys(
        ("temperature", "top_p", "top_k", "min_p", "repeat_penalty"), "from the model")
    assert "general.sampling" in dialog.sources["top_p"].toolTip()
    dialog.temperature.setValue(1.0)
    assert dialog.sources["temperature"].text() == "your setting" and dialog.source_of("top_p") == "model"
    dialog.accept()
    saved = chat.store.conversation(chat.current.id).sampling
    assert saved["temperature"] == 1.0 and not {"top_p", "top_k", "min_p", "repeat_penalty"} & set(saved)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClicks(chat.composer, "Hi")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    used = engine.samplings[-1]
    assert (used.temperature, used.top_p, used.top_k, used.min_p, used.repeat_penalty) == (1.0, 0.9, 20, 0.0, 1.05)
    again = ChatSettingsDialog(chat.store, chat.store.conversation(chat.current.id), window)
    qtbot.addWidget(again)
    assert again.temperature.value() == 1.0 and again.sources["temperature"].text() == "your setting"
    assert again.sources["top_k"].text() == "from the model"
    again.reset_sampling.click()  # back to the model's values: the chat keeps none of its own
    assert again.temperature.value() == 0.6 and again.sources["temperature"].text() == "from the model"
    again.accept()
    assert "temperature" not in chat.store.conversation(chat.current.id).sampling


def test_without_a_recommendation_the_values_are_quantdesks_defaults(qtbot, make_window):
    window = make_window()
    store = window.chat.store
    dialog = ChatSettingsDialog(store, store.create_conversation("one", model_path="/models/gone.gguf"))
    qtbot.addWidget(dialog)
    assert dialog.temperature.value() == 0.8 and dialog.sources["temperature"].text() == "QuantDesk default"
    assert dialog.reset_sampling.text() == "Use the default values"
    dialog.top_k.setValue(12)
    assert dialog.sources["top_k"].text() == "your setting"
    dialog.top_k.setValue(40)  # back to the default: nothing of the user's to keep
    assert dialog.sources["top_k"].text() == "QuantDesk default" and "top_k" not in dialog.sampling()


def test_a_preset_sets_what_it_keeps_and_leaves_the_rest_to_the_model(qtbot, make_window, tiny_sampling_model):
    window = make_window()
    store = window.chat.store
    first = ChatSettingsDialog(store, store.create_conversation("one", model_path=str(tiny_sampling_model)))
    qtbot.addWidget(first)
    first.top_k.setValue(5)
    first.save_preset("Narrow")
    preset = next(p for p in store.presets() if p.name == "Narrow")
    assert preset.sampling["top_k"] == 5 and "temperature" not in preset.sampling  # the model's stay the model's
    other = ChatSettingsDialog(store, store.create_conversation(
        "two", model_path=str(tiny_sampling_model), sampling={"temperature": 1.5}))
    qtbot.addWidget(other)
    assert other.source_of("temperature") == "user"
    other.apply_preset("Narrow")
    assert other.top_k.value() == 5 and other.sources["top_k"].text() == "your setting"
    assert other.temperature.value() == 0.6 and other.sources["temperature"].text() == "from the model"


def test_the_chat_template_is_chosen_for_the_model_and_kept_in_its_preset(qtbot, make_window, tiny_models):
    """A GGUF without a template: the dialog says what the rule serves it and where from, and a bundled one chosen
    is kept in the model's preset (taken at its next load), Automatic forgets it."""
    from app.hub import presets
    from tests.fixtures.models import build_templated_model

    model = str(build_templated_model(tiny_models, "none", ""))
    window = make_window(EngineDouble())
    store = window.chat.store
    dialog = ChatSettingsDialog(store, store.create_conversation("one", model_path=model))
    qtbot.addWidget(dialog)
    box = dialog.template_box
    assert box is not None
    assert box.itemText(0) == "Automatic: ChatML (bundled; the vocabulary holds <|im_start|>: the file has none)"
    box.setCurrentIndex(box.findData("gemma"))
    dialog.accept()
    assert presets.for_model(model).load["chat_template"] == "gemma"
    again = ChatSettingsDialog(store, store.create_conversation("two", model_path=model))
    qtbot.addWidget(again)
    assert again.template_box.currentData() == "gemma"
    again.template_box.setCurrentIndex(0)
    again.accept()
    assert presets.for_model(model) is None  # its only value forgotten: no preset left
    # a model of no local GGUF has no such choice here
    assert ChatSettingsDialog(store, store.create_conversation("three", model_path="/models/gone.gguf")
                              ).template_box is None
