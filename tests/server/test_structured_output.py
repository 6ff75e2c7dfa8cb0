"""Structured output through the official ``openai`` client: ``response_format`` json_schema and json_object held
by llama.cpp's grammar, on Q8_0 and Q4_K_M, checked with ``jsonschema``; schemas the grammar cannot hold are 400s."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.server.conftest import loaded_engine, openai_client

# Every field bounded, so that even a random model's reply ends inside max_tokens (the grammar then allows only
# the end-of-turn token).
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "role": {"enum": ["admin", "user", "guest"]},
        "active": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "manager": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 8}]},
    },
    "required": ["name", "age", "role", "active", "tags", "manager"],
    "additionalProperties": False,
}
ASK = [{"role": "user", "content": "Describe a user of the system as JSON."}]


def _schema_format(schema: dict, strict: bool = True) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": strict}}


@pytest.fixture(scope="module", params=["gguf_q8_0", "gguf_q4_k_m"])
def quant_engine(request, tiny_models):
    yield from loaded_engine(getattr(tiny_models, request.param))


@pytest.fixture
def quant_api(quant_engine):
    yield from openai_client(quant_engine)


@pytest.fixture
def oai(server) -> openai.OpenAI:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        yield client


def test_json_schema_replies_validate_over_20_seeds(quant_api):
    client, name = quant_api
    for seed in range(20):
        reply = client.chat.completions.create(model=name, messages=ASK, seed=seed, max_tokens=400,
                                               response_format=_schema_format(PERSON))
        choice = reply.choices[0]
        assert choice.finish_reason == "stop", (seed, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), PERSON)


def test_a_streamed_json_schema_reply_validates_too(oai, model_name):
    chunks = oai.chat.completions.create(model=model_name, messages=ASK, seed=7, max_tokens=400, stream=True,
                                         response_format=_schema_format(PERSON))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    jsonschema.validate(json.loads(text), PERSON)


def test_without_a_schema_the_same_seed_is_not_json(oai, model_name):
    """The grammar makes the difference: the random model left alone writes no JSON."""
    reply = oai.chat.completions.create(model=model_name, messages=ASK, seed=7, max_tokens=40)
    with pytest.raises(ValueError):
        json.loads(reply.choices[0].message.content)


def test_json_object_replies_are_objects(oai, model_name):
    """json_object is any object: unbounded, so a random model's string may run to max_tokens; every reply is an
    object's beginning, and every one that ends is an object."""
    ended = 0
    for seed in range(6):
        reply = oai.chat.completions.create(model=model_name, messages=ASK, seed=seed, max_tokens=120,
                                            response_format={"type": "json_object"})
        text = reply.choices[0].message.content
        assert text.startswith("{"), text
        if reply.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(text), dict)
            ended += 1
    assert ended


@pytest.mark.parametrize(("response_format", "words"), [
    (_schema_format({"type": "array", "uniqueItems": True}), "uniqueItems"),
    (_schema_format({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}), "properties.a: not"),
    (_schema_format([1, 2]), "schema must be a JSON Schema object"),
    ({"type": "json_schema", "json_schema": {"name": "x"}}, "needs a schema"),
    ({"type": "xml"}, "response_format type must be"),
])
def test_schemas_the_grammar_cannot_hold_are_400s_and_the_engine_goes_on(oai, model_name, response_format, words):
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model=model_name, messages=ASK, max_tokens=8, response_format=response_format)
    assert words in caught.value.body["message"]
    assert oai.chat.completions.create(model=model_name, messages=ASK, max_tokens=2).choices[0].message.content


def test_the_400_says_what_the_cli_and_the_chat_say_of_the_same_schema(oai, model_name):
    """One check and one sentence (backends/json_schema.refusal) for the server, `quantdesk chat --json-schema`
    (tests/commands/test_engine.py) and the Chat page (tests/ui/chat/test_chat_page.py)."""
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(openai.BadRequestError) as caught:
        oai.chat.completions.create(model=model_name, messages=ASK, max_tokens=8, response_format=_schema_format(schema))
    assert caught.value.body["message"] == ("the grammar cannot hold replies to this JSON schema: it does not enforce "
                                            "schema.properties.tags: uniqueItems")
    assert caught.value.body["code"] == "unsupported_schema"


def test_a_loose_schema_may_use_keywords_the_grammar_does_not_enforce(oai, model_name):
    """Not strict: the grammar holds what it can (an array of small integers), as OpenAI's non-strict mode promises
    no more; uniqueItems is left out."""
    schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3,
              "uniqueItems": True}
    reply = oai.chat.completions.create(model=model_name, messages=ASK, seed=1, max_tokens=40,
                                        response_format=_schema_format(schema, strict=False))
    value = json.loads(reply.choices[0].message.content)
    assert isinstance(value, list) and len(value) <= 3 and all(0 <= v <= 9 for v in value)


def test_number_bounds_hold(oai, model_name):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 7},
                                               "x": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}},
              "required": ["n", "x"], "additionalProperties": False}
    for seed in range(5):
        reply = oai.chat.completions.create(model=model_name, messages=ASK, seed=seed, max_tokens=100,
                                            response_format=_schema_format(schema))
        jsonschema.validate(json.loads(reply.choices[0].message.content), schema)


@pytest.fixture(scope="module")
def mlx_engine(tiny_models):
    yield from loaded_engine(tiny_models.mlx_4bit)


@pytest.fixture
def mlx_api(mlx_engine):
    yield from openai_client(mlx_engine)


def test_mlx_json_schema_replies_validate_through_llguidance(mlx_api):
    client, name = mlx_api
    for seed in range(3):  # MLX's Linux CPU build is slow: fewer seeds than on llama.cpp
        reply = client.chat.completions.create(model=name, messages=ASK, seed=seed, max_tokens=400,
                                               response_format=_schema_format(PERSON))
        assert reply.choices[0].finish_reason == "stop", (seed, reply.choices[0].message.content)
        jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
