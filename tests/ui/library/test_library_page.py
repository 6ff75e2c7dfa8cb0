"""The Library page on real files: import (copy and in place), watched folders, the Hugging Face cache,
load into the chat, open folder, delete with confirmation (what is and is not deleted), disk usage."""

from __future__ import annotations

import shutil

from PySide6.QtCore import QObject, QTimer, QUrl, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QMessageBox

from app import settings
from app.hub import config
from app.ui.library.library_page import LibraryPage, delete_question
from tests.ui.engine_double import EngineDouble


def make_page(qtbot) -> LibraryPage:
    page = LibraryPage()
    qtbot.addWidget(page)
    with qtbot.waitSignal(page.changed, timeout=30_000):
        page.refresh()
    return page


def run(qtbot, page, action, *args) -> None:
    with qtbot.waitSignal(page.changed, timeout=60_000):
        action(*args)


def row_texts(page) -> list[list[str]]:
    return [[page.table.item(r, c).text() for c in range(page.table.columnCount())] for r in range(page.table.rowCount())]


class DialogAnswer(QObject):
    """Clicks the button with this text in the next message box."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.seen = text, ""
        QTimer.singleShot(0, self._on_tick)

    @Slot()
    def _on_tick(self) -> None:
        box = next((w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()), None)
        if box is None:
            QTimer.singleShot(10, self._on_tick)
            return
        self.seen = box.text()
        next(b for b in box.buttons() if b.text() == self.text).click()


def test_empty_library_says_what_to_do_and_shows_the_disk(qtbot):
    page = make_page(qtbot)
    assert page.table.rowCount() == 0
    assert "Download one from Discover" in page.details.text()
    usage = page.usage_label.text()
    assert "0 models" in usage and str(settings.models_dir()) in usage and "free of" in usage
    assert not page.load_button.isEnabled() and not page.delete_button.isEnabled()


def test_import_copy_lists_the_model_and_delete_frees_the_disk(qtbot, tiny_models):
    page = make_page(qtbot)
    run(qtbot, page, page.import_path, str(tiny_models.gguf_q8_0), True)
    assert "Imported" in page.status.text()
    [row] = row_texts(page)
    assert row[0] == "tiny-llama-Q8_0" and row[1:3] == ["GGUF", "Q8_0"] and row[4] == "llama"
    assert row[5] == "Imported (copy)" and row[3].endswith("MB")
    copied = settings.models_dir() / "local" / "tiny-llama-Q8_0" / "tiny-llama-Q8_0.gguf"
    assert copied.is_file() and tiny_models.gguf_q8_0.is_file()
    page.table.selectRow(0)
    assert page.load_button.isEnabled() and str(copied) in page.details.text()
    answer = DialogAnswer("Delete")
    with qtbot.waitSignal(page.changed, timeout=30_000):
        page.delete_button.click()
    assert "will be deleted, freeing" in answer.seen
    assert not copied.exists() and tiny_models.gguf_q8_0.is_file()  # the original was never touched
    assert page.table.rowCount() == 0 and "freed" in page.status.text()


def test_cancelled_delete_keeps_everything(qtbot, tiny_models):
    page = make_page(qtbot)
    run(qtbot, page, page.import_path, str(tiny_models.gguf_q8_0), True)
    page.table.selectRow(0)
    DialogAnswer("Cancel")
    page.delete_button.click()
    assert page.table.rowCount() == 1 and (settings.models_dir() / "local" / "tiny-llama-Q8_0").is_dir()


def test_in_place_and_watched_models_are_never_deleted(qtbot, tiny_models, tmp_path):
    folder = tmp_path / "usb"
    folder.mkdir()
    shutil.copy(tiny_models.gguf_q4_k_m, folder)
    page = make_page(qtbot)
    run(qtbot, page, page.watch, str(folder))
    assert "1 model found" in page.status.text()
    [row] = row_texts(page)
    assert row[2] == "Q4_K_M" and row[5] == f"Watched folder · {folder}"
    entry = page.entries[0]
    text, frees = delete_question(entry)
    assert not frees and "deletes no files" in text and "listed again" in text
    page.table.selectRow(0)
    DialogAnswer("Remove from library")
    with qtbot.waitSignal(page.changed, timeout=30_000):
        page.delete_button.click()
    assert (folder / tiny_models.gguf_q4_k_m.name).is_file()
    assert "left where they are" in page.status.text()


def test_hf_cache_models_are_listed_with_repo_and_commit(qtbot, tiny_models):
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = config.hf_hub_cache() / "models--someone--tiny-GGUF" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    shutil.copy(tiny_models.gguf_q8_0, snapshot / "tiny-Q8_0.gguf")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(commit)
    page = make_page(qtbot)
    [row] = row_texts(page)
    assert row[5] == "Hugging Face cache · someone/tiny-GGUF @ 0123456"
    text, frees = delete_question(page.entries[0])
    assert not frees and "hf cache delete" in text


def test_a_bad_import_is_a_sentence_and_changes_nothing(qtbot, tmp_path):
    page = make_page(qtbot)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model")
    run(qtbot, page, page.import_path, str(notes), True)
    assert "not a model file QuantDesk can import" in page.status.text()
    assert page.table.rowCount() == 0 and notes.read_text() == "not a model"
    assert page.import_file_button.isEnabled()


class UrlCatcher(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


def test_open_folder_and_load_into_the_chat(qtbot, make_window, tiny_models):
    engine = EngineDouble()
    window = make_window(engine)
    page = window.library
    qtbot.waitUntil(lambda: not page.busy, timeout=30_000)
    run(qtbot, page, page.import_path, str(tiny_models.gguf_q8_0), False)
    page.table.selectRow(0)
    catcher = UrlCatcher()
    QDesktopServices.setUrlHandler("file", catcher, "open")
    try:
        page.open_button.click()
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [u.toLocalFile() for u in catcher.urls] == [str(tiny_models.gguf_q8_0.parent)]
    window.show_page("Library")
    with qtbot.waitSignal(window.bridge.loaded, timeout=60_000):
        page.load_button.click()
    assert window.current_page == "Chat"
    assert engine.loads[-1][0] == str(tiny_models.gguf_q8_0)
    assert window.chat.model_bar.estimate_label.text().startswith("Estimated")


def test_a_reranker_and_an_embedding_model_are_named_beside_their_architecture(qtbot, tiny_models,
                                                                               tiny_embedding_model,
                                                                               tiny_reranker_model):
    page = make_page(qtbot)
    for model in (tiny_models.gguf_q8_0, tiny_embedding_model, tiny_reranker_model):
        run(qtbot, page, page.import_path, str(model), False)
    by_name = {row[0]: row[4] for row in row_texts(page)}
    assert by_name == {"tiny-llama-Q8_0": "llama", "tiny-llama-embedding-F16": "llama · embeddings",
                       "tiny-qwen3-reranker-F16": "qwen3 · reranker"}
