"""Remote engines in the app, driven like a user would: add a connection in Settings, load a model from it in the
Chat, chat with live stats, stop, and lose the server mid-reply — real engine hosts, a real QuantDesk server in its
own process (killed for the last part), and the fault server for the stall."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from PySide6.QtCore import Qt

from app.remote.connections import Connection, Connections, model_ref
from tests.fixtures.openai_faults import MODEL
from tests.ui.chat.test_chat_page import type_and_send

ROOT = Path(__file__).resolve().parents[3]
SHOTS = os.environ.get("QUANTDESK_SCREENSHOTS")  # a folder: save what the test sees, to look at


def shot(widget, name: str) -> None:
    if SHOTS:
        widget.grab().save(str(Path(SHOTS) / f"{name}.png"))


@pytest.fixture
def quantdesk_server(tiny_models):
    """``quantdesk serve`` in its own process on the tiny model: (base URL, process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--model", str(tiny_models.gguf_q8_0),
                             "--port", str(port), "--ctx", "4096"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)  # another process starting: nothing to wait on but its port
    yield url, proc
    proc.kill()
    proc.wait(10)


def add_connection(qtbot, window, name: str, url: str) -> None:
    window.show_page("Settings")
    panel = window.app_settings.remote_panel
    qtbot.mouseClick(panel.new_button, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.name_edit, name)
    qtbot.keyClicks(panel.url_edit, url)
    qtbot.mouseClick(panel.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "answered in" in panel.result.text(), timeout=30_000)


def load_remote(qtbot, window, name: str) -> str:
    from app.ui.settings.remote_connections import RemoteModelDialog

    window.show_page("Chat")
    dialog = RemoteModelDialog(window)
    qtbot.addWidget(dialog)
    dialog.connection_box.setCurrentText(name)
    qtbot.waitUntil(lambda: dialog.load_button.isEnabled(), timeout=30_000)
    shot(dialog, "remote-model-dialog")
    qtbot.mouseClick(dialog.load_button, Qt.MouseButton.LeftButton)
    assert dialog.chosen_ref.startswith(f"remote:{name}/")
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000):
        window.chat.open_model(dialog.chosen_ref)
    return dialog.chosen_ref


def test_add_a_connection_chat_with_it_and_lose_the_server_mid_reply(qtbot, real_window, quantdesk_server):
    url, server = quantdesk_server
    window = real_window()
    add_connection(qtbot, window, "box", url)
    panel = window.app_settings.remote_panel
    assert "a quantdesk server with tiny-llama-Q8_0" in panel.result.text()
    assert panel.list.item(0).text() == f"box — {url} — no key"
    shot(window, "settings-remote")

    chat = window.chat
    ref = load_remote(qtbot, window, "box")
    assert ref == model_ref("box", "tiny-llama-Q8_0")
    label = chat.model_bar.model_label.text()
    assert "tiny-llama-Q8_0 @ box" in label and "quantdesk server at" in label and "context 4096" in label
    assert not chat.model_bar.gpu_layers_box.isEnabled()  # the server chose its own settings

    with qtbot.waitSignal(window.bridge.done, timeout=60_000):
        type_and_send(qtbot, chat, "hello")
    reply = chat.store.messages(chat.current.id)[-1]
    assert reply.state == "complete" and reply.content and reply.stats["server"]["predicted_n"] > 0
    assert "· server " in chat.stats.tps.text() and chat.stats.memory.text() == "on the server"
    assert "server says" in chat.view.bubbles[-1].meta.text()
    shot(window, "chat-remote")

    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 3500})  # long enough to be cut
    with qtbot.waitSignal(window.bridge.failed, timeout=60_000):
        type_and_send(qtbot, chat, "tell me a long story")
        qtbot.waitUntil(lambda: len(chat.view.bubbles[-1].body.toPlainText()) > 20, timeout=30_000)
        server.send_signal(signal.SIGKILL)  # the machine in the next room loses power
    cut = chat.store.messages(chat.current.id)[-1]
    assert cut.state == "interrupted" and len(cut.content) > 20  # what arrived is kept, marked
    assert chat.banner_text.text() == ("box closed the connection in the middle of the reply (the server may have "
                                       "stopped or restarted; the reply so far is kept)")
    shot(window, "chat-remote-lost")
    assert window.isVisible() and chat.send_button.isEnabled()  # the app stays responsive


def test_stop_ends_a_stalled_remote_reply_and_keeps_what_came(qtbot, real_window, faulty_server):
    window = real_window()
    add_connection(qtbot, window, "stub", faulty_server.url)
    chat = window.chat
    load_remote(qtbot, window, "stub")
    faulty_server.mode = "stall"
    type_and_send(qtbot, chat, "hi")
    qtbot.waitUntil(lambda: chat.view.bubbles[-1].body.toPlainText() == "Hello from", timeout=30_000)
    with qtbot.waitSignal(window.bridge.done, timeout=5_000):
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    reply = chat.store.messages(chat.current.id)[-1]
    assert (reply.content, reply.stats["stop_reason"]) == ("Hello from", "cancelled")
    assert faulty_server.closed.wait(5)


def test_a_refused_model_load_is_a_sentence_and_nothing_breaks(qtbot, real_window, faulty_server):
    window = real_window()
    add_connection(qtbot, window, "stub", faulty_server.url)
    with qtbot.waitSignal(window.bridge.failed, timeout=60_000):
        window.chat.open_model(model_ref("stub", "not-there"))
    assert f"does not serve the model 'not-there' (it serves: {MODEL})" in window.chat.banner_text.text()
    assert Connections().get("stub").base_url == faulty_server.url


def test_the_lab_takes_a_remote_model_but_never_as_the_reference(qtbot, tiny_models):
    from app.ui.lab.lab_page import LabPage

    Connections().save(Connection("box", "http://127.0.0.1:9/v1"))
    page = LabPage()
    qtbot.addWidget(page)
    ref = model_ref("box", "Qwen/Qwen3-8B")
    page.add_paths([str(tiny_models.gguf_q8_0), ref])
    texts = [page.variants.item(r).text() for r in range(page.variants.count())]
    assert "Qwen/Qwen3-8B @ box — remote" in texts
    assert ref in page.checked_paths()
    references = [page.reference.itemData(i) for i in range(page.reference.count())]
    assert ref not in references and str(tiny_models.gguf_q8_0) in references
