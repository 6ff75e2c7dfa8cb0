"""Accessibility (issue 21): every interactive control of every page and dialog has an accessible name, read
through Qt's accessibility interface as assistive technology reads it (a button's text counts; an icon-only
button, a bare text field or a list needs its own name); a streamed reply is announced once it is done."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAccessible
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QAbstractScrollArea, QAbstractSlider,
                               QAbstractSpinBox, QComboBox, QHeaderView, QLineEdit, QPlainTextEdit, QScrollBar, QTabBar,
                               QTextEdit, QWidget)

from app.ui.window import PAGES
from tests.ui.engine_double import EngineDouble
from tests.ui.chat.test_chat_page import load, type_and_send

INTERACTIVE = (QAbstractButton, QLineEdit, QPlainTextEdit, QTextEdit, QComboBox, QAbstractSpinBox, QAbstractSlider,
               QAbstractItemView)


def _part_of_another_control(widget: QWidget) -> bool:
    """Pieces Qt builds inside a control and names through it: a spin box's or combo box's line edit, a scroll
    area's scroll bars, a tab bar's scroll arrows, a combo box's popup list."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, (QAbstractSpinBox, QComboBox, QTabBar, QLineEdit)):  # QLineEdit: its clear button
            return True
        if isinstance(widget, (QScrollBar, QHeaderView)) and isinstance(parent, QAbstractScrollArea):
            return True
        if parent.inherits("QComboBoxPrivateContainer"):
            return True
        parent = parent.parentWidget()
    return False


def unnamed_controls(root: QWidget) -> list[str]:
    found = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, INTERACTIVE) or _part_of_another_control(widget):
            continue
        interface = QAccessible.queryAccessibleInterface(widget)
        name = interface.text(QAccessible.Text.Name) if interface is not None else ""
        if not name.strip():
            found.append(f"{type(widget).__name__} {widget.objectName() or ''} in {_path(widget, root)}".strip())
    return found


def _path(widget: QWidget, root: QWidget) -> str:
    names = []
    parent = widget.parentWidget()
    while parent is not None and parent is not root:
        names.append(parent.objectName() or type(parent).__name__)
        parent = parent.parentWidget()
    return " < ".join(names[:4])


@pytest.mark.parametrize("page", PAGES)
def test_every_control_on_the_page_has_an_accessible_name(page, make_window):
    window = make_window()
    window.show_page(page)
    assert unnamed_controls(window.pages[page]) == []


def test_the_navigation_and_a_chat_with_a_reply_have_accessible_names(qtbot, make_window):
    """The sidebar, and what a reply adds: its bubble's actions (copy, edit, regenerate) and the model bar."""
    window = make_window(EngineDouble(["Hello", " there", "."]))
    load(qtbot, window)
    window.show_page("Chat")
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, window.chat, "Hi")
    assert unnamed_controls(window) == []


def test_pages_full_of_data_have_accessible_names(qtbot, make_window, tmp_path):
    """The controls pages add for what they show: Discover's quants, Downloads' jobs (pause, cancel, chat), the
    Library's models, the Lab's variants and results, the running server, the runtimes panel; filled as the
    README screenshots are (tests/bench/render_pages.py)."""
    from tests.bench import render_pages as screenshots

    screenshots.fill_library(tmp_path)
    screenshots.fill_documents(tmp_path)
    window = make_window()
    qtbot.waitUntil(lambda: not window.library.busy, timeout=10_000)
    window.library.refresh()
    qtbot.waitUntil(lambda: not window.library.busy, timeout=10_000)
    window.hardware.set_profile(screenshots.sample_laptop())
    screenshots.fill_discover_and_downloads(window)
    screenshots.fill_lab_and_server(window, tmp_path)
    assert (window.library.table.rowCount(), window.discover.table.rowCount(), len(window.downloads.rows),
            window.lab.table.rowCount()) == (5, 6, 2, 7)
    assert window.documents.table.rowCount() == 2 and window.documents.report.count() == 2
    assert {page: unnamed_controls(window.pages[page]) for page in PAGES} == {page: [] for page in PAGES}
    window.server.shutdown()


def test_the_check_finds_an_unnamed_control(qtbot):
    from PySide6.QtWidgets import QPushButton, QToolButton, QVBoxLayout

    root = QWidget()
    qtbot.addWidget(root)
    layout = QVBoxLayout(root)
    bare_field, icon_button, named, labelled = QLineEdit(), QToolButton(), QLineEdit(), QPushButton("Send")
    bare_field.setPlaceholderText("Search")  # a placeholder is no name: it is gone once the user types
    named.setAccessibleName("Model folder")
    for widget in (bare_field, icon_button, named, labelled):
        layout.addWidget(widget)
    assert [entry.split()[0] for entry in unnamed_controls(root)] == ["QLineEdit", "QToolButton"]


def test_the_dialogs_have_accessible_names(qtbot, make_window, tmp_path):
    from PySide6.QtCore import QSettings

    from app.ui.chat.chat_documents import CollectionPicker
    from app.ui.chat.chat_settings import ChatSettingsDialog
    from app.ui.crash import CrashDialog
    from app.ui.library.first_run import FirstRunPage
    from app.ui.settings.remote_connections import RemoteModelDialog

    window = make_window()
    store = window.chat.store
    dialogs = [ChatSettingsDialog(store, store.create_conversation("A chat"), window),
               CrashDialog(RuntimeError("a bug"), tmp_path / "quantdesk.log", window),
               FirstRunPage(QSettings(str(tmp_path / "first.ini"), QSettings.Format.IniFormat), window),
               RemoteModelDialog(window), CollectionPicker([("Manuals", "8 files")], [], window)]
    for dialog in dialogs:
        qtbot.addWidget(dialog)
    assert {type(d).__name__: unnamed_controls(d) for d in dialogs} == {type(d).__name__: [] for d in dialogs}


@pytest.fixture
def announcements(monkeypatch) -> list[tuple[QWidget, str]]:
    """What screen readers are told to say: no assistive technology runs here, so Qt's dispatch of accessibility
    events is where the test listens (the event as Qt would hand it to AT-SPI, UIA or NSAccessibility)."""
    from PySide6.QtGui import QAccessibleAnnouncementEvent

    said: list[tuple[QWidget, str]] = []
    dispatch = QAccessible.updateAccessibility

    def listen(event):
        if isinstance(event, QAccessibleAnnouncementEvent):
            said.append((event.object(), event.message()))
        dispatch(event)

    monkeypatch.setattr(QAccessible, "updateAccessibility", staticmethod(listen))
    return said


def test_a_streamed_reply_is_announced_once_when_done(qtbot, make_window, announcements):
    window = make_window(EngineDouble(["Hello", " there", "."]), EngineDouble())
    load(qtbot, window)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        type_and_send(qtbot, window.chat, "Hi")
    assert announcements == [(window.chat.view, "Reply done: Hello there.")]


def test_a_stopped_reply_is_announced_as_stopped(qtbot, make_window, announcements):
    engine = EngineDouble(["Once ", "upon ", "a ", "time", "."], hold_after=2)
    window = make_window(engine)
    load(qtbot, window)
    type_and_send(qtbot, window.chat, "Tell a story")
    qtbot.waitUntil(engine.holding.is_set, timeout=10_000)
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        window.chat.stop()
    assert announcements == [(window.chat.view, "Reply stopped: Once upon")]
