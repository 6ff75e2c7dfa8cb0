"""The reply's parts as a syntax tree, and the tree as a message.

``ChatBuilder`` adds to the PEG combinators (backends/chat_format/peg.py) the tags a reply parser marks its parts with
(reasoning, content, a tool call's name, id, arguments, each argument's name and value) and the shapes tool calls come
in (JSON objects, XML-like tags, Python calls); ``Mapper`` walks a parse's tree and builds the ``ParsedReply``. Both
follow llama.cpp's ``common/chat-peg-parser.cpp`` so a family ported from there reads replies as llama-server does,
partial ones included: a tool call whose arguments are still being written has the JSON written so far.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.chat_format import peg
from backends.chat_format.peg import Node, Parser
from backends.chat_format.tool_schema import functions, parameters, tool_parameters

REASONING_BLOCK = "reasoning-block"
REASONING = "reasoning"
CONTENT = "content"
TOOL = "tool"
TOOL_OPEN = "tool-open"
TOOL_CLOSE = "tool-close"
TOOL_ID = "tool-id"
TOOL_NAME = "tool-name"
TOOL_ARGS = "tool-args"
TOOL_ARG = "tool-arg"
TOOL_ARG_OPEN = "tool-arg-open"
TOOL_ARG_CLOSE = "tool-arg-close"
TOOL_ARG_NAME = "tool-arg-name"
TOOL_ARG_VALUE = "tool-arg-value"
TOOL_ARG_STRING_VALUE = "tool-arg-string-value"  # a value the schema declares a string: kept as text, quoted

MAX_PERMUTE = 6  # beyond this many required arguments, a fixed order (the permutations would explode)
WHITESPACE = " \t\n\v\f\r"


@dataclass
class ParsedCall:
    name: str = ""
    arguments: str = ""  # JSON text, possibly cut short while the reply streams
    id: str = ""
    # whether the call's syntax was read to its end (its closing markup, or its arguments' last brace): later text
    # cannot change it. A call still being written, or cut there, is not complete; not part of a call's value.
    complete: bool = field(default=True, compare=False, repr=False)


@dataclass
class ParsedReply:
    """What a reply (or the reply so far) says: its content, its reasoning and its tool calls."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ParsedCall] = field(default_factory=list)


def trim(text: str) -> str:
    return text.strip(WHITESPACE)


# --- the builder


class ChatBuilder(peg.Builder):
    """PEG combinators plus the tags of a reply's parts and the usual shapes of tool calls."""

    def reasoning_block(self, p: Parser | str) -> Parser:
        return self.tag(REASONING_BLOCK, p)

    def reasoning(self, p: Parser | str) -> Parser:
        return self.tag(REASONING, p)

    def content(self, p: Parser | str) -> Parser:
        return self.tag(CONTENT, p)

    def tool(self, p: Parser | str) -> Parser:
        return self.tag(TOOL, p)

    def tool_open(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_OPEN, p))

    def tool_close(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_CLOSE, p))

    def tool_id(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_ID, p))

    def tool_name(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_NAME, p))

    def tool_args(self, p: Parser | str) -> Parser:
        return self.tag(TOOL_ARGS, p)

    def tool_arg(self, p: Parser | str) -> Parser:
        return self.tag(TOOL_ARG, p)

    def tool_arg_open(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_ARG_OPEN, p))

    def tool_arg_close(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_ARG_CLOSE, p))

    def tool_arg_name(self, p: Parser | str) -> Parser:
        return self.atomic(self.tag(TOOL_ARG_NAME, p))

    def tool_arg_value(self, p: Parser | str) -> Parser:
        return self.tag(TOOL_ARG_VALUE, p)

    def tool_arg_json_value(self, p: Parser | str) -> Parser:
        return self.tag(TOOL_ARG_VALUE, p)

    def tool_arg_string_value(self, p: Parser | str) -> Parser:
        return self.tag(TOOL_ARG_STRING_VALUE, p)

    def tag_with_safe_content(self, tag_name: str, marker: str, p: Parser) -> Parser:
        if not marker:
            return self.zero_or_more(self.choice([p, self.rule(tag_name, self.content(self.any()))]))
        chunk = self.rule(tag_name, self.content(self.negate(self.literal(marker)) + self.any() + self.until(marker)))
        return self.zero_or_more(self.choice([p, chunk]))

    def permute(self, rule_prefix: str, parsers: Sequence[Parser]) -> Parser:
        """Every one of ``parsers`` exactly once, in any order."""
        if not parsers:
            return self.eps()
        if len(parsers) == 1 or len(parsers) > MAX_PERMUTE:
            return self.sequence(list(parsers))
        cache: dict[int, Parser] = {}

        def remaining_of(remaining: int) -> Parser:
            if remaining == 0:
                return self.eps()
            if remaining not in cache:
                alternatives = self.choice([parsers[i] + remaining_of(remaining & ~(1 << i))
                                            for i in range(len(parsers)) if remaining & (1 << i)])
                cache[remaining] = self.rule(f"{rule_prefix}-{remaining}", alternatives)
            return cache[remaining]

        return remaining_of((1 << len(parsers)) - 1)

    def prefix(self, text: str, delimiter: str = "") -> Parser:
        """The generation prompt as a literal, cut before ``delimiter`` (a thinking tag the parser reads itself)."""
        if not text:
            return self.eps()
        if not delimiter:
            return self.literal(text)
        found = text.find(delimiter)
        return self.literal(text if found < 0 else text[:found])

    def optspace(self, tag: str) -> Parser:
        """``tag`` with the whitespace around it optional, character by character."""
        stripped = tag.lstrip(WHITESPACE)
        lead = tag[:len(tag) - len(stripped)]
        core = stripped.rstrip(WHITESPACE)
        trail = stripped[len(core):]
        if not core:  # all whitespace: llama.cpp's scan leaves it as one literal
            return self.literal(tag) if tag else self.eps()
        parts: list[Parser | str] = [self.optional(c) for c in lead]
        parts.append(core)
        parts.extend(self.optional(c) for c in trail)
        return self.sequence(parts)

    # --- tool-call shapes

    def standard_json_tools(self, section_start: str, section_end: str, tools: Any, parallel_tool_calls: bool,
                            force_tool_calls: bool, name_key: str = "", args_key: str = "",
                            array_wrapped: bool = False, function_is_key: bool = False, call_id_key: str = "",
                            gen_call_id_key: str = "", parameters_order: Sequence[str] = (),
                            accept_openai_wrapper: bool = False) -> Parser:
        """JSON tool calls between ``section_start`` and ``section_end``: ``{"name": …, "arguments": {…}}`` (keys
        configurable, dotted for nesting), ``{"NAME": {…}}`` (``function_is_key``), in a JSON array or not."""
        if not list(functions(tools)):
            return self.eps()
        effective_name = name_key or "name"
        effective_args = args_key or "arguments"
        if function_is_key:
            choices = self._json_tools_function_is_key(tools, args_key, effective_args, call_id_key, gen_call_id_key)
        elif "." in effective_name or "." in effective_args:
            choices = self._json_tools_nested(tools, effective_name, effective_args, call_id_key, gen_call_id_key)
        else:
            choices = self._json_tools_flat(tools, effective_name, effective_args, call_id_key, gen_call_id_key,
                                            parameters_order, accept_openai_wrapper)
        calls = choices
        if parallel_tool_calls:
            calls = calls + self.zero_or_more(self.space() + "," + self.space() + choices)
        if array_wrapped:
            calls = "[" + self.space() + calls + self.space() + "]"
        section = self.trigger_rule("tool-call", section_start + self.space() + calls + self.space() + section_end)
        return section if force_tool_calls else self.optional(section)

    def _id_field(self, key: str, numbers: bool = True) -> Parser:
        value: Parser = '"' + self.tool_id(self.string_content('"')) + '"'
        if numbers:
            value = self.choice([value, self.tool_id(self.json_number())])
        return self.atomic(f'"{key}"' + self.space() + ":" + self.space() + value)

    def _json_tools_function_is_key(self, tools: Any, args_key: str, effective_args: str, call_id_key: str,
                                    gen_call_id_key: str) -> Parser:
        choices = self.choice()
        for tool in functions(tools):
            function = tool["function"]
            name = function["name"]
            fields: list[Parser] = []
            if call_id_key:
                fields.append(self.optional(self._id_field(call_id_key, numbers=False) + self.space()
                                            + self.optional("," + self.space())))
            if gen_call_id_key:
                fields.append(self.optional(self._id_field(gen_call_id_key) + self.space()
                                            + self.optional("," + self.space())))
            arguments = self.tool_args(self.schema(self.json(), f"tool-{name}-schema", tool_parameters(function)))
            if args_key:
                arguments = f'"{effective_args}"' + self.space() + ":" + self.space() + arguments
            fields.append(arguments)
            if not args_key and len(fields) == 1:
                inner = fields[0]
            else:
                inner = self.literal("{") + self.space()
                for i, part in enumerate(fields):
                    inner = inner + part
                    if i < len(fields) - 1:
                        inner = inner + self.space()
                inner = inner + self.space() + "}"
            parser = self.tool(self.tool_open(self.literal("{")) + self.space() + '"' + self.tool_name(name) + '"'
                               + self.space() + ":" + self.space() + inner + self.space()
                               + self.tool_close(self.literal("}")))
            choices = choices | self.rule(f"tool-{name}", parser)
        return choices

    def _json_tools_nested(self, tools: Any, effective_name: str, effective_args: str, call_id_key: str,
                           gen_call_id_key: str) -> Parser:
        name_prefix, _, name_field = effective_name.rpartition(".")
        args_prefix, _, args_field = effective_args.rpartition(".")
        nested_prefix = name_prefix or args_prefix
        name_field = name_field if name_prefix else effective_name
        args_field = args_field if args_prefix else effective_args
        choices = self.choice()
        for tool in functions(tools):
            function = tool["function"]
            name = function["name"]
            nested_name = (f'"{name_field}"' + self.space() + ":" + self.space()
                           + self.atomic('"' + self.tool_name(name) + '"'))
            nested_args = (f'"{args_field}"' + self.space() + ":" + self.space()
                           + self.tool_args(self.schema(self.json(), f"tool-{name}-schema", tool_parameters(function))))
            nested = ("{" + self.space() + nested_name + self.space() + "," + self.space() + nested_args + self.space()
                      + "}")
            body = self.tool_open(self.literal("{")) + self.space()
            if call_id_key and "." not in call_id_key:
                body = body + self.optional(self._id_field(call_id_key, numbers=False) + self.space() + ","
                                            + self.space())
            if gen_call_id_key and "." not in gen_call_id_key:
                body = body + self.optional(self._id_field(gen_call_id_key) + self.space() + "," + self.space())
            body = (body + f'"{nested_prefix}"' + self.space() + ":" + self.space() + nested + self.space()
                    + self.tool_close(self.literal("}")))
            choices = choices | self.rule(f"tool-{name}", self.tool(body))
        return choices

    def _json_tools_flat(self, tools: Any, effective_name: str, effective_args: str, call_id_key: str,
                         gen_call_id_key: str, parameters_order: Sequence[str], accept_openai_wrapper: bool) -> Parser:
        choices = self.choice()
        for tool in functions(tools):
            function = tool["function"]
            name = function["name"]
            pairs: list[tuple[Parser, str]] = [
                (f'"{effective_name}"' + self.space() + ":" + self.space()
                 + self.atomic('"' + self.tool_name(name) + '"'), effective_name),
                (f'"{effective_args}"' + self.space() + ":" + self.space()
                 + self.tool_args(self.schema(self.json(), f"tool-{name}-schema", tool_parameters(function))),
                 effective_args),
            ]
            if call_id_key:
                pairs.append((self.optional(self._id_field(call_id_key)), call_id_key))
            if gen_call_id_key:
                pairs.append((self.optional(self._id_field(gen_call_id_key)), gen_call_id_key))
            order = list(parameters_order)
            pairs.sort(key=lambda pair: order.index(pair[1]) if pair[1] in order else len(order))
            body = self.tool_open(self.literal("{")) + self.space()
            if accept_openai_wrapper:
                body = body + self.optional('"type"' + self.space() + ":" + self.space() + '"function"' + self.space()
                                            + "," + self.space())
            for i, (part, _key) in enumerate(pairs):
                body = body + part
                if i < len(pairs) - 1:
                    body = body + self.space() + "," + self.space()
            body = body + self.space() + self.tool_close(self.literal("}"))
            choices = choices | self.rule(f"tool-{name}", self.tool(body))
        return choices

    def standard_constructed_tools(self, markers: dict[str, str], tools: Any, parallel_tool_calls: bool,
                                   force_tool_calls: bool) -> Parser:
        """XML-like calls: ``<tool_call><function=NAME><param=KEY>VALUE</param>…</function></tool_call>`` with the
        markers given (these are the defaults)."""
        if not list(functions(tools)):
            return self.eps()
        section_start = markers.get("tool_call_start_marker", "<tool_call>")
        section_end = markers.get("tool_call_end_marker", "</tool_call>")
        func_opener = markers.get("function_opener", "<function=")
        func_name_suffix = markers.get("function_name_suffix", ">")
        func_closer = markers.get("function_closer", "</function>")
        key_prefix = markers.get("parameter_key_prefix", "<param=")
        key_suffix = markers.get("parameter_key_suffix", ">")
        closer = markers.get("parameter_closer", "</param>")
        choices = self.choice()
        for tool in functions(tools):
            function = tool["function"]
            name = function["name"]
            args: Parser = self.eps()
            properties = tool_parameters(function).get("properties") or {}
            if properties:
                arg_choice = self.choice()
                for prop in properties:
                    arg_name = self.choice([prop, f'"{prop}"', f"'{prop}'"])
                    arg_choice = arg_choice | self.tool_arg(
                        self.tool_arg_open(self.literal(key_prefix)) + self.tool_arg_name(arg_name) + key_suffix
                        + self.tool_arg_value(self.until(closer)) + self.tool_arg_close(self.literal(closer)))
                args = self.zero_or_more(arg_choice + self.space())
            parser = self.tool(self.tool_open(func_opener + self.tool_name(name) + func_name_suffix) + self.space()
                               + self.tool_args(args) + self.space() + self.tool_close(self.literal(func_closer)))
            choices = choices | self.rule(f"tool-{name}", parser)
        if parallel_tool_calls:
            section = self.trigger_rule("tool-call", section_start + self.space()
                                        + self.one_or_more(choices + self.space()) + section_end)
        else:
            section = self.trigger_rule("tool-call", section_start + self.space() + choices + self.space()
                                        + section_end)
        return section if force_tool_calls else self.optional(section)

    def named_parameters(self, function: dict[str, Any], opener: str, closer: str, string_value: Parser) -> Parser:
        """A function's parameters, any of them in any order, each ``opener NAME">VALUE closer``: a string (what the
        schema lets be one) as ``string_value`` reads it, any other value as JSON of its schema (MiniCPM5's
        ``<param name="…">``, Muse Glimmer's ``<atem:parameter name="…">``)."""
        name = function["name"]
        arg_rules: list[Parser] = []
        for param in parameters(function):
            if param.may_be_string():
                value = string_value
            else:
                value = (self.tool_arg_json_value(self.schema(self.json(), f"tool-{name}-arg-{param.name}-schema",
                                                              param.document()))
                         + self.tool_arg_close(self.literal(closer)))
            arg_rules.append(self.tool_arg(self.tool_arg_open(
                self.literal(opener) + self.tool_arg_name(self.literal(param.name)) + self.literal('">')) + value))
        return self.zero_or_more(self.choice(arg_rules) + self.space()) if arg_rules else self.eps()

    def python_or_json_value(self) -> Parser:
        """A Python value whose leaves may also be JSON's true, false and null (LFM2)."""
        def value() -> Parser:
            ws = self.space()
            inner = self.python_or_json_value()
            member = self.sequence([self.python_string(), ws, ":", ws, inner])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, ",", ws, member]))])
            dict_ = self.rule("python-or-json-dict", lambda: self.sequence(
                ["{", ws, self.choice(["}", self.sequence([members, ws, "}"])]), ws]))
            elements = self.sequence([inner, self.zero_or_more(self.sequence([",", ws, inner]))])
            array = self.rule("python-or-json-array", lambda: self.sequence(
                ["[", ws, self.choice(["]", self.sequence([elements, ws, "]"])]), ws]))
            return self.choice([dict_, array, self.python_string(), self.python_number(), self.python_bool(),
                                self.python_null(), self.json_bool(), self.json_null()])
        return self.rule("python-or-json-value", value)

    def python_style_tool_calls(self, tools: Any, parallel_tool_calls: bool, allow_json_literals: bool) -> Parser:
        """``[name(arg="value", other=2), …]`` (LFM2)."""
        if not list(functions(tools)):
            return self.eps()
        choices = self.choice()
        for tool in functions(tools):
            function = tool["function"]
            name = function["name"]
            args: Parser = self.eps()
            properties = tool_parameters(function).get("properties") or {}
            if properties:
                arg_choice = self.choice()
                for prop, definition in properties.items():
                    is_string = isinstance(definition, dict) and definition.get("type") == "string"
                    string_value = self.tool_arg_value(self.choice([
                        '"' + self.string_content('"') + '"', "'" + self.string_content("'") + "'"]))
                    value = string_value if is_string else self.tool_arg_value(
                        self.python_or_json_value() if allow_json_literals else self.python_value())
                    arg_choice = arg_choice | self.tool_arg(
                        self.tool_arg_open(self.tool_arg_name(prop) + "=") + value + self.tool_arg_close(self.eps()))
                args = arg_choice + self.zero_or_more("," + self.space() + arg_choice)
            parser = self.tool(self.tool_open(self.tool_name(name) + "(") + self.space() + self.tool_args(args)
                               + self.space() + self.tool_close(self.literal(")")))
            choices = choices | self.rule(f"tool-{name}", parser)
        if parallel_tool_calls:
            return "[" + self.space() + choices + self.zero_or_more("," + self.space() + choices) + self.space() + "]"
        return "[" + self.space() + choices + self.space() + "]"


def build(make: Callable[[ChatBuilder], Parser]) -> peg.Grammar_:
    builder = ChatBuilder()
    return builder.build(make(builder))


# --- from the tree to the message


def json_brace_depth(text: str) -> int:
    """Unclosed ``{`` in JSON-like text, braces inside strings not counted."""
    depth, in_string, escaped = 0, False, False
    for c in text:
        if escaped:
            escaped = False
        elif c == "\\" and in_string:
            escaped = True
        elif c == '"':
            in_string = not in_string
        elif not in_string:
            depth += (c == "{") - (c == "}")
    return depth


def escape_json_inner(text: str) -> str:
    """``text`` as the inside of a JSON string."""
    return peg.json_text(text)[1:-1]


_PY_LITERALS = (("True", "true"), ("False", "false"), ("None", "null"))


def normalize_quotes_to_json(text: str) -> str:
    """Python-style values as JSON: single-quoted strings double-quoted, True/False/None as JSON's literals (a
    prefix of one as a prefix of the other, so a streamed value only grows)."""
    out: list[str] = []
    in_single = in_double = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if in_single:
                out.append("'" if nxt == "'" else '\\"' if nxt == '"' else c + nxt)
                i += 2
                continue
            if in_double:
                out.append(c + nxt)
                i += 2
                continue
            out.append(c)
            i += 1
            continue
        if c == '"':
            if in_single:
                out.append('\\"')
            else:
                in_double = not in_double
                out.append(c)
        elif c == "'":
            if in_double:
                out.append(c)
            else:
                in_single = not in_single
                out.append('"')
        elif not in_single and not in_double and c in "TFN" and (i == 0 or not _word_char(text[i - 1])):
            j = i
            while j < n and _word_char(text[j]):
                j += 1
            token = text[i:j]
            for python, js in _PY_LITERALS:
                if python[:len(token)] == token:
                    out.append(js[:len(token)])
                    i = j
                    break
            else:
                out.append(c)
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


class Mapper:
    """Builds the message from a parse's tree: reasoning and content concatenated, tool calls from their name, id and
    arguments (a whole JSON object, or built argument by argument from tagged names and values)."""

    def __init__(self) -> None:
        self.result = ParsedReply()
        self._pending: ParsedCall | None = None
        self._current: ParsedCall | None = None
        self._arg_count = 0
        self._quote_pending = False
        self._args_buffer = ""
        self._tool_partial = True  # whether the call being read is cut short (its TOOL node, seen before its parts)
        self.text_end = -1  # the length of the text read: a call's closing that matched nothing there is not seen

    def from_nodes(self, nodes: Sequence[Node]) -> ParsedReply:
        for node in peg.walk(nodes):
            self.map(node)
        if self._pending is not None and self._pending.name:  # a call cut short, its name known
            self._pending.complete = False
            if self._args_buffer:
                self._pending.arguments = self._args_buffer
            if self._quote_pending and self._pending.arguments:
                self._pending.arguments += '"'
            self.result.tool_calls.append(self._pending)
            self._pending = None
        if self.result.reasoning and not self.result.reasoning.strip(" \n\r\t"):
            self.result.reasoning = ""  # an empty <think></think> block
        return self.result

    def _target_append(self, text: str) -> None:
        if self._current is not None and self._current.name:
            self._current.arguments += text
        else:
            self._args_buffer += text

    def _target_set(self, text: str) -> None:
        if self._current is not None and self._current.name:
            self._current.arguments = text
        else:
            self._args_buffer = text

    def _target_empty(self) -> bool:
        if self._current is not None and self._current.name:
            return not self._current.arguments
        return not self._args_buffer

    def normalize_container_value(self, text: str) -> str:
        return normalize_quotes_to_json(text)

    def map(self, node: Node) -> None:
        tag = node.tag
        if not tag:
            return
        if tag == REASONING:
            self.result.reasoning += node.text
        elif tag == CONTENT:
            self.result.content += node.text
        elif tag == TOOL:
            self._tool_partial = node.partial
        elif tag == TOOL_OPEN:
            self._pending = ParsedCall(complete=not self._tool_partial)
            self._tool_partial = True  # a parser that marks no TOOL around its next call: not known complete
            self._current = self._pending
            self._arg_count = 0
            self._args_buffer = ""
            self._quote_pending = False
        elif tag == TOOL_ID and self._current is not None:
            text = node.text.rstrip(WHITESPACE)
            if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                text = text[1:-1]
            self._current.id = text
        elif tag == TOOL_NAME and self._current is not None:
            self._current.name = node.text.rstrip(WHITESPACE)
            if self._args_buffer:
                self._current.arguments = self._args_buffer
                self._args_buffer = ""
            elif not self._current.arguments:
                self._current.arguments = "{"
            if self._pending is not None:  # seen by the stream from now on
                self.result.tool_calls.append(self._pending)
                self._current = self._pending
                self._pending = None
        elif tag == TOOL_ARGS and self._current is not None:
            text = node.text.rstrip(WHITESPACE)
            if text.startswith("{"):
                self._target_set(text)
        elif tag == TOOL_ARG_OPEN:
            self._quote_pending = False
        elif tag == TOOL_ARG_NAME and self._current is not None:
            entry = ("," if self._arg_count > 0 else "") + peg.json_text(trim_arg_name(node.text)) + ":"
            self._arg_count += 1
            if self._target_empty():
                self._target_set("{")
            self._target_append(entry)
        elif tag in (TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE) and self._current is not None:
            value = node.text
            if tag == TOOL_ARG_STRING_VALUE:
                add = ""
                if not value or not self._quote_pending:
                    add = '"'
                    self._quote_pending = True
                self._target_append(add + escape_json_inner(value))
            elif value:
                self._target_append(self.normalize_container_value(value))
        elif tag == TOOL_ARG_CLOSE and self._current is not None:
            if self._quote_pending:
                self._target_append('"')
                self._quote_pending = False
        elif tag == TOOL_CLOSE and self._current is not None:
            current = self._current
            if node.end >= self.text_end >= 0 and not node.text.strip(WHITESPACE):
                current.complete = False  # an optional end marker not written yet: more of the call may come
            if not current.name and self._args_buffer:
                current.arguments = self._args_buffer
                self._args_buffer = ""
            if self._quote_pending:
                current.arguments += '"'
                self._quote_pending = False
            current.arguments += "}" * max(json_brace_depth(current.arguments), 0)
            if self._pending is not None:
                if current.name:
                    self.result.tool_calls.append(self._pending)
                self._pending = None


class TreeMapper(Mapper):
    """A mapper for families that build each call's arguments from their own syntax tree (Gemma 4, MiniMax M3):
    reasoning and content as tagged (an empty thought kept as it is), each call from ``call_of`` its tool node."""

    def from_nodes(self, nodes: Sequence[Node]) -> ParsedReply:
        for node in nodes:
            self._visit(node)
        return self.result

    def call_of(self, node: Node) -> ParsedCall | None:
        raise NotImplementedError

    def _visit(self, node: Node) -> None:
        if node.tag == REASONING:
            self.result.reasoning += node.text
        elif node.tag == CONTENT:
            self.result.content += node.text
        elif node.tag == TOOL:
            call = self.call_of(node)
            if call is not None:
                call.complete = not node.partial
                self.result.tool_calls.append(call)
        else:
            for child in node.children:
                self._visit(child)


def trim_arg_name(text: str) -> str:
    """An argument name's whitespace around it: one leading character at most, as llama.cpp's trim()."""
    if text[:1] in WHITESPACE and text:
        text = text[1:]
    return text.rstrip(WHITESPACE)


def parse(grammar: peg.Grammar_, text: str, partial: bool,
          mapper: Callable[[], Mapper] = Mapper) -> ParsedReply:
    """``text`` (the generation prompt, then the reply so far) read by ``grammar``. A whole reply that does not
    match raises ``ValueError``; a partial one gives what was read."""
    reply, failed_at = read(grammar, text, mapper, final=not partial)
    if reply is None:
        if partial and failed_at > 0:
            return ParsedReply()  # a failed parse keeps no syntax tree
        raise ValueError("the reply does not match the model's format")
    return reply


def read(grammar: peg.Grammar_, text: str, mapper: Callable[[], Mapper] = Mapper,
         final: bool = False) -> tuple[ParsedReply | None, int]:
    """``text`` read by ``grammar`` (``final``: the whole reply, nothing more will come): the message and -1, or
    None and where the parse failed (no text that follows makes it match)."""
    result, _ctx = grammar.parse(text, final=final)
    if result.fail:
        return None, result.end
    reader = mapper()
    reader.text_end = len(text)
    return reader.from_nodes(result.nodes), -1


def args_as_json(arguments: str) -> Any:
    """A call's arguments parsed, or None while they are not yet whole JSON."""
    try:
        return json.loads(arguments)
    except ValueError:
        return None
