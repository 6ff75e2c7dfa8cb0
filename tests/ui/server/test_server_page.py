"""The Local server page: the switch starts a real OpenAI-compatible server on 127.0.0.1 (an ephemeral
port) over the Chat's own engine host, real HTTP requests are answered, chat and API requests take turns
without stopping each other, and switching off closes the port while the Chat keeps its model."""

from __future__ import annotations

import json
import os
import signal
import threading

import httpx
import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.ui.server.server_page import NO_MODEL, SHARED_ENGINE_NOTE, ServerPage, parse_origins
from app.datatypes import LoadSettings, Message, SamplingSettings
from tests.ui.chat.test_chat_real_engine import load_tiny

pytest.importorskip("llama_cpp")


@pytest.fixture
def window(real_window):
    window = real_window()
    window.show_page("Server")
    yield window
    window.server.shutdown()


@pytest.fixture
def page(window) -> ServerPage:
    window.server.port.setValue(0)  # any free port
    return window.server


def switch_on(qtbot, page: ServerPage) -> None:
    with qtbot.waitSignal(page.state_changed, timeout=120_000,
                          check_params_cb=lambda state: state in ("on", "off")) as changed:
        qtbot.mouseClick(page.switch, Qt.MouseButton.LeftButton)
        assert page.state == "starting" and not page.settings_box.isEnabled()
    assert changed.args == ["on"], page.message.text()


def switch_off(qtbot, page: ServerPage) -> None:
    with qtbot.waitSignal(page.state_changed, timeout=60_000, check_params_cb=lambda state: state == "off"):
        qtbot.mouseClick(page.switch, Qt.MouseButton.LeftButton)
        assert page.state == "stopping"


def chat_reply(qtbot, window, max_tokens: int):
    """A chat request straight through the bridge; its Done."""
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as done:
        window.bridge.generate([Message("user", "Hi")], SamplingSettings(max_tokens=max_tokens))
    return done.args[0]


def slow_upload(url: str, key: str, sending: threading.Event, release: threading.Event, answers: list) -> None:
    """A client that sends half of its request body and the rest only when released: the request is active
    for as long as the test needs, however fast the model is."""

    def body():
        yield b'{"model": "tiny-llama-Q8_0", "max_tokens": 4, '
        sending.set()
        release.wait(60)
        yield b'"messages": [{"role": "user", "content": "Hello"}]}'

    with httpx.Client(timeout=60) as client:
        answers.append(client.post(f"{url}/chat/completions", content=body(),
                                   headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}))


def test_the_switch_serves_the_chats_model_from_the_chats_engine_and_off_leaves_it_loaded(
        qtbot, window, page, tiny_models):
    assert SHARED_ENGINE_NOTE in " ".join(label.text() for label in page.findChildren(type(page.state_label)))
    load_tiny(qtbot, window, tiny_models)
    assert page.model.text().startswith("tiny-llama-Q8_0 with llama.cpp (context 2,048 tokens)")
    page.generate_key()
    key = page.api_key.text()
    assert len(key) >= 16
    switch_on(qtbot, page)
    url = page.url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and not url.endswith(":0/v1")
    assert "tiny-llama-Q8_0" in page.state_label.text() and page.copy_button.isEnabled()
    qtbot.mouseClick(page.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == url
    pid = page.engine_pid
    assert pid is not None and pid == window.bridge.engine_pid  # one host: the model is in memory once
    assert len(psutil.Process().children()) == 1
    # where it listens is said for `quantdesk launch` (app/server/running.py), with the key wanted but not kept
    from app.server import running

    assert [(r.url + "/v1", r.api_key_required, r.source) for r in running.running()] == [(url, True, "app")]
    assert key not in "".join(p.read_text() for p in running.records_dir().iterdir())

    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{url}/models", timeout=30).status_code == 401  # the key is required
    models = httpx.get(f"{url}/models", headers=auth, timeout=30)
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "tiny-llama-Q8_0"
    reply = httpx.post(f"{url}/chat/completions", headers=auth, timeout=120, json={
        "model": "tiny-llama-Q8_0", "max_tokens": 8, "messages": [{"role": "user", "content": "Hello"}]})
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] == 8
    # the served model's sequences, its queue and its prompt cache, as `quantdesk ps` says them, live on the page
    parallel = window.bridge.client.loaded.details.get("parallel", 1)
    qtbot.waitUntil(lambda: page.busy.text().startswith(f"0 of {parallel} busy, 0 waiting; the cache served 0 of the "
                                                         "last 1 requests ("), timeout=10_000)

    # The live count of active requests follows a client whose request is still arriving.
    sending, release, answers = threading.Event(), threading.Event(), []
    client = threading.Thread(target=slow_upload, args=(url, key, sending, release, answers), daemon=True)
    client.start()
    try:
        qtbot.waitUntil(sending.is_set, timeout=60_000)
        qtbot.waitUntil(lambda: page.active.text() == "1", timeout=30_000)
    finally:
        release.set()
        client.join(60)
    assert answers and answers[0].status_code == 200, answers
    qtbot.waitUntil(lambda: page.active.text() == "0", timeout=30_000)

    switch_off(qtbot, page)
    assert page.url == "" and not page.copy_button.isEnabled() and page.settings_box.isEnabled()
    assert running.running() == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", headers=auth, timeout=5)
    assert psutil.pid_exists(pid) and window.bridge.engine_pid == pid  # the Chat keeps its engine and model
    assert chat_reply(qtbot, window, max_tokens=3).stats.generated_tokens == 3


def test_chat_and_api_requests_take_turns_and_a_chat_stop_stops_only_the_chat(qtbot, window, page, tiny_models):
    load_tiny(qtbot, window, tiny_models)
    switch_on(qtbot, page)
    streamed: list[dict] = []
    api_started = threading.Event()

    def api_request():  # long enough to be running while the chat asks, then stops
        with httpx.stream("POST", f"{page.url}/chat/completions", timeout=120, json={
                "max_tokens": 1500, "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "Tell a long story"}]}) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    streamed.append(json.loads(line[6:]))
                    api_started.set()

    api = threading.Thread(target=api_request, daemon=True)
    api.start()
    qtbot.waitUntil(api_started.is_set, timeout=60_000)
    # The chat's request waits for its turn; a Stop ends it at once and does not touch the API's.
    with qtbot.waitSignal(window.bridge.waiting, timeout=30_000) as waiting:
        window.bridge.generate([Message("user", "Hi")], SamplingSettings(max_tokens=50))
    assert waiting.args == [1]  # the API's request is ahead of it, and the chat says so
    assert window.chat.stats.ttft.text() == "after 1 server request"
    with qtbot.waitSignal(window.bridge.done, timeout=60_000) as stopped:
        window.bridge.stop()
    api.join(120)
    assert stopped.args[0].stats.stop_reason == "cancelled"
    usage = [chunk["usage"] for chunk in streamed if chunk.get("usage")]
    assert usage and usage[-1]["completion_tokens"] == 1500, streamed[-3:]  # the API's reply ran to the end
    finish = [c["choices"][0]["finish_reason"] for c in streamed if c.get("choices")]
    assert finish[-1] == "length"
    # And the next chat request, with nobody else waiting, runs in full on the same engine.
    assert chat_reply(qtbot, window, max_tokens=5).stats.generated_tokens == 5


def test_loading_another_model_in_chat_changes_what_the_server_serves(qtbot, window, page, tiny_models):
    load_tiny(qtbot, window, tiny_models)
    switch_on(qtbot, page)
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        window.chat.load_model(str(tiny_models.gguf_q4_k_m), LoadSettings(n_ctx=1024, gpu_layers=0))
    assert "tiny-llama-Q4_K_M" in page.state_label.text() and "1,024" in page.state_label.text()
    models = httpx.get(f"{page.url}/models", timeout=30).json()["data"]
    assert [m["id"] for m in models] == ["tiny-llama-Q4_K_M"]
    gone = httpx.post(f"{page.url}/chat/completions", timeout=60, json={
        "model": "tiny-llama-Q8_0", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "model_not_found"


def test_without_a_model_in_chat_the_switch_says_to_load_one(qtbot, page):
    assert page.model.text() == f"{NO_MODEL}."
    with qtbot.waitSignal(page.failed) as failed:
        page.start()
    assert failed.args == [f"{NO_MODEL}."]
    assert page.state == "off" and not page.switch.isChecked()


def test_the_network_switch_without_a_key_is_refused_with_the_guards_sentence(qtbot, window, page, tiny_models):
    load_tiny(qtbot, window, tiny_models)
    page.allow_lan.setChecked(True)
    with qtbot.waitSignal(page.failed) as failed:
        qtbot.mouseClick(page.switch, Qt.MouseButton.LeftButton)
    assert failed.args[0].startswith("Refusing to listen on 0.0.0.0 without an API key: anyone on the network "
                                     "could use it.")
    assert page.message.text() == failed.args[0]
    assert page.state == "off" and not page.switch.isChecked() and page.running is None
    page.api_key.setText("short")
    with qtbot.waitSignal(page.failed) as failed:
        page.start()
    assert "too short" in failed.args[0] and not page.switch.isChecked()


def test_a_bad_origin_is_a_sentence(qtbot, window, page, tiny_models):
    load_tiny(qtbot, window, tiny_models)
    page.origins.setText("localhost:3000")
    with qtbot.waitSignal(page.failed) as failed:
        page.start()
    assert "is not a web origin" in failed.args[0] and page.state == "off"


def test_origins_are_parsed_and_checked():
    assert parse_origins("http://localhost:3000, https://app.example/") == ("http://localhost:3000",
                                                                            "https://app.example")
    assert parse_origins("  ") == ()
    with pytest.raises(ValueError, match="without a path"):
        parse_origins("http://localhost:3000/chat")


def test_when_the_engine_dies_the_server_says_so_and_serves_again_once_chat_reloads(qtbot, window, page, tiny_models):
    load_tiny(qtbot, window, tiny_models)
    switch_on(qtbot, page)
    hello = {"max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}
    with qtbot.waitSignal(window.bridge.crashed, timeout=60_000):  # the chat notices on its next request
        os.kill(window.bridge.engine_pid, signal.SIGKILL)
        window.bridge.generate([Message("user", "Hi")], SamplingSettings(max_tokens=2))
    down = httpx.post(f"{page.url}/chat/completions", timeout=60, json=hello)
    assert down.status_code == 503 and down.json()["error"]["code"] in ("engine_crashed", "model_not_loaded")
    assert httpx.get(page.url.removesuffix("/v1") + "/health", timeout=30).status_code == 503
    assert page.state == "on" and "no model is loaded" in page.state_label.text()
    load_tiny(qtbot, window, tiny_models)  # the Chat's reload: a fresh engine host
    assert "tiny-llama-Q8_0" in page.state_label.text()
    again = httpx.post(f"{page.url}/chat/completions", timeout=60, json=hello)
    assert again.status_code == 200 and again.json()["usage"]["completion_tokens"] == 2
    assert page.engine_pid == window.bridge.engine_pid


def test_the_gateway_box_serves_the_remote_connections_models_beside_the_chats(qtbot, window, page, tiny_models):
    from app.remote.connections import Connection, Connections, model_ref
    from app.server.app import create_app
    from app.server.thread import ServerThread

    load_tiny(qtbot, window, tiny_models)
    # the machine in the next room: a QuantDesk server over the same engine, saved as a connection
    remote = ServerThread(create_app(window.bridge.client)).start()
    try:
        Connections().save(Connection("box", f"{remote.url}/v1"))
        page.serve_remotes.setChecked(True)
        switch_on(qtbot, page)
        models = httpx.get(f"{page.address.text()}/models", timeout=30).json()["data"]
        assert [m["id"] for m in models] == ["tiny-llama-Q8_0", model_ref("box", "tiny-llama-Q8_0")]
        switch_off(qtbot, page)
        page.serve_remotes.setChecked(False)
        switch_on(qtbot, page)
        assert [m["id"] for m in httpx.get(f"{page.address.text()}/models").json()["data"]] == ["tiny-llama-Q8_0"]
        switch_off(qtbot, page)
    finally:
        remote.stop()


def test_the_on_demand_box_lets_requests_load_library_models_beside_the_chats(qtbot, window, page, tiny_models,
                                                                             tmp_path, monkeypatch):
    from app.hub.library import Library

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    Library().import_path(tiny_models.gguf_f16, copy=False)
    load_tiny(qtbot, window, tiny_models)
    assert not page.load_on_demand.isChecked() and not page.memory_budget.isEnabled()  # off by default
    switch_on(qtbot, page)
    body = {"model": "tiny-llama-F16", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]}
    refused = httpx.post(f"{page.address.text()}/chat/completions", json=body, timeout=60)
    assert refused.status_code == 404 and "--load-on-demand" in refused.json()["error"]["message"]
    switch_off(qtbot, page)

    page.load_on_demand.setChecked(True)
    assert page.memory_budget.isEnabled() and page.force.isEnabled()
    page.memory_budget.setValue(64)
    from app.datatypes import DEFAULT_PARALLEL

    assert page.parallel.value() == DEFAULT_PARALLEL
    page.parallel.setValue(3)  # the requests a model the server loads decodes together
    switch_on(qtbot, page)
    # said on start: the Chat's model keeps its one sequence, the ones the server loads take the field's
    assert page.sequences.text().startswith("one request at a time") and page.sequences.text().endswith(
        "models the server loads decode 3 together"), page.sequences.text()
    answer = httpx.post(f"{page.address.text()}/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200 and answer.json()["model"] == "tiny-llama-F16"
    qtbot.waitUntil(lambda: page.also_loaded.text() == "tiny-llama-F16", timeout=10_000)
    cards = {m["id"]: m["meta"] for m in httpx.get(f"{page.address.text()}/models").json()["data"]}
    assert {name: meta["loaded"] for name, meta in cards.items()} == {"tiny-llama-Q8_0": True, "tiny-llama-F16": True}
    assert (cards["tiny-llama-Q8_0"]["parallel"], cards["tiny-llama-F16"]["parallel"]) == (1, 3)
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        window.grab().save(os.path.join(shots, "server_on_demand.png"))
    engine, = page.running.server.app.state.openai.pool.loaded_engines()
    switch_off(qtbot, page)
    assert not engine.client.alive and window.bridge.client.alive  # its host closed; the Chat's model stays
