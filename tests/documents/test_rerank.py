"""The reranker on the real engine: a tiny Qwen3-Reranker GGUF (rank pooling, a yes/no head, the rerank template, as
convert_hf_to_gguf writes one) loaded by llama.cpp in an engine host, through the one model pool; the GGUF told apart
from an embedding model by its header; refusals in words."""

from __future__ import annotations

import json
import math

import pytest

from app.datatypes import LoadSettings, Message, Reranked
from app.documents.passages import DocumentsError
from app.documents.rerank import find_reranker, pool_reranker, rerankers
from app.engine import protocol
from app.engine.client import EngineClient
from app.engine.pool import ModelPool, PoolLimits
from app.errors import EngineError
from app.models.metadata import model_pooling, read_model

QUERY = "which animal jumps over the dog?"
DOCS = ["The quick brown fox jumps over the lazy dog.", "Quantization trades a little quality for less memory.",
        "Hello! How are you today?", "def main():\n    print('hello, world')"]


@pytest.fixture(scope="module")
def rerank_engine(tiny_reranker_model):
    with EngineClient() as client:
        client.load(tiny_reranker_model, LoadSettings(n_ctx=1024))
        yield client


@pytest.fixture
def pool():
    models = ModelPool(PoolLimits(budget_bytes=1 << 40, max_loaded=2))
    yield models
    models.close()


def test_the_gguf_declares_rank_pooling_and_the_load_reports_a_reranker(tiny_reranker_model, tiny_embedding_model,
                                                                        tiny_models, rerank_engine):
    assert read_model(tiny_reranker_model).pooling == "rank"
    assert read_model(tiny_reranker_model).summary()["pooling"] == "rank"
    assert (model_pooling(tiny_reranker_model), model_pooling(tiny_embedding_model),
            model_pooling(tiny_models.gguf_f16)) == ("rank", "mean", "")
    details = rerank_engine.loaded.details
    assert details["reranker"] is True and details["pooling"] == "rank"
    assert details["rerank_outputs"] == 2 and details["rerank_template"] == "model"
    assert "embedding" not in details  # /v1/embeddings and the embedder do not take it for an embedding model


def test_each_text_gets_a_score_in_order_the_same_alone_in_a_batch_and_again(rerank_engine):
    together = rerank_engine.rerank(QUERY, DOCS)
    assert isinstance(together, Reranked) and len(together.scores) == len(DOCS)
    assert all(0.0 < s < 1.0 for s in together.scores)  # Qwen3-Reranker's P("yes"): llama.cpp's softmax of the head
    assert len({round(s, 4) for s in together.scores}) == len(DOCS)  # the texts are told apart
    assert together.prompt_tokens > len(DOCS) * 100  # each text in the rerank template, with the question
    again = rerank_engine.rerank(QUERY, DOCS)
    assert again.scores == together.scores
    alone = [rerank_engine.rerank(QUERY, [doc]).scores[0] for doc in DOCS]
    backwards = rerank_engine.rerank(QUERY, DOCS[::-1]).scores[::-1]
    for score, one, reversed_batch in zip(together.scores, alone, backwards, strict=True):
        assert math.isclose(score, one, abs_tol=1e-3)  # sequences of one batch do not see each other
        assert math.isclose(score, reversed_batch, abs_tol=1e-3)
    order = sorted(range(len(DOCS)), key=lambda i: -together.scores[i])
    assert order == sorted(range(len(DOCS)), key=lambda i: -alone[i])  # the ranking does not depend on the batch
    other = rerank_engine.rerank("how much memory does a quant save?", DOCS)
    assert other.scores != together.scores  # the question counts
    assert rerank_engine.rerank(QUERY, []).scores == []


def test_more_texts_than_one_batch_holds_are_scored_in_several(rerank_engine):
    many = [f"{doc} ({i})" for i, doc in enumerate(DOCS * 3)]  # ~210 tokens each: 12 of them need three batches
    scores = rerank_engine.rerank(QUERY, many).scores
    assert len(scores) == len(many)
    for i, score in enumerate(scores):
        assert math.isclose(score, rerank_engine.rerank(QUERY, [many[i]]).scores[0], abs_tol=1e-3)


def test_a_text_longer_than_the_context_is_refused_in_words_and_the_engine_goes_on(rerank_engine):
    with pytest.raises(EngineError) as refused:
        rerank_engine.rerank(QUERY, [DOCS[0], "word " * 2000])
    assert refused.value.kind == "context"
    assert "tokens together" in str(refused.value) and "at most 1024" in str(refused.value)
    assert len(rerank_engine.rerank(QUERY, DOCS[:1]).scores) == 1


def test_a_reranker_makes_no_embeddings_and_no_replies(rerank_engine):
    with pytest.raises(EngineError, match="is a reranker: it scores passages for a question, it makes no embeddings"):
        rerank_engine.embed(["hello"])
    with pytest.raises(EngineError, match="is a reranker: it scores passages, it makes no replies"):
        list(rerank_engine.generate([Message("user", "hi")]))


def test_an_embedding_model_or_a_chat_model_asked_to_rerank_is_refused_in_words(tiny_embedding_model, tiny_models,
                                                                              pool):
    with EngineClient() as client:
        client.load(tiny_embedding_model, LoadSettings(n_ctx=512))
        with pytest.raises(EngineError, match=r"not a reranker: it is an embedding model \(mean pooling\)") as refused:
            client.rerank(QUERY, DOCS)
        assert refused.value.kind == "request"
        assert len(client.embed(["still embeds"]).vectors) == 1
    with EngineClient() as client:
        client.load(tiny_models.gguf_f16, LoadSettings(n_ctx=512))
        with pytest.raises(EngineError, match="not a reranker: it is a chat model"):
            client.rerank(QUERY, DOCS)
    # the documents' face refuses it before anything loads
    with pytest.raises(DocumentsError, match=r"is not a reranker: its GGUF declares an embedding model \(mean"):
        pool_reranker(pool, str(tiny_embedding_model))
    with pytest.raises(DocumentsError, match="is not a reranker: its GGUF declares a chat model"):
        pool_reranker(pool, str(tiny_models.gguf_f16))
    assert pool.models() == []


def test_pool_reranker_holds_the_model_for_each_call_only(tiny_reranker_model, pool, rerank_engine):
    reranker = pool_reranker(pool, str(tiny_reranker_model))
    assert reranker.model == str(tiny_reranker_model)
    scores = reranker.rerank(QUERY, DOCS)
    assert len(scores) == len(DOCS) and all(isinstance(s, float) for s in scores)
    [held] = pool.models()
    assert held.users == 0 and held.loaded.details["reranker"] is True
    assert pool.active is None  # a reranker for the documents never becomes the Chat's model
    assert reranker.rerank(QUERY, DOCS) == scores  # loaded once, asked again
    assert pool.host_starts == 1
    for score, engine_score in zip(scores, rerank_engine.rerank(QUERY, DOCS).scores, strict=True):
        assert math.isclose(score, engine_score, abs_tol=1e-3)  # the same model and input, another host
    assert reranker.rerank(QUERY, []) == []
    assert pool.models()[0].users == 0


def test_pool_reranker_scores_a_passage_too_long_by_its_first_part_and_refuses_a_question_too_long(
        tiny_reranker_model, pool):
    reranker = pool_reranker(pool, str(tiny_reranker_model), settings=LoadSettings(n_ctx=512))
    long_passage = DOCS[0] + " " + "word " * 2000
    scores = reranker.rerank(QUERY, [DOCS[1], long_passage, DOCS[2]])
    assert len(scores) == 3 and reranker.cut > 0
    assert math.isclose(scores[0], reranker.rerank(QUERY, [DOCS[1]])[0], abs_tol=1e-3)  # the others as before
    with pytest.raises(EngineError, match="tokens together, but this reranker reads at most 512") as refused:
        reranker.rerank("why? " * 2000, DOCS)
    assert refused.value.kind == "context"
    assert pool.models()[0].users == 0  # released after a refusal too


def test_find_reranker_picks_the_librarys_reranker(tiny_reranker_model, tiny_embedding_model, tiny_models):
    from app.hub.library import Library

    library = Library()
    assert find_reranker(library) is None
    library.import_path(tiny_models.gguf_f16, copy=False)
    library.import_path(tiny_embedding_model, copy=False)
    assert find_reranker(library) is None  # an embedding model is no reranker
    library.import_path(tiny_reranker_model, copy=False)
    assert find_reranker(library) == str(tiny_reranker_model)
    assert rerankers(library) == [str(tiny_reranker_model)]


def test_the_request_and_its_answer_cross_the_wire_typed():
    request = protocol.RerankRequest("r1", "a question", ["one", "two"])
    assert protocol.decode_request(protocol.encode(request)) == request
    event = Reranked("r1", [0.25, 0.75], 12, 3.5)
    assert protocol.decode_event(protocol.encode(event)) == event
    assert json.loads(protocol.encode(request))["op"] == "rerank"
    assert Reranked in protocol.FINAL_EVENTS


def test_quantdesk_ls_and_inspect_tell_a_reranker_from_an_embedding_model(tiny_reranker_model, tiny_embedding_model,
                                                                          tiny_models, capsys):
    from app.cli import main

    assert main(["inspect", str(tiny_reranker_model)]) == 0
    assert "pooling            rank: a reranker (scores passages for a question)" in capsys.readouterr().out
    assert main(["inspect", str(tiny_embedding_model)]) == 0
    assert "pooling            mean: an embedding model" in capsys.readouterr().out
    assert main(["inspect", str(tiny_models.gguf_f16), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pooling"] is None
    for model in (tiny_reranker_model, tiny_embedding_model, tiny_models.gguf_f16):
        assert main(["import", str(model), "--link", "--json"]) == 0
    capsys.readouterr()
    assert main(["ls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [reranker_line] = [line for line in lines if tiny_reranker_model.name in line]
    [embedding_line] = [line for line in lines if tiny_embedding_model.name in line]
    [chat_line] = [line for line in lines if tiny_models.gguf_f16.name in line]
    assert reranker_line.endswith("reranker (rank pooling)")
    assert embedding_line.endswith("embedding model (mean pooling)")
    assert "pooling" not in chat_line
    assert main(["ls", "--json"]) == 0
    by_path = {m["path"]: m["pooling"] for m in json.loads(capsys.readouterr().out)["models"]}
    assert by_path == {str(tiny_reranker_model): "rank", str(tiny_embedding_model): "mean",
                       str(tiny_models.gguf_f16): None}


def test_without_a_rerank_template_the_question_and_passage_are_joined_as_llama_server_joins_them(
        tiny_reranker_without_template):
    """llama-server's format_prompt_rerank without a template: [BOS] query [EOS] [SEP] doc [EOS], each special token
    where the vocabulary adds one; this vocabulary adds none (as its GGUF says), so the pair is the two texts' tokens."""
    from tests.fixtures.models import TINY_RERANKER, build_tokenizer

    tokenizer = build_tokenizer(TINY_RERANKER)
    with EngineClient() as client:
        client.load(tiny_reranker_without_template, LoadSettings(n_ctx=512))
        assert client.loaded.details["rerank_template"] == "none"
        reranked = client.rerank(QUERY, DOCS[:2])
        expected = sum(len(tokenizer.encode(QUERY).ids) + len(tokenizer.encode(doc).ids) for doc in DOCS[:2])
        assert reranked.prompt_tokens == expected
        assert len(reranked.scores) == 2 and reranked.scores[0] != reranked.scores[1]


def test_a_reranker_reads_in_batches_as_large_as_its_context_and_the_fit_check_sizes_them(tiny_reranker_model,
                                                                                          tiny_models):
    """The compute buffer llama.cpp allocates for a reranker's batch (its load log, Loaded.devices) is the one the
    estimator sizes with ``ubatch_for``: four times a chat model's at 2,048 tokens."""
    from app.models.estimate import LlamaCppSettings, estimate_llama_cpp, ubatch_for

    meta = read_model(tiny_reranker_model)
    assert ubatch_for(meta, 2048) == 2048 and ubatch_for(meta, 8192) == 2048 and ubatch_for(meta, 512) == 512
    assert ubatch_for(read_model(tiny_models.gguf_f16), 2048) == 512
    with EngineClient() as client:
        [device] = client.load(tiny_reranker_model, LoadSettings(n_ctx=2048)).devices
        assert client.rerank(QUERY, ["word " * 600]).prompt_tokens > 1024  # past llama-cpp-python's 512 at once
    [estimated] = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=2048, n_ubatch=ubatch_for(meta, 2048))).devices
    assert device.compute_bytes > 3 * estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=2048)).devices[0].compute_bytes
    assert abs(estimated.compute_bytes - device.compute_bytes) < 0.1 * device.compute_bytes


def test_a_bert_cross_encoder_reranks_without_a_cache_its_pairs_joined_by_bos_eos_and_sep(tiny_bert_reranker):
    """A non-causal reranker (bge-reranker's layout: no KV cache, the first token through cls and cls.output, one
    logit) with no rerank template: llama-server's [BOS] query [EOS] [SEP] doc [EOS], this vocabulary adding all
    three, so each pair is the two texts' tokens and four more."""
    from tests.fixtures.models import TINY_BERT_RERANKER, build_tokenizer

    tokenizer = build_tokenizer(TINY_BERT_RERANKER)
    with EngineClient() as client:
        details = client.load(tiny_bert_reranker, LoadSettings(n_ctx=512)).details
        assert details["architecture"] == "bert" and details["rerank_outputs"] == 1
        assert details["rerank_template"] == "none"
        together = client.rerank(QUERY, DOCS)
        assert together.prompt_tokens == sum(len(tokenizer.encode(QUERY).ids) + len(tokenizer.encode(doc).ids) + 4
                                              for doc in DOCS)
        assert not all(0 < s < 1 for s in together.scores)  # a logit each (no softmax: not confined to (0, 1))
        other = client.rerank("something else entirely", DOCS).scores
        assert min(abs(a - b) for a, b in zip(other, together.scores, strict=True)) > 0.1  # the question counts
        # alone or beside others, in any order, the same score: sequences of one batch do not attend to each other
        # (within the noise of F16 weights at other batch shapes, ~1e-3 of the value; far below what the text moves)
        for score, doc in zip(together.scores, DOCS, strict=True):
            assert math.isclose(score, client.rerank(QUERY, [doc]).scores[0], rel_tol=2e-3)
        assert client.rerank(QUERY, DOCS[::-1]).scores[::-1] == pytest.approx(together.scores, rel=2e-3)
