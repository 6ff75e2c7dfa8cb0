"""Icons for the navigation and the actions, drawn from the Material Design Icons font that qtawesome ships, in
the colour of the palette they are painted with: a theme switch recolours every icon on its next paint, with no
icon made again.

qtawesome draws its glyphs with QPainter from a font in its package (no SVG module, no network), so it works with
PySide6-Essentials; packaging/quantdesk.spec carries that font into the bundle."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QAbstractButton

# What each icon shows, by the app's own names (Material Design Icons 6 glyphs).
GLYPHS = {
    # navigation
    "Discover": "mdi6.compass-outline", "Downloads": "mdi6.download-outline", "Library": "mdi6.bookshelf",
    "Chat": "mdi6.chat-outline", "Hardware": "mdi6.chip", "Lab": "mdi6.flask-outline",
    "Server": "mdi6.server-network", "Settings": "mdi6.cog-outline",
    # actions
    "send": "mdi6.send", "stop": "mdi6.stop-circle-outline", "download": "mdi6.download",
    "delete": "mdi6.delete-outline", "load": "mdi6.play-circle-outline", "eject": "mdi6.eject-outline",
    "search": "mdi6.magnify", "settings": "mdi6.cog-outline", "copy": "mdi6.content-copy",
    "edit": "mdi6.pencil-outline", "regenerate": "mdi6.refresh", "new": "mdi6.plus", "image": "mdi6.image-outline",
    "import": "mdi6.file-import-outline", "folder": "mdi6.folder-open-outline", "pause": "mdi6.pause",
    "resume": "mdi6.play", "cancel": "mdi6.close", "retry": "mdi6.refresh", "update": "mdi6.update",
    "chat": "mdi6.chat-outline", "run": "mdi6.play", "export": "mdi6.export",
}


class _PaletteIconEngine(QIconEngine):
    """Paints one glyph in the application palette's colour for the icon's mode: button text normally, the
    highlighted text on a selected item (the sidebar's current page), the disabled text when disabled."""

    def __init__(self, glyph: str) -> None:
        super().__init__()
        self.glyph = glyph

    def colour(self, mode: QIcon.Mode) -> QColor:
        palette = QGuiApplication.palette()
        if mode == QIcon.Mode.Disabled:
            return palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText)
        if mode == QIcon.Mode.Selected:
            return palette.color(QPalette.ColorRole.HighlightedText)
        return palette.color(QPalette.ColorRole.ButtonText)

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        glyph = _glyph_icon(self.glyph, self.colour(mode).name(QColor.NameFormat.HexArgb))
        glyph.paint(painter, rect, Qt.AlignmentFlag.AlignCenter, QIcon.Mode.Normal, state)

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        pixmap = QPixmap(size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        self.paint(painter, QRect(QPoint(0, 0), size), mode, state)
        painter.end()
        return pixmap

    def clone(self) -> QIconEngine:
        return _PaletteIconEngine(self.glyph)


@lru_cache(maxsize=256)
def _glyph_icon(glyph: str, colour: str) -> QIcon:
    import qtawesome  # loads its fonts into the application on first use: after the QApplication exists

    return qtawesome.icon(glyph, color=QColor(colour))


def icon(name: str) -> QIcon:
    """The icon for a page ("Chat") or an action ("send"), coloured by the palette it is painted with."""
    return QIcon(_PaletteIconEngine(GLYPHS[name]))


def decorate(button: QAbstractButton, name: str) -> QAbstractButton:
    """Give ``button`` the icon for ``name`` (its text stays: it names the button for everyone)."""
    button.setIcon(icon(name))
    return button
