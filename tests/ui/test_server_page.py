"""The Local server page: the switch starts a real OpenAI-compatible server on 127.0.0.1 (an ephemeral
port) over its own engine host, real HTTP requests are answered, and switching off closes both."""

from __future__ import annotations

import threading

import httpx
import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.ui.server_page import SEPARATE_ENGINE_NOTE, ServerPage, parse_origins

pytest.importorskip("llama_cpp")


@pytest.fixture
def page(qtbot):
    page = ServerPage()
    qtbot.addWidget(page)
    page.resize(1130, 800)
    page.show()
    yield page
    page.shutdown()


def switch_on(qtbot, page: ServerPage) -> None:
    with qtbot.waitSignal(page.state_changed, timeout=120_000,
                          check_params_cb=lambda state: state in ("on", "off")) as changed:
        qtbot.mouseClick(page.switch, Qt.MouseButton.LeftButton)
        assert page.state == "starting" and not page.settings_box.isEnabled()
    assert changed.args == ["on"], page.message.text()


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


def test_the_switch_serves_the_model_and_switching_off_closes_the_port_and_the_engine(qtbot, page, tiny_models):
    assert SEPARATE_ENGINE_NOTE in " ".join(label.text() for label in page.findChildren(type(page.state_label)))
    page.set_model(tiny_models.gguf_q8_0)
    page.port.setValue(0)  # any free port
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
    assert pid is not None and psutil.pid_exists(pid)

    auth = {"Authorization": f"Bearer {key}"}
    assert httpx.get(f"{url}/models", timeout=30).status_code == 401  # the key is required
    models = httpx.get(f"{url}/models", headers=auth, timeout=30)
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "tiny-llama-Q8_0"
    reply = httpx.post(f"{url}/chat/completions", headers=auth, timeout=120, json={
        "model": "tiny-llama-Q8_0", "max_tokens": 8, "messages": [{"role": "user", "content": "Hello"}]})
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["object"] == "chat.completion" and isinstance(answer["choices"][0]["message"]["content"], str)
    assert 1 <= answer["usage"]["completion_tokens"] <= 8

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

    with qtbot.waitSignal(page.state_changed, timeout=60_000, check_params_cb=lambda state: state == "off"):
        qtbot.mouseClick(page.switch, Qt.MouseButton.LeftButton)
        assert page.state == "stopping"
    assert page.url == "" and not page.copy_button.isEnabled() and page.settings_box.isEnabled()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", headers=auth, timeout=5)
    assert not psutil.pid_exists(pid), "switching off must close the server's engine host"


def test_the_network_switch_without_a_key_is_refused_with_the_guards_sentence(qtbot, page, tiny_models):
    page.set_model(tiny_models.gguf_q8_0)
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


def test_settings_that_cannot_work_are_sentences(qtbot, page, tiny_models, tmp_path):
    with qtbot.waitSignal(page.failed) as failed:
        page.start()
    assert failed.args == ["Choose a model to serve first."]
    page.set_model(tiny_models.gguf_q8_0)
    page.origins.setText("localhost:3000")
    with qtbot.waitSignal(page.failed) as failed:
        page.start()
    assert "is not a web origin" in failed.args[0] and page.state == "off"
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    page.origins.setText("")
    page.set_model(broken)
    page.port.setValue(0)
    with qtbot.waitSignal(page.failed, timeout=60_000) as failed:
        page.start()
    assert failed.args[0].startswith("The server could not start: ") and "Traceback" not in failed.args[0]
    assert page.state == "off" and not page.switch.isChecked()


def test_origins_are_parsed_and_checked():
    assert parse_origins("http://localhost:3000, https://app.example/") == ("http://localhost:3000",
                                                                            "https://app.example")
    assert parse_origins("  ") == ()
    with pytest.raises(ValueError, match="without a path"):
        parse_origins("http://localhost:3000/chat")
