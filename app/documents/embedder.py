"""Embeddings of passages and questions through the engine host: the embedding model is a model of the process's one
``ModelPool`` (app/engine/pool.py), acquired for each batch and released after, so it shares the memory budget,
the eviction and the idle unload with the Chat's and the server's models, and the engine host keeps llama.cpp out of
the GUI's process. ``embedding_models`` says which of the library's models embed (their GGUF declares a pooling).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from app.datatypes import LoadSettings
from app.documents.passages import DocumentsError, Embedder
from app.engine.client import EngineClientLike
from app.engine.pool import ModelPool
from app.errors import EngineError
from app.hub.library import Library, LibraryEntry
from app.models.metadata import model_pooling

log = logging.getLogger(__name__)
T = TypeVar("T")

# The poolings that give a vector (app.models.metadata.model_pooling's names); "rank" is a reranker's score.
EMBEDDING_POOLINGS = ("mean", "cls", "last")
# Texts per engine request: llama.cpp packs them into batches of its own (n_batch tokens); a request of this many
# passages keeps one request's work (and a pause's wait) around a second on a small model on a CPU.
BATCH_TEXTS = 32
# What an embedding model takes at once by default: llama.cpp's n_batch (512 tokens, the limit of one text). A
# text is cut to this many tokens' worth of characters before it is sent, and cut further if the engine says it
# is still too long.
DEFAULT_TOKENS = 512
CHARS_PER_TOKEN = 3  # a conservative guess for prose; code and other scripts are cut again on the engine's word
LOAD_SETTINGS = LoadSettings(n_ctx=2048)


def is_embedding_model(path: str | Path) -> bool:
    """Whether the GGUF at ``path`` declares a pooling that gives a vector (read from its header once per process)."""
    return model_pooling(path) in EMBEDDING_POOLINGS


def embedding_models(library: Library | None = None, *, refresh: bool = False) -> list[LibraryEntry]:
    """The library's models that embed: GGUFs whose header declares a pooling that gives a vector (mean, CLS,
    last; not a reranker's rank). Headers are read once per process (app.models.metadata)."""
    library = library or Library()
    return [entry for entry in library.entries(refresh=refresh)
            if entry.format == "gguf" and is_embedding_model(entry.path)]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [float(x) / norm for x in vector] if norm > 0 else [float(x) for x in vector]


def shortened_until_taken(call: Callable[[str], T], text: str, max_chars: int) -> tuple[T, int, int]:
    """``call`` on ``text`` cut to ``max_chars``, cut by a quarter more each time the engine says it is longer than
    the model reads (EngineError "context"): the answer, the ``max_chars`` it was taken at, and the cuts it took. A
    passage's first part stands for it (the embedder's and the reranker's rule)."""
    cuts = 0
    while True:
        text = text[:max_chars]
        try:
            return call(text), max_chars, cuts
        except EngineError as exc:
            if exc.kind != "context" or len(text) <= 16:
                raise
            cuts += 1
            max_chars = len(text) * 3 // 4


class EngineEmbedder:
    """An ``Embedder`` over an engine: ``call(texts)`` runs one engine request (through the pool, or one client)."""

    def __init__(self, model: str, call: Callable[[list[str]], list[list[float]]], *,
                 max_tokens: int = DEFAULT_TOKENS, batch_texts: int = BATCH_TEXTS) -> None:
        self.model = model
        self._call = call
        self.max_chars = max(16, max_tokens * CHARS_PER_TOKEN)
        self.batch_texts = batch_texts
        self.cut = 0  # texts cut to fit the model (counted for the tests and the log)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Each text's vector, unit length, in order; batches of ``batch_texts``, each text within the model's
        context (cut where longer: a passage's first part stands for it)."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_texts):
            batch = [self._fit(t) for t in texts[start:start + self.batch_texts]]
            try:
                vectors = self._call(batch)
            except EngineError as exc:
                if exc.kind != "context":
                    raise
                vectors = [self._one(text) for text in batch]  # which text is too long: each alone, cut until it fits
            if len(vectors) != len(batch):
                raise DocumentsError(f"the embedding model {Path(self.model).name} gave {len(vectors)} vectors for "
                                     f"{len(batch)} texts")
            out.extend(_unit(v) for v in vectors)
        return out

    def _fit(self, text: str) -> str:
        text = text if text.strip() else "."  # an empty text is no request: the engine refuses it
        if len(text) > self.max_chars:
            self.cut += 1
            return text[:self.max_chars]
        return text

    def _one(self, text: str) -> list[float]:
        # from what fitted before (the next texts start from here): not each text of a batch from its full length
        vector, self.max_chars, cuts = shortened_until_taken(lambda t: self._call([t])[0], text, self.max_chars)
        self.cut += cuts
        return vector


def pool_embedder(pool: ModelPool, model_path: str, *, settings: LoadSettings = LOAD_SETTINGS) -> EngineEmbedder:
    """An ``Embedder`` whose model is loaded into ``pool`` (under its budget; an estimate of the file's size) and
    held for each batch, released after: between batches the pool may unload it for the Chat's model."""
    try:
        estimate = Path(model_path).stat().st_size
    except OSError as exc:
        raise DocumentsError(f"the embedding model {model_path} is not there", "choose another one") from exc

    def call(texts: list[str]) -> list[list[float]]:
        model = pool.acquire(model_path, settings, estimate_bytes=estimate)
        try:
            return model.client.embed(texts).vectors
        finally:
            pool.release(model)

    return EngineEmbedder(model_path, call, max_tokens=min(DEFAULT_TOKENS, settings.n_ctx))


def client_embedder(client: EngineClientLike) -> EngineEmbedder:
    """An ``Embedder`` over one engine client that has its embedding model loaded (a test's engine, a script)."""
    loaded = client.loaded
    if loaded is None or not loaded.details.get("embedding"):
        raise DocumentsError("the loaded model is not an embedding model (its GGUF declares no pooling)",
                             "choose an embedding model")
    return EngineEmbedder(loaded.model_path, lambda texts: client.embed(texts).vectors,
                          max_tokens=min(DEFAULT_TOKENS, loaded.n_ctx))


__all__ = ["Embedder", "EngineEmbedder", "client_embedder", "embedding_models", "is_embedding_model", "pool_embedder",
           "shortened_until_taken"]
