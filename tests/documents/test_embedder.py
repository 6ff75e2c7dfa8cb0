"""Embeddings through the real engine host: the tiny GGUF embedding model (mean pooling) loaded into a real
``ModelPool``, batches, texts longer than the model takes cut to fit, the library's embedding models."""

from __future__ import annotations

import math

import pytest

from app.documents.embedder import LOAD_SETTINGS, client_embedder, embedding_models, is_embedding_model, pool_embedder
from app.documents.passages import DocumentsError
from app.engine.pool import ModelPool
from app.hub.library import Library
from tests.fixtures.models import TINY

TEXTS = ["Local models run on laptops.", "The pump needs priming before the first start.", "Hello there!"]


@pytest.fixture(scope="module")
def pool(tiny_embedding_model):
    """A pool with the embedding model loaded already (its host is the module's, not a test's)."""
    with_pool = ModelPool()
    with_pool.release(with_pool.acquire(str(tiny_embedding_model), LOAD_SETTINGS))
    yield with_pool
    with_pool.close()


def test_the_pool_embedder_gives_unit_vectors_in_order_and_releases_the_model(pool, tiny_embedding_model):
    embedder = pool_embedder(pool, str(tiny_embedding_model))
    assert embedder.model == str(tiny_embedding_model)
    vectors = embedder.embed(TEXTS)
    assert len(vectors) == 3 and all(len(v) == TINY.n_embd for v in vectors)
    assert all(math.isclose(math.fsum(x * x for x in v), 1.0, rel_tol=1e-4) for v in vectors)
    alone = embedder.embed([TEXTS[1]])[0]
    assert max(abs(a - b) for a, b in zip(alone, vectors[1], strict=True)) < 1e-4
    held = pool.get(str(tiny_embedding_model))
    assert held is not None and held.users == 0  # loaded into the one pool, released after the batch
    assert embedder.embed([]) == []


def test_many_texts_go_in_several_requests(pool, tiny_embedding_model):
    embedder = pool_embedder(pool, str(tiny_embedding_model))
    embedder.batch_texts = 4
    texts = [f"Passage number {i} about pumps and priming." for i in range(10)]
    vectors = embedder.embed(texts)
    assert len(vectors) == 10 and len({tuple(v[:6]) for v in vectors}) == 10
    assert vectors[3] == pytest.approx(embedder.embed([texts[3]])[0], abs=1e-4)


def test_a_text_longer_than_the_model_takes_is_cut_to_fit(pool, tiny_embedding_model):
    embedder = pool_embedder(pool, str(tiny_embedding_model))
    long = " ".join(f"word{i} x{i % 7}" for i in range(3000))  # thousands of tokens: more than one batch of 512
    first_guess = embedder.max_chars
    vectors = embedder.embed(["short one", long, "", "another short one", "中文字符" * 1000])
    assert len(vectors) == 5 and all(len(v) == TINY.n_embd for v in vectors)
    assert embedder.cut >= 2
    # the engine said the first cut was still too long (the tiny tokenizer's tokens are short): cut again, and the
    # next texts start from what fitted
    assert embedder.max_chars < first_guess


def test_the_client_embedder_on_a_loaded_engine(tiny_embedding_model):
    from app.datatypes import LoadSettings
    from app.engine.client import EngineClient

    with EngineClient() as client:
        client.load(tiny_embedding_model, LoadSettings(n_ctx=512))
        embedder = client_embedder(client)
        assert embedder.model == str(tiny_embedding_model)
        assert len(embedder.embed(TEXTS)) == 3


def test_a_missing_model_is_a_sentence(pool, tmp_path):
    with pytest.raises(DocumentsError, match="is not there"):
        pool_embedder(pool, str(tmp_path / "gone.gguf"))


def test_the_library_shows_which_models_embed(tmp_path, tiny_models, tiny_embedding_model, tiny_reranker_model):
    assert is_embedding_model(tiny_embedding_model)
    assert not is_embedding_model(tiny_models.gguf_f16)
    assert not is_embedding_model(tmp_path / "missing.gguf")
    assert not is_embedding_model(tiny_reranker_model)  # rank pooling: a score, not a vector
    library = Library(tmp_path / "library")
    library.import_path(tiny_models.gguf_f16, copy=False)
    library.import_path(tiny_embedding_model, copy=False)
    library.import_path(tiny_reranker_model, copy=False)
    assert [entry.path for entry in embedding_models(library)] == [str(tiny_embedding_model)]
