"""The whole first-hour path with the keyboard alone: Ctrl+1 to Discover, type a search, arrow into the results,
Enter to the quants, arrow to one, Enter to download it (from the local Hub stand-in), Space on "Chat with it",
type a message, Enter, and the reply streams in from a real engine host on the tiny model. Also: every page
shortcut leaves the focus in its page, and the focus ring sits on the focused control.

Every step is a key event sent to whichever widget has the focus, as a keyboard would: no clicks, no slots called,
no values set. So each assertion about the focus is also an assertion that the next key lands where a user
would expect it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget

from app.ui.window import PAGES
from tests.ui.tiny_hub import TINY_REPO, tiny_hub_fixture  # noqa: F401 - the tiny_hub fixture

Key = Qt.Key
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def focused() -> QWidget:
    widget = QApplication.focusWidget()
    assert widget is not None, "nothing has the keyboard focus"
    return widget


def press(qtbot, key: Qt.Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """One key, to the widget with the focus (shortcuts included, as Qt delivers them)."""
    qtbot.keyClick(focused(), key, modifier)


def tab_to(qtbot, widget: QWidget, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """Tab (or Shift+Tab) until ``widget`` has the focus; fails if a whole round of the window does not reach it."""
    for _ in range(200):
        if focused() is widget:
            return
        press(qtbot, Key.Key_Tab, modifier)
    raise AssertionError(f"Tab never reached {widget.accessibleName() or widget}")


def test_page_shortcuts_put_the_focus_in_the_page(qtbot, make_window):
    window = make_window()
    assert focused() is window.chat.composer  # the window opens on Chat, ready to type
    for number, name in enumerate(PAGES, start=1):
        press(qtbot, Qt.Key(Key.Key_0.value + number), CTRL)
        assert window.current_page == name and window.pages[name].isAncestorOf(focused()), name
        ringed = window.focus_ring.ring.widget()
        assert not isinstance(ringed, QScrollArea), f"{name}: the focus ring went round the whole page"
    press(qtbot, Key.Key_1, CTRL)
    assert focused() is window.discover.search_box
    press(qtbot, Key.Key_Tab)
    assert focused() is window.discover.format_box
    press(qtbot, Key.Key_4, CTRL)
    press(qtbot, Key.Key_1, CTRL)
    assert focused() is window.discover.format_box  # back where it was
    tab_to(qtbot, window.sidebar, SHIFT)  # from the sidebar too, a shortcut goes into the page
    press(qtbot, Key.Key_4, CTRL)
    assert focused() is window.chat.composer


def test_the_focus_ring_sits_on_the_focused_control(qtbot, make_window):
    window = make_window()
    ring = window.focus_ring.ring
    press(qtbot, Key.Key_1, CTRL)
    for _ in range(3):
        widget = focused()
        assert ring.widget() is widget and ring.isVisible()
        assert ring.mapTo(window, QPoint(0, 0)) == widget.mapTo(window, QPoint(0, 0)) and ring.size() == widget.size()
        press(qtbot, Key.Key_Tab, SHIFT)  # search box → sidebar → its page's last control
    tab_to(qtbot, window.sidebar)
    # Drawn: the sidebar has no frame of its own, so the accent colour on its edge is the ring's.
    edge = window.sidebar.mapTo(window, QPoint(1, window.sidebar.height() // 2))
    assert window.grab().toImage().pixelColor(edge) == ring.palette().color(QPalette.ColorRole.Highlight)


def test_search_download_and_chat_with_the_keyboard_alone(qtbot, real_window, tiny_hub, tiny_models):  # noqa: F811
    pytest.importorskip("llama_cpp")
    window = real_window()
    with qtbot.waitSignal(window._probe.succeeded, timeout=30_000):
        window.detect_hardware()  # what app.ui.main does once the window is up
    discover = window.discover

    press(qtbot, Key.Key_1, CTRL)
    assert window.current_page == "Discover" and focused() is discover.search_box
    qtbot.keyClicks(focused(), "tiny-llama")
    with qtbot.waitSignal(discover.answered, timeout=30_000):
        press(qtbot, Key.Key_Return)
    assert discover.results.count() == 1

    with qtbot.waitSignal(discover.answered, timeout=60_000):  # into the results: the first one opens
        press(qtbot, Key.Key_Down)
    assert focused() is discover.results and discover.choices.repo_id == TINY_REPO
    press(qtbot, Key.Key_Return)  # to its quants, on the best pick
    quants = [choice.quant for choice in discover.choices.choices]
    best = discover.choices.best.quant
    assert focused() is discover.table and quants[discover.table.currentRow()] == best
    wanted = next(quant for quant in quants if quant != best)  # not the best pick: the arrows must move
    for _ in quants:  # arrows walk the rows to the quant we want
        if quants[discover.table.currentRow()] == wanted:
            break
        press(qtbot, Key.Key_Down if quants.index(wanted) > discover.table.currentRow() else Key.Key_Up)
    assert quants[discover.table.currentRow()] == wanted

    press(qtbot, Key.Key_Return)  # download it
    assert window.current_page == "Downloads"
    (row,) = window.downloads.rows.values()
    assert row.task.request.files == (f"tiny-llama-{wanted}.gguf",) and row.isAncestorOf(focused())
    # Finished: the buttons change, and the focus goes to what comes next rather than back to the sidebar.
    qtbot.waitUntil(lambda: row.task.state == "done" and focused() is row.buttons["chat"], timeout=60_000)
    model_path = str(row.task.result.path)
    assert model_path.endswith(f"tiny-llama-{wanted}.gguf")

    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        press(qtbot, Key.Key_Space)
    assert loaded.args[0].model_path == model_path
    chat = window.chat
    assert window.current_page == "Chat" and focused() is chat.composer

    qtbot.keyClicks(focused(), "Hello there")
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        press(qtbot, Key.Key_Return)
        reply = chat.view.bubbles[-1]
        # Streaming: the reply shows its first tokens while it is still being written.
        qtbot.waitUntil(lambda: reply.state == "streaming" and bool(reply.body.toPlainText()), timeout=60_000)
    assert done.args[0].stats.generated_tokens > 0
    messages = chat.store.messages(chat.current.id)
    assert [(m.role, m.content) for m in messages] == [("user", "Hello there"), ("assistant", done.args[0].text)]
    assert reply.markdown == done.args[0].text and focused() is chat.composer  # ready for the next message


def test_the_focus_ring_follows_into_a_dialog_and_back(qtbot, make_window):
    from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLineEdit, QVBoxLayout

    window = make_window()
    dialog = QDialog(window)
    field = QLineEdit(dialog)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, dialog)
    layout = QVBoxLayout(dialog)
    layout.addWidget(field)
    layout.addWidget(buttons)
    dialog.show()
    dialog.activateWindow()
    field.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is field)
    press(qtbot, Key.Key_Tab)
    button = focused()
    assert button in buttons.buttons()
    ring = window.focus_ring.ring
    assert ring.widget() is button and ring.isVisible() and ring.window() is dialog and ring.size() == button.size()
    dialog.close()
    window.activateWindow()
    window.sidebar.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.sidebar)
    ring = window.focus_ring.ring
    assert ring.widget() is window.sidebar and ring.window() is window
