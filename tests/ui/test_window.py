"""The main window shell: navigation, remembered geometry, accessible names, the hardware page."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QAbstractSpinBox, QLineEdit, QListWidget, QPlainTextEdit

from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile
from app.ui.library.library_page import LibraryPage
from app.ui.settings.settings_page import SettingsPage
from app.ui.window import PAGES


def test_every_page_is_reachable_from_the_sidebar_and_by_shortcut(qtbot, make_window):
    window = make_window()
    for index, name in enumerate(PAGES):
        window.sidebar.setCurrentRow(index)
        assert window.stack.currentWidget() is window.pages[name]
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page == "Hardware"
    assert isinstance(window.pages["Library"], LibraryPage) and isinstance(window.pages["Settings"], SettingsPage)


def test_size_position_and_page_are_remembered(qtbot, make_window):
    window = make_window()
    window.resize(760, 560)  # the offscreen screen is 800x800; restoring clamps to the screen
    window.show_page("Hardware")
    window.close()
    again = make_window()
    assert (again.width(), again.height()) == (760, 560)
    assert again.current_page == "Hardware"


def test_interactive_controls_have_accessible_names(qtbot, make_window):
    window = make_window()
    for name in PAGES:  # each page is built on its first visit
        window.page(name)
    kinds = (QAbstractButton, QLineEdit, QPlainTextEdit, QAbstractSpinBox, QListWidget)
    unnamed = [w for kind in kinds for w in window.findChildren(kind)
               if not (w.accessibleName() or (isinstance(w, QAbstractButton) and w.text()))
               and not isinstance(w.parent(), kinds)]  # sub-controls such as a line edit's clear button
    assert unnamed == [], [type(w).__name__ for w in unnamed]


def _profile() -> HardwareProfile:
    return HardwareProfile(
        os="Linux", arch="x86_64", cpu=CpuInfo("Test CPU 9000", "x86_64", 8, 16, ["sse4_2", "avx2", "avx"]),
        ram_total_bytes=32 * 2**30, ram_available_bytes=24 * 2**30,
        gpus=[GpuInfo(0, "nvidia", "RTX Test", 8 * 2**30, 6 * 2**30, compute_capability="8.9")],
        disk_free_bytes=400 * 10**9, disk_path="/models",
        backends=[BackendSupport("llama.cpp", True), BackendSupport("exllamav2", False, "needs CUDA <b>torch</b>")],
        hints=["llama.cpp was built without CUDA"])


def test_hardware_page_shows_memory_flags_backends_and_hints(qtbot, make_window):
    window = make_window()
    page = window.hardware
    page.set_profile(_profile())
    ram, gpu = page.memory_bars
    assert "8.0 GiB in use of 32.0 GiB" in ram.label.text() and ram.bar.value() == 250
    assert "RTX Test" in gpu.label.text() and "2.0 GiB in use of 8.0 GiB" in gpu.label.text()
    assert "400.0 GB free on /models" in page.disk_label.text()
    assert page.flags_label.text().startswith("<b>avx</b> <b>avx2</b>")  # the flags that matter first
    assert page.backend_rows["llama.cpp"].text() == "ready"
    # Reasons are shown as written, never interpreted as markup.
    assert page.backend_rows["exllamav2"].text() == "needs CUDA <b>torch</b>"
    assert page.backend_rows["exllamav2"].textFormat() == Qt.TextFormat.PlainText


def test_hardware_detection_runs_off_the_gui_thread_and_fills_the_page(qtbot, make_window):
    window = make_window()
    with qtbot.waitSignal(window._probe.succeeded, timeout=10_000):
        window.detect_hardware(_profile)
    assert window.hardware.profile.cpu.model == "Test CPU 9000"


def test_a_failing_probe_shows_a_sentence(qtbot, make_window):
    def broken() -> HardwareProfile:
        raise RuntimeError("sysfs exploded")

    window = make_window()
    with qtbot.waitSignal(window._probe.failed, timeout=10_000):
        window.detect_hardware(broken)
    assert "Hardware detection failed" in window.hardware.status_label.text()


def test_a_page_is_built_on_its_first_visit_and_kept(qtbot, make_window):
    window = make_window()
    assert [name for name in PAGES if window.built(name) is not None] == ["Chat"]  # the page it opens on
    window.show_page("Lab")
    lab = window.built("Lab")
    assert lab is not None and window.stack.currentWidget() is lab and lab.isVisible()
    window.show_page("Chat")
    window.show_page("Lab")
    assert window.lab is lab and window.stack.count() == len(PAGES)
    assert [window.stack.indexOf(window.pages[name]) for name in PAGES] == list(range(len(PAGES)))


def test_what_reached_the_window_before_a_page_existed_reaches_the_page(qtbot, make_window):
    """The hardware profile, the probe's failure and the default context wait in the window for the pages that
    show them."""
    from app import settings

    window = make_window()
    with qtbot.waitSignal(window._probe.succeeded, timeout=10_000):
        window.detect_hardware(_profile)
    assert window.built("Hardware") is None and window.built("Discover") is None
    assert window.hardware.profile.cpu.model == "Test CPU 9000"
    assert window.discover.profile.cpu.model == "Test CPU 9000"

    def broken() -> HardwareProfile:
        raise RuntimeError("sysfs exploded")

    again = make_window()
    with qtbot.waitSignal(again._probe.failed, timeout=10_000):
        again.detect_hardware(broken)
    assert "Hardware detection failed" in again.hardware.status_label.text()

    settings.update(default_n_ctx=6144)  # as the Settings page saves it, then the Chat is first built
    again.settings.setValue("window/page", "Settings")
    third = make_window()
    assert third.built("Chat") is None
    assert third.chat.context_box.value() == 6144
