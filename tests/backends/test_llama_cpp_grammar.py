"""llama.cpp held to a grammar (backends/llama_cpp/sampling.GuidedSampler, llguidance's token mask) on the real tiny model:
the chain still chooses (a seed repeats its reply), and text around the JSON is part of the grammar."""

from __future__ import annotations

import json
import threading

import jsonschema
import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from backends.base import GenerationError
from backends.llama_cpp import LlamaCppBackend

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "n": {"type": "integer", "minimum": 1, "maximum": 99},
                                           "ok": {"type": "boolean"}},
          "required": ["name", "n", "ok"], "additionalProperties": False}
ASK = [Message("user", "Describe yourself as JSON.")]


@pytest.fixture(scope="module")
def backend(tiny_models):
    backend = LlamaCppBackend()
    backend.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=512))
    yield backend
    backend.unload()


def _done(backend, sampling) -> Done:
    return next(e for e in backend.generate("r", ASK, sampling, threading.Event()) if isinstance(e, Done))


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"temperature": 0.8}, {"temperature": 1.5, "top_k": 5}],
                         ids=["greedy", "default", "hot"])
def test_every_reply_is_valid_and_a_seed_repeats_it(backend, sampling):
    for seed in range(3):
        first = _done(backend, SamplingSettings(seed=seed, max_tokens=120, json_schema=SCHEMA, **sampling))
        again = _done(backend, SamplingSettings(seed=seed, max_tokens=120, json_schema=SCHEMA, **sampling))
        assert first.text == again.text and first.stats.stop_reason == "eos"
        jsonschema.validate(json.loads(first.text), SCHEMA)


def test_text_around_the_json_is_part_of_the_grammar(backend):
    text = _done(backend, SamplingSettings(seed=3, max_tokens=120, json_schema=SCHEMA, json_prefix="<out>",
                                           json_suffix="</out>")).text
    assert text.startswith("<out>") and text.endswith("</out>")
    jsonschema.validate(json.loads(text[len("<out>"):-len("</out>")]), SCHEMA)


def test_a_schema_llguidance_cannot_compile_is_refused_in_words_and_the_model_goes_on(backend):
    with pytest.raises(GenerationError, match="cannot be turned into a grammar.*uniqueItems"):
        _done(backend, SamplingSettings(max_tokens=8, json_schema={"type": "array", "uniqueItems": True}))
    assert _done(backend, SamplingSettings(seed=1, max_tokens=4)).stats.generated_tokens == 4
