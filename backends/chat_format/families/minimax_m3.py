"""MiniMax M3: thinking in ``<mm:think>…</mm:think>``, tool calls as XML whose every tag is prefixed with the
namespace token ``]<]minimax[>[``, one tag per argument named after it, objects and arrays written out as nested tags
(llama.cpp's common/parsers/minimax-m3.cpp and common_chat_peg_minimax_m3_mapper in common/chat-peg-parser.cpp)::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="plan">
    ]<]minimax[>[<title>Trip]<]minimax[>[</title>
    ]<]minimax[>[<days>]<]minimax[>[<item>1]<]minimax[>[</item>]<]minimax[>[<item>2]<]minimax[>[</item>]<]minimax[>[</days>
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

The namespace token collides with the markup the differential analysis looks for, hence a family of its own. The
parser follows each tool's schema down into its objects and arrays (the template expands values that way, in its
``to_xml()`` macro), and ``MiniMaxM3Mapper`` builds the arguments' JSON from that tree.
"""

from __future__ import annotations

from typing import Any

from backends.chat_format import peg
from backends.chat_format.builder import (
    TOOL_ARG,
    TOOL_ARG_NAME,
    TOOL_ARG_STRING_VALUE,
    TOOL_ARG_VALUE,
    TOOL_NAME,
    ChatBuilder,
    ParsedCall,
    TreeMapper,
    build,
    escape_json_inner,
)
from backends.chat_format.tool_schema import functions, may_be_string, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Node, Parser

NS = "]<]minimax[>["
THINK_START = "<mm:think>"
THINK_END = "</mm:think>"
FC_START = NS + "<tool_call>"
FC_END = NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"

# the tags of nested values (common_chat_peg_minimax_m3_mapper's)
TOOL_ARG_OBJECT = "tool-arg-object"
TOOL_ARG_ARRAY = "tool-arg-array"
TOOL_ARG_ITEM = "tool-arg-item"


# --- a schema's shape, as llama.cpp's common_chat_schema_from_json (common/json-schema.cpp) reads it


def _has_format(schema: dict[str, Any]) -> bool:
    fmt = schema.get("format")
    return isinstance(fmt, str) and (fmt in ("date", "time", "date-time", "uuid")
                                     or (len(fmt) == 5 and fmt.startswith("uuid") and fmt[4] in "12345"))


def kind(schema: Any) -> str:
    """The kind of node llama.cpp builds for ``schema``: ref, anyOf, allOf, const, enum, object, array, tuple,
    string, integer, number, boolean, null or any (a schema that is no object counts as any here, where llama.cpp
    refuses it)."""
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        return "ref"
    if "oneOf" in schema or "anyOf" in schema or isinstance(schema.get("type"), list):
        return "anyOf"
    if "const" in schema:
        return "const"
    if "enum" in schema:
        return "enum"
    type_name = schema.get("type") if isinstance(schema.get("type"), str) else ""
    has_properties = "properties" in schema or ("additionalProperties" in schema
                                                and schema["additionalProperties"] is not True)
    if not type_name:  # without a type the structural keywords decide, in the converter's order
        if has_properties:
            return "object"
        if "allOf" in schema:
            return "allOf"
        if "items" in schema or "prefixItems" in schema:
            return _array_kind(schema)
        if any(k in schema for k in ("pattern", "minLength", "maxLength")) or _has_format(schema):
            return "string"
        return "any"
    if type_name == "object":
        return "allOf" if not has_properties and "allOf" in schema else "object"
    if type_name == "string":
        return "allOf" if "allOf" in schema else "string"
    if type_name == "array":
        return _array_kind(schema)
    return type_name if type_name in ("integer", "number", "boolean", "null") else "any"


def _array_kind(schema: dict[str, Any]) -> str:
    items = schema.get("items", schema.get("prefixItems"))
    return "tuple" if isinstance(items, list) else "array"


def alternatives(schema: dict[str, Any]) -> list[Any]:
    """An anyOf node's alternatives: oneOf's or anyOf's, or one per type of a list of types."""
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return list(schema[key]) if isinstance(schema[key], list) else []
    return [{**schema, "type": t} for t in schema.get("type") or ()]


def items(schema: dict[str, Any]) -> Any:
    """An array's item schema ("items" before "prefixItems"; any value where neither is given)."""
    return schema.get("items", schema.get("prefixItems", {}))


# --- the arguments, from the tree to JSON


def _collect(node: Node, tag: str, out: list[Node]) -> None:
    for child in node.children:
        if child.tag == tag:
            out.append(child)
        else:
            _collect(child, tag, out)


def _value_of(node: Node) -> Node | None:
    for child in node.children:
        if child.tag in (TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE, TOOL_ARG_OBJECT, TOOL_ARG_ARRAY):
            return child
    return None


def _member_to_json(node: Node) -> str:
    name = node.find(TOOL_ARG_NAME)
    if name is None:
        return ""
    return peg.json_text(name.text) + ":" + value_to_json(_value_of(node), not node.partial)


def container_to_json(node: Node, is_object: bool, closed: bool) -> str:
    """The members (or items) found under ``node`` as a JSON object (or array), left open while ``closed`` is not
    set, so that a call's arguments grow as it streams."""
    entries: list[Node] = []
    _collect(node, TOOL_ARG if is_object else TOOL_ARG_ITEM, entries)
    texts = [_member_to_json(entry) if is_object else value_to_json(_value_of(entry), not entry.partial)
             for entry in entries]
    out = ("{" if is_object else "[") + ",".join(text for text in texts if text)
    if closed:
        out += "}" if is_object else "]"
    return out


def value_to_json(node: Node | None, closed: bool) -> str:
    if node is None:
        return ""
    if node.tag == TOOL_ARG_OBJECT:
        return container_to_json(node, True, closed)
    if node.tag == TOOL_ARG_ARRAY:
        return container_to_json(node, False, closed)
    if node.tag == TOOL_ARG_STRING_VALUE:
        return '"' + escape_json_inner(node.text) + ('"' if closed else "")
    return node.text  # numbers and booleans are written as they are by the template


class MiniMaxM3Mapper(TreeMapper):
    """Each call from its name and its arguments' tree (none of the generic mapper's argument building, and an empty
    thought is kept as it is)."""

    def call_of(self, node: Node) -> ParsedCall | None:
        name = node.find(TOOL_NAME)
        if name is None:
            return None
        return ParsedCall(name=name.text, arguments=container_to_json(node, True, not node.partial))


def _invoke(p: ChatBuilder, name: str, root: dict[str, Any]) -> Parser:
    """One call of tool ``name``: its arguments as the template's to_xml() macro expands them from the schema."""

    def element_of(tag: str, schema: Any, rule_name: str) -> Parser:
        close = f"{NS}</{tag}>"
        return p.rule(rule_name, p.tool_arg(
            p.tool_arg_open(p.literal(NS + "<") + p.tool_arg_name(p.literal(tag)) + p.literal(">"))
            + value_of(schema, rule_name, close)))

    def value_of(schema: Any, rule_name: str, close: str) -> Parser:
        close_tag = p.tool_arg_close(p.literal(close))
        if may_be_string(schema, root):  # a string takes anything: a union with a string is a string
            return p.ac(p.tool_arg_string_value(p.until(close)) + close_tag, close)
        shape = kind(schema)
        if shape == "anyOf":
            # this may break the streamed deltas, a risk llama.cpp takes to stream the arguments
            return p.choice([value_of(alt, f"{rule_name}-{i}", close) for i, alt in enumerate(alternatives(schema))])
        if shape == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
            return p.tag(TOOL_ARG_OBJECT, members_of(schema, rule_name)) + p.space() + close_tag
        if shape == "array":
            item_close = NS + "</item>"
            item = p.rule(f"{rule_name}-item", p.tag(TOOL_ARG_ITEM, p.literal(NS + "<item>") + value_of(
                items(schema), f"{rule_name}-item", item_close)))
            return p.tag(TOOL_ARG_ARRAY, p.repeat(p.space() + item, 0, -1)) + p.space() + close_tag
        return p.tool_arg_json_value(p.schema(p.json(), f"{rule_name}-schema", schema)) + close_tag

    def members_of(schema: dict[str, Any], rule_prefix: str) -> Parser:
        """The required properties in schema order, then any number of the optional ones, in any order."""
        required_names = {n for n in schema.get("required") or () if isinstance(n, str)}
        required: list[Parser] = []
        optional: list[Parser] = []
        for prop, prop_schema in schema["properties"].items():
            element = element_of(prop, prop_schema, f"{rule_prefix}-{prop}")
            (required if prop in required_names else optional).append(element)
        members: Parser = p.eps()
        for i, element in enumerate(required):
            if i > 0:
                members = members + p.space()
            members = members + element
        if optional:
            members = members + p.repeat(p.space() + p.choice(optional), 0, -1)
        return members

    body: Parser = p.eps()
    if kind(root) == "object" and isinstance(root.get("properties"), dict):
        body = members_of(root, f"tool-{name}-arg")
    return p.tool(p.tool_open(p.literal(NS + '<invoke name="') + p.tool_name(p.literal(name)) + p.literal('">'))
                  + p.space() + body + p.space() + p.tool_close(p.literal(INVOKE_END)))


def reply_parser(request: Request, template_generation_prompt: str) -> peg.Grammar_:
    """The parser of a reply to ``request``, whose template opens the assistant's turn with
    ``template_generation_prompt`` (before any continuation)."""
    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    extract_reasoning = request.reasoning_format != "none"

    def make(p: ChatBuilder) -> Parser:
        generation = p.prefix(template_generation_prompt, THINK_START)
        end = p.end()
        reasoning: Parser = p.eps()
        if extract_reasoning:
            block = (p.literal(THINK_START) + p.space() + p.ac(p.reasoning(p.until(THINK_END))
                                                                 + p.literal(THINK_END), THINK_END)
                     if request.enable_thinking else
                     p.literal(THINK_START) + p.ac(p.until(THINK_END) + p.literal(THINK_END), THINK_END))
            # A turn without reasoning starts with a bare </mm:think>, written by the generation prompt
            # (thinking_mode = "disabled") or by the model itself.
            reasoning = p.optional(p.choice([block, p.literal(THINK_END)]))

        if has_schema:
            response = p.rule("response-format", p.literal("```json") + p.space()
                              + p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
                              + p.space() + p.literal("```"))
            return generation + reasoning + response + end

        if not has_tools or request.tool_choice == "none":
            return generation + reasoning + p.content(p.rest()) + end

        tool_choice = p.choice()
        for tool in functions(request.tools):
            name = tool["function"]["name"]
            tool_choice = tool_choice | p.rule(f"tool-{name}", _invoke(p, name, tool_parameters(tool["function"])))

        if request.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + tool_choice
                                        + p.zero_or_more(p.space() + tool_choice) + p.space() + p.literal(FC_END))
        else:
            tool_calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + tool_choice + p.space()
                                        + p.literal(FC_END))
        if request.tool_choice != "required":
            tool_calls = p.optional(tool_calls)
        return generation + reasoning + p.content(p.until(FC_START)) + tool_calls + end

    return build(make)


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = template_gen = generation_prompt(template, request)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = template_gen + THINK_START + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += THINK_END + render_content(msg)
        prompt += gen
    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")
    return Prepared(
        prompt, gen, reply_parser(request, template_gen), mapper=MiniMaxM3Mapper, format="peg-minimax-m3",
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=(THINK_END,), grammar=include_grammar,
        grammar_lazy=include_grammar and not (has_schema or (has_tools and request.tool_choice == "required")),
        grammar_triggers=(("word", FC_START),) if include_grammar else (),
        preserved_tokens=(NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END))
