"""``quantdesk`` with no arguments: the desktop app.

Only what the first screen needs is imported before the main window shows: the window, the page it opens on
and the chat store. The model pool is made by the first load (``EngineBridge.over(chat_pool)``), the other pages on
their first visit (app/ui/window.py), the local server when switched on; the hardware probe and the first-run
check start after the window's first paint, the probe on a thread of its own (BackgroundCall).
tests/ui/test_startup_imports.py holds it to that."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__, logs, paths
from app import settings as app_settings
from app.chats.store import ChatStore, ChatStoreError
from app.ui.chat.engine_bridge import EngineBridge
from app.ui.common.theme import ThemeFollower
from app.ui.common.translations import chosen_language, install, uninstall
from app.ui.crash import CrashReporter
from app.ui.window import MainWindow

if TYPE_CHECKING:
    from app.engine.pool import ModelPool


def window_settings() -> QSettings:
    """Window state lives in the app's config folder (platformdirs), not in Qt's own location."""
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    return QSettings(str(paths.config_dir() / "window.ini"), QSettings.Format.IniFormat)


def application(argv: list[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if existing is not None:
        assert isinstance(existing, QApplication)  # QuantDesk makes no bare QCoreApplication
        return existing
    # Fractional scale factors (125 %, 150 %) as they are, so text and lines stay sharp.
    QGuiApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("QuantDesk")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("quantdesk")
    app.setWindowIcon(app_icon())
    return app


def app_icon() -> QIcon:
    """The icon at every size we ship (resources/icons); Linux desktops take it from the .desktop file too."""
    from importlib.resources import files

    icon = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256):
        icon.addFile(str(files("resources") / "icons" / f"quantdesk-{size}.png"))
    return icon


def chat_pool() -> ModelPool:
    """The one model pool: the chat's models, one engine host each; the active one lent to the local server. Made
    by its first use (EngineBridge.over), with the pool limits saved in Settings then."""
    from app import machine
    from app.engine.pool import ModelPool, limits_from

    return ModelPool(limits_from(app_settings.load()), free_memory=machine.free_memory_bytes)


def build_window(store: ChatStore | None = None, bridge: EngineBridge | None = None,
                 settings: QSettings | None = None) -> MainWindow:
    bridge = bridge or EngineBridge.over(chat_pool)
    return MainWindow(store or ChatStore(), bridge, settings or window_settings())


class AfterFirstPaint(QObject):
    """Calls ``then`` once the watched window has painted for the first time: what is not needed to show it
    waits until it is on screen."""

    def __init__(self, window: QObject, then: Callable[[], object]) -> None:
        super().__init__(window)
        self._then = then
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Paint:
            watched.removeEventFilter(self)
            QTimer.singleShot(0, self._then)  # once this paint has finished
        return False


def _say_shown_and_quit(window: MainWindow) -> None:
    """QUANTDESK_EXIT_AFTER_SHOWN=1: say so on stdout once the main window has painted, then quit. Packaging smoke
    checks use it to prove a frozen build's GUI starts (packaging/smoke_test.sh), tests/bench/gui_startup.py to time
    the start."""
    print(f"quantdesk: main window shown ({window.windowTitle()})", flush=True)
    QApplication.quit()


def _after_shown(window: MainWindow) -> None:
    window.detect_hardware()  # probes GPUs and disks, on the probe's own thread
    window.offer_first_run()  # no chats and no models yet: the welcome flow
    window.start_documents()  # the indexer, where a collection has work left (app/ui/documents/documents_service.py)


def run() -> int:
    app = application()
    logs.setup()
    crash_reporter = CrashReporter(app)
    crash_reporter.install()
    try:
        return _run_window(app)
    finally:
        crash_reporter.uninstall()


def _run_window(app: QApplication) -> int:
    user_settings = app_settings.load()
    # Before the first widget: texts are translated as widgets are built (a change in Settings needs a restart).
    installed = install(chosen_language(user_settings.language))
    try:
        return _run_main_window(app, user_settings)
    finally:
        uninstall(installed)  # back to how it was: run() may be called again in this process (tests do)


def _run_main_window(app: QApplication, user_settings: app_settings.Settings) -> int:
    try:
        store = ChatStore()
    except ChatStoreError as exc:
        QMessageBox.critical(None, "QuantDesk", str(exc))
        return 1
    settings = window_settings()
    app_settings.apply_environment(user_settings)  # offline mode for this app's Hub requests
    app.theme = ThemeFollower(app, user_settings.theme)  # type: ignore[attr-defined]  # window._on_theme_changed reads it
    bridge = EngineBridge.over(chat_pool)  # the pool is made by the first load, not before the window shows
    window = build_window(store, bridge, settings)
    if os.environ.get("QUANTDESK_EXIT_AFTER_SHOWN"):
        AfterFirstPaint(window, lambda: _say_shown_and_quit(window))
    else:
        AfterFirstPaint(window, lambda: _after_shown(window))
    window.show()
    try:
        return app.exec()
    finally:
        bridge.shutdown()
        store.close()
