"""llama.cpp's grammar-constrained sampling (backends/llama_cpp._GrammarSampler) on the real tiny model: the
shortlist that makes a refused token cheap to replace changes no token, and the grammar holds every reply."""

from __future__ import annotations

import json
import threading

import pytest

from backends import llama_cpp as llama_cpp_backend
from backends.base import Done, LoadSettings, Message, SamplingSettings
from backends.llama_cpp import LlamaCppBackend, json_grammar

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "n": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["name", "n", "ok"], "additionalProperties": False}
ASK = [Message("user", "Describe yourself as JSON.")]


@pytest.fixture(scope="module")
def backend(tiny_models):
    backend = LlamaCppBackend()
    backend.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=512))
    yield backend
    backend.unload()


def _text(backend, sampling) -> str:
    return next(e for e in backend.generate("r", ASK, sampling, threading.Event()) if isinstance(e, Done)).text


@pytest.mark.parametrize("sampling", [
    {"temperature": 0.0}, {"temperature": 0.8, "top_k": 40}, {"temperature": 1.5, "top_k": 5, "min_p": 0.0},
], ids=["greedy", "top-k 40", "top-k 5"])
def test_the_shortlist_picks_what_the_whole_vocabulary_picks(backend, monkeypatch, sampling):
    resample = llama_cpp_backend._GrammarSampler._resample
    ways = {"shortlist": 0, "whole": 0}

    def counted(self):
        self._short.selected = -1  # the chain sets it only when it chose from the shortlist
        token = resample(self)
        ways["shortlist" if self._short.selected >= 0 else "whole"] += 1
        return token

    monkeypatch.setattr(llama_cpp_backend._GrammarSampler, "_resample", counted)
    replies = {}
    for shortlist in (16, 10**9):  # 10**9: never a shortlist, every refused token goes the whole way
        monkeypatch.setattr(llama_cpp_backend._GrammarSampler, "SHORTLIST", shortlist)
        replies[shortlist] = [_text(backend, SamplingSettings(seed=seed, max_tokens=120, json_schema=SCHEMA,
                                                              **sampling)) for seed in range(4)]
        if shortlist == 16:
            assert ways["shortlist"] and ways["whole"], ways  # both ways were taken
    assert replies[16] == replies[10**9]
    for text in replies[16]:
        assert set(json.loads(text)) == {"name", "n", "ok"}


def test_json_strings_exclude_control_characters_as_json_does():
    grammar, root = json_grammar({"type": "string"})
    assert root == "root" and r'[^"\\\x7F\x00-\x1F]' in grammar


def test_text_around_the_json_is_part_of_the_grammar(backend):
    text = _text(backend, SamplingSettings(seed=3, max_tokens=120, json_schema=SCHEMA, json_prefix="<out>",
                                           json_suffix="</out>"))
    assert text.startswith("<out>") and text.endswith("</out>")
    json.loads(text[len("<out>"):-len("</out>")])
