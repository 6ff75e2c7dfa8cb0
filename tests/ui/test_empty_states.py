"""Each page that can be empty says what to do next, and its button does it."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.chat.test_chat_page import load


def test_the_empty_library_downloads_and_chat_send_the_user_to_discover(qtbot, make_window):
    window = make_window()
    qtbot.waitUntil(lambda: not window.library.busy, timeout=10_000)
    for page_name, page in (("Library", window.library), ("Downloads", window.downloads), ("Chat", window.chat)):
        empty = page.empty_state if page_name != "Downloads" else page.empty_label
        window.show_page(page_name)
        qtbot.waitUntil(empty.isVisible)
        assert empty.button.text() == "Find a model" and empty.title.text().startswith(("No ", "Nothing"))
        qtbot.mouseClick(empty.button, Qt.MouseButton.LeftButton)
        assert window.current_page == "Discover", page_name
    assert window.library.table.isHidden()


def test_the_chat_empty_state_goes_once_a_model_is_loaded(qtbot, make_window):
    window = make_window()
    window.show_page("Chat")
    qtbot.waitUntil(window.chat.empty_state.isVisible)
    load(qtbot, window)
    qtbot.waitUntil(lambda: window.chat.empty_state.isHidden())


def test_the_lab_and_the_stopped_server_say_what_to_do(qtbot, make_window):
    window = make_window()
    window.show_page("Server")
    qtbot.waitUntil(window.server.empty_state.isVisible)  # no model in Chat: nothing to serve
    qtbot.mouseClick(window.server.empty_state.button, Qt.MouseButton.LeftButton)
    assert window.current_page == "Chat"
    load(qtbot, window)
    assert window.server.empty_state.isHidden()
    window.show_page("Lab")
    qtbot.waitUntil(window.lab.empty_state.isVisible, timeout=10_000)  # the library is empty: nothing to compare
    qtbot.mouseClick(window.lab.empty_state.button, Qt.MouseButton.LeftButton)
    assert window.current_page == "Discover"
