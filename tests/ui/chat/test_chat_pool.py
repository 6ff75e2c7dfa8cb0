"""Several models loaded in the Chat (app/engine/pool.py through the bridge), with real engine hosts on two quants of
the tiny model: each chat answers from its own model without a reload, the budget unloads the least recently used
one with a sentence (or refuses with the estimate and “Load anyway”), idle models unload after the TTL and the model
bar shows it, Eject from the "N loaded" menu, and closing the app leaves no host behind."""

from __future__ import annotations

import os
import time

import psutil
import pytest
from PySide6.QtCore import Qt

from app.engine.pool import ModelPool, PoolLimits
from app.ui.chat.engine_bridge import EngineBridge
from app.datatypes import LoadSettings
from tests.ui.held_reply import HeldReply

pytest.importorskip("llama_cpp")

SETTINGS = LoadSettings(n_ctx=512, gpu_layers=0)
SHORT = {"max_tokens": 6, "seed": 1}


@pytest.fixture
def pool_window(build_window):
    def make(limits: PoolLimits):
        window = build_window(EngineBridge.over(lambda: ModelPool(limits)))
        assert window.bridge.pool is None  # made by its first use, not before
        window.bridge.client  # noqa: B018 - made now, so a test can hold it before its first load
        return window

    return make


def load(qtbot, window, path) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        window.chat.load_model(str(path), SETTINGS)
    assert loaded.args[0].model_path == str(path)


def open_model(qtbot, window, path) -> None:
    """As the Library's Chat button does: sized up by the estimator, then loaded."""
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        window.chat.open_model(str(path))


def chat_with(qtbot, window, text: str) -> str:
    chat = window.chat
    chat.store.update_settings(chat.current.id, sampling=SHORT)
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as done:
        qtbot.keyClicks(chat.composer, text)
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert chat.store.messages(chat.current.id)[-1].content == done.args[0].text
    return chat.store.conversation(chat.current.id).model_path


def select_chat(qtbot, window, conversation_id: int) -> None:
    """Click the chat in the list: its model is loaded, so switching to it is answered at once."""
    chat = window.chat
    row = next(i for i in range(chat.conversation_list.count())
               if chat.conversation_list.item(i).data(Qt.ItemDataRole.UserRole) == conversation_id)
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000):
        chat.conversation_list.setCurrentRow(row)


def menu_texts(window) -> list[str]:
    return [a.text() for a in window.chat.model_bar.loaded_button.menu().actions() if a.text()]


def test_two_chats_answer_from_their_own_models_without_a_reload_eject_and_quit(qtbot, pool_window, tiny_models):
    a, b = str(tiny_models.gguf_q8_0), str(tiny_models.gguf_q4_k_m)
    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    chat, pool = window.chat, window.bridge.pool
    load(qtbot, window, a)
    chat.new_conversation()
    first = chat.current.id
    assert chat_with(qtbot, window, "Hello A") == a
    load(qtbot, window, b)
    chat.new_conversation()
    assert chat_with(qtbot, window, "Hello B") == b
    pids = {m.path: m.client.pid for m in pool.models()}
    assert pool.host_starts == 2 and len(set(pids.values())) == 2

    select_chat(qtbot, window, first)  # back to the first chat: its model answers, no host starts
    assert chat.loaded.model_path == a and pool.host_starts == 2 and window.bridge.engine_pid == pids[a]
    assert "tiny-llama-Q8_0.gguf" in chat.model_label.text()
    assert chat_with(qtbot, window, "Again A") == a
    assert pool.host_starts == 2 and [m.client.pid for m in pool.models()] == [pids[a], pids[b]]

    bar = chat.model_bar
    assert bar.loaded_button.isVisible() and bar.loaded_button.text() == "2 loaded"
    texts = menu_texts(window)
    assert texts[0].startswith("tiny-llama-Q8_0.gguf · ") and texts[0].endswith(" · this chat")
    assert texts[1] == "Eject tiny-llama-Q8_0.gguf" and texts[3] == "Eject tiny-llama-Q4_K_M.gguf"
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        window.grab().save(os.path.join(shots, "chat_two_loaded.png"))
    eject_b = next(a for a in bar.loaded_button.menu().actions() if a.text() == "Eject tiny-llama-Q4_K_M.gguf")
    with qtbot.waitSignal(window.bridge.model_unloaded, timeout=30_000):
        eject_b.trigger()
    assert bar.loaded_button.text() == "1 loaded" and chat.loaded.model_path == a
    assert chat.banner_text.text() == "tiny-llama-Q4_K_M.gguf unloaded: ejected."
    assert not _running(pids[b]) and _running(pids[a])

    window.close()
    window.bridge.shutdown()  # as the app does on quit
    assert not any(_running(pid) for pid in pids.values())


def test_the_budget_unloads_the_least_recently_used_model_and_the_chat_says_which_and_why(
        qtbot, pool_window, tiny_models):
    a, b = tiny_models.gguf_q8_0, tiny_models.gguf_q4_k_m
    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=4))
    chat, pool = window.chat, window.bridge.pool
    open_model(qtbot, window, a)
    chat.new_conversation()
    first = chat.current.id
    chat_with(qtbot, window, "Hello A")
    estimate = chat.prefill.estimated_bytes
    assert estimate and pool.get(str(a)).estimate_bytes == estimate
    pool.set_limits(PoolLimits(budget_bytes=int(estimate * 1.5), max_loaded=4))  # room for one of them

    open_model(qtbot, window, b)
    assert [m.path for m in pool.models()] == [str(b)]
    assert chat.banner_text.text().startswith(
        "tiny-llama-Q8_0.gguf unloaded to make room for tiny-llama-Q4_K_M.gguf: it was the least recently used "
        "idle model, and the memory budget of ")
    assert chat.model_bar.loaded_button.text() == "1 loaded"
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        window.grab().save(os.path.join(shots, "chat_budget_unload.png"))
    chat.new_conversation()
    chat_with(qtbot, window, "Hello B")

    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):  # the first chat loads its model again
        chat.conversation_list.setCurrentRow(next(
            i for i in range(chat.conversation_list.count())
            if chat.conversation_list.item(i).data(Qt.ItemDataRole.UserRole) == first))
    assert chat.loaded.model_path == str(a) and pool.host_starts == 3
    assert "tiny-llama-Q4_K_M.gguf unloaded to make room for tiny-llama-Q8_0.gguf" in chat.banner_text.text()


def test_past_the_budget_the_refusal_gives_the_estimate_and_load_anyway_loads_it(qtbot, pool_window, tiny_models):
    window = pool_window(PoolLimits(budget_bytes=1 << 20, max_loaded=4))  # 1 MiB: no model fits
    chat, pool = window.chat, window.bridge.pool
    with qtbot.waitSignal(window.bridge.refused, timeout=120_000):
        chat.open_model(str(tiny_models.gguf_q8_0))
    text = chat.banner_text.text()
    assert text.startswith("tiny-llama-Q8_0.gguf needs about ") and "the memory budget is 0.00 GiB" in text
    assert "“Load anyway” loads it anyway: past it the system may swap" in text
    assert chat.load_anyway_button.isVisible() and pool.host_starts == 0 and chat.loaded is None
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        window.grab().save(os.path.join(shots, "chat_budget_refusal.png"))
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        qtbot.mouseClick(chat.load_anyway_button, Qt.MouseButton.LeftButton)
    assert chat.banner_text.text().startswith("Loading tiny-llama-Q8_0.gguf anyway, ")
    assert pool.host_starts == 1 and chat.loaded is not None


def test_idle_models_unload_after_the_ttl_the_bar_shows_it_and_reload_brings_it_back(qtbot, pool_window,
                                                                                     tiny_models):
    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    chat, pool = window.chat, window.bridge.pool
    settings_page = window.app_settings
    settings_page.idle_box.setCurrentIndex(settings_page.idle_box.findData(15))
    settings_page.idle_box.activated.emit(settings_page.idle_box.currentIndex())  # as a user's pick does
    assert pool.limits.idle_ttl_s == 15 * 60 and settings_page.current.idle_unload_minutes == 15

    load(qtbot, window, tiny_models.gguf_q8_0)
    pid = window.bridge.engine_pid
    chat.new_conversation()
    chat_with(qtbot, window, "Hello")
    with qtbot.waitSignal(window.bridge.model_unloaded, timeout=60_000) as unloaded:
        pool.set_limits(PoolLimits(budget_bytes=1 << 40, max_loaded=2, idle_ttl_s=0.3))  # a test's short TTL
    assert "unloaded after 0.3 s without a request" in unloaded.args[1]
    assert chat.loaded is None and chat.model_label.text() == "No model loaded"
    assert not chat.model_bar.loaded_button.isVisible() and not _running(pid)
    assert chat.banner_text.text().endswith("Reload loads it again.") and chat.reload_button.isVisible()
    pool.set_limits(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        qtbot.mouseClick(chat.reload_button, Qt.MouseButton.LeftButton)
    assert chat.loaded is not None and pool.host_starts == 2


def _running(pid: int | None) -> bool:
    try:
        return pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_server_serves_every_model_loaded_in_chat_and_loads_into_the_chats_pool(
        qtbot, pool_window, tiny_models, tmp_path, monkeypatch):
    import httpx

    from app.hub.library import Library
    from tests.ui.server.test_server_page import switch_off, switch_on

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    Library().import_path(tiny_models.gguf_f16, copy=False)
    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=3))
    chat, pool, page = window.chat, window.bridge.pool, window.server
    load(qtbot, window, tiny_models.gguf_q8_0)
    load(qtbot, window, tiny_models.gguf_q4_k_m)  # the Chat's active model, the server's primary
    assert not page.memory_budget.isEnabled()  # no loads on demand: the Chat's limits (Settings → Loaded models)
    page.port.setValue(0)
    page.load_on_demand.setChecked(True)
    assert page.memory_budget.isEnabled() and page.idle_minutes.isEnabled()  # they set the one pool's limits
    try:
        switch_on(qtbot, page)
        url = page.address.text()
        models = {m["id"]: m["meta"]["loaded"] for m in httpx.get(f"{url}/models", timeout=60).json()["data"]}
        assert models == {"tiny-llama-Q4_K_M": True, "tiny-llama-Q8_0": True, "tiny-llama-F16": False}
        body = {"model": "tiny-llama-Q8_0", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}
        answer = httpx.post(f"{url}/chat/completions", json=body, timeout=120)
        assert answer.status_code == 200 and answer.json()["model"] == "tiny-llama-Q8_0"
        answer = httpx.post(f"{url}/chat/completions", json={**body, "model": "tiny-llama-Q4_K_M"}, timeout=120)
        assert answer.status_code == 200 and answer.json()["model"] == "tiny-llama-Q4_K_M"  # the Chat's active one
        assert pool.host_starts == 2 and chat.loaded.model_path == str(tiny_models.gguf_q4_k_m)
        qtbot.waitUntil(lambda: page.also_loaded.text() == "tiny-llama-Q8_0", timeout=10_000)

        with qtbot.waitSignal(window.bridge.models_changed, timeout=120_000):  # the server loads into the Chat's
            answer = httpx.post(f"{url}/chat/completions", json={**body, "model": "tiny-llama-F16"}, timeout=120)
        assert answer.status_code == 200 and pool.host_starts == 3
        assert chat.model_bar.loaded_button.text() == "3 loaded"
        health = httpx.get(url.removesuffix("/v1") + "/health", timeout=60).json()
        assert set(health["loaded"]) == {"tiny-llama-Q4_K_M", "tiny-llama-Q8_0", "tiny-llama-F16"}
        assert health["memory_budget_bytes"] == 1 << 40  # the Chat's budget (Settings → Loaded models)
        assert "Eject tiny-llama-F16.gguf" in menu_texts(window)
        switch_off(qtbot, page)
    finally:
        page.shutdown()
    assert len(pool.models()) == 3  # the server's queues closed; every model stays loaded in the Chat


def test_ejecting_the_model_that_writes_a_reply_stops_the_reply_and_keeps_it(qtbot, pool_window, tiny_models,
                                                                           monkeypatch):
    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    chat = window.chat
    load(qtbot, window, tiny_models.gguf_q8_0)
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 1500, "seed": 1})
    with HeldReply(window.bridge) as held:
        qtbot.keyClicks(chat.composer, "Tell me a long story")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: int(chat.stats.tokens.text() or 0) >= 1, timeout=60_000)
        assert psutil.Process(window.bridge.engine_pid).status() == psutil.STATUS_STOPPED  # held mid-reply
        eject = next(a for a in chat.model_bar.loaded_button.menu().actions() if a.text().startswith("Eject "))
        # The Eject runs on a thread of its own: the host goes on once the Eject's cancel is in its pipe.
        client = window.bridge.pool.models()[0].client
        cancel = client.cancel
        monkeypatch.setattr(client, "cancel", lambda request_id=None: (cancel(request_id), held.release()))
        with qtbot.waitSignal(window.bridge.done, timeout=60_000) as stopped:
            with qtbot.waitSignal(window.bridge.model_unloaded, timeout=60_000):
                eject.trigger()
    done = stopped.args[0]
    assert done.stats.stop_reason == "cancelled" and done.text
    reply = chat.store.messages(chat.current.id)[-1]
    assert reply.state == "complete" and reply.content == done.text
    assert chat.loaded is None and window.bridge.pool.models() == []
    assert chat.banner_text.text() == "tiny-llama-Q8_0.gguf unloaded: ejected. Reload loads it again."


def test_the_server_pages_budget_and_idle_time_are_the_pools_limits_while_it_serves(qtbot, pool_window, tiny_models):
    import httpx

    from tests.ui.server.test_server_page import switch_off, switch_on

    window = pool_window(PoolLimits(budget_bytes=1 << 40, max_loaded=3))
    pool, page = window.bridge.pool, window.server
    load(qtbot, window, tiny_models.gguf_q8_0)
    page.port.setValue(0)
    page.load_on_demand.setChecked(True)
    page.memory_budget.setValue(2.5)
    page.idle_minutes.setValue(5)
    try:
        switch_on(qtbot, page)
        assert pool.limits == PoolLimits(budget_bytes=int(2.5 * (1 << 30)), max_loaded=3, idle_ttl_s=300.0)
        health = httpx.get(page.address.text().removesuffix("/v1") + "/health", timeout=60).json()
        assert health["memory_budget_bytes"] == int(2.5 * (1 << 30))
        pool.unload_idle(now=time.monotonic() + 301)  # the pool's idle check, as its reaper runs it
        assert [m.path for m in pool.models()] == [str(tiny_models.gguf_q8_0)]  # the Chat's, served: kept
        switch_off(qtbot, page)
    finally:
        page.shutdown()
    assert pool.limits == PoolLimits(budget_bytes=1 << 40, max_loaded=3)  # Settings → Loaded models' again
