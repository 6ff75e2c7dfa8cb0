"""The Settings page: models folder (persisted, followed by the library), HF token (stored where
huggingface_hub keeps it, shown masked, removable), offline mode, default context, theme."""

from __future__ import annotations

import os

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app import paths
from app import settings as app_settings
from app.hub import config
from app.ui.settings.settings_page import SettingsPage, masked


@pytest.fixture(autouse=True)
def fresh_offline_state(monkeypatch):
    monkeypatch.setattr(app_settings, "_set_by_app", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "placeholder")  # registers the variable so the test's change is undone
    monkeypatch.delenv("HF_HUB_OFFLINE")


def make_page(qtbot) -> SettingsPage:
    page = SettingsPage()
    qtbot.addWidget(page)
    return page


def test_models_folder_change_is_persisted_and_followed(qtbot, tmp_path):
    page = make_page(qtbot)
    assert page.models_dir_label.text() == str(paths.default_models_dir())
    with qtbot.waitSignal(page.models_dir_changed) as changed:
        assert page.set_models_dir(str(tmp_path / "models"))
    assert changed.args == [str(tmp_path / "models")]
    assert app_settings.models_dir() == tmp_path / "models" and app_settings.load().models_dir == str(tmp_path / "models")
    assert make_page(qtbot).models_dir_label.text() == str(tmp_path / "models")  # a restart keeps it
    page.models_dir_default.click()
    assert app_settings.models_dir() == paths.default_models_dir()


def test_a_folder_that_cannot_hold_models_changes_nothing(qtbot, tmp_path):
    page = make_page(qtbot)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert not page.set_models_dir(str(blocker / "models"))
    assert "cannot hold models" in page.status.text() and "unchanged" in page.status.text()
    assert app_settings.models_dir() == paths.default_models_dir()


def test_models_folder_from_the_environment_is_said(qtbot, monkeypatch, tmp_path):
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "env"))
    page = make_page(qtbot)
    assert "QUANTDESK_MODELS_DIR" in page.models_dir_note.text() and not page.models_dir_button.isEnabled()


def test_token_saved_masked_and_removed(qtbot):
    page = make_page(qtbot)
    assert "No token" in page.token_status.text() and not page.token_remove.isEnabled()
    page.token_edit.setText("hf_abcdefghijklmnopqrstuvwxyz")
    page.token_save.click()
    assert config.token() == "hf_abcdefghijklmnopqrstuvwxyz"
    assert oct(config.token_path().stat().st_mode & 0o777) == "0o600"
    assert page.token_status.text() == "In use: hf_••••••••wxyz" and page.token_edit.text() == ""
    page.token_remove.click()
    assert config.token() is None and "No token" in page.token_status.text()


def test_a_token_with_spaces_is_refused_and_kept_in_the_box(qtbot):
    page = make_page(qtbot)
    page.token_edit.setText("hf_abc def")
    page.token_save.click()
    assert config.token() is None and "Nothing was saved" in page.status.text()
    assert page.token_edit.text() == "hf_abc def"


def test_masking_never_shows_a_short_token():
    assert masked("hf_short") == "••••••••"
    assert "abcdefghijklmnop" not in masked("hf_abcdefghijklmnopqrstuvwxyz")


def test_offline_mode_sets_the_variable_and_is_persisted(qtbot):
    page = make_page(qtbot)
    page.offline_box.setChecked(True)
    assert os.environ["HF_HUB_OFFLINE"] == "1" and app_settings.is_offline() and app_settings.load().offline
    page.offline_box.setChecked(False)
    assert "HF_HUB_OFFLINE" not in os.environ and not app_settings.load().offline


def test_offline_from_the_environment_cannot_be_unticked(qtbot, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page = make_page(qtbot)
    assert page.offline_box.isChecked() and not page.offline_box.isEnabled()
    assert "set in the environment" in page.offline_note.text()


def test_default_context_and_theme(qtbot, make_window):
    window = make_window()
    page = window.app_settings
    page.context_box.setValue(16384)
    page.context_box.editingFinished.emit()
    assert app_settings.load().default_n_ctx == 16384 and window.chat.default_n_ctx == 16384
    window_colour = QApplication.instance().palette().color(QPalette.ColorRole.Window)
    with qtbot.waitSignal(page.theme_changed) as changed:
        page.theme_box.setCurrentIndex(2)
    assert changed.args == ["dark"] and app_settings.load().theme == "dark"
    assert QApplication.instance().palette().color(QPalette.ColorRole.Window).lightness() < 128  # applied at once
    assert make_page(qtbot).theme_box.currentText() == "Dark"
    page.theme_box.setCurrentIndex(0)  # back to the system's, as the test found the application
    assert QApplication.instance().palette().color(QPalette.ColorRole.Window) == window_colour


def test_a_damaged_settings_file_is_said(qtbot):
    app_settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    app_settings.settings_path().write_text("{oops")
    page = make_page(qtbot)
    assert "damaged" in page.status.text()


def test_llama_server_presets_import_and_export_say_what_they_did(qtbot, tmp_path, monkeypatch, tiny_models):
    from app.hub import presets
    from app.hub.library import Library

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    entry, = Library().import_path(tiny_models.gguf_q8_0, copy=False)
    page = make_page(qtbot)
    assert "No model has a preset yet" in page.presets_note.text() and not page.presets_export.isEnabled()
    ini = tmp_path / "models.ini"
    ini.write_text("[tiny-llama-Q8_0]\nc = 2048\ntemp = 0.5\nchat-template = chatml\n[gone]\nmodel = /no.gguf\n",
                   encoding="utf-8")
    page.import_presets(str(ini))
    note = page.presets_note.text()
    assert "1 model(s) have a preset" in note and "Imported 1 preset(s) from models.ini." in note
    assert "skipped chat-template" not in note  # llama-server's chat template is the preset's now (issue 37)
    assert "[gone] not imported: its model /no.gguf is neither a file here nor a model of the library" in note
    assert presets.for_model(entry.path).load == {"n_ctx": 2048, "chat_template": "chatml"}
    page.show()
    page.resize(900, 700)
    page.ensureWidgetVisible(page.presets_note)
    assert page.grab().save(str(tmp_path / "settings-presets.png"))
    if folder := os.environ.get("QUANTDESK_SCREENSHOTS"):
        import shutil

        shutil.copy(tmp_path / "settings-presets.png", folder)
    out = tmp_path / "out.ini"
    page.presets_export.setEnabled(True)
    page.export_presets(str(out))
    assert "[tiny-llama-Q8_0]" in out.read_text(encoding="utf-8") and "Exported 1 preset(s)" in page.presets_note.text()
    ini.write_text("[a]\nno key here\n", encoding="utf-8")
    page.import_presets(str(ini))
    assert "Nothing imported:" in page.presets_note.text() and "line 2" in page.presets_note.text()


def test_saved_chat_states_show_their_size_obey_the_limit_and_can_be_deleted(qtbot):
    from app.engine import states

    cache = states.default_cache()
    cache.folder.mkdir(parents=True)
    for i, key in enumerate(("a", "b", "c")):  # three saved states of 1 MiB, "a" the least recently used
        path = cache.path("/m.gguf", key)
        path.write_bytes(b"x" * 2**20)
        os.utime(path, ns=(10**18 + i * 10**9,) * 2)
    page = make_page(qtbot)
    assert page.states_box.value() == app_settings.SAVED_STATES_DEFAULT_MB
    assert "3 saved, 3.0 MB" in page.states_note.text() or "3 saved, 3.1 MB" in page.states_note.text(), \
        page.states_note.text()
    assert str(cache.folder) in page.states_note.text() and page.states_clear.isEnabled()
    page.states_box.setValue(2)  # 2 MiB: the oldest state goes at once
    page.states_box.editingFinished.emit()
    assert app_settings.load().saved_states_mb == 2
    assert not cache.path("/m.gguf", "a").exists() and cache.count() == 2
    assert "2 saved" in page.states_note.text()
    page.states_box.setValue(0)
    page.states_box.editingFinished.emit()
    assert page.states_box.text() == "Off" and cache.count() == 0 and "Off:" in page.states_note.text()
    assert not page.states_clear.isEnabled()


def test_deleting_the_saved_chat_states_empties_their_folder(qtbot):
    from app.engine import states

    cache = states.default_cache()
    cache.folder.mkdir(parents=True)
    cache.path("/m.gguf", "a").write_bytes(b"x" * 1000)
    page = make_page(qtbot)
    page.states_clear.click()
    assert cache.count() == 0 and "0 saved" in page.states_note.text()


def test_the_overflow_defaults_for_chats_and_the_server_are_saved_and_new_chats_follow(qtbot, tmp_path):
    from app.chats.store import ChatStore
    from app.ui.chat.chat_settings import ChatSettingsDialog

    page = make_page(qtbot)
    assert (page.overflow_box.currentData(), page.server_overflow_box.currentData()) == ("stop", "stop")
    assert page.overflow_box.accessibleName() and page.server_overflow_box.accessibleName()
    page.overflow_box.setCurrentIndex(page.overflow_box.findData("compact"))
    page.server_overflow_box.setCurrentIndex(page.server_overflow_box.findData("drop-oldest"))
    saved = app_settings.load()
    assert (saved.overflow, saved.server_overflow) == ("compact", "drop-oldest")
    again = make_page(qtbot)  # a restart keeps them
    assert (again.overflow_box.currentText(), again.server_overflow_box.currentData()) == (
        "Compact: the model summarises the oldest turns", "drop-oldest")
    # a chat without its own policy follows the default, and says which it is
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation()
        dialog = ChatSettingsDialog(store, conv)
        qtbot.addWidget(dialog)
        assert dialog.overflow.currentData() == ""
        assert dialog.overflow.currentText() == "Settings' default (Compact: the model summarises the oldest turns)"
        dialog.overflow.setCurrentIndex(dialog.overflow.findData("truncate-middle"))
        dialog.accept()
        assert store.conversation(conv.id).overflow == "truncate-middle"
        dialog = ChatSettingsDialog(store, store.conversation(conv.id))
        qtbot.addWidget(dialog)
        assert dialog.overflow.currentData() == "truncate-middle"
        dialog.overflow.setCurrentIndex(0)  # back to the default
        dialog.accept()
        assert store.conversation(conv.id).overflow is None
