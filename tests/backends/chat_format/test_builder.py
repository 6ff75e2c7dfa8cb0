"""backends.chat_format.builder's helpers, on their own."""

from __future__ import annotations

from backends.chat_format.builder import parameters


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
