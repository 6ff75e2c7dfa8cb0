"""The server plans a library model's load as the Chat's model bar does, through the one load planner
(app/models/planner.py): the projector beside a vision model, the runtime pinned for it, a q8_0 KV cache or a shorter
context where the server's context does not fit. Compared face to face with the model bar's ``prefill_for`` on the
tiny models, and a vision model loaded on request answers an image (a real engine host)."""

from __future__ import annotations

import base64
import shutil

import pytest

from app.datatypes import DEFAULT_PARALLEL, LoadSettings
from app.engine.pool import ModelPool, PoolLimits
from app.hardware.profile import HardwareProfile
from app.models.metadata import read_model
from app.models.recommend import fit_model
from app.runtimes import pins
from app.server.router import ModelRouter, ServeSettings
from app.ui.chat.model_bar import prefill_for
from tests.fixtures.machines import machine, with_cpu_and_vulkan_runtimes
from tests.server.conftest import N_CTX, openai_on

@pytest.fixture
def router_on():
    """``router_on(profile, n_ctx)``: a router over a pool with nothing loaded (it plans; nothing here loads), for
    the sequences serve and the Chat both load with (DEFAULT_PARALLEL)."""
    made: list[tuple[ModelRouter, ModelPool]] = []

    def make(profile: HardwareProfile, n_ctx: int = N_CTX) -> ModelRouter:
        pool = ModelPool(PoolLimits())
        load = LoadSettings(n_ctx=n_ctx, parallel=DEFAULT_PARALLEL)
        router = ModelRouter(pool, ServeSettings(load_on_demand=True, load=load), profile=profile)
        made.append((router, pool))
        return router

    yield make
    for router, pool in made:
        router.close()
        pool.close()


@pytest.fixture
def vision_model(tmp_path, tiny_vision):
    """A vision model's folder as its repo ships it: the model and its projectors side by side."""
    folder = tmp_path / "vision"
    folder.mkdir()
    model = shutil.copy(tiny_vision.text.gguf_q8_0, folder / "tiny-vision-Q8_0.gguf")
    for projector in (tiny_vision.mmproj_f16, tiny_vision.mmproj_wide):
        shutil.copy(projector, folder)
    return str(model)


def test_the_server_loads_a_vision_model_with_the_projector_beside_it_as_the_chat_does(router_on, vision_model,
                                                                                       tiny_vision):
    plan = router_on(machine()).plan(vision_model)
    chat = prefill_for(vision_model, machine(), N_CTX)
    assert plan.settings.mmproj.endswith(tiny_vision.mmproj_f16.name)  # the one that pairs, not the wide one
    assert plan.settings == chat.settings and plan.estimate_bytes == chat.estimated_bytes


def test_the_server_takes_a_q8_cache_or_a_shorter_context_as_the_chat_does(router_on, tiny_models):
    path = str(tiny_models.gguf_q8_0)
    meta = read_model(path)
    ctx = meta.context_length

    def need(kv: str, n_ctx: int) -> int:
        return fit_model(meta, machine(), n_ctx, "auto", kv, n_seq=DEFAULT_PARALLEL).memory_bytes

    q8_machine = machine(ram_available=need("q8_0", ctx))
    plan = router_on(q8_machine, ctx).plan(path)
    assert (plan.settings.kv_cache_type, plan.settings.flash_attention, plan.settings.n_ctx) == ("q8_0", True, ctx)
    assert plan.fits and plan.settings == prefill_for(path, q8_machine, ctx).settings
    tight = machine(ram_available=need("f16", ctx // 2))
    shorter = router_on(tight, ctx).plan(path)
    assert shorter.fits and shorter.settings.kv_cache_type == "f16" and shorter.settings.n_ctx < ctx
    assert shorter.settings == prefill_for(path, tight, ctx).settings


def test_the_server_plans_for_the_runtime_pinned_for_the_model_as_the_chat_does(router_on, tiny_models):
    path = str(tiny_models.gguf_q8_0)
    profile = with_cpu_and_vulkan_runtimes()
    assert router_on(profile).plan(path).settings.gpu_layers == -1  # automatic: Vulkan, every layer on the GPU
    pins.pin("cpu", path)
    plan = router_on(profile).plan(path)
    assert plan.pin == ("cpu", "for this model") and plan.fit.runtime == "CPU" and plan.settings.gpu_layers == 0
    assert plan.settings == prefill_for(path, profile, N_CTX).settings


def test_a_vision_model_loaded_on_request_answers_an_image(serve, vision_model, tiny_vision, tmp_path, monkeypatch):
    from app.hub.library import Library
    from tests.fixtures.models import write_test_png

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    Library().import_path(vision_model, copy=False)
    server = serve(pool=ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX),
                                      memory_budget_bytes=64 << 30))
    png = base64.b64encode(write_test_png(tmp_path / "p.png").read_bytes()).decode()
    answer = openai_on(server).chat.completions.create(model="tiny-vision-Q8_0", max_tokens=3, messages=[
        {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}]}])
    assert answer.model == "tiny-vision-Q8_0" and answer.usage.prompt_tokens > 16  # the image's 16 tokens counted
    loaded, = server.app.state.openai.pool.loaded_engines()
    assert loaded.model.settings.mmproj.endswith(tiny_vision.mmproj_f16.name) and "vision" in loaded.model.loaded.details
