from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app.ui.theme import ThemeFollower


def test_dark_theme_darkens_the_palette_and_system_restores_it(qtbot):
    app = QApplication.instance()
    native = app.palette().color(QPalette.ColorRole.Window)
    follower = ThemeFollower(app, "dark")
    try:
        assert app.palette().color(QPalette.ColorRole.Window).lightness() < 128
        assert app.palette().color(QPalette.ColorRole.Text).lightness() > 128
        follower.set_theme("system")  # the offscreen platform reports no dark scheme
        assert app.palette().color(QPalette.ColorRole.Window) == native
    finally:
        follower.set_theme("system")
        follower.deleteLater()
