"""Chat requests answered from document collections (``"quantdesk": {"documents": [...]}``), with the official
``openai`` and ``anthropic`` clients against the real server on the tiny model: the passages are in the prompt the
engine read (its count and its greedy reply are those of the question with the passages), the citations come in the
response's ``quantdesk`` field and on a stream's first chunk, the question is embedded through the router's pool,
and a name that is no collection is a 400 naming it."""

from __future__ import annotations

import anthropic
import openai
import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from app.documents.embedder import client_embedder
from app.documents.passages import Chunk, Citation
from app.documents.retrieve import Retrieval, augment
from app.documents.store import DocumentStore
from app.engine.client import EngineClient
from app.server.app import model_id
from tests.server.conftest import loaded_engine, openai_on

N_CTX = 2048
QUESTION = "How long must I hold the button?"


@pytest.fixture(scope="module")
def docs_engine(tiny_models):
    yield from loaded_engine(tiny_models.gguf_q8_0, N_CTX)


def _manuals() -> None:
    with DocumentStore() as store:  # the user data folder the server opens (isolated per test)
        store.create_collection("manuals")
        store.store_file("manuals", "/docs/guide.pdf", size=10, mtime_ns=1, sha256="g", pages=2, chunks=[
            Chunk("Unpack the device and place it on a flat surface.", 0, page=1),
            Chunk("To reset the device, hold the button for ten seconds.", 1, page=2)])


def _chat(oai, docs_engine, **extra):
    return oai.chat.completions.create(model=model_id(docs_engine.loaded.model_path), max_tokens=5, temperature=0,
                                       seed=1, messages=[{"role": "user", "content": QUESTION}], **extra)


def test_a_chat_naming_a_collection_reads_its_passages_and_cites_them(serve, docs_engine):
    _manuals()
    oai = openai_on(serve(docs_engine))
    reply = _chat(oai, docs_engine, extra_body={"quantdesk": {"documents": ["manuals"]}})
    field = reply.model_extra["quantdesk"]
    citations = [Citation.from_dict(c) for c in field["citations"]]
    assert [(c.number, c.passage.where) for c in citations] == [(1, "guide.pdf, page 1"), (2, "guide.pdf, page 2")]
    assert field["documents"]["collections"] == ["manuals"] and field["documents"]["whole"] is True
    assert 0 < field["documents"]["tokens"] <= N_CTX // 3
    assert "manuals has no embedding model: searched by its words only" in field["documents"]["notes"]
    # the engine read the question with the passages: its count and its greedy reply are theirs
    sent = augment([Message("user", QUESTION)], Retrieval(tuple(citations)))
    assert "hold the button for ten seconds" in sent[0].content
    assert reply.usage.prompt_tokens == docs_engine.count_tokens(sent, SamplingSettings())
    assert reply.usage.prompt_tokens > docs_engine.count_tokens([Message("user", QUESTION)], SamplingSettings())
    done = [e for e in docs_engine.generate(sent, SamplingSettings(temperature=0, max_tokens=5, seed=1))
            if isinstance(e, Done)][-1]
    assert done.text == reply.choices[0].message.content
    # without the field: no quantdesk field, and the plain prompt
    plain = _chat(oai, docs_engine)
    assert "quantdesk" not in (plain.model_extra or {})
    assert plain.usage.prompt_tokens < reply.usage.prompt_tokens


def test_a_stream_carries_the_citations_on_its_first_chunk(serve, docs_engine):
    _manuals()
    oai = openai_on(serve(docs_engine))
    chunks = list(_chat(oai, docs_engine, stream=True, extra_body={"quantdesk": {"documents": ["manuals"]}}))
    first = chunks[0].model_extra["quantdesk"]
    assert [c["page"] for c in first["citations"]] == [1, 2]
    assert all("quantdesk" not in (c.model_extra or {}) for c in chunks[1:])
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_the_question_is_embedded_through_the_routers_pool(serve, docs_engine, tiny_embedding_model):
    with DocumentStore() as store, EngineClient() as embedding:
        embedding.load(tiny_embedding_model, LoadSettings(n_ctx=512))
        embedder = client_embedder(embedding)
        store.create_collection("big", embed_model=str(tiny_embedding_model))
        store.store_file("big", "/big.txt", size=10, mtime_ns=1, sha256="b", pages=0, chunks=[
            Chunk(f"Section {i} of the pump manual covers valve {i} and its yearly check. " * 4, i, line=1 + 9 * i)
            for i in range(60)])
        pending = store.unembedded("big", str(tiny_embedding_model), 100)
        store.put_vectors("big", str(tiny_embedding_model),
                          list(zip([i for i, _ in pending], embedder.embed([t for _, t in pending]), strict=True)))
    server = serve(docs_engine)
    oai = openai_on(server)
    # no word of the question is in the collection: what it finds, it finds by the question's embedding
    reply = oai.chat.completions.create(model=model_id(docs_engine.loaded.model_path), max_tokens=3, temperature=0,
                                        messages=[{"role": "user", "content": "zyxwv qwertz?"}],
                                        extra_body={"quantdesk": {"documents": ["big"]}})
    field = reply.model_extra["quantdesk"]
    assert field["documents"]["whole"] is False and field["documents"]["notes"] == []
    assert 1 <= len(field["citations"]) <= 8 and field["documents"]["tokens"] <= N_CTX // 3
    pool = server.app.state.openai.pool.models
    assert str(tiny_embedding_model) in [m.path for m in pool.models()]  # loaded into the router's one pool


def test_a_name_that_is_no_collection_is_a_400_naming_it(serve, docs_engine):
    _manuals()
    oai = openai_on(serve(docs_engine))
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(oai, docs_engine, extra_body={"quantdesk": {"documents": ["manuals", "handbook"]}})
    error = caught.value.body
    assert "handbook" in error["message"] and error["param"] == "quantdesk.documents"
    assert error["code"] == "collection_not_found"
    for bad in ([1], [""], {"a": 1}, ["x"] * 17):
        with pytest.raises(openai.BadRequestError) as caught:
            _chat(oai, docs_engine, extra_body={"quantdesk": {"documents": bad}})
        assert caught.value.body["param"] == "quantdesk.documents"
    assert _chat(oai, docs_engine).choices[0].message.content is not None  # the server goes on


def test_anthropics_messages_cite_the_collection_too(serve, docs_engine):
    _manuals()
    server = serve(docs_engine)
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as claude:
        message = claude.messages.create(model=model_id(docs_engine.loaded.model_path), max_tokens=5,
                                         messages=[{"role": "user", "content": QUESTION}],
                                         extra_body={"quantdesk": {"documents": ["manuals"]}, "temperature": 0})
        field = message.model_extra["quantdesk"]
        assert [c["page"] for c in field["citations"]] == [1, 2]
        with pytest.raises(anthropic.BadRequestError, match="handbook"):
            claude.messages.create(model=model_id(docs_engine.loaded.model_path), max_tokens=5,
                                   messages=[{"role": "user", "content": QUESTION}],
                                   extra_body={"quantdesk": {"documents": ["handbook"]}})


def test_the_librarys_reranker_orders_the_passages_through_the_routers_pool(serve, docs_engine, tiny_reranker_model):
    from app.hub.library import Library

    Library().import_path(tiny_reranker_model, copy=False)
    with DocumentStore() as store:
        store.create_collection("big")
        store.store_file("big", "/big.txt", size=10, mtime_ns=1, sha256="b", pages=0, chunks=[
            Chunk(f"Section {i}: the pump's valve {i} is checked yearly, and the button {i} is pressed. " * 3, i,
                  line=1 + 9 * i) for i in range(40)])
    server = serve(docs_engine)
    reply = openai_on(server).chat.completions.create(
        model=model_id(docs_engine.loaded.model_path), max_tokens=3, temperature=0,
        messages=[{"role": "user", "content": "pump button"}], extra_body={"quantdesk": {"documents": ["big"]}})
    citations = reply.model_extra["quantdesk"]["citations"]
    assert len(citations) >= 2
    with EngineClient() as reranker:
        reranker.load(tiny_reranker_model, LoadSettings(n_ctx=2048))
        own = reranker.rerank("pump button", [c["text"] for c in citations]).scores
    assert [c["score"] for c in citations] == pytest.approx(list(own), abs=1e-4)
    assert str(tiny_reranker_model) in [m.path for m in server.app.state.openai.pool.models.models()]


def test_the_responses_api_cites_the_collection_whole_streamed_and_stored(serve, docs_engine):
    _manuals()
    oai = openai_on(serve(docs_engine))
    model = model_id(docs_engine.loaded.model_path)
    extra = {"extra_body": {"quantdesk": {"documents": ["manuals"]}}}
    response = oai.responses.create(model=model, input=QUESTION, max_output_tokens=16, temperature=0, **extra)
    field = response.model_extra["quantdesk"]
    assert [c["page"] for c in field["citations"]] == [1, 2] and field["documents"]["whole"] is True
    plain = oai.responses.create(model=model, input=QUESTION, max_output_tokens=16, temperature=0)
    assert response.usage.input_tokens > plain.usage.input_tokens and "quantdesk" not in (plain.model_extra or {})
    stored = oai.responses.retrieve(response.id)
    assert stored.model_extra["quantdesk"] == field
    events = list(oai.responses.create(model=model, input=QUESTION, max_output_tokens=16, stream=True, **extra))
    assert events[0].type == "response.created"
    assert [c["page"] for c in events[0].response.model_extra["quantdesk"]["citations"]] == [1, 2]
    with pytest.raises(openai.BadRequestError, match="handbook"):
        oai.responses.create(model=model, input=QUESTION, extra_body={"quantdesk": {"documents": ["handbook"]}})


def test_a_messages_stream_carries_the_citations_on_message_start(serve, docs_engine):
    _manuals()
    server = serve(docs_engine)
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120) as claude:
        with claude.messages.stream(model=model_id(docs_engine.loaded.model_path), max_tokens=5,
                                    messages=[{"role": "user", "content": QUESTION}],
                                    extra_body={"quantdesk": {"documents": ["manuals"]}}) as stream:
            events = list(stream)
    start = events[0]
    assert start.type == "message_start"
    assert [c["page"] for c in start.message.model_extra["quantdesk"]["citations"]] == [1, 2]


def test_a_remote_model_that_cannot_count_gets_passages_within_their_bytes(serve, docs_engine):
    """A model of a remote connection (here a QuantDesk server over the tiny model, reached through the remote
    backend's engine host): its engine cannot count tokens, so the passages are bounded by their UTF-8 bytes, which
    no tokenizer's count passes."""
    from app.remote.connections import Connection, Connections, model_ref

    _manuals()
    remote_server = serve(docs_engine, api_key="remote-only-key-0123456789")
    Connections().save(Connection("box", f"{remote_server.url}/v1"), api_key="remote-only-key-0123456789")
    remote = model_ref("box", model_id(docs_engine.loaded.model_path))
    gateway = serve(docs_engine, serve_remotes=True)
    api = openai_on(gateway)
    ask = {"model": remote, "max_tokens": 5, "temperature": 0, "messages": [{"role": "user", "content": QUESTION}]}
    reply = api.chat.completions.create(**ask, extra_body={"quantdesk": {"documents": ["manuals"]}})
    field = reply.model_extra["quantdesk"]
    citations = [Citation.from_dict(c) for c in field["citations"]]
    assert [c.passage.page for c in citations] == [1, 2]
    block = augment([Message("user", "")], Retrieval(tuple(citations)))[0].content
    assert field["documents"]["tokens"] == len(block.encode("utf-8")) + 1  # the bytes' bound, not a count
    assert field["documents"]["tokens"] <= N_CTX // 3
    # the remote model read them: its prompt is the question with the passages
    sent = augment([Message("user", QUESTION)], Retrieval(tuple(citations)))
    assert reply.usage.prompt_tokens == docs_engine.count_tokens(sent, SamplingSettings())
