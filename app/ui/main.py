"""``quantdesk`` with no arguments: the desktop app."""

from __future__ import annotations

import os
import sys

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__, logs, paths
from app import settings as app_settings
from app.chats.store import ChatStore, ChatStoreError
from app.engine.pool import ModelPool, limits_from, machine_free_memory
from app.ui.crash import CrashReporter
from app.ui.engine_bridge import EngineBridge
from app.ui.theme import ThemeFollower
from app.ui.translations import chosen_language, install, uninstall
from app.ui.window import MainWindow


def window_settings() -> QSettings:
    """Window state lives in the app's config folder (platformdirs), not in Qt's own location."""
    paths.config_dir().mkdir(parents=True, exist_ok=True)
    return QSettings(str(paths.config_dir() / "window.ini"), QSettings.Format.IniFormat)


def application(argv: list[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if existing is not None:
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


def build_window(store: ChatStore | None = None, bridge: EngineBridge | None = None,
                 settings: QSettings | None = None) -> MainWindow:
    bridge = bridge or EngineBridge.over(ModelPool(limits_from(app_settings.load()),
                                                   free_memory=machine_free_memory))
    return MainWindow(store or ChatStore(), bridge, settings or window_settings())


class _QuitAfterFirstPaint(QObject):
    """QUANTDESK_EXIT_AFTER_SHOWN=1: say so on stdout once the main window has painted, then quit.
    Packaging smoke checks use it to prove a frozen build's GUI starts (packaging/smoke_test.sh)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            watched.removeEventFilter(self)
            print(f"quantdesk: main window shown ({watched.windowTitle()})", flush=True)
            QTimer.singleShot(0, QApplication.quit)
        return False


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
    app.theme = ThemeFollower(app, user_settings.theme)
    # The one model pool: the chat's models, one engine host each; the active one lent to the local server.
    bridge = EngineBridge.over(ModelPool(limits_from(user_settings), free_memory=machine_free_memory))
    window = build_window(store, bridge, settings)
    if os.environ.get("QUANTDESK_EXIT_AFTER_SHOWN"):
        quit_after_paint = _QuitAfterFirstPaint(window)
        window.installEventFilter(quit_after_paint)
    window.show()
    # Detection probes GPUs and disks: start it once the window is on screen.
    QTimer.singleShot(0, window.detect_hardware)
    QTimer.singleShot(0, window.offer_first_run)  # no chats and no models yet: the welcome flow
    try:
        return app.exec()
    finally:
        bridge.shutdown()
        store.close()
