"""Which JSON Schema keywords grammar-constrained decoding enforces, checked before a schema reaches an engine.

llama.cpp turns a schema into a grammar (llama-cpp-python's port of json_schema_to_grammar); a keyword the
converter does not know is silently not enforced, so a "strict" schema using one would be a promise the server
cannot keep. ``unenforced(schema)`` names such keywords (with where they are) for a 400 that says so.
"""

from __future__ import annotations

from typing import Any

# What the converter turns into grammar (llama_cpp/llama_grammar.py, SchemaConverter.visit)...
ENFORCED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "pattern", "format", "minLength", "maxLength",
})
# ...and what only describes (no effect on which JSON is valid).
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$defs", "definitions", "$comment",
    "deprecated", "readOnly", "writeOnly", "name", "strict",
})
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
MAX_DEPTH = 64


def unenforced(schema: Any, where: str = "schema", depth: int = 0) -> list[str]:
    """Places in ``schema`` whose keywords the grammar would not enforce (``"schema.properties.age: minimum"``)."""
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
