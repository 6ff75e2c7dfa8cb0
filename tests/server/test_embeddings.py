"""/v1/embeddings through the official ``openai`` client on a tiny GGUF embedding model (mean pooling declared in
its metadata): shape, batching, determinism, refusals in words."""

from __future__ import annotations

import math

import openai
import pytest

from app.errors import EngineError
from tests.fixtures.models import TINY
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import loaded_engine, openai_client, openai_queue

TEXTS = ["Local models run on laptops.", "The quick brown fox jumps over the lazy dog.", "Hello there!"]


@pytest.fixture(scope="module")
def embed_engine(tiny_embedding_model):
    yield from loaded_engine(tiny_embedding_model)


@pytest.fixture
def embed_api(embed_engine):
    yield from openai_client(embed_engine)


def test_the_load_reports_an_embedding_model_with_its_pooling(embed_engine):
    details = embed_engine.loaded.details
    assert details["embedding"] is True and details["pooling"] == "mean"
    assert details["embedding_length"] == TINY.n_embd


def test_embeddings_have_the_models_width_unit_length_and_the_inputs_order(embed_api):
    api, name = embed_api
    # Left to itself the openai client asks for base64 and decodes it; "float" asks for JSON numbers.
    for options in ({}, {"encoding_format": "float"}):
        reply = api.embeddings.create(model=name, input=TEXTS, **options)
        assert [d.index for d in reply.data] == [0, 1, 2]
        for item in reply.data:
            assert len(item.embedding) == TINY.n_embd
            assert math.isclose(math.fsum(x * x for x in item.embedding), 1.0, rel_tol=1e-4)
        assert reply.usage.prompt_tokens == reply.usage.total_tokens > len(TEXTS)
    assert reply.data[0].embedding != reply.data[1].embedding


def test_a_batch_gives_each_text_what_it_gets_alone_and_again_the_same(embed_api):
    api, name = embed_api
    batch = [d.embedding for d in api.embeddings.create(model=name, input=TEXTS, encoding_format="float").data]
    alone = [api.embeddings.create(model=name, input=t, encoding_format="float").data[0].embedding for t in TEXTS]
    again = [d.embedding for d in api.embeddings.create(model=name, input=TEXTS, encoding_format="float").data]
    assert again == batch  # deterministic
    for one, together in zip(alone, batch, strict=True):  # sequences in one batch do not see each other
        assert max(abs(a - b) for a, b in zip(one, together, strict=True)) < 1e-4


def test_many_inputs_go_in_several_batches(embed_api, embed_engine):
    api, name = embed_api
    texts = [f"Sentence number {i} about local models." for i in range(100)]  # more tokens than one batch holds
    reply = api.embeddings.create(model=name, input=texts, encoding_format="float")
    assert len(reply.data) == 100 and len({tuple(d.embedding[:8]) for d in reply.data}) == 100


@pytest.mark.parametrize(("extra", "param", "words"), [
    ({"input": []}, "input", "non-empty list of strings"),
    ({"input": [[1, 2, 3]]}, "input", "token arrays are not supported"),
    ({"input": ["a", ""]}, "input", "may not be empty"),
    ({"input": "a", "dimensions": 64}, "dimensions", "256 dimensions"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format", "encoding_format must be"),
])
def test_bad_inputs_are_400s_and_the_engine_goes_on(embed_api, extra, param, words):
    api, name = embed_api
    with pytest.raises(openai.BadRequestError) as caught:
        api.embeddings.create(model=name, **extra)
    assert caught.value.body["param"] == param and words in caught.value.body["message"]
    assert api.embeddings.create(model=name, input="still here").data


def test_a_text_longer_than_a_batch_is_a_400(embed_api):
    api, name = embed_api
    with pytest.raises(openai.BadRequestError, match="embeds at most"):
        api.embeddings.create(model=name, input="word " * 2000)
    assert api.embeddings.create(model=name, input="still here").data


def test_an_embedding_model_refuses_to_chat_and_a_chat_model_to_embed(embed_api, embed_engine, server, model_name):
    api, name = embed_api
    with pytest.raises(openai.BadRequestError, match="an embedding model: it makes embeddings, not replies"):
        api.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as chat_api:
        with pytest.raises(openai.BadRequestError, match="is not an embedding model"):
            chat_api.embeddings.create(model=model_name, input="hi")
    with pytest.raises(EngineError, match="not an embedding model"):
        server.app.state.openai.client.embed(["hi"])



def test_embedding_requests_count_against_the_queue_limit(embed_engine):
    """An embedding waits for the engine like a generation does, so it is one of ``max_pending``: with the queue
    full it is a 503 to retry, and once there is room it is served."""
    with ServerThread(create_app(embed_engine, max_pending=1)) as server, \
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as api:
        name = model_id(embed_engine.loaded.model_path)
        with openai_queue(server).counted():  # one request in the engine's line already
            with pytest.raises(openai.APIStatusError) as refused:
                api.embeddings.create(model=name, input=TEXTS)
            assert refused.value.status_code == 503 and refused.value.body["code"] == "queue_full"
        assert len(api.embeddings.create(model=name, input=TEXTS).data) == 3
