"""/v1/rerank (and llama-server's other names for it) over httpx against the real server on a tiny Qwen3-Reranker GGUF
(rank pooling): Jina's and Cohere's shape, TEI's, top_n, documents returned, refusals in words (llama-server's own
tests of the route: tests/server/llama_server_suite/test_rerank.py)."""

from __future__ import annotations

import math

import httpx
import pytest

from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine

QUERY = "which animal jumps over the dog?"
DOCS = ["The quick brown fox jumps over the lazy dog.", "Quantization trades a little quality for less memory.",
        "Hello! How are you today?"]


@pytest.fixture(scope="module")
def rerank_engine(tiny_reranker_model):
    yield from loaded_engine(tiny_reranker_model, n_ctx=1024)


@pytest.fixture
def api(rerank_engine):
    with ServerThread(create_app(rerank_engine)) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        yield client, model_id(rerank_engine.loaded.model_path)


def test_the_documents_come_back_best_first_with_the_engines_scores(api, rerank_engine):
    client, name = api
    reply = client.post("/v1/rerank", json={"model": name, "query": QUERY, "documents": DOCS})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["model"] == name and body["object"] == "list"
    scores = [r["relevance_score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and sorted(r["index"] for r in body["results"]) == [0, 1, 2]
    engine = rerank_engine.rerank(QUERY, DOCS)
    for result in body["results"]:
        assert math.isclose(result["relevance_score"], engine.scores[result["index"]], abs_tol=1e-6)
        assert "document" not in result
    assert body["usage"] == {"prompt_tokens": engine.prompt_tokens, "total_tokens": engine.prompt_tokens}
    for path in ("/rerank", "/v1/reranking", "/reranking"):  # llama-server's other names for the route
        again = client.post(path, json={"query": QUERY, "documents": DOCS})
        assert again.status_code == 200 and again.json()["results"] == body["results"]


def test_top_n_and_the_documents_returned_in_jinas_and_cohere_s_shape(api):
    client, name = api
    whole = client.post("/v1/rerank", json={"query": QUERY, "documents": DOCS}).json()["results"]
    best = client.post("/v1/rerank", json={"query": QUERY, "documents": [{"text": d} for d in DOCS], "top_n": 2,
                                           "return_documents": True}).json()["results"]
    assert [r["index"] for r in best] == [r["index"] for r in whole[:2]]
    assert [r["document"] for r in best] == [{"text": DOCS[r["index"]]} for r in best]


def test_tei_s_shape_a_bare_list_with_score_and_text(api):
    client, _ = api
    reply = client.post("/rerank", json={"query": QUERY, "texts": DOCS, "return_text": True, "top_n": 1})
    assert reply.status_code == 200
    [best] = reply.json()
    assert set(best) == {"index", "score", "text"} and best["text"] == DOCS[best["index"]]


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"documents": DOCS}, "query", "query must be provided"),
    ({"query": QUERY, "documents": []}, "documents", "non-empty list of strings"),
    ({"query": QUERY, "documents": [1, 2]}, "documents", "non-empty list of strings"),
    ({"query": QUERY, "documents": DOCS, "top_n": 0}, "top_n", "top_n must be 1 or more"),
    ({"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "return_documents", "true or false"),
])
def test_bad_requests_are_400s_in_words_and_the_engine_goes_on(api, body, param, words):
    client, _ = api
    reply = client.post("/v1/rerank", json=body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == param and words in error["message"]
    assert client.post("/v1/rerank", json={"query": QUERY, "documents": DOCS[:1]}).status_code == 200


def test_a_document_longer_than_the_reranker_reads_is_a_400_in_words(api):
    client, _ = api
    reply = client.post("/v1/rerank", json={"query": QUERY, "documents": [DOCS[0], "word " * 2000]})
    assert reply.status_code == 400
    assert "tokens together, but this reranker reads at most 1024" in reply.json()["error"]["message"]


def test_a_chat_model_refuses_to_rerank_and_a_reranker_to_embed(api, server, model_name):
    client, name = api
    reply = client.post("/v1/embeddings", json={"model": name, "input": "hi"})
    assert reply.status_code == 400 and "is not an embedding model (a reranker: ask /v1/rerank)" in reply.text
    reply = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert reply.status_code == 400 and "is a reranker: it scores passages, it makes no replies" in reply.text
    refused = httpx.post(f"{server.url}/v1/rerank", json={"model": model_name, "query": QUERY, "documents": DOCS},
                         timeout=60)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "not_a_reranker"
    assert "is not a reranker: it is a chat model" in refused.json()["error"]["message"]
