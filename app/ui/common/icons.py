"""Icons for the navigation and the actions: glyphs of the Material Design Icons font that the qtawesome package
ships, painted in the colour of the palette in use, so a theme switch recolours every icon on its next paint with no
icon made again.

Only the font and its charmap are used, loaded on the first paint: importing qtawesome itself goes through QtPy,
whose star imports of QtCore, QtGui and QtWidgets cost ~0.1 s of start-up, and it loads all twelve of its fonts
(+35 MiB). A glyph is text in that font, so no SVG module and no network is needed (PySide6-Essentials is enough);
packaging/quantdesk.spec carries the font files into the bundle."""

from __future__ import annotations

import importlib.util
import json
import logging
from functools import lru_cache
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QAbstractButton

log = logging.getLogger(__name__)

# What each icon shows, by the app's own names (Material Design Icons 6 glyphs).
GLYPHS = {
    # navigation
    "Discover": "compass-outline", "Downloads": "download-outline", "Library": "bookshelf",
    "Chat": "chat-outline", "Hardware": "chip", "Lab": "flask-outline",
    "Server": "server-network", "Settings": "cog-outline", "Documents": "file-document-multiple-outline",
    # actions
    "send": "send", "stop": "stop-circle-outline", "download": "download",
    "delete": "delete-outline", "load": "play-circle-outline", "eject": "eject-outline",
    "search": "magnify", "settings": "cog-outline", "copy": "content-copy",
    "edit": "pencil-outline", "regenerate": "refresh", "new": "plus", "image": "image-outline",
    "import": "file-import-outline", "folder": "folder-open-outline", "pause": "pause",
    "resume": "play", "cancel": "close", "retry": "refresh", "update": "update",
    "chat": "chat-outline", "run": "play", "export": "export", "documents": "paperclip",
}


@lru_cache(maxsize=1)
def _font() -> tuple[str, dict[str, int]]:
    """The Material Design Icons font's family (added to the application) and its glyphs' code points by name."""
    spec = importlib.util.find_spec("qtawesome")  # finds the package's folder without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("The qtawesome package (the icons' font) is missing: pip install qtawesome")
    fonts = Path(next(iter(spec.submodule_search_locations))) / "fonts"
    ttf = max(fonts.glob("materialdesignicons6-webfont-*.ttf"))
    charmap = json.loads(ttf.with_name(ttf.name.replace("-webfont-", "-webfont-charmap-")).with_suffix(".json")
                         .read_text(encoding="utf-8"))
    family = QFontDatabase.applicationFontFamilies(QFontDatabase.addApplicationFont(str(ttf)))[0]
    return family, {name: int(code, 16) for name, code in charmap.items()}


@lru_cache(maxsize=1)
def _say_once(problem: str) -> None:
    log.warning("Icons are not drawn: %s", problem)


def glyph_exists(name: str) -> bool:
    return GLYPHS[name] in _font()[1]


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
        try:
            family, code_points = _font()
        except (RuntimeError, OSError, ValueError, IndexError) as error:  # an install without the font: no icons
            _say_once(str(error))
            return
        font = QFont(family)
        font.setPixelSize(max(1, round(0.875 * rect.height())))  # the glyphs' em box: as qtawesome sizes them
        painter.save()
        painter.setFont(font)
        painter.setPen(self.colour(mode))
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, chr(code_points[self.glyph]))
        painter.restore()

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        pixmap = QPixmap(size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        try:
            self.paint(painter, QRect(QPoint(0, 0), size), mode, state)
        finally:  # a painter still active on the returned pixmap crashes Qt
            painter.end()
        return pixmap

    def clone(self) -> QIconEngine:
        return _PaletteIconEngine(self.glyph)


def icon(name: str) -> QIcon:
    """The icon for a page ("Chat") or an action ("send"), coloured by the palette it is painted with."""
    return QIcon(_PaletteIconEngine(GLYPHS[name]))


def decorate(button: QAbstractButton, name: str) -> QAbstractButton:
    """Give ``button`` the icon for ``name`` (its text stays: it names the button for everyone)."""
    button.setIcon(icon(name))
    return button
