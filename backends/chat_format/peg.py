"""Parsing expression grammars that read a model's reply while it is still being written.

The reply parsers of every model family are built from these few combinators, with the same semantics as llama.cpp's
own (``common/peg-parser.cpp`` in the llama.cpp that llama-cpp-python vendors), so that a family ported from llama.cpp
reads a reply exactly as llama-server does (tests/backends/chat_format/test_llama_cpp_conformance.py holds us to it).

A parse is *lenient*: input that ends inside a literal, a string or an ``until`` is not a failure but
``NEED_MORE`` — the reply so far, read as far as it goes. Parsing the growing reply again after each chunk therefore
yields results that only ever grow (content is appended to, a tool call's arguments are extended), which is what
lets the engine stream reasoning, content and tool calls as separate deltas.

Parsers are plain objects combined with operators, as in llama.cpp's builder: ``a + b`` a sequence, ``a | b`` a
choice, ``a << b`` a sequence with optional whitespace between, and a ``str`` on either side is a literal. Tags
(``tag(name, p)``) and rules name the parts of the syntax tree a mapper turns into a message (backends/chat_format
/builder.py). ``backends/chat_format/grammar.py``'s ``to_lark`` turns a built parser into an llguidance grammar, so
the same definition that reads a family's tool calls can also force one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

FAIL, SUCCESS, NEED_MORE = 0, 1, 2

_SPACE = re.compile(r"[ \t\n\v\f\r]*")  # C's isspace on ASCII, as llama.cpp's space() skips


@dataclass
class Node:
    """A node of the syntax tree: a rule or a tag that matched ``text`` (``partial``: the input ended inside it)."""

    rule: str
    tag: str
    start: int
    end: int
    text: str
    children: list[Node]
    partial: bool = False

    def find(self, tag: str, max_depth: int = 3) -> Node | None:
        """The first descendant tagged ``tag`` within ``max_depth`` levels (llama.cpp's find_by_tag)."""
        for child in self.children:
            if child.tag == tag:
                return child
            if max_depth > 1:
                found = child.find(tag, max_depth - 1)
                if found is not None:
                    return found
        return None

    def find_rule(self, rule: str, max_depth: int = 3) -> Node | None:
        for child in self.children:
            if child.rule == rule:
                return child
            if max_depth > 1:
                found = child.find_rule(rule, max_depth - 1)
                if found is not None:
                    return found
        return None


@dataclass
class Result:
    type: int
    start: int
    end: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def fail(self) -> bool:
        return self.type == FAIL

    @property
    def success(self) -> bool:
        return self.type == SUCCESS

    @property
    def need_more(self) -> bool:
        return self.type == NEED_MORE


def walk(nodes: Sequence[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and below, parents before their children, in input order."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


class Context:
    def __init__(self, text: str, rules: dict[str, Parser], lenient: bool = True, final: bool = False) -> None:
        self.text = text
        self.rules = rules
        self.lenient = lenient
        self.final = final  # the text is the whole reply: nothing more will come


class Parser:
    """One combinator. Subclasses implement ``parse``; the operators build sequences and choices."""

    def parse(self, ctx: Context, pos: int) -> Result:
        raise NotImplementedError

    def __add__(self, other: Parser | str) -> Parser:
        return sequence([self, _as_parser(other)])

    def __radd__(self, other: str) -> Parser:
        return sequence([Literal(other), self])

    def __or__(self, other: Parser | str) -> Parser:
        return choice([self, _as_parser(other)])

    def __ror__(self, other: str) -> Parser:
        return choice([Literal(other), self])

    def __lshift__(self, other: Parser | str) -> Parser:
        return sequence([self, Space(), _as_parser(other)])

    def __rlshift__(self, other: str) -> Parser:
        return sequence([Literal(other), Space(), self])


def _as_parser(value: Parser | str) -> Parser:
    return Literal(value) if isinstance(value, str) else value


class Epsilon(Parser):
    def parse(self, ctx: Context, pos: int) -> Result:
        return Result(SUCCESS, pos, pos)


class Start(Parser):
    def parse(self, ctx: Context, pos: int) -> Result:
        return Result(SUCCESS if pos == 0 else FAIL, pos, pos)


class End(Parser):
    def parse(self, ctx: Context, pos: int) -> Result:
        return Result(SUCCESS if pos >= len(ctx.text) else FAIL, pos, pos)


class Literal(Parser):
    def __init__(self, literal: str) -> None:
        self.literal = literal

    def parse(self, ctx: Context, pos: int) -> Result:
        text, literal = ctx.text, self.literal
        if text.startswith(literal, pos):
            return Result(SUCCESS, pos, pos + len(literal))
        rest = text[pos:pos + len(literal)]
        if len(rest) < len(literal) and literal.startswith(rest):  # the input ends inside the literal
            return Result(NEED_MORE, pos, len(text)) if ctx.lenient else Result(FAIL, pos, pos)
        return Result(FAIL, pos, pos)


class Sequence_(Parser):
    def __init__(self, children: list[Parser]) -> None:
        self.children = children

    def parse(self, ctx: Context, pos: int) -> Result:
        start, nodes = pos, []
        for child in self.children:
            result = child.parse(ctx, pos)
            if result.type == FAIL:
                return Result(FAIL, start, result.end)
            nodes.extend(result.nodes)
            if result.type == NEED_MORE:
                return Result(NEED_MORE, start, result.end, nodes)
            pos = result.end
        return Result(SUCCESS, start, pos, nodes)


class Choice(Parser):
    def __init__(self, children: list[Parser]) -> None:
        self.children = children

    def parse(self, ctx: Context, pos: int) -> Result:
        for child in self.children:
            result = child.parse(ctx, pos)
            if result.type != FAIL:
                return result
        return Result(FAIL, pos, pos)


class Repeat(Parser):
    def __init__(self, child: Parser, min_count: int, max_count: int) -> None:
        self.child, self.min_count, self.max_count = child, min_count, max_count

    def parse(self, ctx: Context, pos: int) -> Result:
        start, count, nodes = pos, 0, []
        size = len(ctx.text)
        while self.max_count == -1 or count < self.max_count:
            if pos >= size:
                break
            result = self.child.parse(ctx, pos)
            if result.type == SUCCESS:
                if result.end == pos:  # an empty match would loop forever
                    break
                nodes.extend(result.nodes)
                pos = result.end
                count += 1
                continue
            if result.type == NEED_MORE:
                nodes.extend(result.nodes)
                return Result(NEED_MORE, start, result.end, nodes)
            break
        if self.min_count > 0 and count < self.min_count:
            if pos >= size and ctx.lenient:
                return Result(NEED_MORE, start, pos, nodes)
            return Result(FAIL, start, pos)
        return Result(SUCCESS, start, pos, nodes)


class Peek(Parser):
    """Positive lookahead: the child's verdict, nothing consumed."""

    def __init__(self, child: Parser) -> None:
        self.child = child

    def parse(self, ctx: Context, pos: int) -> Result:
        return Result(self.child.parse(ctx, pos).type, pos, pos)


class Not(Parser):
    def __init__(self, child: Parser) -> None:
        self.child = child

    def parse(self, ctx: Context, pos: int) -> Result:
        found = self.child.parse(ctx, pos).type
        if found == SUCCESS:
            return Result(FAIL, pos, pos)
        if found == NEED_MORE:  # what follows decides
            return Result(NEED_MORE, pos, pos)
        return Result(SUCCESS, pos, pos)


class Any_(Parser):
    def parse(self, ctx: Context, pos: int) -> Result:
        if pos >= len(ctx.text):
            return Result(NEED_MORE if ctx.lenient else FAIL, pos, pos)
        return Result(SUCCESS, pos, pos + 1)


class Space(Parser):
    def parse(self, ctx: Context, pos: int) -> Result:
        match = _SPACE.match(ctx.text, pos)
        return Result(SUCCESS, pos, match.end() if match else pos)


class Chars(Parser):
    """Characters of a class (``"[0-9]"``, ``"[^\\n]"``), between ``min_count`` and ``max_count`` (-1: no limit)."""

    def __init__(self, classes: str, min_count: int = 1, max_count: int = -1) -> None:
        self.classes, self.min_count, self.max_count = classes, min_count, max_count
        body = classes[1:-1] if classes.startswith("[") and classes.endswith("]") else classes
        upper = "" if max_count == -1 else str(max_count)
        self._pattern = re.compile(f"[{body}]{{0,{upper}}}" if upper else f"[{body}]*")

    def parse(self, ctx: Context, pos: int) -> Result:
        match = self._pattern.match(ctx.text, pos)
        end = match.end() if match else pos
        if end - pos < self.min_count:
            if end >= len(ctx.text) and ctx.lenient:
                return Result(NEED_MORE, pos, end)
            return Result(FAIL, pos, end)
        return Result(SUCCESS, pos, end)


_ESCAPES = {'"': re.compile(r'(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*'),
            "'": re.compile(r"(?:[^'\\]|\\['\\/bfnrt]|\\u[0-9a-fA-F]{4})*")}
_PARTIAL_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")


class StringContent(Parser):
    """The inside of a quoted string up to (not including) its closing ``delimiter``, JSON escapes checked."""

    def __init__(self, delimiter: str) -> None:
        self.delimiter = delimiter
        self._body = _ESCAPES.get(delimiter) or re.compile(
            rf"(?:[^{re.escape(delimiter)}\\]|\\[{re.escape(delimiter)}\\/bfnrt]|\\u[0-9a-fA-F]{{4}})*")

    def parse(self, ctx: Context, pos: int) -> Result:
        text = ctx.text
        match = self._body.match(text, pos)
        end = match.end() if match else pos
        if end >= len(text):
            return Result(NEED_MORE if ctx.lenient else FAIL, pos, end)
        if text[end] == self.delimiter:
            return Result(SUCCESS, pos, end)
        if ctx.lenient and _PARTIAL_ESCAPE.match(text, end):  # an escape cut by the end of the input
            return Result(NEED_MORE, pos, end)
        return Result(FAIL, pos, pos)


class Ahead(Parser):
    """Whether ``literal`` comes from here on before any of ``stops``, nothing consumed; while the reply may still
    go on and neither has come, more is needed (what depends on it is held back)."""

    def __init__(self, literal: str, stops: Sequence[str] = ()) -> None:
        self.literal, self.stops = literal, tuple(s for s in stops if s)

    def parse(self, ctx: Context, pos: int) -> Result:
        text = ctx.text
        found = text.find(self.literal, pos)
        stop = min((at for s in self.stops if (at := text.find(s, pos)) >= 0), default=-1)
        if found >= 0 and (stop < 0 or found < stop):
            return Result(SUCCESS, pos, pos)
        if stop >= 0 or ctx.final or not ctx.lenient:
            return Result(FAIL, pos, pos)
        return Result(NEED_MORE, pos, pos)


class Until(Parser):
    """Everything up to the first of ``delimiters`` (not consumed), or up to where the input ends inside one."""

    def __init__(self, delimiters: Sequence[str]) -> None:
        self.delimiters = tuple(d for d in delimiters if d)

    def parse(self, ctx: Context, pos: int) -> Result:
        text, size = ctx.text, len(ctx.text)
        stop = size
        for delimiter in self.delimiters:
            found = text.find(delimiter, pos)
            if found >= 0:
                stop = min(stop, found)
            for k in range(max(pos, size - len(delimiter) + 1), stop):  # its beginning at the end of the input
                if delimiter.startswith(text[k:]):
                    stop = k
                    break
        if stop < size:
            return Result(SUCCESS, pos, stop)
        return Result(NEED_MORE if ctx.lenient else SUCCESS, pos, size)


class Schema(Parser):
    """A parser whose grammar is a JSON schema (the tool's arguments); it parses as its child does."""

    def __init__(self, child: Parser, name: str, schema: Any, raw: bool = False) -> None:
        self.child, self.name, self.schema, self.raw = child, name, schema, raw

    def parse(self, ctx: Context, pos: int) -> Result:
        return self.child.parse(ctx, pos)


class Rule(Parser):
    def __init__(self, name: str, child: Parser, trigger: bool = False) -> None:
        self.name, self.child, self.trigger = name, child, trigger

    def parse(self, ctx: Context, pos: int) -> Result:
        result = self.child.parse(ctx, pos)
        if result.type == FAIL:
            return result
        node = Node(self.name, "", result.start, result.end, ctx.text[result.start:result.end], result.nodes,
                    result.type == NEED_MORE)
        return Result(result.type, result.start, result.end, [node])


class Ref(Parser):
    """A named rule, looked up when parsing: rules may refer to themselves (JSON values nest)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def parse(self, ctx: Context, pos: int) -> Result:
        return ctx.rules[self.name].parse(ctx, pos)


class Atomic(Parser):
    """Makes no syntax-tree nodes from a child that only partly matched: a half-written name is no name yet."""

    def __init__(self, child: Parser) -> None:
        self.child = child

    def parse(self, ctx: Context, pos: int) -> Result:
        result = self.child.parse(ctx, pos)
        if result.type == NEED_MORE:
            result.nodes = []
        return result


class Tag(Parser):
    def __init__(self, tag: str, child: Parser) -> None:
        self.tag, self.child = tag, child

    def parse(self, ctx: Context, pos: int) -> Result:
        result = self.child.parse(ctx, pos)
        if result.type == FAIL:
            return result
        node = Node("", self.tag, result.start, result.end, ctx.text[result.start:result.end], result.nodes,
                    result.type == NEED_MORE)
        return Result(result.type, result.start, result.end, [node])


class Grammar(Parser):
    """Parses as its child; its grammar is given (``gbnf`` in llama.cpp) or is 'up to and including a delimiter'."""

    def __init__(self, child: Parser, lark: str = "", until_including: Sequence[str] = ()) -> None:
        self.child, self.lark, self.until_including = child, lark, tuple(until_including)

    def parse(self, ctx: Context, pos: int) -> Result:
        return self.child.parse(ctx, pos)


def sequence(parts: Sequence[Parser | str]) -> Parser:
    flat: list[Parser] = []
    for part in parts:
        parser = _as_parser(part)
        if isinstance(parser, Sequence_):
            flat.extend(parser.children)
        elif not isinstance(parser, Epsilon):
            flat.append(parser)
    if not flat:
        return Epsilon()
    return flat[0] if len(flat) == 1 else Sequence_(flat)


def choice(parts: Sequence[Parser | str] = ()) -> Parser:
    flat: list[Parser] = []
    for part in parts:
        parser = _as_parser(part)
        flat.extend(parser.children if isinstance(parser, Choice) else [parser])
    return Choice(flat)


@dataclass
class Grammar_:
    """A built parser: its root and its named rules."""

    root: Parser
    rules: dict[str, Parser]

    def parse(self, text: str, lenient: bool = True, final: bool = False) -> tuple[Result, Context]:
        ctx = Context(text, self.rules, lenient, final)
        return self.root.parse(ctx, 0), ctx


class Builder:
    """Makes parsers; keeps the named rules (llama.cpp's common_peg_parser_builder)."""

    def __init__(self) -> None:
        self.rules: dict[str, Parser] = {}

    # --- the combinators
    def eps(self) -> Parser:
        return Epsilon()

    def start(self) -> Parser:
        return Start()

    def end(self) -> Parser:
        return End()

    def literal(self, text: str) -> Parser:
        return Literal(text)

    def sequence(self, parts: Sequence[Parser | str]) -> Parser:
        return sequence(parts)

    def choice(self, parts: Sequence[Parser | str] = ()) -> Parser:
        return choice(parts)

    def repeat(self, p: Parser | str, min_count: int, max_count: int) -> Parser:
        return Repeat(_as_parser(p), min_count, max_count)

    def one_or_more(self, p: Parser | str) -> Parser:
        return self.repeat(p, 1, -1)

    def zero_or_more(self, p: Parser | str) -> Parser:
        return self.repeat(p, 0, -1)

    def optional(self, p: Parser | str) -> Parser:
        return self.repeat(p, 0, 1)

    def peek(self, p: Parser | str) -> Parser:
        return Peek(_as_parser(p))

    def ahead(self, literal: str, stops: Sequence[str] = ()) -> Parser:
        return Ahead(literal, stops)

    def negate(self, p: Parser | str) -> Parser:
        return Not(_as_parser(p))

    def any(self) -> Parser:
        return Any_()

    def space(self) -> Parser:
        return Space()

    def chars(self, classes: str, min_count: int = 1, max_count: int = -1) -> Parser:
        return Chars(classes, min_count, max_count)

    def until(self, delimiter: str) -> Parser:
        return Until([delimiter])

    def until_one_of(self, delimiters: Sequence[str]) -> Parser:
        return Until(delimiters)

    def rest(self) -> Parser:
        return Until([])

    def string_content(self, delimiter: str) -> Parser:
        return StringContent(delimiter)

    def atomic(self, p: Parser | str) -> Parser:
        return Atomic(_as_parser(p))

    def tag(self, name: str, p: Parser | str) -> Parser:
        return Tag(name, _as_parser(p))

    def schema(self, p: Parser, name: str, schema: Any, raw: bool = False) -> Parser:
        return Schema(p, name, schema, raw)

    def gbnf(self, p: Parser, lark: str) -> Parser:
        return Grammar(p, lark=lark)

    def ac(self, p: Parser, delimiters: str | Sequence[str]) -> Parser:
        return Grammar(p, until_including=[delimiters] if isinstance(delimiters, str) else delimiters)

    def rule(self, name: str, p: Parser | Callable[[], Parser], trigger: bool = False) -> Parser:
        """A named rule (a node of the syntax tree). ``p`` may be a function that builds it, for rules that refer to
        themselves: it is built once, and later calls return the same rule."""
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", name)
        if callable(p) and not isinstance(p, Parser):
            if name in self.rules:
                return Ref(name)
            self.rules[name] = Rule(name, Any_(), trigger)  # a placeholder while the body refers to itself
            self.rules[name] = Rule(name, p(), trigger)
            return Ref(name)
        self.rules[name] = Rule(name, _as_parser(p), trigger)
        return Ref(name)

    def trigger_rule(self, name: str, p: Parser | Callable[[], Parser]) -> Parser:
        return self.rule(name, p, trigger=True)

    def ref(self, name: str) -> Parser:
        return Ref(name)

    def build(self, root: Parser) -> Grammar_:
        return Grammar_(root, self.rules)

    # --- strings, JSON and Python values
    def double_quoted_string(self) -> Parser:
        return self.rule("double-quoted-string", lambda: self.sequence(['"', self.string_content('"'), '"']))

    def single_quoted_string(self) -> Parser:
        return self.rule("single-quoted-string", lambda: self.sequence(["'", self.string_content("'"), "'"]))

    def quoted_string(self) -> Parser:
        return self.rule("quoted-string", lambda: self.choice([self.double_quoted_string(),
                                                                self.single_quoted_string()]))

    def json_number(self) -> Parser:
        def number() -> Parser:
            int_part = self.choice(["0", self.sequence([self.chars("[1-9]", 1, 1), self.chars("[0-9]", 0, -1)])])
            frac = self.sequence([".", self.chars("[0-9]")])
            exp = self.sequence([self.choice(["e", "E"]), self.optional(self.chars("[+-]", 1, 1)),
                                 self.chars("[0-9]")])
            # commit a number only once the next character cannot extend it ("3" while "3.14" is coming)
            return self.sequence([self.optional("-"), int_part, self.optional(frac), self.optional(exp),
                                  self.negate(self.chars("[0-9.eE+-]", 1, 1))])
        return self.rule("json-number", number)

    def json_string(self) -> Parser:
        return self.rule("json-string", lambda: self.sequence(['"', self.string_content('"'), '"']))

    def json_bool(self) -> Parser:
        return self.rule("json-bool", lambda: self.choice(["true", "false"]))

    def json_null(self) -> Parser:
        return self.rule("json-null", lambda: self.literal("null"))

    def json_object(self) -> Parser:
        def obj() -> Parser:
            ws = self.space()
            member = self.sequence([self.json_string(), ws, ":", ws, self.json()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, ",", ws, member]))])
            return self.sequence(["{", ws, self.choice(["}", self.sequence([members, ws, "}"])])])
        return self.rule("json-object", obj)

    def json_array(self) -> Parser:
        def array() -> Parser:
            ws = self.space()
            elements = self.sequence([self.json(), self.zero_or_more(self.sequence([ws, ",", ws, self.json()]))])
            return self.sequence(["[", ws, self.choice(["]", self.sequence([elements, ws, "]"])])])
        return self.rule("json-array", array)

    def json(self) -> Parser:
        return self.rule("json-value", lambda: self.choice([self.json_object(), self.json_array(), self.json_string(),
                                                            self.json_number(), self.json_bool(), self.json_null()]))

    def json_member(self, key: str, p: Parser) -> Parser:
        ws = self.space()
        return self.sequence([f'"{key}"', ws, ":", ws, p])

    def python_string(self) -> Parser:
        return self.rule("python-string", lambda: self.choice([self.double_quoted_string(),
                                                                self.single_quoted_string()]))

    def python_number(self) -> Parser:
        return self.json_number()

    def python_bool(self) -> Parser:
        return self.rule("python-bool", lambda: self.choice(["True", "False"]))

    def python_null(self) -> Parser:
        return self.rule("python-none", lambda: self.literal("None"))

    def python_dict(self) -> Parser:
        def dict_() -> Parser:
            ws = self.space()
            member = self.sequence([self.python_string(), ws, ":", ws, self.python_value()])
            members = self.sequence([member, self.zero_or_more(self.sequence([ws, ",", ws, member]))])
            return self.sequence(["{", ws, self.choice(["}", self.sequence([members, ws, "}"])]), ws])
        return self.rule("python-dict", dict_)

    def python_array(self) -> Parser:
        def array() -> Parser:
            ws = self.space()
            elements = self.sequence([self.python_value(),
                                      self.zero_or_more(self.sequence([",", ws, self.python_value()]))])
            return self.sequence(["[", ws, self.choice(["]", self.sequence([elements, ws, "]"])]), ws])
        return self.rule("python-array", array)

    def python_value(self) -> Parser:
        return self.rule("python-value", lambda: self.choice([
            self.python_dict(), self.python_array(), self.python_string(), self.python_number(), self.python_bool(),
            self.python_null()]))

    def marker(self) -> Parser:
        """Text between ``<`` and ``>`` or ``[`` and ``]``."""
        return self.choice([self.sequence(["<", self.until(">"), ">"]), self.sequence(["[", self.until("]"), "]"])])


def json_text(value: Any) -> str:
    """``value`` as llama.cpp's nlohmann::json dumps it: compact, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
