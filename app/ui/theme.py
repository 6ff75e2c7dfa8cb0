"""Light and dark: follow the system's colour scheme, or the one the user picked.

Native styles (macOS, Windows 11, recent GNOME/KDE) switch palettes themselves. Where the platform
reports dark but the palette stayed light (older Linux desktops, the offscreen platform), or where
the user picked dark, the Fusion style with a dark palette stands in.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

THEMES = ("system", "light", "dark")
# The border of an unticked check box or radio button on the dark palette: Fusion derives it from
# the window colour made darker, which on a dark window is all but black on near-black.
DARK_INDICATOR_OUTLINE = "#8a9096"
DARK_INDICATOR_OUTLINE_DISABLED = "#54585d"


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


class DarkFusionStyle(QProxyStyle):
    """Fusion for the dark palette, with check box and radio button outlines that show.

    Fusion draws those outlines in the window colour made darker (``QFusionStylePrivate::outline``:
    ``window().darker(140)``; radio buttons ``darker(150)``), fine on a light window, invisible on
    a dark one. The indicators are drawn by Fusion itself, from a palette whose window colour is
    light enough that "darker" lands on a visible grey; nothing else in them uses the window colour.
    """

    def __init__(self) -> None:
        super().__init__("Fusion")

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,  # noqa: N802 (Qt's name)
                      painter: QPainter, widget: QWidget | None = None) -> None:
        if element in (QStyle.PrimitiveElement.PE_IndicatorCheckBox,
                       QStyle.PrimitiveElement.PE_IndicatorRadioButton):
            option = type(option)(option)
            palette = QPalette(option.palette)
            for group, colour in ((QPalette.ColorGroup.Active, DARK_INDICATOR_OUTLINE),
                                  (QPalette.ColorGroup.Inactive, DARK_INDICATOR_OUTLINE),
                                  (QPalette.ColorGroup.Disabled, DARK_INDICATOR_OUTLINE_DISABLED)):
                palette.setColor(group, QPalette.ColorRole.Window, QColor(colour).lighter(140))
            option.palette = palette
        super().drawPrimitive(element, option, painter, widget)


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
            self.app.setStyle(DarkFusionStyle())  # the application takes ownership
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
