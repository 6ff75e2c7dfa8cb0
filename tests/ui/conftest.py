"""Fixtures for the UI tests: a main window on a real chat store, with the engine stood in by
EngineDouble where a test must steer it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, QTranslator
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.chats.store import ChatStore
from app.engine.client import EngineClient
from app.ui.chat.engine_bridge import EngineBridge
from app.ui.common.theme import ThemeFollower
from app.ui.common.translations import translations_dir
from app.ui.window import MainWindow
from tests.hub.conftest import fast, fixed_template, gguf_repo  # noqa: F401 - fixtures: the Library's update checks
from tests.ui.engine_double import EngineDouble, SuccessiveEngines


@pytest.fixture(autouse=True, scope="session")
def english_plurals(qapp):
    """The English forms of the "%n ..." strings, which the app loads at start-up (app.ui.common.translations.install):
    without them Qt shows the source text, "1 server request(s)"."""
    translator = QTranslator()
    assert translator.load(str(translations_dir() / "quantdesk_en.qm"))
    qapp.installTranslator(translator)
    yield
    qapp.removeTranslator(translator)


@pytest.fixture(autouse=True, scope="session")
def themed_as_the_app_starts(qapp):
    """The look app.ui.main gives the application before any window (the system theme: palette with the accent, the
    style sheet built for it), so that a window made in a test changes nothing application-wide."""
    qapp.theme = follower = ThemeFollower(qapp, "system")  # where app.ui.main keeps it, for Settings' theme choice
    yield
    del qapp.theme
    follower.deleteLater()


@pytest.fixture(autouse=True)
def leaves_the_application_as_found(qapp, themed_as_the_app_starts):
    """Every test leaves the application's look as it found it: style, palette, style sheet, font and layout
    direction are application-wide, so a theme left on by one test changes what the next one sees (a light-theme
    icon drawn in a dark palette's ink failed only after such a test). A test that changes one must restore it; this
    restores it anyway, so one culprit fails alone instead of the tests after it."""
    before = _application_look(qapp)
    yield
    after = _application_look(qapp)
    changed = [name for name in before if before[name] != after[name]]
    if changed:
        style, palette, sheet, font, direction = before.values()
        qapp.setStyle(style)
        qapp.setPalette(palette)
        qapp.setStyleSheet(sheet)
        qapp.setFont(font)
        qapp.setLayoutDirection(direction)
        pytest.fail(f"the test left the application's {', '.join(changed)} changed (restored now)", pytrace=False)


def _application_look(app: QApplication) -> dict[str, object]:
    return {"style": app.style().name(), "palette": QPalette(app.palette()), "style sheet": app.styleSheet(),
            "font": app.font(), "layout direction": app.layoutDirection()}


@pytest.fixture
def build_window(qtbot, tmp_path):
    """build_window(bridge, db=None) -> a shown, active MainWindow on a real chat store; closed after the test."""
    made: list[tuple[MainWindow, EngineBridge, ChatStore]] = []

    def build(bridge: EngineBridge, db=None) -> MainWindow:
        store = ChatStore(db or tmp_path / "chats.sqlite3")
        settings = QSettings(str(tmp_path / "window.ini"), QSettings.Format.IniFormat)
        window = MainWindow(store, bridge, settings)
        qtbot.addWidget(window)
        made.append((window, bridge, store))
        # Shortcuts fire only in the active window; offscreen activates only the first one shown.
        with qtbot.waitActive(window):
            window.show()
            window.activateWindow()
        return window

    yield build
    for window, bridge, store in made:
        window.close()
        bridge.shutdown()
        store.close()


@pytest.fixture
def make_window(build_window):
    """make_window(engines...) -> MainWindow; each engine double serves one engine start."""

    def make(*engines: EngineDouble, db=None) -> MainWindow:
        return build_window(EngineBridge(SuccessiveEngines(*(engines or [EngineDouble()]))), db)

    return make


@pytest.fixture
def real_window(build_window):
    """real_window() -> MainWindow whose bridge starts real engine hosts (same store and settings each time)."""
    return lambda: build_window(EngineBridge(EngineClient()))
