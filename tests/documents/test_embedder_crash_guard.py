"""The documents' embedder through the crash guard: an engine host that aborts in its first decode after the load
(QUANTDESK_TEST_CRASH=reply, as llama.cpp's AMX kernels do on some Xeons) is revived in the safer configuration and
the batch is embedded as if nothing had happened."""

from __future__ import annotations

import pytest

from app.documents.embedder import pool_embedder
from app.engine import guard
from app.engine.pool import ModelPool

pytest.importorskip("llama_cpp")
TEXTS = ["Local models run on laptops.", "The pump needs priming before the first start."]


def test_a_crash_while_embedding_is_survived_with_the_same_vectors(monkeypatch, tiny_embedding_model):
    calm_pool = ModelPool()
    try:
        calm = pool_embedder(calm_pool, str(tiny_embedding_model)).embed(TEXTS)
    finally:
        calm_pool.close()
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", "reply")
    pool = ModelPool()
    try:
        embedder = pool_embedder(pool, str(tiny_embedding_model))
        vectors = embedder.embed(TEXTS)
        held = pool.get(str(tiny_embedding_model))
        assert held is not None and "crashed (SIGABRT) while embedding" in held.client.loaded.notice
        alone = embedder.embed(TEXTS[:1])[0]  # the revived engine goes on (one text alone: a batch rounds otherwise)
        assert max(abs(a - b) for a, b in zip(alone, vectors[0], strict=True)) < 1e-4
    finally:
        pool.close()
    assert max(abs(a - b) for v, w in zip(vectors, calm, strict=True) for a, b in zip(v, w, strict=True)) < 1e-5
    assert [e.rung for e in guard.learned()] == [guard.NO_EXTRA_BUFFER_TYPES]
