"""Images in the Chat page, against the real engine (the tiny model and its projector through llama.cpp's
multimodal path): attach by the button, paste, drop and remove; send; the thumbnails in the message, and again
after a restart; a text-only model says it does not see images as soon as one is attached."""

from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QFileDialog

from app.images import to_base64
from app.datatypes import LoadSettings
from tests.fixtures.models import write_test_png
from tests.ui.engine_double import EngineDouble

pytest.importorskip("llama_cpp")
SCREENSHOTS = "QUANTDESK_SCREENSHOTS"  # set to a folder to keep the pictures this test takes


def _open(qtbot, window, path) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        window.chat.open_model(str(path))


def _keep(widget, name: str, tmp_path) -> None:
    import os

    folder = os.environ.get(SCREENSHOTS)
    assert widget.grab().save(str(tmp_path / name))
    if folder:
        shutil.copy(tmp_path / name, folder)


def test_attach_paste_drop_remove_send_and_see_the_images_after_a_restart(qtbot, real_window, make_window,
                                                                          tiny_vision, tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    model = models / tiny_vision.text.gguf_q8_0.name
    shutil.copy(tiny_vision.text.gguf_q8_0, model)
    shutil.copy(tiny_vision.mmproj_f16, models)  # beside the model: found and loaded with it
    pictures = [write_test_png(tmp_path / f"p{w}.png", w, 40) for w in (48, 64, 32)]

    window = real_window()
    chat = window.chat
    chat.set_profile(None)
    _open(qtbot, window, model)
    assert "sees images" in chat.model_label.text()
    assert chat.loaded.details["vision"]["projector"] == tiny_vision.mmproj_f16.name

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(pictures[0])], "Images"))
    qtbot.mouseClick(chat.attach_button, Qt.MouseButton.LeftButton)
    assert len(chat.attachments.images) == 1 and chat.attachments.isVisible()

    chat.composer.setFocus()
    QGuiApplication.clipboard().setImage(QImage(str(pictures[1])))
    qtbot.keyClick(chat.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert len(chat.attachments.images) == 2 and chat.composer.toPlainText() == ""

    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(pictures[2]))])
    chat.composer.insertFromMimeData(dropped)  # what a drop on the message box hands over
    assert chat.attachments.images[2] == pictures[2].read_bytes()
    _keep(window, "chat-attachments.png", tmp_path)

    qtbot.mouseClick(chat.attachments.remove_buttons[1], Qt.MouseButton.LeftButton)  # the pasted one goes
    assert chat.attachments.images == [pictures[0].read_bytes(), pictures[2].read_bytes()]

    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 8, "seed": 1})
    qtbot.keyClicks(chat.composer, "What are these?")
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert done.args[0].stats.generated_tokens == 8
    assert done.args[0].stats.prompt_tokens > 2 * 16  # both images' tokens reached the model
    assert not chat.attachments.isVisible() and chat.attachments.images == []
    asked = chat.view.bubbles[0]
    assert len(asked.images) == 2 and not asked.images[0].pixmap().isNull()
    _keep(window, "chat-images.png", tmp_path)
    conversation_id = chat.current.id
    window.close()

    again = make_window(EngineDouble())
    again.chat.open_conversation(conversation_id)
    asked = again.chat.view.bubbles[0]
    assert [label.accessibleName() for label in asked.images] == ["Image 1 of 2: 48 × 40", "Image 2 of 2: 32 × 40"]
    assert all(not label.pixmap().isNull() for label in asked.images)
    _keep(again, "chat-images-after-restart.png", tmp_path)


def test_a_text_only_model_says_so_when_an_image_is_attached(qtbot, real_window, tiny_vision, tmp_path):
    window = real_window()
    chat = window.chat
    _open(qtbot, window, tiny_vision.text.gguf_q8_0)  # no projector beside it in the model set's folder
    assert "sees images" not in chat.model_label.text()
    assert not chat.attach_file(write_test_png(tmp_path / "p.png"))
    assert chat.banner.isVisible() and "does not see images" in chat.banner_text.text()
    assert chat.attachments.images == []
    _keep(window, "chat-text-only-image.png", tmp_path)


def test_a_file_that_is_not_an_image_is_refused_with_its_name(qtbot, make_window, tmp_path):
    window = make_window(EngineDouble())
    notes = tmp_path / "notes.png"
    notes.write_text("not a picture")
    assert not window.chat.attach_file(notes)
    assert "notes.png: This is not a PNG, JPEG or WebP image" in window.chat.banner_text.text()


def test_edit_and_resend_brings_the_images_back_to_the_composer(qtbot, make_window, tmp_path):
    engine = EngineDouble(["seen"])
    window = make_window(engine)
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=10_000):
        chat.load_model("/models/tiny-q8_0.gguf", LoadSettings(n_ctx=512, mmproj="/models/mmproj-tiny-f16.gguf"))
    picture = write_test_png(tmp_path / "p.png")
    assert chat.attach_file(picture)
    qtbot.keyClicks(chat.composer, "look")
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert engine.requests[-1][-1].images == (to_base64(picture.read_bytes()),)
    qtbot.mouseClick(chat.view.bubbles[0].actions["edit"], Qt.MouseButton.LeftButton)
    assert chat.composer.toPlainText() == "look" and chat.attachments.images == [picture.read_bytes()]
    # The old version stays in the store (a branch) until the edited one is sent beside it, with the images.
    assert chat.view.bubbles == [] and [m.content for m in chat.store.messages(chat.current.id)] == ["look", "seen"]
    with qtbot.waitSignal(window.bridge.done, timeout=10_000):
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert engine.requests[-1] == engine.requests[-2]  # the same message and picture, sent again
    assert chat.view.bubbles[0].branch_position.text() == "2/2" and len(chat.view.bubbles[0].images) == 1
