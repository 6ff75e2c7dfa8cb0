"""The first-run welcome: offered only with no chats, no models and not done before; hardware → models for this
machine → the chosen model opens on Discover; offline it offers importing a file, which lands in the Chat page;
skipping is remembered."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.hub.library import Library
from tests.ui.tiny_hub import cpu_only


def test_offered_once_then_remembered(qtbot, make_window):
    window = make_window()
    dialog = window.offer_first_run()
    assert dialog is not None and dialog.isVisible()
    dialog.set_profile(cpu_only(16))
    assert "Test CPU" in dialog.hardware_label.text() and "16.0 GiB of RAM" in dialog.hardware_label.text()
    qtbot.mouseClick(dialog.skip_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    window.close()
    assert make_window().offer_first_run() is None  # same settings file: done


def test_not_offered_when_there_are_chats(qtbot, make_window):
    window = make_window()
    window.chat.store.create_conversation("old chat")
    assert window.offer_first_run() is None


def test_models_for_this_machine_open_on_discover(qtbot, make_window):
    window = make_window()
    window.discover.set_profile(cpu_only(2))
    dialog = window.offer_first_run()
    dialog.set_profile(cpu_only(2))
    qtbot.mouseClick(dialog.next_button, Qt.MouseButton.LeftButton)
    shown = [dialog.models.item(i).text() for i in range(dialog.models.count())]
    assert shown and not any("gpt-oss" in text for text in shown)  # too large for 2 GiB is left out
    chosen = dialog.models.currentItem().data(Qt.ItemDataRole.UserRole)
    qtbot.mouseClick(dialog.choose_button, Qt.MouseButton.LeftButton)
    assert window.current_page == "Discover" and chosen in window.discover.model_title.text()
    assert window.offer_first_run() is None


def test_offline_first_run_imports_a_file_into_the_chat(qtbot, make_window, monkeypatch, tiny_models):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    window = make_window()
    dialog = window.offer_first_run()
    dialog.set_profile(cpu_only())
    qtbot.mouseClick(dialog.next_button, Qt.MouseButton.LeftButton)
    assert "offline" in dialog.models_title.text() and dialog.import_button.isVisibleTo(dialog)
    assert not dialog.choose_button.isVisibleTo(dialog)
    monkeypatch.setattr(window.importer, "ask", lambda parent=None: window.importer.start(str(tiny_models.gguf_q4_k_m)))
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000) as loaded:
        qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)
    (entry,) = Library().entries(refresh=False)
    assert loaded.args[0].model_path == entry.path and entry.source == "import"
    assert window.current_page == "Chat"


def test_importing_a_broken_file_is_a_sentence(qtbot, make_window, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf at all")
    window = make_window()
    with qtbot.waitSignal(window.importer.failed, timeout=30_000) as failed:
        window.importer.start(str(broken))
    assert "broken.gguf" in failed.args[0] and Library().entries(refresh=False) == []


def test_the_welcome_never_outlives_its_window(qtbot, make_window):
    window = make_window()
    dialog = window.offer_first_run()
    window.close()  # the app quits with its last window: an open welcome would keep it running
    assert not dialog.isVisible()
    hidden = make_window()
    hidden.hide()
    assert hidden.offer_first_run() is None  # closed before the welcome came up
