"""The Chat with documents (issue 28), on real engines: a PDF attached to a chat becomes the chat's own collection,
indexed in the background with the tiny embedding model through the Chat's own model pool; a question is answered
with the passages found (the page that holds its phrase first), the reply keeps them as its citations and shows them
as chips, a chip opens the passage (file, page, text) in the side panel, and the context meter says their share. A
collection of the Documents page is attached with "Use a collection…" and detached with its chip's button."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.engine.pool import ModelPool, PoolLimits
from app.hub.library import Library
from app.ui.chat.engine_bridge import EngineBridge
from app.datatypes import LoadSettings
from tests.fixtures.documents import page_phrase, write_markdown, write_text_pdf

pytest.importorskip("llama_cpp")

PAGES = 12  # more than the passages' share of a 2048-token context holds: the question's page is searched for


@pytest.fixture
def pool_window(build_window):
    """A window whose Chat runs on its own model pool, as the app's does (the embedding model loads beside)."""
    return lambda: build_window(EngineBridge.over(lambda: ModelPool(PoolLimits(max_loaded=3))))


def indexed(service, name: str) -> bool:
    collection = service.store.collection(name)
    return collection.files > 0 and collection.pending == 0 and collection.chunks > 0 and (
        collection.embed_model is None or collection.embedded == collection.chunks)


def test_attach_a_pdf_ask_and_open_the_cited_passage(qtbot, pool_window, tiny_models, tiny_embedding_model,
                                                     tmp_path):
    [embedding] = Library().import_path(tiny_embedding_model, copy=False)  # the library's embedding model
    # Short pages: the tiny model's tokenizer spends about a token a character, and a page is one passage.
    pdf = write_text_pdf(tmp_path / "docs" / "guide.pdf", PAGES, tag="guide", words_per_page=40)
    window = pool_window()
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=2048, gpu_layers=0))
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 8, "seed": 1})

    assert chat.documents.attach_files([pdf])
    name = f"chat-{chat.current.id}"
    assert chat.current.documents == (name,) and chat.store.conversation(chat.current.id).documents == (name,)
    assert chat.documents.strip.isVisible() and chat.documents.strip.names == (name,)
    service = window.documents_service()
    assert service.store.collection(name).embed_model == embedding.path
    qtbot.waitUntil(lambda: indexed(service, name), timeout=180_000)  # in the background: the window stays live

    question = f"Where does it say {page_phrase(2, 'guide')}?"
    with qtbot.waitSignal(window.bridge.done, timeout=120_000):
        qtbot.keyClicks(chat.composer, question)
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    reply = chat.store.messages(chat.current.id)[-1]
    assert reply.role == "assistant" and reply.citations
    assert [c["number"] for c in reply.citations] == list(range(1, len(reply.citations) + 1))
    assert len(reply.citations) < PAGES  # not pasted whole: the collection is larger than its share
    first = reply.citations[0]
    assert (first["page"], first["path"], first["where"]) == (2, str(pdf), "guide.pdf, page 2")
    assert page_phrase(2, "guide") in first["text"]
    # The meter: what the passages took of the context.
    meter = chat.model_bar.context_meter
    assert meter.use is not None and 0 < meter.use.documents < meter.use.used
    assert "· documents " in meter.label.text()

    bubble = chat.view.bubble(reply.id)
    chips = bubble.citation_chips
    assert chips is not None and chips.isVisible() and chips.chips[0].text() == "[1] guide.pdf · page 2"
    panel = chat.documents.panel
    assert panel.isHidden()
    qtbot.mouseClick(chips.chips[0], Qt.MouseButton.LeftButton)
    assert panel.isVisible() and panel.title.text() == "[1] guide.pdf"
    assert panel.where.text() == f"page 2 · collection “{name}”"
    assert page_phrase(2, "guide") in panel.text.toPlainText() and panel.open_button.isEnabled()
    qtbot.wait(20)
    window.grab().save(str(tmp_path / "chat_documents.png"))

    # Reopened from the store, the reply shows the same chips; another chat has no passage open.
    other = chat.store.create_conversation("other")
    chat.open_conversation(other.id)
    assert panel.isHidden() and chat.documents.strip.isHidden()
    chat.open_conversation(reply.conversation_id)
    reopened = chat.view.bubble(reply.id).citation_chips
    assert reopened is not None and [c.text() for c in reopened.chips] == [c.text() for c in chips.chips]
    assert chat.documents.strip.names == (name,)

    # Detached: the next question is answered without passages.
    chat.documents.strip.remove_buttons[0].click()
    assert chat.store.conversation(chat.current.id).documents == () and chat.documents.strip.isHidden()
    with qtbot.waitSignal(window.bridge.done, timeout=120_000):
        qtbot.keyClicks(chat.composer, "And now?")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert chat.store.messages(chat.current.id)[-1].citations == ()
    assert chat.model_bar.context_meter.use.documents == 0

    # The chat deleted for good (its undo lapsed): the index of its own files goes with it, the file stays.
    chat.undo_bar.timer.setInterval(50)
    qtbot.mouseClick(chat.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.undo_bar.isVisible(), timeout=5_000)
    assert name not in [c.name for c in service.store.collections()] and pdf.exists()


def test_use_a_collection_of_the_documents_page(qtbot, real_window, tiny_models, tmp_path, monkeypatch):
    """A collection of the Documents page, searched by its words (no embedding model in the library), attached
    through "Use a collection…" (its picker answered as a user would) on a single engine."""
    notes = tmp_path / "notes"
    notes.mkdir()
    write_markdown(notes / "guide.md")
    window = real_window()
    chat = window.chat
    service = window.documents_service()
    service.add_folder("notes", notes)
    qtbot.waitUntil(lambda: indexed(service, "notes"), timeout=60_000)
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=1024, gpu_layers=0))
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 4, "seed": 1})

    from app.ui.chat import chat_documents

    class Picked(chat_documents.CollectionPicker):
        def exec(self) -> int:  # the user checks "notes" and presses OK
            assert [self.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.list.count())] == ["notes"]
            self.list.item(0).setCheckState(Qt.CheckState.Checked)
            return self.DialogCode.Accepted

    monkeypatch.setattr(chat_documents, "CollectionPicker", Picked)
    chat.documents.use_action.trigger()
    assert chat.current.documents == ("notes",) and chat.documents.strip.names == ("notes",)
    with qtbot.waitSignal(window.bridge.done, timeout=120_000):
        qtbot.keyClicks(chat.composer, "How are the options set?")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    reply = chat.store.messages(chat.current.id)[-1]
    assert reply.citations and reply.citations[0]["path"] == str(notes / "guide.md")
    assert any("md-options" in c["text"] for c in reply.citations)

    # Removed on the Documents page meanwhile: the question is answered without it, and the banner says why.
    service.remove("notes")
    with qtbot.waitSignal(window.bridge.done, timeout=120_000):
        qtbot.keyClicks(chat.composer, "And the options?")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    assert chat.store.messages(chat.current.id)[-1].citations == ()
    assert "The collection notes is no longer there (removed on the Documents page)." in chat.banner_text.text()


def test_the_librarys_reranker_orders_the_chats_passages(qtbot, pool_window, tiny_models, tiny_reranker_model):
    """With a reranker in the library, the Chat's passages are ordered by it through the Chat's pool (as the server
    and ``quantdesk chat --docs`` do): the citations' scores are the reranker's own."""
    from app.documents.passages import Chunk
    from app.engine.client import EngineClient

    Library().import_path(tiny_reranker_model, copy=False)
    window = pool_window()
    chat = window.chat
    store = window.documents_service().store
    store.create_collection("manuals")
    store.store_file("manuals", "/big.txt", size=10, mtime_ns=1, sha256="b", pages=0, chunks=[
        Chunk(f"Section {i}: the pump's valve {i} is checked yearly, and the button {i} is pressed. " * 3, i,
              line=1 + 9 * i) for i in range(40)])
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=2048, gpu_layers=0))
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 4, "seed": 1})
    assert chat.documents.use_collections(["manuals"])
    with qtbot.waitSignal(window.bridge.done, timeout=120_000):
        qtbot.keyClicks(chat.composer, "pump button")
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    citations = chat.store.messages(chat.current.id)[-1].citations
    assert len(citations) >= 2
    assert any(m.path == str(tiny_reranker_model) for m in window.bridge.pool.models())  # in the Chat's pool
    scores = [c["score"] for c in citations]
    assert scores == sorted(scores, reverse=True)
    with EngineClient() as reranker:  # the reranker's own scores for these passages, not the fusion's
        reranker.load(tiny_reranker_model, LoadSettings(n_ctx=2048))
        own = reranker.rerank("pump button", [c["text"] for c in citations]).scores
    assert scores == pytest.approx(list(own), abs=1e-4)


def test_documents_dropped_on_the_message_box_are_attached(qtbot, make_window, tmp_path):
    """A Markdown file and an image dropped together: the image waits for the next message as before, the document
    becomes the chat's own collection (its words searched: no embedding model in the library)."""
    from PySide6.QtCore import QMimeData, QUrl

    from tests.fixtures.models import write_test_png

    notes = write_markdown(tmp_path / "notes.md")
    picture = write_test_png(tmp_path / "picture.png")
    window = make_window()
    chat = window.chat
    chat.new_conversation()
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(notes)), QUrl.fromLocalFile(str(picture))])
    assert chat.composer.canInsertFromMimeData(dropped)
    chat.composer.insertFromMimeData(dropped)
    assert chat.composer.toPlainText() == ""  # no path typed into the message
    assert len(chat.attachments.images) == 1
    name = f"chat-{chat.current.id}"
    assert chat.current.documents == (name,)
    service = window.documents_service()
    qtbot.waitUntil(lambda: indexed(service, name), timeout=60_000)
    assert [p.path for p in service.store.collection_passages([name], 10)][0] == str(notes)
