"""Chat requests answered from the user's document collections: ``"quantdesk": {"documents": ["NAME", ...]}`` on
chat completions and Anthropic's Messages.

Before the job, the request's last user message is the question (app/documents/retrieve.py ``with_documents``): it
is searched by its words and, where a collection is embedded, by its meaning (the question embedded by the
collection's embedding model, loaded into the router's pool under its budget: ``embedder.pool_embedder``), and
reordered by the library's reranker when it has one (``rerank.pool_reranker``, the same pool); the
conversation as it will be sent is counted by the answering engine in its turn, the passages get their share of
what is left, and the message the engine reads carries them, numbered. The response's ``quantdesk`` field carries
``citations`` (each ``Citation.to_dict()``: number, file, page / heading / line, text, score) and ``documents``
(the collections, the passages' tokens, whether they were sent whole, notes), on a stream's first chunk. A name that
is no collection is a 400 naming it. Nothing leaves the machine.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from app.documents.passages import DocumentsError
from app.documents.retrieve import Retrieval, question_engines, with_documents
from app.documents.store import DocumentStore
from app.datatypes import Message, SamplingSettings
from app.engine.turn import Passages
from app.server.params import ApiError
from app.server.router import Lease, ModelRouter


@dataclasses.dataclass(frozen=True)
class Cited:
    """What a request's documents gave its answer, as the response reports it."""

    collections: tuple[str, ...]
    retrieval: Retrieval

    def field(self) -> dict[str, Any]:
        r = self.retrieval
        return {"citations": [c.to_dict() for c in r.citations],
                "documents": {"collections": list(self.collections), "tokens": r.tokens, "whole": r.whole,
                              "notes": list(r.notes)}}


class ServerDocuments:
    """The server's documents database (opened at its first use, under the user data folder unless ``path``)."""

    def __init__(self, router: ModelRouter, path: Path | str | None = None) -> None:
        self._router = router
        self._path = path
        self._store: DocumentStore | None = None
        self._lock = threading.Lock()

    def store(self) -> DocumentStore:
        with self._lock:
            if self._store is None:
                try:
                    self._store = DocumentStore(self._path)
                except DocumentsError as exc:
                    raise ApiError(503, f"the documents database cannot be opened: {exc}", type="server_error",
                                   code="documents_unavailable") from None
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def passages(self, lease: Lease, names: tuple[str, ...]) -> tuple[tuple[str, ...], Passages]:
        """The collections a request names, and its turn's documents step (app/engine/turn.py: the question's
        passages in the messages the engine reads, counted by the lease's engine; blocking, as the turn is). ApiError
        400 for a name that is no collection, now or when the step runs."""
        store = self.store()
        try:
            found = [store.collection(name) for name in names]
        except DocumentsError as exc:
            raise ApiError(400, f"{exc.message}: quantdesk.documents names the collections of quantdesk docs ls",
                           param="quantdesk.documents", code="collection_not_found") from None
        chosen = tuple(c.name for c in found)

        def step(messages: list[Message], sampling: SamplingSettings) -> tuple[list[Message], Retrieval]:
            embedder, reranker = question_engines(self._router.models, found)
            try:
                return with_documents(lease.queue.client, store, chosen, messages, sampling, lease.loaded.n_ctx,
                                      embedder=embedder, reranker=reranker)
            except DocumentsError as exc:  # a collection removed meanwhile
                raise ApiError(400, exc.message, param="quantdesk.documents",
                               code="collection_not_found") from None

        return chosen, step
