"""Fixtures for the UI tests: a main window on a real chat store, with the engine stood in by
EngineDouble where a test must steer it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, QTranslator

from app.chats.store import ChatStore
from app.engine.client import EngineClient
from app.ui.engine_bridge import EngineBridge
from app.ui.translations import translations_dir
from app.ui.window import MainWindow
from tests.hub.conftest import fast, fixed_template, gguf_repo  # noqa: F401 - fixtures: the Library's update checks
from tests.ui.engine_double import EngineDouble, SuccessiveEngines


@pytest.fixture(autouse=True, scope="session")
def english_plurals(qapp):
    """The English forms of the "%n ..." strings, which the app loads at start-up (app.ui.translations.install):
    without them Qt shows the source text, "1 server request(s)"."""
    translator = QTranslator()
    assert translator.load(str(translations_dir() / "quantdesk_en.qm"))
    qapp.installTranslator(translator)
    yield
    qapp.removeTranslator(translator)


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
