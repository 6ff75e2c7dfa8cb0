"""The Hardware page's llama.cpp runtimes: what each sees, which one loads use, and Use / Remove / Build doing
what `quantdesk runtime use | rm | build` do (real runtime folders, real pins file, real build planning)."""

from __future__ import annotations

from app.datatypes import Device
from app.hardware.profile import CpuInfo, GpuInfo, HardwareProfile, RuntimeInfo
from app.runtimes import catalog, pins
from app.ui.hardware.hardware_page import HardwarePage
from tests.fixtures.runtimes import install_copy

GIB = 1 << 30
CPU_DEVICE = Device("CPU", "AMD Ryzen 7 7840HS", "cpu", 32 * GIB, 21 * GIB)


def profile(*runtimes: RuntimeInfo, gpus=()) -> HardwareProfile:
    return HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo("AMD Ryzen 7 7840HS", "x86_64", 8, 16),
                           ram_total_bytes=32 * GIB, ram_available_bytes=21 * GIB, gpus=list(gpus),
                           runtimes=list(runtimes))


def test_each_runtime_with_what_it_sees_and_the_one_loads_use(qtbot):
    page = HardwarePage()
    qtbot.addWidget(page)
    nvidia = GpuInfo(0, "nvidia", "NVIDIA GeForce RTX 4070 Laptop GPU", 8 * GIB, 7 * GIB)
    vulkan0 = Device("Vulkan0", nvidia.name, "gpu", 8 * GIB, 7 * GIB, "nvidia")
    page.set_profile(profile(RuntimeInfo("cpu", "cpu", "environment", "0.3.36", devices=[CPU_DEVICE]),
                             RuntimeInfo("vulkan", "vulkan", "user", "0.3.36", devices=[vulkan0, CPU_DEVICE]),
                             gpus=[nvidia]))
    panel = page.runtimes_panel
    assert "in use" in panel.rows["vulkan"].text() and "in use" not in panel.rows["cpu"].text()
    assert "Vulkan0: NVIDIA GeForce RTX 4070 Laptop GPU (discrete GPU, 7.0 GiB of 8.0 GiB free)" in \
        panel.rows["vulkan"].text()
    assert panel.choice_label.text().startswith("Loads use <b>vulkan</b>: NVIDIA GeForce RTX 4070 Laptop GPU runs on "
                                                "the Vulkan runtime")
    assert sorted(k for k in panel.buttons if k.startswith("build")) == ["build cuda"]  # vulkan is there already
    assert "remove vulkan" in panel.buttons and "remove cpu" not in panel.buttons
    # the automatic choice is in use already: its button pins it rather than offering to "use" it
    assert [panel.buttons[f"use {name}"].text() for name in ("vulkan", "cpu")] == ["Always use", "Use"]


def test_use_pins_a_runtime_and_remove_deletes_one(qtbot, environment_site):
    install_copy(environment_site, "vulkan", "vulkan")
    page = HardwarePage()
    qtbot.addWidget(page)
    machine = profile(RuntimeInfo("cpu", "cpu", "environment", devices=[CPU_DEVICE]),
                      RuntimeInfo("vulkan", "vulkan", "user", devices=[CPU_DEVICE]))
    page.set_profile(machine)
    panel = page.runtimes_panel
    with qtbot.waitSignal(panel.changed):
        panel.buttons["use vulkan"].click()
    assert pins.load().default == "vulkan" and panel.status_label.text() == "Every model now loads with vulkan."
    page.set_profile(machine)  # as the window does on `changed`: it detects the machine again
    assert not panel.buttons["use vulkan"].isEnabled() and panel.buttons["use vulkan"].text() == "Pinned"
    with qtbot.waitSignal(panel.changed):
        panel.buttons["remove vulkan"].click()
    assert catalog.find("vulkan") is None and pins.load().default is None
    assert panel.status_label.text() == "Removed the vulkan runtime."


def test_a_build_that_cannot_start_says_why(qtbot):
    page = HardwarePage()
    qtbot.addWidget(page)
    page.set_profile(profile(RuntimeInfo("cpu", "cpu", "environment", devices=[CPU_DEVICE])))
    panel = page.runtimes_panel
    with qtbot.waitSignal(panel.changed, timeout=60_000):
        panel.start_build("metal")  # Linux: Metal is macOS only
    assert "the metal runtime cannot be built here: The Metal runtime runs on macOS only." in panel.status_label.text()
    assert not panel.progress.isVisible()


def test_a_build_reports_its_plan_and_progress_then_what_it_built(qtbot, monkeypatch):
    """The build runs on the page's one thread runner (BackgroundCall.start_job): its plan and progress reach the
    page while it runs, its Runtime when it ends. The compile itself (minutes) is stood in for at build.build."""
    import threading
    from types import SimpleNamespace

    from app.runtimes import build

    compiling, finish = threading.Event(), threading.Event()

    def stand_in(backend, *, on_progress, on_plan, **_):
        on_plan(build.Plan(backend, "0.3.36", "3.12", jobs=4))
        on_progress(build.Progress("compiling", step=3, total=10, remaining_s=120.0))
        compiling.set()
        finish.wait(10)
        return SimpleNamespace(name="vulkan-user", log="/tmp/build.log")

    monkeypatch.setattr(build, "build", stand_in)
    page = HardwarePage()
    qtbot.addWidget(page)
    page.set_profile(profile(RuntimeInfo("cpu", "cpu", "environment", devices=[CPU_DEVICE])))
    panel = page.runtimes_panel
    panel.start_build("vulkan")
    assert compiling.wait(10)
    qtbot.waitUntil(lambda: panel.status_label.text().startswith("Compiling: step 3 of 10"), timeout=10_000)
    assert (panel.progress.maximum(), panel.progress.value()) == (10, 3)
    assert not any(b.isEnabled() for k, b in panel.buttons.items() if k.startswith("build"))
    with qtbot.waitSignal(panel.changed, timeout=10_000):
        finish.set()
    assert panel.status_label.text() == "Built the vulkan-user runtime; loads can use it now. Log: /tmp/build.log"
    assert not panel.progress.isVisible()


def test_what_the_crash_guard_learned_is_shown_and_forget_forgets_it(qtbot):
    from PySide6.QtCore import Qt

    from app.engine import guard

    page = HardwarePage()
    qtbot.addWidget(page)
    page.set_profile(profile(RuntimeInfo("cpu", "cpu", "environment", "0.3.36", devices=[CPU_DEVICE])))
    assert "Nothing: every model loads with llama.cpp's defaults" in page.learned_label.text()
    assert not page.forget_button.isEnabled()
    guard.remember(guard.Key("Intel Xeon Platinum 8480+", "cpu 0.3.36", "Q4_K_M"), guard.NO_EXTRA_BUFFER_TYPES,
                   "the engine crashed (SIGSEGV) while loading gemma-3-270m-q4_k_m.gguf")
    page.set_profile(page.profile)
    text = page.learned_label.text()
    assert "Q4_K_M on Intel Xeon Platinum 8480+ with the cpu 0.3.36 runtime" in text
    assert "without llama.cpp's extra buffer types" in text and "crashed (SIGSEGV)" in text
    qtbot.mouseClick(page.forget_button, Qt.MouseButton.LeftButton)
    assert guard.learned() == [] and "Nothing" in page.learned_label.text()
