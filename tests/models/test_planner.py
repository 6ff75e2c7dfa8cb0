"""The one load planner (app/models/planner.py), rule by rule, on the generated tiny models: real headers and real
projectors, the real fit check and the real presets and runtime pins files (in the test's own config folder)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from app.datatypes import LoadSettings
from app.hub import presets
from app.models import planner
from app.models.metadata import read_model
from app.models.planner import (ContextLowered, EstimatorNote, KvQuantized, PresetApplied, PresetSetAside,
                                plan_load)
from app.models.recommend import fit_model
from app.runtimes import pins
from tests.fixtures.machines import machine, rtx, with_cpu_and_vulkan_runtimes

GiB = 1 << 30


def need(path, n_ctx: int, kv: str = "f16") -> int:
    """What the fit check says the model needs on a CPU machine at this context."""
    return fit_model(read_model(path), machine(), n_ctx, "auto", kv).memory_bytes


def preset(path, **load) -> presets.ModelPreset:
    presets.update(path, load_values=load)
    found = presets.for_model(path)
    assert found is not None
    return found


@pytest.fixture
def vision_folder(tmp_path, tiny_vision) -> Path:
    """The tiny model with its projectors beside it, as a vision repo ships them."""
    for source in (tiny_vision.text.gguf_q8_0, tiny_vision.mmproj_f16, tiny_vision.mmproj_f32,
                   tiny_vision.mmproj_wide):
        (tmp_path / source.name).symlink_to(source)
    return tmp_path / tiny_vision.text.gguf_q8_0.name


# --- 1. the preset ---

def test_the_preset_sets_its_values_over_the_wanted_ones_but_not_over_the_given(tiny_models):
    path = tiny_models.gguf_q8_0
    saved = preset(path, n_ctx=640, threads=3, kv_cache_type="q8_0")
    plan = plan_load(path, machine(), LoadSettings(n_ctx=2048, threads=1), preset=saved)
    assert (plan.settings.n_ctx, plan.settings.threads, plan.settings.kv_cache_type) == (640, 3, "q8_0")
    assert plan.settings.flash_attention is True  # a quantized V cache needs it (ModelPreset.apply_load)
    assert plan.notes[0] == PresetApplied((("n_ctx", 640), ("threads", 3), ("kv_cache_type", "q8_0")))
    given = plan_load(path, machine(), LoadSettings(n_ctx=2048, threads=1), given=("threads",), preset=saved)
    assert (given.settings.n_ctx, given.settings.threads) == (640, 1)
    assert given.notes[0] == PresetApplied((("n_ctx", 640), ("kv_cache_type", "q8_0")))
    assert plan_load(path, machine(), LoadSettings(n_ctx=2048)).settings.n_ctx == 2048  # without it: the wanted


# --- 2. the context ---

def test_a_free_context_is_clamped_to_the_trained_length_a_held_one_is_not(tiny_models):
    path = tiny_models.gguf_q8_0
    trained = read_model(path).context_length
    assert plan_load(path, machine(), LoadSettings(n_ctx=trained * 4)).settings.n_ctx == trained
    assert plan_load(path, machine(), LoadSettings(n_ctx=trained * 4), given=("n_ctx",)).settings.n_ctx == trained * 4
    held = plan_load(path, machine(), LoadSettings(n_ctx=512), preset=preset(path, n_ctx=trained * 2))
    assert held.settings.n_ctx == trained * 2  # the preset's context may pass the trained length (RoPE scaling)


# --- 3. the projector ---

def test_the_projector_beside_the_model_loads_with_it_and_is_counted(vision_folder, tiny_vision):
    plan = plan_load(vision_folder, machine(), LoadSettings(n_ctx=512))
    assert plan.settings.mmproj == str(vision_folder.parent / tiny_vision.mmproj_f16.name)  # F16 first; wide skipped
    text_only = plan_load(vision_folder, machine(), LoadSettings(n_ctx=512), find_projector=False)
    assert text_only.settings.mmproj == ""
    assert plan.estimate_bytes > text_only.estimate_bytes  # the projector's weights and its compute counted
    assert plan.fit.estimate.image_tokens > 0 and text_only.fit.estimate.image_tokens == 0


def test_a_named_projector_wins_one_the_user_gave_is_kept_even_when_it_is_no_file(vision_folder, tiny_vision):
    f32 = str(vision_folder.parent / tiny_vision.mmproj_f32.name)
    assert plan_load(vision_folder, machine(), LoadSettings(mmproj=f32)).settings.mmproj == f32
    gone = plan_load(vision_folder, machine(), LoadSettings(), preset=preset(vision_folder, mmproj="/no/such.gguf"))
    assert gone.settings.mmproj.endswith(tiny_vision.mmproj_f16.name)  # the preset's is gone: the one beside
    kept = plan_load(vision_folder, machine(), LoadSettings(mmproj="/no/such.gguf"), given=("mmproj",))
    assert kept.settings.mmproj == "/no/such.gguf" and kept.fit.estimate.image_tokens == 0  # the engine says why
    wide = plan_load(vision_folder, machine(), LoadSettings(mmproj=str(tiny_vision.mmproj_wide)), given=("mmproj",))
    assert wide.settings.mmproj == str(tiny_vision.mmproj_wide) and wide.fit.estimate.image_tokens == 0  # no pair


def test_a_text_model_without_a_projector_beside_it_loads_without_one(tiny_models):
    assert plan_load(tiny_models.gguf_q8_0, machine(), LoadSettings()).settings.mmproj == ""


# --- 4. the runtime pin ---

def test_the_plan_is_for_the_pinned_runtime_or_the_one_asked_for(tiny_models):
    path = tiny_models.gguf_q8_0
    auto = plan_load(path, with_cpu_and_vulkan_runtimes(), LoadSettings(n_ctx=1024))
    assert auto.pin is None and auto.fit.runtime.startswith("Vulkan") and auto.settings.gpu_layers == -1
    pins.pin("cpu", path)
    pinned = plan_load(path, with_cpu_and_vulkan_runtimes(), LoadSettings(n_ctx=1024))
    assert pinned.pin == ("cpu", "for this model") and pinned.fit.runtime == "CPU"
    assert pinned.settings.gpu_layers == 0 and pinned.expected_gpu_blocks == 0
    asked = plan_load(path, with_cpu_and_vulkan_runtimes(), LoadSettings(n_ctx=1024), runtime="vulkan")
    assert asked.pin == ("vulkan", "for this load") and asked.fit.runtime.startswith("Vulkan")


# --- 5 and 7. the fit, and the free settings from the estimate ---

def test_free_gpu_layers_are_the_most_that_fit_held_ones_are_kept(tiny_models):
    path = tiny_models.gguf_q8_0
    full = plan_load(path, machine(gpu=rtx()), LoadSettings(n_ctx=1024))
    assert full.settings.gpu_layers == -1 and full.fit.verdict == "full GPU" and full.expected_gpu_blocks == 2
    cpu = plan_load(path, machine(), LoadSettings(n_ctx=1024))
    assert cpu.settings.gpu_layers == 0 and cpu.fit.verdict == "CPU only"
    held = plan_load(path, machine(gpu=rtx()), LoadSettings(n_ctx=1024, gpu_layers=1), given=("gpu_layers",))
    assert held.settings.gpu_layers == 1 and held.fit.estimate.gpu_layers == 1


def test_a_moe_too_big_for_the_gpu_keeps_experts_in_ram_unless_the_user_said(tiny_moe):
    from app.models.estimate import LlamaCppSettings, estimate_llama_cpp

    meta = read_model(tiny_moe.gguf_q8_0)

    def on_gpu(cpu_moe: int) -> int:
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=2048, gpu_layers=99, cpu_moe=cpu_moe), "GPU0")
        return est.device("GPU").total_bytes

    profile = machine(gpu=rtx((on_gpu(0) + on_gpu(1)) // 2))  # whole it does not fit; one layer's experts out, it does
    plan = plan_load(tiny_moe.gguf_q8_0, profile, LoadSettings(n_ctx=2048))
    assert plan.moe and (plan.settings.cpu_moe, plan.settings.gpu_layers) == (1, -1)
    held = plan_load(tiny_moe.gguf_q8_0, profile, LoadSettings(n_ctx=2048, cpu_moe=-1), given=("cpu_moe",))
    assert held.settings.cpu_moe == -1 and held.fit.estimate.cpu_moe == 4  # every layer's experts, as asked


# --- 6. the KV fallback ---

def test_a_context_that_does_not_fit_takes_a_q8_cache_else_it_is_lowered(tiny_models):
    path = tiny_models.gguf_q8_0
    ctx = read_model(path).context_length
    assert need(path, ctx, "q8_0") < need(path, ctx)
    q8 = plan_load(path, machine(ram_available=need(path, ctx, "q8_0")), LoadSettings(n_ctx=ctx))
    assert (q8.settings.kv_cache_type, q8.settings.flash_attention, q8.settings.n_ctx) == ("q8_0", True, ctx)
    assert q8.fits and KvQuantized(ctx) in q8.notes
    tight = machine(ram_available=need(path, ctx // 2))
    lowered = plan_load(path, tight, LoadSettings(n_ctx=ctx))
    max_ctx = fit_model(read_model(path), tight, ctx, "auto", "f16").max_ctx
    assert (lowered.settings.kv_cache_type, lowered.settings.n_ctx) == ("f16", max_ctx) and lowered.fits
    assert ContextLowered(ctx, max_ctx) in lowered.notes


def test_a_held_kv_type_takes_no_fallback_and_a_held_context_is_not_lowered(tiny_models):
    path = tiny_models.gguf_q8_0
    ctx = read_model(path).context_length
    tight = machine(ram_available=need(path, ctx // 2))
    kv_held = plan_load(path, tight, LoadSettings(n_ctx=ctx), given=("kv_cache_type",))
    assert (kv_held.settings.kv_cache_type, kv_held.settings.n_ctx, kv_held.fits) == ("f16", ctx, False)
    ctx_held = plan_load(path, tight, LoadSettings(n_ctx=ctx), given=("n_ctx",))
    assert ctx_held.settings.n_ctx == ctx and not ctx_held.fits
    assert not any(isinstance(n, ContextLowered | KvQuantized) for n in kv_held.notes + ctx_held.notes)
    # A held context still takes the q8_0 cache where that keeps it.
    q8 = plan_load(path, machine(ram_available=need(path, ctx, "q8_0")), LoadSettings(n_ctx=ctx), given=("n_ctx",))
    assert q8.settings.kv_cache_type == "q8_0" and q8.fits


# --- 8. a preset that does not fit gives way ---

def test_a_preset_that_does_not_fit_is_set_aside_where_the_plan_without_it_fits(tiny_models):
    path = tiny_models.gguf_q8_0
    small = machine(ram_available=1 * GiB)
    huge = preset(path, n_ctx=20_000_000, threads=2)
    plan = plan_load(path, small, LoadSettings(n_ctx=1024), preset=huge)
    assert plan.fits and (plan.settings.n_ctx, plan.settings.threads) == (1024, None)
    aside = plan.notes[0]
    assert isinstance(aside, PresetSetAside) and aside.values == (("n_ctx", 20_000_000), ("threads", 2))
    assert "needs" in aside.reason and "does not fit this machine" in aside.words()
    # Where nothing fits, the preset stays and the verdict says no; what the user gave never gives way.
    tiny = machine(ram_available=16 << 20)
    assert not plan_load(path, tiny, LoadSettings(n_ctx=1024), preset=huge).fits
    given = plan_load(path, small, LoadSettings(n_ctx=20_000_000), given=("n_ctx",), preset=preset(path, threads=2))
    assert not given.fits and given.settings.n_ctx == 20_000_000 and given.settings.threads == 2


# --- 9. the verdict, and a header that cannot be read ---

def test_the_verdict_and_the_figures_follow_the_fit_check(tiny_models):
    path = tiny_models.gguf_q8_0
    plan = plan_load(path, machine(), LoadSettings(n_ctx=1024))
    assert plan.fits and plan.estimated_bytes == plan.fit.memory_bytes == plan.estimate_bytes > 0
    assert plan.format == "gguf" and not plan.moe and plan.weights_bytes == read_model(path).weights_bytes
    no = plan_load(path, machine(ram_available=16 << 20), LoadSettings(n_ctx=1024))
    assert not no.fits and no.fit.verdict == "does not fit"
    notes = plan_load(path, machine(), LoadSettings(n_ctx=1024, gpu_layers=3), given=("gpu_layers",)).notes
    assert EstimatorNote("no GPU to offload to: layers stay on the CPU") in notes


def test_a_header_that_cannot_be_read_is_a_plan_without_an_estimate(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 20)
    plan = plan_load(broken, machine(), LoadSettings(n_ctx=1024), preset=preset(broken, threads=2))
    assert plan.fit is None and plan.fits and "Unsupported GGUF version 0" in plan.problem
    assert plan.estimated_bytes is None and plan.estimate_bytes == 0 and plan.settings.threads == 2


def test_a_model_of_another_format_is_estimated_and_keeps_the_wanted_gpu_settings(tiny_models):
    folder = plan_load(tiny_models.mlx_f16, machine(), LoadSettings(n_ctx=1024, gpu_layers=-1, cpu_moe=0))
    assert folder.format == "safetensors" and folder.fit is not None and folder.estimate_bytes > 0
    assert (folder.settings.gpu_layers, folder.settings.cpu_moe, folder.settings.mmproj) == (-1, 0, "")
    assert folder.expected_gpu_blocks is None


# --- one planner: no face plans on its own ---

def test_no_face_plans_a_load_on_its_own():
    """The model bar, the router and the CLI's check plan through plan_load; none calls the fit check or looks for
    a projector itself any more."""
    from app.commands import engine, server as serve_command
    from app.server import router
    from app.ui.chat import model_bar

    for module in (model_bar, router, engine, serve_command):
        source = inspect.getsource(module)
        for own_rule in ("fit_model(", "find_projector(", "with_projector(", "load_cpu_moe(", "pins.load("):
            assert own_rule not in source, f"{module.__name__} plans on its own: {own_rule}"
    assert "plan_load(" in inspect.getsource(model_bar.prefill_for)
    assert "plan_load(" in inspect.getsource(router.ModelRouter._make_plan)
    assert "plan_load(" in inspect.getsource(engine.check_fit)
    assert {f.name for f in dataclasses.fields(planner.LoadPlan)} >= {"settings", "fit", "notes"}


def test_the_plan_counts_each_sequence_a_parallel_load_decodes(tiny_mamba2):
    """A load for the server's --parallel N counts N sequences' recurrent state and logits in the budget."""
    path = tiny_mamba2.gguf_q8_0
    one = plan_load(path, machine(), LoadSettings(n_ctx=1024, parallel=1))
    four = plan_load(path, machine(), LoadSettings(n_ctx=1024, parallel=4))
    state = one.fit.estimate.devices[0].state_bytes
    assert four.settings.parallel == 4 and state > 0
    assert four.estimated_bytes - one.estimated_bytes == 3 * state + 3 * four.fit.estimate.devices[0].output_bytes // 4


def test_an_mlx_load_for_several_replies_counts_a_cache_for_each(tiny_models):
    """MLX batching (backends/mlx_batch.py) gives each running reply a KV cache of its own, up to the whole context:
    a load for N replies at once counts N caches."""
    one = plan_load(tiny_models.mlx_f16, machine(), LoadSettings(n_ctx=1024, parallel=1))
    four = plan_load(tiny_models.mlx_f16, machine(), LoadSettings(n_ctx=1024, parallel=4))
    kv = one.fit.estimate.devices[0].kv_bytes
    assert kv > 0 and four.fit.estimate.devices[0].kv_bytes == 4 * kv
    assert four.estimated_bytes - one.estimated_bytes >= 3 * kv


def test_replies_at_once_are_lowered_to_the_most_whose_caches_fit(tiny_models):
    """An MLX load for 4 replies at once on a machine with room for 2 of their caches decodes 2 together and says
    so; asked for 4 (held), it keeps 4 and the fit check says no."""
    path = tiny_models.mlx_f16

    def total(parallel: int) -> int:
        return plan_load(path, machine(), LoadSettings(n_ctx=2048, parallel=parallel)).estimated_bytes

    room = (total(2) + total(3)) // 2
    lowered = plan_load(path, machine(room), LoadSettings(n_ctx=2048, parallel=4))
    assert lowered.fits and lowered.settings.parallel == 2 and lowered.settings.n_ctx == 2048
    assert any(isinstance(note, planner.ParallelLowered) and note.words().startswith("2 replies at once instead of 4")
               for note in lowered.notes)
    held = plan_load(path, machine(room), LoadSettings(n_ctx=2048, parallel=4), given=("parallel", "n_ctx"))
    assert held.settings.parallel == 4 and not held.fits
