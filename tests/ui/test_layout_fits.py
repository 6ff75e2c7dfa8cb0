"""Every page of the main window fits the window at 1024×700, 1280×800 and 1920×1080, light and dark, in English and
German: no widget cut off by its parent, none drawn over a sibling, no label or button too small for its text
(tests/ui/layout_check.py says the rules). The pages hold what a user sees after a while (as the screenshots do:
tests/bench/render_pages.py's data): a loaded model with its context meter and engine memory, a chat, Discover's
quants, downloads, a library, collections, a finished lab result, the server on, a laptop's hardware."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import QCoreApplication

from app.datatypes import ContextUse, LoadSettings
from app.ui.chat.model_bar import Prefill
from app.ui.common.translations import install, uninstall
from app.ui.window import PAGES
from tests.bench import render_pages as sample
from tests.ui.layout_check import describe, problems, text_cut

SIZES = ((1024, 700), (1280, 800), (1920, 1080))


def settle(qtbot) -> None:
    QCoreApplication.processEvents()
    qtbot.wait(10)  # layouts post their requests: one more turn of the loop lays them out
    QCoreApplication.processEvents()


@pytest.fixture
def filled_window(make_window, tmp_path, qapp):
    """A window whose every page shows realistic data."""
    sample.fill_library(tmp_path)
    sample.fill_documents(tmp_path)

    def make():
        window = make_window()
        store = window.store
        for title, text in (("Packing list for Iceland", "What should I pack for a week in Iceland in October?"),
                            ("Explain KV cache quantization", "Does a q8_0 KV cache hurt quality?")):
            conv = store.create_conversation(title, model_path=sample.MODEL)
            store.add_message(conv.id, "user", text)
            store.add_message(conv.id, "assistant", sample.REPLY, stats={"generated_tokens": 300, "decode_tps": 47.9})
        chat = window.chat
        chat.refresh_conversations()
        prefill = Prefill(sample.MODEL, LoadSettings(n_ctx=8192), estimated_bytes=int(5.6 * 2**30),
                          expected_gpu_blocks=28, verdict="full GPU", reason="all 29 layers on Vulkan0",
                          runtime="Vulkan · NVIDIA GeForce RTX 4070 Laptop GPU (8.0 GiB)", runtimes=["cpu", "vulkan"],
                          estimated_buffers={"Vulkan0": int(4.87 * 2**30), "CPU": 330 * 2**20})
        loaded = sample.ScriptedEngine().load(sample.MODEL, LoadSettings(n_ctx=8192))
        bar = chat.model_bar
        bar.show_estimate(prefill)
        bar.show_loaded(loaded, prefill)
        bar.show_pool([(sample.MODEL, int(5.2 * 2**30), True)])
        bar.context_meter.show_use(ContextUse(used=7_600, n_ctx=8192, documents=1_200), 1024,
                                   sample.MODEL)
        bar.watch_process(os.getpid())  # "Engine process: …" sampled from a live process
        window.hardware.set_profile(sample.sample_laptop())
        sample.fill_discover_and_downloads(window)
        sample.fill_lab_and_server(window, tmp_path)
        return window

    made = []
    yield lambda: made.append(make()) or made[-1]
    for window in made:
        window.server.shutdown()


@pytest.fixture(params=["light", "dark"])
def theme(request, qapp):
    qapp.theme.set_theme(request.param)
    yield request.param
    qapp.theme.set_theme("system")


@pytest.fixture(params=["en", "de"])
def language(request, qapp):
    installed = install(request.param) if request.param != "en" else None
    yield request.param
    if installed is not None:
        uninstall(installed)


def test_every_page_fits_at_every_size(qtbot, theme, language, filled_window):
    window = filled_window()
    found = []
    for width, height in SIZES:
        window.resize(width, height)
        for name in PAGES:
            window.show_page(name)
            settle(qtbot)
            if (window.width(), window.height()) != (width, height):
                found.append(f"{width}×{height} {name}: the window is {window.width()}×{window.height()} (its "
                             f"minimum size is {window.minimumSizeHint().width()}×{window.minimumSizeHint().height()})")
            found += [f"{width}×{height} {name}: {p}" for p in problems(window.centralWidget())]
    assert not found, f"{len(found)} layout problems ({theme}, {language}):\n" + "\n".join(found)


def test_the_welcome_fits_at_every_size(qtbot, theme, language, make_window):
    """The first run's page (no chats, no models yet), with Discover's cards of the models for a laptop."""
    window = make_window()
    page = window.offer_first_run()
    page.set_profile(sample.sample_laptop())
    found = []
    for width, height in SIZES:
        window.resize(width, height)
        settle(qtbot)
        assert window.current_page == "Welcome" and page.models.count()
        if (window.width(), window.height()) != (width, height):
            found.append(f"{width}×{height}: the window is {window.width()}×{window.height()}")
        found += [f"{width}×{height} Welcome: {p}" for p in problems(window.centralWidget())]
    assert not found, f"{len(found)} layout problems ({theme}, {language}):\n" + "\n".join(found)


# --- the rules themselves: each catches what it is for, and leaves alone what is meant ----------------------------

def test_the_check_catches_a_cut_child_an_overlap_and_cut_text(qtbot):
    from PySide6.QtWidgets import QLabel, QPushButton, QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    parent.resize(200, 100)
    inside = QLabel("fits", parent)
    inside.setGeometry(0, 0, 60, 20)
    cut = QPushButton("A button with a long caption", parent)
    cut.setGeometry(150, 70, 40, 20)  # past the right edge? no: narrower than its text
    over = QLabel("over", parent)
    over.setGeometry(20, 5, 60, 20)  # over the first label
    outside = QLabel("x", parent)
    outside.setGeometry(190, 90, 30, 20)  # past the bottom-right corner
    parent.show()
    settle(qtbot)
    kinds = sorted(p.kind for p in problems(parent))
    assert kinds == ["clipped", "overlap", "text cut"], problems(parent)
    assert text_cut(cut) and "A button" in describe(cut) and text_cut(inside) is None


def test_the_check_leaves_scrolled_content_and_hidden_pages_alone(qtbot):
    from PySide6.QtWidgets import QLabel, QScrollArea, QStackedWidget, QVBoxLayout, QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    layout = QVBoxLayout(parent)
    scroll = QScrollArea()
    content = QWidget()
    content.setMinimumSize(900, 900)  # larger than the viewport: it scrolls
    QLabel("top of a long page", content).move(10, 10)
    scroll.setWidget(content)
    stack = QStackedWidget()
    stack.addWidget(QLabel("shown"))
    hidden = QLabel("a hidden page with a much longer text than the stack is wide, which is fine: it is not shown")
    stack.addWidget(hidden)
    layout.addWidget(scroll)
    layout.addWidget(stack)
    parent.resize(300, 300)
    parent.show()
    settle(qtbot)
    assert problems(parent) == []


def test_a_flow_wraps_its_widgets_onto_more_lines_instead_of_cutting_them(qtbot):
    from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

    from app.ui.common.widgets import Flow

    parent = QWidget()
    qtbot.addWidget(parent)
    flow = Flow(spacing=8)
    buttons = [QPushButton(f"A control named {n}") for n in range(4)]
    for button in buttons:
        flow.add_widget(button)
    layout = QVBoxLayout(parent)
    layout.addWidget(flow)
    layout.addWidget(QLabel("below the flow"))
    layout.addStretch(1)  # the flow gets the height its lines need, no more
    width = sum(b.sizeHint().width() for b in buttons) + 3 * 8 + 40
    parent.resize(width, 200)
    parent.show()
    settle(qtbot)
    assert len({b.y() for b in buttons}) == 1  # all on one line
    one_line = flow.height()
    parent.resize(buttons[0].sizeHint().width() * 2 + 30, 200)
    settle(qtbot)
    assert len({b.y() for b in buttons}) == 2 and flow.height() > one_line  # two lines, and room for both
    assert all(b.width() == b.sizeHint().width() for b in buttons) and problems(parent) == []
    buttons[1].hide()
    settle(qtbot)
    assert buttons[2].y() == buttons[0].y()  # a hidden widget takes no place
