"""Several models behind one server (app/server/router.py over app/engine/pool.py): the primary model, library models loaded on demand in
engine hosts of their own within a memory budget, idle unload, least-recently-used eviction, load anyway. Real engine
hosts on the tiny model's quants, a temporary models folder as the library, the official ``openai`` client."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading

import httpx
import openai
import pytest

from app.hub.library import Library
from app.server.params import ApiError
from app.server.router import ModelRouter, ServeSettings
from app.datatypes import LoadSettings
from tests.server.conftest import N_CTX, openai_on, wait_until

CHAT = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture
def library(tmp_path, monkeypatch, tiny_models) -> dict[str, str]:
    """Three models in a fresh models folder, by the id the server serves them as (the primary, tiny-llama-Q8_0,
    is not among them)."""
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    other = tmp_path / "elsewhere"
    other.mkdir()
    copy = shutil.copy(tiny_models.gguf_q4_k_m, other / "tiny-llama-Q4_K_M-copy.gguf")
    paths = [tiny_models.gguf_q4_k_m, tiny_models.gguf_f16, copy]
    found = {}
    for path in paths:
        entry, = Library().import_path(path, copy=False)
        found[os.path.basename(entry.path).removesuffix(".gguf")] = entry.path
    return found


@pytest.fixture
def estimates(engine, library) -> dict[str, int]:
    """The fit check's estimate of each model as the server loads them (the primary's at its own context)."""
    pool = ModelRouter(engine, ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX)))
    sizes = {name: pool.plan(path).estimate_bytes for name, path in library.items()}
    sizes["primary"] = pool.primary_estimate()
    assert all(sizes.values())
    return sizes


def pool_settings(**options) -> ServeSettings:
    return ServeSettings(**{"load_on_demand": True, "load": LoadSettings(n_ctx=N_CTX), **options})


def api(server) -> openai.OpenAI:
    return openai_on(server)


def ask(server, model: str) -> str:
    answer = api(server).chat.completions.create(model=model, messages=CHAT, max_tokens=4)
    assert answer.model == model
    return answer.choices[0].message.content


def pool_of(server) -> ModelRouter:
    return server.app.state.openai.pool


def loaded_ids(server) -> list[str]:
    return [e.served for e in pool_of(server).loaded_engines()]


def test_two_models_loaded_and_requests_to_each(serve, library, model_name):
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30))
    assert ask(server, model_name) and ask(server, "tiny-llama-F16") and ask(server, model_name)
    assert loaded_ids(server) == ["tiny-llama-F16"]
    cards = {m["id"]: m["meta"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]}
    assert cards[model_name]["loaded"] and cards[model_name]["primary"]
    assert cards["tiny-llama-F16"]["loaded"] and cards["tiny-llama-F16"]["memory_estimate_bytes"] > 0
    assert cards["tiny-llama-Q4_K_M"]["loaded"] is False  # can load
    assert set(cards) == {model_name, *library}
    health = httpx.get(f"{server.url}/health").json()
    assert health["loaded"] == [model_name, "tiny-llama-F16"] and health["memory_budget_bytes"] == 64 << 30
    streamed = "".join(c.choices[0].delta.content or "" for c in api(server).chat.completions.create(
        model="tiny-llama-F16", messages=CHAT, max_tokens=4, stream=True) if c.choices)
    assert streamed and pool_of(server).loads == 1


def test_on_demand_loads_are_off_by_default_and_the_404_names_the_flag(serve, library, model_name):
    server = serve()
    with pytest.raises(openai.NotFoundError) as caught:
        ask(server, "tiny-llama-F16")
    assert "--load-on-demand" in str(caught.value) and "in the library but not loaded" in str(caught.value)
    assert [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]] == [model_name]
    assert pool_of(server).loads == 0


def test_a_model_neither_loaded_nor_in_the_library_is_a_404(serve, library):
    server = serve(pool=pool_settings())
    with pytest.raises(openai.NotFoundError) as caught:
        ask(server, "no-such-model")
    assert "neither loaded nor in the library" in str(caught.value)


def test_an_idle_model_unloads_after_the_ttl_and_loads_again_on_the_next_request(serve, library):
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30, idle_ttl_s=0.3))
    assert ask(server, "tiny-llama-F16")
    engine, = pool_of(server).loaded_engines()
    asyncio.run(wait_until(lambda: not engine.client.alive))  # its host is closed
    assert loaded_ids(server) == []
    assert ask(server, "tiny-llama-F16") and pool_of(server).loads == 2


def test_a_model_past_the_budget_is_refused_with_the_estimate_the_budget_and_what_is_loaded(
        serve, library, estimates, model_name):
    budget = estimates["primary"] + estimates["tiny-llama-F16"] - 1
    server = serve(pool=pool_settings(memory_budget_bytes=budget))
    with pytest.raises(openai.APIStatusError) as caught:
        ask(server, "tiny-llama-F16")
    error = caught.value
    assert error.status_code == 507 and error.body["code"] == "insufficient_memory"
    assert "tiny-llama-F16.gguf needs about" in error.message and "(estimate), the memory budget is" in error.message
    assert f"held by {model_name}" in error.message and "--force" in error.message and "swap" in error.message
    assert pool_of(server).loads == 0
    assert ask(server, "tiny-llama-Q4_K_M")  # a smaller quant fits


def test_idle_models_unload_least_recently_used_first_to_make_room(serve, library, estimates):
    q4, f16 = estimates["tiny-llama-Q4_K_M"], estimates["tiny-llama-F16"]
    assert estimates["tiny-llama-Q4_K_M-copy"] == q4 < f16
    server = serve(pool=pool_settings(memory_budget_bytes=estimates["primary"] + q4 + f16))  # F16 and one Q4
    assert ask(server, "tiny-llama-Q4_K_M") and ask(server, "tiny-llama-Q4_K_M-copy")
    assert ask(server, "tiny-llama-Q4_K_M")  # used last: the copy is now the least recently used
    assert sorted(loaded_ids(server)) == ["tiny-llama-Q4_K_M", "tiny-llama-Q4_K_M-copy"]
    assert ask(server, "tiny-llama-F16")
    assert sorted(loaded_ids(server)) == ["tiny-llama-F16", "tiny-llama-Q4_K_M"]


def test_force_loads_past_the_budget_and_says_the_risk(serve, library, estimates):
    server = serve(pool=pool_settings(memory_budget_bytes=estimates["primary"], force=True))
    assert ask(server, "tiny-llama-F16")
    warning, = httpx.get(f"{server.url}/health").json()["warnings"]
    assert warning.startswith("Loading tiny-llama-F16.gguf anyway,") and "past the memory budget" in warning
    assert "swap" in warning and "run out of memory" in warning


def test_two_first_requests_for_one_model_load_it_once(serve, library):
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30))

    async def both():
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            body = {"model": "tiny-llama-F16", "messages": CHAT, "max_tokens": 4}
            return await asyncio.gather(*(http.post("/v1/chat/completions", json=body) for _ in range(2)))

    answers = asyncio.run(both())
    assert [a.status_code for a in answers] == [200, 200]
    assert pool_of(server).loads == 1 and loaded_ids(server) == ["tiny-llama-F16"]


def test_a_dead_host_is_replaced_on_the_next_request(serve, library):
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30))
    assert ask(server, "tiny-llama-F16")
    engine, = pool_of(server).loaded_engines()
    os.kill(engine.client.pid, signal.SIGKILL)
    asyncio.run(wait_until(lambda: not engine.client.alive))
    assert ask(server, "tiny-llama-F16") and pool_of(server).loads == 2
    engine.client.close()


def test_stopping_the_server_closes_every_host_but_the_primary(serve, engine, library):
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30))
    assert ask(server, "tiny-llama-F16") and ask(server, "tiny-llama-Q4_K_M")
    clients = [e.client for e in pool_of(server).loaded_engines()]
    assert len(clients) == 2
    server.stop()
    assert not any(c.alive for c in clients) and engine.alive


class SlowToClose:
    """A real engine client whose close waits at a gate the test opens: an unload can be caught half-way."""

    def __init__(self) -> None:
        from app.engine.client import EngineClient

        self._client = EngineClient()
        self.closing = threading.Event()
        self.gate = threading.Event()

    def __getattr__(self, name):
        return getattr(self._client, name)

    def close(self) -> None:
        self.closing.set()
        self.gate.wait(120)
        self._client.close()


def test_a_request_for_a_model_being_unloaded_waits_and_loads_it_again(engine, library):
    made: list[SlowToClose] = []

    def make_client() -> SlowToClose:
        made.append(SlowToClose())
        return made[-1]

    pool = ModelRouter(engine, pool_settings(memory_budget_bytes=64 << 30, idle_ttl_s=0),
                      make_client=make_client)
    try:
        pool.acquire("tiny-llama-F16").release()
        unloading = threading.Thread(target=pool.models.unload_idle)
        unloading.start()
        assert made[0].closing.wait(60)  # out of the pool, its host not closed yet
        leases = []
        asking = threading.Thread(target=lambda: leases.append(pool.acquire("tiny-llama-F16")))
        asking.start()
        made[0].gate.set()
        unloading.join(60)
        asking.join(120)
        lease, = leases
        assert lease.loaded.model_path == library["tiny-llama-F16"] and pool.loads == 2 and made[1].alive
        lease.release()
    finally:
        for client in made:
            client.gate.set()
        pool.close()


def test_a_model_that_fits_once_busy_ones_are_done_is_a_503_to_retry_and_loads_after(engine, library, estimates):
    budget = estimates["primary"] + estimates["tiny-llama-F16"]  # room for one library model at a time
    pool = ModelRouter(engine, pool_settings(memory_budget_bytes=budget))
    try:
        busy = pool.acquire("tiny-llama-Q4_K_M")  # a request answering on it holds its lease
        with pytest.raises(ApiError) as caught:
            pool.acquire("tiny-llama-F16")
        assert caught.value.status == 503 and caught.value.headers == {"Retry-After": "5"}
        assert "answering requests now; retry when they are done" in str(caught.value)
        busy.release()
        pool.acquire("tiny-llama-F16").release()
        assert [e.served for e in pool.loaded_engines()] == ["tiny-llama-F16"]
    finally:
        pool.close()


def test_an_on_demand_load_takes_the_models_preset(serve, library, tmp_path):
    from app.hub import preset_ini

    ini = tmp_path / "models.ini"  # as llama-server's router reads it: the section named by the served id
    ini.write_text("[tiny-llama-F16]\nc = 768\nngl = 0\ncache-type-k = q8_0\ncache-type-v = q8_0\nfa = on\n",
                   encoding="utf-8")
    section, = preset_ini.import_file(ini).imported
    assert section.model == library["tiny-llama-F16"]
    server = serve(pool=pool_settings(memory_budget_bytes=64 << 30))
    cards = {m["id"]: m for m in httpx.get(f"{server.url}/v1/models").json()["data"]}
    assert cards["tiny-llama-F16"]["meta"]["n_ctx"] == 768 and not cards["tiny-llama-F16"]["meta"]["loaded"]
    assert ask(server, "tiny-llama-F16")
    loaded, = pool_of(server).loaded_engines()
    assert loaded.model.loaded.n_ctx == 768 and loaded.model.loaded.gpu_layers == 0
    assert loaded.model.settings.kv_cache_type == "q8_0" and loaded.model.settings.flash_attention is True
    # Another library model, without a preset, loads with the server's context.
    assert ask(server, "tiny-llama-Q4_K_M")
    other = next(e for e in pool_of(server).loaded_engines() if e.served == "tiny-llama-Q4_K_M")
    assert other.model.loaded.n_ctx == N_CTX


def test_a_preset_that_does_not_fit_this_machine_leaves_the_fit_checks_settings_and_says_why(
        engine, library, caplog):
    from app.hardware.profile import CpuInfo, HardwareProfile
    from app.hub import presets

    small = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=2 << 30,
                            ram_available_bytes=1 << 30, gpus=[])
    path = library["tiny-llama-F16"]
    presets.update(path, load_values={"n_ctx": 1536, "threads": 2})
    router = ModelRouter(engine, pool_settings(), profile=small)
    plan = router.plan(path)
    assert (plan.settings.n_ctx, plan.settings.threads) == (1536, 2)  # it fits: the preset's
    presets.update(path, load_values={"n_ctx": 20_000_000})  # a KV cache of gigabytes: not on this machine
    router = ModelRouter(engine, pool_settings(), profile=small)
    with caplog.at_level("WARNING", logger="app.server.router"):
        plan = router.plan(path)
    assert plan.settings.n_ctx == N_CTX and plan.fit is not None and plan.fit.fits
    assert "the preset of tiny-llama-F16.gguf (n_ctx 20000000, threads 2) does not fit this machine" in caplog.text
