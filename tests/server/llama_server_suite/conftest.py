"""The engines the ported llama-server tests run on: loaded once for the suite, shared by every server a test
starts (as the app's engine is shared by the servers the Server page starts and stops)."""

from __future__ import annotations

import pytest

from app.datatypes import LoadSettings
from app.engine.client import EngineClient
from tests.server.llama_server_suite import utils

N_CTX = 1024  # upstream's tinyllama2 preset has 512 per slot; room here for the tool declarations of Qwen 2.5's template


@pytest.fixture(scope="package")
def _suite_engines(tiny_tool_model, tiny_embedding_model, tiny_reranker_model):
    with EngineClient() as chat, EngineClient() as embedding, EngineClient() as rerank:
        chat.load(tiny_tool_model, LoadSettings(n_ctx=N_CTX))
        embedding.load(tiny_embedding_model, LoadSettings(n_ctx=512))
        rerank.load(tiny_reranker_model, LoadSettings(n_ctx=N_CTX))
        utils.ENGINES.update(chat=chat, embedding=embedding, rerank=rerank)
        yield utils.ENGINES
        utils.ENGINES.clear()


@pytest.fixture(autouse=True)
def _servers(_suite_engines):
    yield
    utils.stop_all()
    assert all(engine.alive for engine in _suite_engines.values()), "a server took its engine host down"
