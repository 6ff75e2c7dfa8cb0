"""The first-run welcome: offered only with no chats, no models and not done before; hardware → models for this
machine → the chosen model opens on Discover; offline it offers importing a file, which lands in the Chat page;
skipping is remembered."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.hub.library import Library
from tests.ui.tiny_hub import cpu_only


def test_offered_once_then_remembered(qtbot, make_window):
    window = make_window()
    page = window.offer_first_run()
    assert page is not None and page.isVisible() and window.current_page == "Welcome"
    page.set_profile(cpu_only(16))
    assert "Test CPU" in page.hardware_label.text() and "16.0 GiB of RAM" in page.hardware_label.text()
    qtbot.mouseClick(page.skip_button, Qt.MouseButton.LeftButton)
    assert window.current_page == "Chat" and window.first_run is None  # the page it opened on
    window.close()
    assert make_window().offer_first_run() is None  # same settings file: done


def test_the_welcome_is_a_page_of_its_own_not_an_overlay(qtbot, make_window):
    """Nothing of another page shows through it: it is the stack's current page, and the Chat behind it is hidden."""
    window = make_window()
    page = window.offer_first_run()
    assert window.stack.currentWidget() is page and page.geometry() == window.stack.rect()
    assert not window.chat.isVisible() and not window.chat.model_bar.model_label.isVisible()
    assert window.sidebar.currentRow() == -1  # none of the sidebar's pages is shown
    window.sidebar.setCurrentRow(window.sidebar.count() - 1)  # left for another page: gone, offered next time
    assert window.current_page == "Settings" and window.first_run is None
    assert window.stack.indexOf(page) == -1


def test_its_models_are_discovers_cards(qtbot, make_window):
    from app.ui.library.discover_page import CardList, ModelCard

    window = make_window()
    page = window.offer_first_run()
    page.set_profile(cpu_only(16))
    assert isinstance(page.models, CardList) and page.models.count()
    cards = [page.models.card(row) for row in range(page.models.count())]
    assert all(isinstance(card, ModelCard) for card in cards)
    assert all(card.isVisible() and card.badge.text() == "Likely fits" for card in cards)
    first = page.models.item(0).data(Qt.ItemDataRole.UserRole)
    assert cards[0].title.text() == first and first in page.models.item(0).text()  # the item keeps the words


def test_models_for_this_machine_open_on_discover(qtbot, make_window):
    window = make_window()
    window.discover.set_profile(cpu_only(2))
    page = window.offer_first_run()
    page.set_profile(cpu_only(2))
    shown = [page.models.item(i).text() for i in range(page.models.count())]
    assert shown and not any("gpt-oss" in text for text in shown)  # too large for 2 GiB is left out
    chosen = page.chosen()
    qtbot.mouseClick(page.choose_button, Qt.MouseButton.LeftButton)
    assert window.current_page == "Discover" and chosen in window.discover.model_title.text()
    assert window.first_run is None and window.offer_first_run() is None


def test_offline_first_run_imports_a_file_into_the_chat(qtbot, make_window, monkeypatch, tiny_models):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    window = make_window()
    page = window.offer_first_run()
    page.set_profile(cpu_only())
    assert "offline" in page.models_title.text() and page.import_button.isVisibleTo(page)
    assert not page.choose_button.isVisibleTo(page) and not page.models.isVisibleTo(page)
    monkeypatch.setattr(window.importer, "ask", lambda parent=None: window.importer.start(str(tiny_models.gguf_q4_k_m)))
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000) as loaded:
        qtbot.mouseClick(page.import_button, Qt.MouseButton.LeftButton)
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


def test_the_welcome_comes_only_to_a_shown_window(qtbot, make_window):
    hidden = make_window()
    hidden.hide()
    assert hidden.offer_first_run() is None  # closed before the welcome came up
