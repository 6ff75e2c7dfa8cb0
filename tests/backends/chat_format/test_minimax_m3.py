"""MiniMax M3 (backends/chat_format/families/minimax_m3.py): the schema's shape read as llama.cpp reads it, nested
arguments built as JSON from the parse tree while they stream, and the thinking switches of the real template.

The parser is exercised through ``reply_parser`` with the generation prompt the real template gives (``]~b]ai\\n``):
the template itself renders tools with ``tojson(ensure_ascii=False)``, which llama.cpp's conformance cases cover
once the renderer takes those arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import formats
from backends.chat_format.families.minimax_m3 import MiniMaxM3Mapper, kind, reply_parser

NS = "]<]minimax[>["
GEN = "]~b]ai\n"
USER = {"role": "user", "content": "hi"}
NESTED = {"type": "function", "function": {"name": "plan", "parameters": {
    "type": "object", "required": ["title"],
    "properties": {
        "title": {"type": "string"},
        "days": {"type": "array", "items": {"type": "integer"}},
        "stops": {"type": "array", "items": {"type": "object", "required": ["city"], "properties": {
            "city": {"type": "string"}, "nights": {"type": "integer"}}}},
        "budget": {"anyOf": [{"type": "number"}, {"type": "object", "properties": {"max": {"type": "number"}}}]},
        "note": {"type": ["string", "null"]}}}}}


def tag(name: str, inner: str) -> str:
    return f"{NS}<{name}>{inner}{NS}</{name}>"


def prepared(request: formats.Request) -> formats.Prepared:
    return formats.Prepared("", GEN, reply_parser(request, GEN), mapper=MiniMaxM3Mapper)


@pytest.mark.parametrize("schema, expected", [
    ({"type": "object", "properties": {}}, "object"),
    ({"properties": {"a": {}}}, "object"),
    ({"additionalProperties": False}, "object"),
    ({"type": "object", "allOf": [{}]}, "allOf"),
    ({"type": ["string", "null"]}, "anyOf"),
    ({"oneOf": [{"type": "string"}]}, "anyOf"),
    ({"$ref": "#/$defs/x"}, "ref"),
    ({"type": "array", "items": {"type": "string"}}, "array"),
    ({"type": "array", "items": [{"type": "string"}]}, "tuple"),
    ({"prefixItems": [{}]}, "tuple"),
    ({"maxLength": 3}, "string"),
    ({"format": "uuid4"}, "string"),
    ({"format": "email"}, "any"),
    ({"const": 1, "type": "string"}, "const"),
    ({"enum": ["a"]}, "enum"),
    ({"type": "integer"}, "integer"),
    ({}, "any"),
])
def test_kind_is_the_node_llama_cpp_builds(schema, expected):
    assert kind(schema) == expected


def test_nested_arguments_are_built_from_the_tree_and_grow_as_they_stream():
    request = formats.Request(messages=[USER], tools=[NESTED])
    prep = prepared(request)
    reply = ("<mm:think>Planning</mm:think>Here it is."
             f"{NS}<tool_call>\n{NS}<invoke name=\"plan\">"
             + tag("title", 'Trip "north"') + tag("days", tag("item", "1") + tag("item", "2"))
             + tag("stops", tag("item", tag("city", "Oslo") + tag("nights", "2")) + tag("item", tag("city", "Bergen")))
             + tag("budget", tag("max", "900")) + tag("note", "bring a coat")
             + f"{NS}</invoke>\n{NS}</tool_call>")
    seen = ""
    for i in range(1, len(reply) + 1):
        parsed = prep.parse(reply[:i], partial=i < len(reply))
        arguments = parsed.tool_calls[0].arguments if parsed.tool_calls else ""
        assert arguments.startswith(seen), (seen, arguments)  # what was handed out is never taken back
        seen = arguments
    parsed = prep.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("Planning", "Here it is.")
    assert json.loads(parsed.tool_calls[0].arguments) == {
        "title": 'Trip "north"', "days": [1, 2], "stops": [{"city": "Oslo", "nights": 2}, {"city": "Bergen"}],
        "budget": {"max": 900}, "note": "bring a coat"}
    cut = prep.parse(reply[:reply.index("Oslo") + 2], partial=True)
    assert cut.tool_calls[0].arguments == '{"title":"Trip \\"north\\"","days":[1,2],"stops":[{"city":"Os'


def test_a_union_takes_the_alternative_written():
    prep = prepared(formats.Request(messages=[USER], tools=[NESTED]))
    reply = (f"{NS}<tool_call>\n{NS}<invoke name=\"plan\">" + tag("title", "T") + tag("budget", "12.5")
             + f"{NS}</invoke>\n{NS}</tool_call>")
    assert json.loads(prep.parse(reply).tool_calls[0].arguments) == {"title": "T", "budget": 12.5}


def test_a_required_argument_comes_first():
    prep = prepared(formats.Request(messages=[USER], tools=[NESTED]))
    reply = (f"{NS}<tool_call>\n{NS}<invoke name=\"plan\">" + tag("note", "n") + tag("title", "T")
             + f"{NS}</invoke>\n{NS}</tool_call>")
    with pytest.raises(ValueError):
        prep.parse(reply)


def test_thinking_switches_of_the_real_template(llama_cpp_templates):
    template = formats.Template.of(llama_cpp_templates["MiniMax-M3.jinja"])
    on = formats.apply(template, formats.Request(messages=[USER]))
    assert on.generation_prompt == GEN and on.format == "peg-minimax-m3"
    assert (on.parse("<mm:think>x</mm:think>Hello").reasoning, on.parse("</mm:think>Hello").content) == ("x", "Hello")
    off = formats.apply(template, formats.Request(messages=[USER], extra_context={"thinking_mode": "disabled"}))
    assert off.generation_prompt == GEN + "</mm:think>"
    assert off.parse("Hello").content == "Hello"
    # with thinking off the block is read but not kept as reasoning
    quiet = formats.apply(template, formats.Request(messages=[USER], enable_thinking=False))
    assert (quiet.parse("<mm:think>x</mm:think>Hello").reasoning, quiet.parse("<mm:think>x</mm:think>Hello").content) \
        == ("", "Hello")


def test_a_continued_reply_reads_its_generation_prompt(llama_cpp_templates):
    template = formats.Template.of(llama_cpp_templates["MiniMax-M3.jinja"])
    prefill: dict[str, Any] = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
    prep = formats.apply(template, formats.Request(messages=[USER, prefill], add_generation_prompt=False,
                                                   continue_final_message="content"))
    assert prep.generation_prompt == GEN + "<mm:think>I'm thinking</mm:think>Hello, "
    assert prep.prompt.endswith(prep.generation_prompt)
    parsed = prep.parse("world!")
    assert (parsed.reasoning, parsed.content) == ("I'm thinking", "Hello, world!")
