"""JSON Schemas as grammars: which keywords grammar-constrained decoding enforces (checked before a schema reaches an
engine), and the llguidance matcher both engines hold a reply to.

Both llama.cpp and MLX decode through llguidance (``TokenMask``): it compiles a JSON Schema itself and computes the
set of tokens the grammar allows next in tens of microseconds, whatever the vocabulary, so each token costs a mask
and no second pass (llama.cpp's own GBNF grammar sampler checks a refused token against the whole vocabulary:
milliseconds at 150k tokens; llama.cpp can itself be built with llguidance for the same reason). A keyword llguidance
does not implement fails the compile, unless the schema is marked lenient (``x-guidance``), as the server marks a
non-strict one; ``refusal(schema)`` names such keywords, in the words the server (a strict schema's 400), the CLI and
the Chat refuse a schema with before any token.
"""

from __future__ import annotations

import json
from typing import Any

# What llguidance's JSON compiler turns into grammar...
ENFORCED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern", "format", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minProperties", "maxProperties",
    "patternProperties",
})
# ...and what only describes (no effect on which JSON is valid).
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$defs", "definitions", "$comment",
    "deprecated", "readOnly", "writeOnly", "name", "strict", "x-guidance",
})
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
MAX_DEPTH = 64


def unenforced(schema: Any, where: str = "schema", depth: int = 0) -> list[str]:
    """Places in ``schema`` whose keywords the grammar would not enforce (``"schema.properties.tags: uniqueItems"``)."""
    if isinstance(schema, bool):
        return []
    if not isinstance(schema, dict):
        return [f"{where}: is not a schema object"]
    if depth > MAX_DEPTH:
        return [f"{where}: nested deeper than {MAX_DEPTH} levels"]
    found = [f"{where}: {key}" for key in schema if key not in ENFORCED and key not in ANNOTATIONS]
    for key in _SUBSCHEMA_LISTS:
        subs = schema.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else ()):
            found += unenforced(sub, f"{where}.{key}[{i}]", depth + 1)
    for key in _SUBSCHEMA_MAPS:
        subs = schema.get(key)
        if isinstance(subs, dict):
            for name, sub in subs.items():
                found += unenforced(sub, f"{where}.{key}.{name}", depth + 1)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += unenforced(schema[key], f"{where}.{key}", depth + 1)
    return found


NOT_A_SCHEMA = "the schema must be a JSON Schema object"


def refusal(schema: Any) -> str | None:
    """Why a reply cannot be held to ``schema`` whole, or None when it can: the one check, and the one sentence, of
    the server (a strict ``response_format``'s 400), ``quantdesk chat --json-schema`` and the Chat page, each made
    before the reply starts (an engine handed such a schema would fail in the middle of it)."""
    if not isinstance(schema, dict):
        return NOT_A_SCHEMA
    problems = unenforced(schema)
    if problems:
        return f"the grammar cannot hold replies to this JSON schema: it does not enforce {'; '.join(problems[:5])}"
    return None


def lenient(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` marked so that keywords the grammar cannot enforce are left out instead of failing the compile
    (OpenAI's non-strict mode promises no more)."""
    return {**schema, "x-guidance": {**(schema.get("x-guidance") or {}), "lenient": True}}


def lark_grammar(schema: dict[str, Any], prefix: str = "", suffix: str = "") -> str:
    """llguidance's Lark grammar for ``prefix`` + JSON valid against ``schema`` + ``suffix``. The JSON is compact,
    one optional space around separators (llguidance allows any whitespace by default, which a weak model fills a
    reply with)."""
    options = {"whitespace_flexible": False, "whitespace_pattern": " ?", **(schema.get("x-guidance") or {})}
    body = json.dumps({**schema, "x-guidance": options})
    return f"start: {json.dumps(prefix)} body {json.dumps(suffix)}\nbody: %json {body}"


class TokenMask:
    """One reply's llguidance matcher: the tokens the grammar allows next, as a numpy array of 0/1 per token id,
    and the tokens taken. ``tokenizer`` is llguidance's view of the model's vocabulary (built once per model)."""

    def __init__(self, tokenizer: Any, grammar: str, n_vocab: int, end_tokens: frozenset[int],
                 primed: list[int] | None = None) -> None:
        """``grammar`` in llguidance's Lark dialect (``lark_grammar`` for a JSON schema, or a chat format's reply
        grammar: backends/chat_format/grammar.py); ``primed``: tokens already in the prompt that the grammar starts
        with (the generation prompt: llama.cpp feeds it to its grammar too)."""
        import llguidance
        import llguidance.numpy
        import numpy as np

        self._matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self._matcher.is_error():
            raise ValueError(f"the JSON schema cannot be turned into a grammar: {self._matcher.get_error()}")
        self._bitmask = llguidance.numpy.allocate_token_bitmask(1, n_vocab)
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self._n_vocab, self._np = n_vocab, np
        self._end_tokens, self._ended = end_tokens, False
        if primed:
            self.take(primed)

    @property
    def stopped(self) -> bool:
        """The reply ended where the grammar allowed it to: nothing more may follow."""
        return self._ended or bool(self._matcher.is_stopped())

    def allowed(self) -> Any:
        self._fill(self._matcher, self._bitmask)
        return self._np.unpackbits(self._bitmask.view(self._np.uint8), bitorder="little", count=self._n_vocab)

    def take(self, tokens: list[int]) -> None:
        """The tokens the model took. An end-of-turn token where the grammar is complete ends the reply (llguidance
        counts consuming it as an error: the end is the caller's to notice)."""
        for token in tokens:
            if token in self._end_tokens and self._matcher.is_accepting():
                self._ended = True
                return
            if not self._matcher.consume_token(token) or self._matcher.is_error():
                raise ValueError(f"the grammar refused a token: {self._matcher.get_error()}")
