"""Icons: every navigation item has one, drawn in the palette's colour, so it follows light and dark."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtGui import QIcon, QPalette
from PySide6.QtWidgets import QApplication

from app.ui.common.icons import GLYPHS, glyph_exists, icon
from app.ui.common.theme import ThemeFollower
from app.ui.window import PAGES


def ink(qicon: QIcon, mode: QIcon.Mode = QIcon.Mode.Normal) -> tuple[int, int]:
    """The drawn pixels of an icon: how many, and their mean lightness."""
    image = qicon.pixmap(QSize(32, 32), mode).toImage()
    drawn = [image.pixelColor(x, y) for x in range(image.width()) for y in range(image.height())
             if image.pixelColor(x, y).alpha() > 128]
    return len(drawn), sum(c.lightness() for c in drawn) // max(1, len(drawn))


def test_every_navigation_item_has_an_icon_that_follows_the_theme(qtbot, make_window):
    app = QApplication.instance()
    window = make_window()
    follower = ThemeFollower(app, "light")
    try:
        lightness = {}
        for theme in ("light", "dark"):
            follower.set_theme(theme)
            for row, name in enumerate(PAGES):
                item = window.sidebar.item(row)
                assert item.text() == name and not item.icon().isNull()
                drawn, lightness[theme, name] = ink(item.icon())
                assert drawn > 20, f"{name}: nothing drawn in the {theme} theme"
        for name in PAGES:  # dark ink on the light palette, light ink on the dark one
            assert lightness["light", name] < 100 < lightness["dark", name], name
        dark_text = app.palette().color(QPalette.ColorRole.ButtonText).lightness()  # the dark theme is still on
        assert abs(lightness["dark", "Chat"] - dark_text) < 40
    finally:
        follower.set_theme("system")
        follower.deleteLater()


def test_a_selected_item_and_a_disabled_button_get_their_own_colours(qtbot):
    app = QApplication.instance()
    follower = ThemeFollower(app, "light")
    try:
        normal, selected, disabled = (ink(icon("Chat"), mode)[1] for mode in (
            QIcon.Mode.Normal, QIcon.Mode.Selected, QIcon.Mode.Disabled))
        assert selected > 200 > normal  # white on the accent
        assert disabled != normal
    finally:
        follower.set_theme("system")
        follower.deleteLater()


def test_every_glyph_exists_in_the_font(qtbot):
    assert [name for name in GLYPHS if not glyph_exists(name)] == []


def test_an_install_without_the_font_shows_no_icons_and_says_why(qtbot, make_window, monkeypatch, caplog):
    """A build that lost qtawesome's font files draws blank icons and logs the cause once; it used to raise inside
    Qt's paint and crash the process (a painter left active on a pixmap)."""
    from app.ui.common import icons

    real_find_spec = icons.importlib.util.find_spec
    monkeypatch.setattr(icons.importlib.util, "find_spec",
                        lambda name, *a: None if name == "qtawesome" else real_find_spec(name, *a))
    icons._font.cache_clear()
    icons._say_once.cache_clear()
    try:
        window = make_window()
        window.grab()
        assert ink(icon("Chat")) == (0, 0)
        assert [r.getMessage() for r in caplog.records if r.name == icons.__name__] == [
            "Icons are not drawn: The qtawesome package (the icons' font) is missing: pip install qtawesome"]
    finally:
        icons._font.cache_clear()
