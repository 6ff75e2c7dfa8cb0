"""The Chat page's model bar: load settings prefilled from the estimator for the chosen model and this
machine, the load progress bar, what loaded against the estimate, the spill warning, and the engine's
live memory (real engine)."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from app.models.metadata import read_model
from app.models.recommend import fit_model
from app.datatypes import DEFAULT_PARALLEL
from app.ui.chat.model_bar import prefill_for, spill_warning
from app.datatypes import Loaded
from tests.fixtures.machines import machine, rtx
from tests.ui.engine_double import EngineDouble

GiB = 1 << 30


def open_and_load(qtbot, window, path) -> Loaded:
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        window.chat.open_model(str(path))
    return loaded.args[0]


def test_cpu_only_machine_prefills_cpu_settings_and_shows_the_estimate(qtbot, make_window, tiny_models):
    engine = EngineDouble()
    window = make_window(engine)
    window.chat.set_profile(machine())
    window.chat.set_default_context(8192)
    open_and_load(qtbot, window, tiny_models.gguf_q8_0)
    path, settings = engine.loads[-1]
    trained = read_model(tiny_models.gguf_q8_0).context_length
    assert settings.gpu_layers == 0 and settings.n_ctx == min(8192, trained) and settings.kv_cache_type == "f16"
    bar = window.chat.model_bar
    assert (bar.gpu_layers_box.value(), bar.context_box.value()) == (0, settings.n_ctx)
    assert bar.estimate_label.text().startswith("Estimated ") and "CPU only" in bar.estimate_label.text()
    assert "(estimated " in bar.model_label.text()
    assert not window.chat.banner.isVisible()  # nothing was expected on a GPU


def test_load_progress_fills_the_bar(qtbot, make_window, tiny_models):
    class SlowLoad(EngineDouble):
        def load(self, model_path, settings, on_progress=None):
            on_progress(0.5)
            self.release.wait(timeout=60)  # held half-way until the test has looked at the bar
            return super().load(model_path, settings, on_progress=on_progress)

    engine = SlowLoad()
    window = make_window(engine)
    window.chat.set_profile(machine())
    with qtbot.waitSignal(window.bridge.load_progress, timeout=30_000):
        window.chat.open_model(str(tiny_models.gguf_q8_0))
    bar = window.chat.model_bar.load_progress
    assert bar.value() == 50 and not bar.isHidden()
    with qtbot.waitSignal(window.bridge.loaded, timeout=30_000):
        engine.release.set()
    assert bar.isHidden()


def test_gpu_machine_prefills_every_layer_and_warns_when_the_build_has_no_gpu(qtbot, make_window, tiny_models):
    class CpuBuild(EngineDouble):
        def load(self, model_path, settings, on_progress=None):
            self.loads.append((model_path, settings))
            return Loaded("llama.cpp", model_path, settings.n_ctx, 2, 0, False, {"cpu": 200 * 2**20}, 50.0)

    engine = CpuBuild()
    window = make_window(engine)
    window.chat.set_profile(machine(gpu=rtx()))
    open_and_load(qtbot, window, tiny_models.gguf_q8_0)
    assert engine.loads[-1][1].gpu_layers == -1
    assert "full GPU" in window.chat.model_bar.estimate_label.text()
    assert window.chat.banner.isVisible()
    assert "has no GPU support" in window.chat.banner_text.text() and "2 of 2 layers" in window.chat.banner_text.text()


def test_spill_warning_compares_with_the_estimate(tiny_models):
    prefill = prefill_for(str(tiny_models.gguf_q8_0), machine(gpu=rtx()), 2048)
    assert prefill.expected_gpu_blocks == 2
    full = Loaded("llama.cpp", prefill.path, 2048, 2, 2, True, {}, 1.0)
    spilled = Loaded("llama.cpp", prefill.path, 2048, 2, 1, True, {}, 1.0)
    assert spill_warning(full, prefill, -1) == ""
    assert "Only 1 of 2 layers fit on the GPU (2 were expected)" in spill_warning(spilled, prefill, -1)
    cpu = prefill_for(str(tiny_models.gguf_q8_0), machine(), 2048)
    assert spill_warning(Loaded("llama.cpp", cpu.path, 2048, 2, 0, True, {}, 1.0), cpu, 0) == ""


def test_tight_memory_picks_a_q8_cache_or_a_shorter_context(tiny_models):
    path = str(tiny_models.gguf_q8_0)
    meta = read_model(path)
    ctx = meta.context_length

    def need(kv: str, n_ctx: int) -> int:  # for the replies the Chat decodes together (its "Decode together")
        return sum(d.total_bytes for d in fit_model(meta, machine(), n_ctx, "auto", kv,
                                                    n_seq=DEFAULT_PARALLEL).estimate.devices)

    assert need("q8_0", ctx) < need("f16", ctx)
    q8 = prefill_for(path, machine(ram_available=need("q8_0", ctx)), ctx)
    assert (q8.settings.kv_cache_type, q8.settings.flash_attention, q8.settings.n_ctx) == ("q8_0", True, ctx)
    assert any("q8_0" in note for note in q8.notes)
    tight = machine(ram_available=need("f16", ctx // 2))
    shorter = prefill_for(path, tight, ctx)
    assert shorter.settings.kv_cache_type == "f16" and shorter.settings.n_ctx < ctx
    assert shorter.settings.n_ctx == fit_model(meta, tight, ctx, "auto", "f16", n_seq=DEFAULT_PARALLEL).max_ctx
    assert any("lowered" in note for note in shorter.notes)


def test_a_file_that_cannot_be_read_is_said_and_nothing_loads(qtbot, real_window, tmp_path):
    # The estimator cannot read it either, so the model bar has no estimate; the engine client's own
    # check of the file refuses it before the engine is asked to load anything.
    window = real_window()
    window.chat.set_profile(machine())
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 20)
    with qtbot.waitSignal(window.bridge.failed, timeout=30_000):
        window.chat.open_model(str(broken))
    qtbot.waitUntil(window.chat.banner.isVisible)
    assert "broken.gguf is truncated or corrupt" in window.chat.banner_text.text()
    assert window.chat.model_bar.estimate_label.text().startswith("No estimate")
    assert window.chat.loaded is None


def test_real_engine_memory_is_sampled_live_and_stops_with_the_engine(qtbot, real_window, tiny_models):
    pytest.importorskip("llama_cpp")
    window = real_window()
    window.chat.set_profile(machine())
    info = open_and_load(qtbot, window, tiny_models.gguf_q8_0)
    assert info.gpu_layers == 0 and "(estimated " in window.chat.model_label.text()
    bar = window.chat.model_bar
    assert bar.memory_timer.isActive()
    pid = window.bridge.engine_pid
    rss = psutil.Process(pid).memory_info().rss
    text = bar.memory_label.text()
    assert text.startswith("Engine process: ") and text.endswith("MiB")
    assert abs(float(text.split()[2]) * 2**20 - rss) < 0.25 * rss
    bar.memory_label.clear()
    qtbot.waitUntil(lambda: bar.memory_label.text().startswith("Engine process: "), timeout=5_000)  # sampled again
    with qtbot.waitSignal(window.bridge.crashed, timeout=30_000):
        os.kill(pid, signal.SIGKILL)
        window.chat.composer.setPlainText("hello")
        window.chat.send()  # the next request finds the engine gone
    assert not bar.memory_timer.isActive() and bar.memory_label.text() == ""


def test_a_moe_too_big_for_the_gpu_prefills_experts_in_ram_and_shows_what_loaded(qtbot, real_window, tiny_moe):
    from app.models.estimate import LlamaCppSettings, estimate_llama_cpp

    meta = read_model(tiny_moe.gguf_q8_0)

    def on_gpu(cpu_moe: int) -> int:
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=2048, gpu_layers=99, cpu_moe=cpu_moe), "GPU0")
        return est.device("GPU").total_bytes

    vram = (on_gpu(0) + on_gpu(1)) // 2  # the whole model does not fit; with one layer's experts in RAM it does
    profile = machine(gpu=rtx(vram))
    prefill = prefill_for(str(tiny_moe.gguf_q8_0), profile, 2048)
    assert prefill.moe and prefill.settings.cpu_moe == 1 and prefill.settings.gpu_layers == -1
    assert prefill.verdict == "MoE split: experts of 1 of 4 layers in RAM"

    window = real_window()
    window.chat.set_profile(profile)
    window.chat.set_default_context(2048)
    loaded = open_and_load(qtbot, window, tiny_moe.gguf_q8_0)
    bar = window.chat.model_bar
    assert loaded.details["experts_in_ram"] == 1  # the engine got cpu_moe=1 (a CPU build: the layers stay here)
    assert not bar.experts_box.isHidden() and bar.experts_box.text() == "Experts in RAM: 1 layer"
    assert "MoE split" in bar.estimate_label.text() and "experts of 1 layer in RAM" in bar.model_label.text()
    bar.experts_box.setValue(-1)
    assert bar.experts_box.text() == "Experts in RAM: all" and bar.settings().cpu_moe == -1


def test_a_dense_model_hides_the_experts_control(tiny_models):
    prefill = prefill_for(str(tiny_models.gguf_q8_0), machine(gpu=rtx(1 * GiB)), 2048)
    assert not prefill.moe and prefill.settings.cpu_moe == 0


def test_the_runtime_menu_pins_a_runtime_for_this_model_and_loads_it_again(qtbot, make_window, tiny_models):
    from app.datatypes import Device
    from app.hardware.profile import RuntimeInfo
    from app.runtimes import pins

    engine = EngineDouble()
    window = make_window(engine)
    profile = machine()
    cpu = Device("CPU", "Test CPU", "cpu", 32 * GiB, 16 * GiB)
    profile.runtimes = [RuntimeInfo("cpu", "cpu", "environment", devices=[cpu]),
                        RuntimeInfo("vulkan", "vulkan", "user", devices=[cpu])]
    window.chat.set_profile(profile)
    open_and_load(qtbot, window, tiny_models.gguf_q8_0)
    box = window.chat.model_bar.runtime_box
    assert [box.itemText(i) for i in range(box.count())] == ["Runtime auto", "Runtime cpu", "Runtime vulkan"]
    assert box.currentText() == "Runtime auto"
    loads = len(engine.loads)
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        box.activated.emit(box.findData("vulkan"))
    assert pins.load().for_model(tiny_models.gguf_q8_0) == ("vulkan", "for this model")
    assert len(engine.loads) == loads + 1 and box.currentText() == "Runtime vulkan"


def test_a_model_that_does_not_fit_waits_for_load_anyway_then_loads_with_the_risk_said(qtbot, real_window,
                                                                                         tiny_models):
    window = real_window()
    window.chat.set_profile(machine(ram_available=16 << 20))  # a machine with 16 MiB free: the fit check says no
    chat = window.chat
    chat.open_model(str(tiny_models.gguf_q8_0))
    qtbot.waitUntil(lambda: chat.load_anyway_button.isVisible(), timeout=60_000)
    said = chat.banner_text.text()
    assert said.startswith("tiny-llama-Q8_0.gguf does not fit this machine: needs ")
    assert "“Load anyway” loads it anyway: past it the system may swap" in said
    assert chat.loaded is None and window.bridge.engine_pid is None  # nothing was loaded
    assert chat.load_button.isEnabled() and not chat.reload_button.isVisible()
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        window.grab().save(os.path.join(shots, "load_anyway_offered.png"))
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_anyway_button.click()
    assert chat.loaded is not None and not chat.load_anyway_button.isVisible()
    assert chat.banner_text.text().startswith("Loading tiny-llama-Q8_0.gguf anyway, though it does not fit this "
                                              "machine (needs ")
    if shots:
        window.grab().save(os.path.join(shots, "load_anyway_loaded.png"))
    chat.open_model(str(tiny_models.gguf_q8_0))  # sized up again: the override was for that one load
    qtbot.waitUntil(lambda: chat.load_anyway_button.isVisible(), timeout=60_000)


def test_a_model_without_a_template_says_which_it_got_and_where_from(qtbot, real_window, tiny_models):
    """A GGUF without a chat template (real engine): the bar says the template the rule chose for it, and the
    tools' format, where the user sees the model (backends/chat_format/bundled.py)."""
    pytest.importorskip("llama_cpp")
    from tests.fixtures.models import build_templated_model

    window = real_window()
    window.chat.set_profile(machine())
    info = open_and_load(qtbot, window, build_templated_model(tiny_models, "none", ""))
    assert info.details["chat_template"] == "chatml"
    label = window.chat.model_bar.model_label
    line = ("Chat template: ChatML (bundled; the vocabulary holds &lt;|im_start|&gt;: the file has none) · tools in "
            "the generic JSON format (the template shows none)")
    assert line in label.text()
    assert line.replace("&lt;", "<").replace("&gt;", ">") in label.toolTip()


def test_the_preset_s_chat_template_reaches_the_load(qtbot, make_window, tiny_models):
    from app.hub import presets

    presets.update(tiny_models.gguf_q8_0, load_values={"chat_template": "gemma"})
    engine = EngineDouble()
    window = make_window(engine)
    window.chat.set_profile(machine())
    open_and_load(qtbot, window, tiny_models.gguf_q8_0)
    assert engine.loads[-1][1].chat_template == "gemma"


def test_a_preset_that_does_not_fit_gives_way_and_the_tooltip_says_why(tiny_models):
    """The one load planner's rule, as the model bar words it: a preset that cannot fit this machine is set aside
    where the fit check's own settings fit (before, the bar offered “Load anyway” for it)."""
    from app.hub import presets

    path = str(tiny_models.gguf_q8_0)
    presets.update(path, load_values={"n_ctx": 20_000_000, "threads": 2})
    prefill = prefill_for(path, machine(ram_available=1 * GiB), 1024)
    assert prefill.fits and (prefill.settings.n_ctx, prefill.settings.threads) == (1024, None)
    assert prefill.notes[0].startswith("this model's preset (n_ctx 20000000, threads 2) does not fit this machine (")
