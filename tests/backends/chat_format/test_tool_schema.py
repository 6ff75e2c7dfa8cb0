"""backends.chat_format.tool_schema: tool definitions read as the parsers read them."""

from __future__ import annotations

import json

from backends.chat_format.tool_schema import parameters


def test_a_parameter_schema_carries_the_definitions_its_refs_name():
    function = {"name": "f", "parameters": {
        "type": "object",
        "properties": {"point": {"$ref": "#/$defs/point"}, "n": {"type": "integer"}},
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }}
    point, n = parameters(function)
    assert point.document() == {"$ref": "#/$defs/point",
                                "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}}}
    assert n.document() == {"type": "integer", "$defs": function["parameters"]["$defs"]}
    assert parameters({"name": "g", "parameters": {"properties": {"s": {"type": "string"}}}})[0].document() == {
        "type": "string"}


def test_arguments_written_as_text_are_typed_by_the_tools_schema():
    from backends.chat_format.tool_schema import typed_arguments

    function = {"name": "f", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "on": {"type": "boolean"}, "o": {"type": "object"},
        "a": {"type": "array"}, "s": {"type": "string"}, "any": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}}
    typed = json.loads(typed_arguments(json.dumps({"n": "42", "x": "1.5", "on": "false", "o": "{\"k\": 1}",
                                                   "a": "[1, 2]", "s": "42", "any": "7"}), function))
    assert typed == {"n": 42, "x": 1.5, "on": False, "o": {"k": 1}, "a": [1, 2], "s": "42", "any": "7"}
    # what does not convert, or converts to another type than the schema's, stays a string
    assert json.loads(typed_arguments('{"n": "forty", "on": "1", "x": "2"}', function)) == {
        "n": "forty", "on": "1", "x": 2}
    assert typed_arguments('{"n": "4', function) == '{"n": "4'  # not yet whole: as it is
