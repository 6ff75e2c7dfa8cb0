"""``quantdesk`` with no arguments opens the main window and returns when the app quits."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Slot
from PySide6.QtWidgets import QApplication

from app import cli, paths
from app.ui.window import MainWindow


class Closer(QObject):
    """Closes the main window once it is shown, as a user would; the app quits with its last window."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[MainWindow] = []

    @Slot()
    def close_when_shown(self) -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if not windows:
            QTimer.singleShot(20, self.close_when_shown)
            return
        self.seen.extend(windows)
        windows[0].close()


def test_cli_without_arguments_runs_the_gui(qtbot):
    closer = Closer()
    QTimer.singleShot(0, closer.close_when_shown)
    assert cli.main([]) == 0
    assert len(closer.seen) == 1
    assert (paths.data_dir() / "chats.sqlite3").exists()  # the history lives in the user data folder
    assert (paths.config_dir() / "window.ini").exists()  # and the window state in the config folder


def test_the_app_has_its_icon(qapp):
    from app.ui.main import app_icon

    icon = app_icon()
    assert not icon.isNull() and 256 in [s.width() for s in icon.availableSizes()]
