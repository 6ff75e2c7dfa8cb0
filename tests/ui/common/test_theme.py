import gc

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QCheckBox, QStyle, QStyleOptionButton

from app.ui.common.theme import ThemeFollower


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


def _indicator_contrast(checkbox: QCheckBox) -> int:
    """The largest lightness difference between the window colour and any pixel of the box."""
    option = QStyleOptionButton()
    checkbox.initStyleOption(option)
    box = checkbox.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, checkbox)
    image = checkbox.grab().toImage()
    window = checkbox.palette().color(QPalette.ColorRole.Window).lightness()
    return max(abs(image.pixelColor(x, y).lightness() - window)
               for x in range(box.left(), box.right() + 1) for y in range(box.top(), box.bottom() + 1))


def test_an_unticked_check_box_has_a_visible_border_in_the_dark_theme(qtbot):
    app = QApplication.instance()
    follower = ThemeFollower(app, "dark")
    try:
        gc.collect()  # the style belongs to the application, not to a Python name
        boxes = [QCheckBox("Offline mode"), QCheckBox("Disabled")]
        boxes[1].setEnabled(False)
        for box in boxes:
            qtbot.addWidget(box)
            box.show()
        assert _indicator_contrast(boxes[0]) >= 60
        assert _indicator_contrast(boxes[1]) >= 25  # dimmer when disabled, still there
    finally:
        follower.set_theme("system")
        follower.deleteLater()


def test_the_chat_banner_text_is_dark_on_its_light_background_in_the_dark_theme(qtbot, make_window):
    app = QApplication.instance()
    follower = ThemeFollower(app, "dark")
    try:
        chat = make_window().chat
        chat.composer.setPlainText("hello?")
        chat.send()  # no model loaded: the banner says so
        qtbot.waitExposed(chat.banner)
        text = chat.banner_text.palette().color(QPalette.ColorRole.WindowText)
        assert text.lightness() < 100  # the banner is #fff4d6 in every theme
    finally:
        follower.set_theme("system")
        follower.deleteLater()


def test_muted_cells_take_the_new_palette_when_the_theme_switches(qtbot, make_window, tmp_path):
    """The Library's "up to date" and the Lab's unmeasured rows are coloured when filled: a theme switch fills
    them again, so they do not keep the old palette's grey (near-invisible on the other background)."""
    from app.ui.lab.lab_page import FIRST_FIGURE  # where a variant's figures (or why there are none) begin
    from tests.bench import render_pages as screenshots

    app = QApplication.instance()
    follower = ThemeFollower(app, "light")
    try:
        screenshots.fill_library(tmp_path)
        window = make_window()
        qtbot.waitUntil(lambda: not window.library.busy, timeout=10_000)
        window.library.refresh()
        qtbot.waitUntil(lambda: not window.library.busy and bool(window.library.entries), timeout=10_000)
        screenshots.fill_lab_and_server(window, tmp_path)
        table, lab = window.library.table, window.lab.table
        up_to_date = next(row for row in range(table.rowCount()) if table.item(row, 6).text() == "up to date")
        unmeasured = lab.rowCount() - 1  # the exl2 variant that could not run
        light = (table.item(up_to_date, 6).foreground().color(),
                 lab.item(unmeasured, FIRST_FIGURE).foreground().color())
        follower.set_theme("dark")
        muted = app.palette().color(QPalette.ColorRole.PlaceholderText)
        assert table.item(up_to_date, 6).foreground().color() == muted != light[0]
        assert lab.item(unmeasured, FIRST_FIGURE).foreground().color() == muted != light[1]
        window.server.shutdown()
    finally:
        follower.set_theme("system")
        follower.deleteLater()
