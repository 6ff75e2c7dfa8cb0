"""The user's documents as the window holds them (issue 28): one ``DocumentStore`` and one ``Indexer`` (app/documents)
for the Documents page and the Chat, made on first use; the indexer's thread embeds through the app's model pool
(the Chat's bridge's), and its progress reaches the GUI thread as a queued signal, the newest per collection, never
touching a widget from the indexer's thread.

The window makes it after its first paint and starts the indexer then only when a collection has work (files not yet
indexed, chunks without a vector, a watched folder); the Documents page and the Chat's "Attach files…" start it too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal, Slot

from app.ui.common.background import QuietAtQuit

if TYPE_CHECKING:
    from app.documents.indexer import Indexer, IndexProgress
    from app.documents.store import Collection, DocumentStore
    from app.ui.chat.engine_bridge import EngineBridge

CHAT_COLLECTION = "chat-{id}"  # the collection of the files attached to one chat


def chat_collection(conversation_id: int) -> str:
    return CHAT_COLLECTION.format(id=conversation_id)


def embedding_model_choices() -> list[tuple[str, str]]:
    """The library's embedding models (app/documents/embedder.py: GGUFs declaring a pooling) as (name, path)."""
    from app.documents.embedder import embedding_models

    return [(entry.name, entry.path) for entry in embedding_models()]


def has_work(collection: Collection) -> bool:
    """Whether the indexer has something to do for ``collection``: files not read yet, chunks its embedding model
    has not embedded, or a folder to watch; a paused collection has none."""
    if collection.paused:
        return False
    return bool(collection.folder) or collection.pending > 0 or (
        collection.embed_model is not None and collection.embedded < collection.chunks)


class DocumentsService(QuietAtQuit):
    """The store and the indexer; ``progress`` (an IndexProgress, on the GUI thread) and ``changed`` (collections
    added, removed or changed here) are for the page and the Chat."""

    progress = Signal(object)  # app.documents.indexer.IndexProgress, the newest of its collection
    changed = Signal()
    _pending = Signal()  # the indexer's thread has progress waiting (queued to the GUI thread)

    def __init__(self, bridge: EngineBridge | None = None, path: Path | str | None = None) -> None:
        super().__init__()
        self._bridge = bridge
        self._path = path
        self._store: DocumentStore | None = None
        self._indexer: Indexer | None = None
        self._lock = threading.Lock()
        self._waiting: dict[str, IndexProgress] = {}
        self.latest: dict[str, IndexProgress] = {}  # each collection's newest progress, for a page built later
        self._pending.connect(self._deliver)

    @property
    def store(self) -> DocumentStore:
        if self._store is None:
            from app.documents.store import DocumentStore

            self._store = DocumentStore(self._path)
        return self._store

    @property
    def indexer(self) -> Indexer:
        """The one indexer, started on first use."""
        if self._indexer is None:
            from app.documents.indexer import Indexer
            from app.settings import load

            settings = load()  # the largest file read and how often a watched folder is scanned (Settings)
            self._indexer = Indexer(self.store, self._make_embedder, on_progress=self._on_progress,
                                    watch_every_s=settings.documents_watch_seconds,
                                    max_bytes=settings.documents_max_file_mb * 2**20).start()
        return self._indexer

    @property
    def started(self) -> bool:
        return self._indexer is not None

    def start_if_work(self) -> bool:
        """Start the indexer when a collection has work (after the window's first paint); True when it runs."""
        if self._indexer is None and any(has_work(c) for c in self.store.collections()):
            self.indexer  # noqa: B018 - made and started here
        return self._indexer is not None

    def _make_embedder(self, model: str) -> Any:
        """An embedder through the app's model pool (the Chat's): the embedding model loads beside the chat's
        models, within the same budget. Called on the indexer's thread."""
        from app.documents.embedder import pool_embedder
        from app.documents.passages import DocumentsError

        bridge = self._bridge
        if bridge is None:
            raise DocumentsError("no engine to embed with")
        bridge.client  # noqa: B018 - the app's pool is made by its first use
        if bridge.pool is None:
            raise DocumentsError("embeddings need the app's model pool")
        return pool_embedder(bridge.pool, model)

    # --- what the page and the Chat ask ----------------------------------------------------------

    def add_folder(self, name: str, folder: Path, embed_model: str | None = None) -> Collection:
        collection = self.store.create_collection(name, folder=folder, embed_model=embed_model)
        self._changed_and_index(collection.name)
        return collection

    def add_files(self, name: str, paths: Sequence[Path], embed_model: str | None = None) -> Collection:
        """Files added by hand to ``name``, made on demand (a chat's own collection: ``chat_collection``)."""
        from app.documents.passages import DocumentsError

        try:
            self.store.collection(name)
        except DocumentsError:
            self.store.create_collection(name, embed_model=embed_model)
        self.store.add_paths(name, list(paths))
        self._changed_and_index(name)
        return self.store.collection(name)

    def set_embed_model(self, name: str, model: str | None) -> None:
        self.store.set_embed_model(name, model)
        self._changed_and_index(name)

    def pause(self, name: str) -> None:
        if self._indexer is not None:
            self._indexer.pause(name)
        else:
            self.store.set_paused(name, True)
        self.changed.emit()

    def resume(self, name: str) -> None:
        self.indexer.resume(name)  # kept in the database too
        self.changed.emit()

    def remove(self, name: str) -> None:
        if self._indexer is not None:
            self._indexer.forget(name)  # its work stops before its rows go
        self.store.remove_collection(name)
        with self._lock:
            self._waiting.pop(name, None)
        self.latest.pop(name, None)
        self.changed.emit()

    def _changed_and_index(self, name: str) -> None:
        self.changed.emit()
        self.indexer.index(name)

    # --- progress, from the indexer's thread to the GUI's -----------------------------------------

    def _on_progress(self, progress: IndexProgress) -> None:
        """Any thread: keep the newest per collection; one queued signal stands for any number of them."""
        with self._lock:
            signal = not self._waiting
            self._waiting[progress.collection] = progress
        if signal:
            self.emit_from_worker("_pending")

    @Slot()
    def _deliver(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for progress in waiting:
            self.latest[progress.collection] = progress
            self.progress.emit(progress)

    def shutdown(self) -> None:
        """Stop the indexer (what it wrote is kept: the next start goes on where it stopped) and close the store."""
        if self._indexer is not None:
            self._indexer.close()
            self._indexer = None
        if self._store is not None:
            self._store.close()
            self._store = None
