"""The Library page's update badge and Update button on a model pulled from the Hub stand-in whose repo then
changed; the Settings switch that turns checks off. Real Hub stand-in, real downloads, real widgets."""

from __future__ import annotations

from pathlib import Path

from app import settings
from app.hub.library import Library
from app.ui.library.library_page import UPDATE_COLUMN, LibraryPage
from app.ui.settings.settings_page import SettingsPage
from tests.hub.conftest import ENTRY, FILE, REPO, sha256


def _page_after_daily_check(qtbot) -> LibraryPage:
    page = LibraryPage()
    qtbot.addWidget(page)
    with qtbot.waitSignal(page.checked, timeout=60_000):  # the first listing starts the daily check
        page.refresh()
    return page


def _wait_for_badge(qtbot, page: LibraryPage) -> None:
    """The window's Library lists and runs the daily check by itself at start."""
    def badge() -> str:
        cell = page.table.item(0, UPDATE_COLUMN) if page.table.rowCount() else None
        return cell.text() if cell is not None else ""

    qtbot.waitUntil(lambda: badge().startswith("update available"), timeout=60_000)


def test_the_badge_says_what_changed_and_details_name_the_file(qtbot, gguf_repo, fixed_template):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template, "README.md": b"# a new card\n"})
    page = _page_after_daily_check(qtbot)
    cell = page.table.item(0, UPDATE_COLUMN)
    assert cell.text() == "update available: chat template changed" and cell.font().bold()
    assert "1 update available: " + ENTRY in page.status.text()
    page.table.selectRow(0)
    assert f"{FILE}: chat template changed" in page.details.text() and page.update_button.isEnabled()
    server.log.clear()
    with qtbot.waitSignal(page.changed, timeout=30_000):
        page.refresh()  # a new listing shows the kept result; no second check today
    assert page.table.item(0, UPDATE_COLUMN).text() == "update available: chat template changed"
    assert server.log == []


def test_check_now_on_an_unchanged_model_says_up_to_date(qtbot, gguf_repo):
    page = _page_after_daily_check(qtbot)
    assert page.table.item(0, UPDATE_COLUMN).text() == "up to date"
    with qtbot.waitSignal(page.checked, timeout=60_000):
        page.check_button.click()
    assert page.status.text() == "Every downloaded model is up to date."
    page.table.selectRow(0)
    assert not page.update_button.isEnabled() and "up to date (checked " in page.details.text()


def test_update_button_updates_through_downloads_and_the_badge_goes(qtbot, make_window, gguf_repo, fixed_template):
    server, entry = gguf_repo
    new_commit = server.update_repo(REPO, {FILE: fixed_template})
    window = make_window()
    _wait_for_badge(qtbot, window.library)
    window.show_page("Library")
    window.library.table.selectRow(0)
    with qtbot.waitSignal(window.downloads.installed, timeout=60_000):
        window.library.update_button.click()
        assert window.current_page == "Downloads"
    qtbot.waitUntil(lambda: window.library.table.item(0, UPDATE_COLUMN).text() == "", timeout=30_000)
    assert sha256(Path(entry.path)) == sha256(fixed_template)
    assert Library().find(ENTRY).commit_hash == new_commit


def test_a_failed_update_says_why_and_keeps_the_model(qtbot, make_window, gguf_repo, fixed_template):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    server.faults.add(FILE, "wrong_byte", times=-1, offset=1000)
    window = make_window()
    _wait_for_badge(qtbot, window.library)
    window.library.table.selectRow(0)
    window.library.update_button.click()
    [row] = window.downloads.rows.values()
    qtbot.waitUntil(lambda: row.task.state == "failed", timeout=60_000)
    qtbot.waitUntil(lambda: "failed verification" in row.detail.text(), timeout=10_000)
    assert Library().find(ENTRY) == entry and sha256(Path(entry.path)) != sha256(fixed_template)


def test_switched_off_in_settings_the_page_never_asks(qtbot, gguf_repo, fixed_template):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    prefs = SettingsPage()
    qtbot.addWidget(prefs)
    assert prefs.updates_box.isChecked() and "Once a day at most" in prefs.updates_note.text()
    prefs.updates_box.click()
    assert settings.load().check_updates is False and "Off:" in prefs.updates_note.text()
    server.log.clear()
    page = _page_after_daily_check(qtbot)
    assert page.table.item(0, UPDATE_COLUMN).text() == ""
    with qtbot.waitSignal(page.checked, timeout=60_000):
        page.check_button.click()
    assert "Update checks are off" in page.status.text() and server.log == []


def test_switching_checks_off_takes_the_badges_away(qtbot, make_window, gguf_repo, fixed_template):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    window = make_window()
    _wait_for_badge(qtbot, window.library)
    with qtbot.waitSignal(window.library.changed, timeout=30_000):
        window.app_settings.updates_box.click()
    assert window.library.table.item(0, UPDATE_COLUMN).text() == ""
    window.library.table.selectRow(0)
    assert not window.library.update_button.isEnabled()
