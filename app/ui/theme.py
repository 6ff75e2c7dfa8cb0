"""Light and dark: follow the system's colour scheme, or the one the user picked.

Native styles (macOS, Windows 11, recent GNOME/KDE) switch palettes themselves. Where the platform
reports dark but the palette stayed light (older Linux desktops, the offscreen platform), or where
the user picked dark, the Fusion style with a dark palette stands in.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

THEMES = ("system", "light", "dark")


def dark_palette() -> QPalette:
    palette = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#202124", QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#17181a", QPalette.ColorRole.AlternateBase: "#2a2b2f",
        QPalette.ColorRole.Text: "#e8eaed", QPalette.ColorRole.Button: "#2d2e32",
        QPalette.ColorRole.ButtonText: "#e8eaed", QPalette.ColorRole.Highlight: "#3d7bd9",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2d2e32",
        QPalette.ColorRole.ToolTipText: "#e8eaed", QPalette.ColorRole.Link: "#8ab4f8",
        QPalette.ColorRole.PlaceholderText: "#9aa0a6", QPalette.ColorRole.Mid: "#3c4043",
        QPalette.ColorRole.Dark: "#111214", QPalette.ColorRole.Light: "#3c4043",
    }
    for role, colour in roles.items():
        palette.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f7378"))
    return palette


def _palette_is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


class ThemeFollower(QObject):
    """Applies a theme now and again whenever the system's colour scheme changes."""

    def __init__(self, app: QApplication, theme: str = "system") -> None:
        super().__init__(app)
        self.app = app
        self._native_style = app.style().name()
        self._native_palette = QPalette(app.palette())
        self.theme = theme if theme in THEMES else "system"
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)
        self.apply()

    def wants_dark(self) -> bool:
        if self.theme == "system":
            return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
        return self.theme == "dark"

    def set_theme(self, theme: str) -> None:
        self.theme = theme if theme in THEMES else "system"
        self.apply()

    def apply(self) -> None:
        if self.wants_dark() and not _palette_is_dark(self._native_palette):
            self.app.setStyle("Fusion")
            self.app.setPalette(dark_palette())
        elif not self.wants_dark() and _palette_is_dark(self.app.palette()) and self.theme == "light":
            self.app.setStyle("Fusion")
            self.app.setPalette(self.app.style().standardPalette())
        else:
            self.app.setStyle(self._native_style)
            self.app.setPalette(self._native_palette)

    @Slot(Qt.ColorScheme)
    def _on_color_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        self._native_palette = QPalette(QGuiApplication.palette())
        self.apply()
