"""Tool definitions as the reply parsers read them: an OpenAI ``tools`` list's functions, each function's parameters
in their declared order, the JSON types a parameter's schema allows (``$ref``, ``oneOf``/``anyOf``, ``allOf``,
``const``, ``enum``: llama.cpp's ``common_chat_schema::value_types``), and a call's text-written arguments given the
types the schema asks for. Pure JSON-schema reading: the parsers (``builder.py``, the families, the autoparser) and the
grammar (``grammar.py``) import it; it imports nothing of the chat format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def functions(tools: Any) -> Iterator[dict[str, Any]]:
    """The function tools of an OpenAI ``tools`` list, each as ``{"type": "function", "function": {...}}``."""
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
            yield tool


def tool_parameters(function: dict[str, Any]) -> dict[str, Any]:
    """A function's parameters schema; none (or ``{}``) is an object without arguments, as llama.cpp reads it."""
    params = function.get("parameters")
    if params is None or params == {}:
        return {"type": "object", "properties": {}}
    return params if isinstance(params, dict) else {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Parameter:
    name: str
    schema: Any
    required: bool
    root: Any  # the whole parameters schema, for $ref

    def value_types(self) -> set[str]:
        return value_types(self.schema, self.root)

    def may_be_string(self) -> bool:
        return may_be_string(self.schema, self.root)

    def document(self) -> Any:
        """The parameter's schema standing alone, as a grammar compiles it: the definitions its ``$ref``s name
        (``#/$defs/…``, ``#/definitions/…``) carried along from the whole parameters schema (llama.cpp keeps the
        node inside its document)."""
        if not isinstance(self.schema, dict) or not isinstance(self.root, dict):
            return self.schema
        carried = {key: self.root[key] for key in ("$defs", "definitions")
                   if key in self.root and key not in self.schema}
        return {**self.schema, **carried} if carried else self.schema


def parameters(function: dict[str, Any]) -> list[Parameter]:
    """A function's parameters in their declared order, as llama.cpp's foreach_parameter gives them."""
    params = tool_parameters(function)
    properties = params.get("properties") if isinstance(params, dict) else None
    if not isinstance(properties, dict):
        return []
    required = set(params.get("required") or ()) if isinstance(params.get("required"), list) else set()
    return [Parameter(name, schema, name in required, params) for name, schema in properties.items()]


ALL_TYPES = {"null", "boolean", "number", "integer", "string", "array", "object"}


def _resolve(ref: Any, root: Any) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/")[1:]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _alternatives(schema: dict[str, Any]) -> list[Any] | None:
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return list(schema[key])
    if isinstance(schema.get("type"), list):
        return [{**schema, "type": t} for t in schema["type"]]
    return None


def value_types(schema: Any, root: Any, seen: frozenset[int] = frozenset()) -> set[str]:
    """The JSON types a value of ``schema`` may have (llama.cpp's common_chat_schema::value_types)."""
    if not isinstance(schema, dict):
        return set(ALL_TYPES)
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        if target is None or id(target) in seen:
            return set()
        return value_types(target, root, seen | {id(target)})
    alternatives = _alternatives(schema)
    if alternatives is not None:
        return set().union(*(value_types(a, root, seen) for a in alternatives)) if alternatives else set()
    if "const" in schema:
        return {_json_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {_json_type(v) for v in schema["enum"]}
    kind = schema.get("type")
    if kind is None:
        if "properties" in schema or schema.get("additionalProperties", True) is not True:
            return {"object"}
        if isinstance(schema.get("allOf"), list):
            types = set(ALL_TYPES)
            for child in schema["allOf"]:
                types &= value_types(child, root, seen)
            return types
        if "items" in schema or "prefixItems" in schema:
            return {"array"}
        if any(k in schema for k in ("pattern", "minLength", "maxLength", "format")):
            return {"string"}
        return set(ALL_TYPES)
    if kind == "number":
        return {"number", "integer"}
    return {kind} if kind in ALL_TYPES else set()


def may_be_string(schema: Any, root: Any, seen: frozenset[int] = frozenset()) -> bool:
    """Whether a value of ``schema`` may be a string through any branch (a schema without a type may not)."""
    if not isinstance(schema, dict):
        return False
    if "$ref" in schema:
        target = _resolve(schema["$ref"], root)
        return target is not None and id(target) not in seen and may_be_string(target, root, seen | {id(target)})
    alternatives = _alternatives(schema)
    if alternatives is not None:
        return any(may_be_string(a, root, seen) for a in alternatives)
    if "const" in schema:
        return isinstance(schema["const"], str)
    if isinstance(schema.get("enum"), list):
        return any(isinstance(v, str) for v in schema["enum"])
    kind = schema.get("type")
    if kind is None:
        if "properties" in schema or schema.get("additionalProperties", True) is not True:
            return False
        if isinstance(schema.get("allOf"), list):
            children = [c for c in schema["allOf"] if value_types(c, root, seen) != ALL_TYPES]
            return bool(children) and all(may_be_string(c, root, seen) for c in children)
        if "items" in schema or "prefixItems" in schema:
            return False
        return any(k in schema for k in ("pattern", "minLength", "maxLength", "format"))
    if kind == "string" and isinstance(schema.get("allOf"), list):
        children = [c for c in schema["allOf"] if value_types(c, root, seen) != ALL_TYPES]
        return not children or all(may_be_string(c, root, seen) for c in children)
    return bool(kind == "string")


def typed_arguments(arguments: str, function: dict[str, Any]) -> str:
    """A call's arguments with each value a syntax wrote as text given the type the tool's schema asks for, as vLLM's
    and llama.cpp's XML formats read them: ``"42"`` for an integer parameter is 42, ``"true"`` for a boolean true,
    ``"[1, 2]"`` for an array the array. A value that does not convert (or a parameter that may be a string, or
    arguments not yet whole JSON) stays as it is."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(args, dict):
        return arguments
    by_name = {param.name: param for param in parameters(function)}
    changed = False
    for key, value in args.items():
        param = by_name.get(key)
        if param is None or not isinstance(value, str) or param.may_be_string():
            continue
        types = param.value_types()
        try:
            converted = json.loads(value)
        except ValueError:
            continue
        if _json_type(converted) in types or (isinstance(converted, int) and "number" in types):
            args[key] = converted
            changed = True
    return json.dumps(args, ensure_ascii=False, separators=(",", ":")) if changed else arguments
