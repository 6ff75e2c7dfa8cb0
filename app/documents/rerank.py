"""A reranker GGUF as the documents' ``Reranker``: passages scored for a question through the one model pool.

A reranker is a GGUF whose header declares llama.cpp's rank pooling (``app.models.metadata.model_pooling`` says
"rank"; Qwen3-Reranker, bge-reranker as convert_hf_to_gguf writes them). Its engine host answers ``rerank`` requests
(app/engine/protocol.py ``RerankRequest``; backends/llama_cpp/rerank.py formats the question and each passage as
llama-server's ``/rerank`` does). ``pool_reranker`` holds the model in the ``ModelPool`` for each call only, as the
embedder does, so the pool's budget and idle unloads see it like any other model. ``find_reranker`` picks the
library's reranker, if it has one: retrieval reranks with it, and does without when there is none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.datatypes import LoadSettings
from app.documents.embedder import shortened_until_taken
from app.documents.passages import DocumentsError, Reranker
from app.errors import EngineError

if TYPE_CHECKING:
    from app.engine.pool import ModelPool
    from app.hub.library import Library

# The context a reranker loads with (or the model's own, when shorter): a question and one passage (the chunker's
# 1,200 characters) with the rerank template come to some hundreds of tokens; llama.cpp reads the pairs in batches as
# large as this context (app.models.estimate.RERANK_UBATCH), several pairs to a batch.
RERANK_CTX = 2048


@dataclass
class PoolReranker:
    """``Reranker`` through a ``ModelPool``: the model acquired (loaded if it is not) for each call, released after."""

    pool: ModelPool
    model: str
    settings: LoadSettings
    estimate_bytes: int = 0
    cut: int = 0  # passages cut to fit the reranker (counted for the tests and the log)

    def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's relevance to ``query``, in order. A passage longer than the reranker reads with the question
        is scored by its first part (cut on the engine's word, as the embedder cuts); the engine's other refusals
        (a model that is no reranker, a question longer than the reranker reads) raise EngineError in words."""
        if not texts:
            return []
        try:
            return self._call(query, list(texts))
        except EngineError as exc:
            if exc.kind != "context":
                raise
        self._call(query, ["."])  # raises (in words) where the question itself is too long: no passage would fit
        return [self._one(query, text) for text in texts]  # which passage is too long: each alone, cut until it fits

    def _one(self, query: str, text: str) -> float:
        score, _, cuts = shortened_until_taken(lambda t: self._call(query, [t])[0], text, len(text))
        self.cut += cuts
        return score

    def _call(self, query: str, texts: list[str]) -> list[float]:
        held = self.pool.acquire(self.model, self.settings, estimate_bytes=self.estimate_bytes)
        try:
            return list(held.client.rerank(query, texts).scores)
        finally:
            self.pool.release(held)


def pool_reranker(pool: ModelPool, model_path: str, *, settings: LoadSettings | None = None) -> Reranker:
    """The reranker GGUF at ``model_path`` through ``pool``. DocumentsError, in words, for a model that is no
    reranker (a chat or embedding model: its GGUF declares no rank pooling) or cannot be read."""
    from app.errors import QuantDeskError
    from app.models.metadata import read_model

    try:
        meta = read_model(model_path)
    except QuantDeskError as exc:
        raise DocumentsError(f"the reranker {model_path} cannot be read: {exc}") from None
    if meta.pooling != "rank":
        what = f"an embedding model ({meta.pooling} pooling)" if meta.pooling else "a chat model (no pooling)"
        raise DocumentsError(f"{meta.name or model_path} is not a reranker: its GGUF declares {what}, not rank "
                             "pooling", "choose a reranker GGUF (quantdesk inspect shows its pooling: rank)")
    if settings is None:
        n_ctx = min(RERANK_CTX, meta.context_length) if meta.context_length else RERANK_CTX
        settings = LoadSettings(n_ctx=n_ctx)
    return PoolReranker(pool, model_path, settings, meta.weights_bytes)


def rerankers(library: Library | None = None) -> list[str]:
    """The paths of the library's reranker GGUFs (rank pooling), in the library's order (the oldest first)."""
    from app.hub.library import Library
    from app.models.metadata import model_pooling

    entries = (library or Library()).entries(refresh=False)
    return [e.path for e in entries if e.format == "gguf" and model_pooling(e.path) == "rank"]


def find_reranker(library: Library | None = None) -> str | None:
    """The library's reranker GGUF (the first added, when it holds several), or None when it has none."""
    found = rerankers(library)
    return found[0] if found else None
