"""A reply parser as an llguidance grammar: the same definition that reads a family's replies also forces them.

llama.cpp turns each family's PEG parser into a GBNF grammar (``common_peg_arena::build_grammar`` in
``common/peg-parser.cpp``): eagerly (the whole reply, from the generation prompt on) when a tool call is required or
a response format is asked for, lazily (only the trigger rules: the tool calls, which the sampler starts enforcing
once a trigger word or pattern shows up) for ``tool_choice: auto``. ``to_lark`` does the same for llguidance, the
grammar engine QuantDesk decodes with (backends/json_schema.py), in its Lark dialect:

- literals, sequences, choices and repetitions as themselves; ``any`` as one character; ``space`` as llama.cpp's
  ``space`` rule (nothing, a blank, or one or two newlines and an indent of at most 20);
- ``until`` as text that does not contain its delimiters (llama.cpp's "excluding" automaton; here a terminal
  intersected with the negation of "contains a delimiter"), ``rest`` as any text;
- a JSON schema (a tool's parameters, the response format) as ``%json {…}``, with llama.cpp's whitespace;
- a given grammar (``gbnf``) as its text, and ``ac`` as "up to and including the first delimiter";
- tags, atomics and rules transparent; a rule is a Lark rule (or a terminal, see below);
- a lookahead (``peek``, ``negate``) as nothing, as llama.cpp's build_grammar leaves it out ("lookahead not
  supported in GBNF"): the grammar accepts a little more than the parser, never less.

One difference of engines shapes the output. llama.cpp's GBNF sampler follows every reading of the text at once,
character by character; llguidance lexes — a terminal (a *lexeme*) extends for as long as it can, and only then
does the next one begin. Text "up to ``<function``" followed by the literal ``<function`` would, as two lexemes,
swallow the beginning of the delimiter and fail. So every stretch of the parser that is a regular language (no JSON
schema, no given grammar, no recursion) becomes one terminal, and a stretch followed by more of the grammar is
joined with the regular beginnings of what may follow (``content until <function`` + ``<function name="f">`` as
one lexeme per tool): a single lexeme's automaton sees where the text stops and the call starts. Text up to a
delimiter that the delimiter then follows is "up to and including its *first* occurrence", a language no word of
which extends another, so that a lexeme ends there even where the delimiter overlaps itself (``\n</parameter>\n``).

Where the engine's vocabulary has the format's markers as special tokens (``<|start|>``, ``[TOOL_CALLS]``), pass
them: llguidance matches a special token only where the grammar names it, never as text. A marker then cannot sit
inside free text (content, thinking, a string value) as llama.cpp's GBNF sampler, which reads a token's text, lets it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.chat_format import builder, peg, tool_schema

# llama.cpp's ``space`` rule (json-schema-to-grammar.cpp's SPACE_RULE: | " " | "\n"{1,2} [ \t]{0,20}), used between
# the parts of its JSON too
SPACE_REGEX = r"(?: |\n{1,2}[ \t]{0,20})?"
# common_peg_string_parser's GBNF: ( [^"\\] | "\\" ( ["\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )*
STRING_CONTENT_REGEX = r"(?:[^{d}\\]|\\(?:[{d}\\/ bfnrt]|u[0-9a-fA-F]{{4}}))*"
MAX_ALTERNATIVES = 64  # beyond this many ways a stretch may continue, it stays a lexeme of its own

_Alternative = tuple[tuple[peg.Parser, ...], "peg.Parser | None"]  # (regular beginning, what follows it or None)


def to_lark(grammar: peg.Grammar_, lazy: bool = False, special_tokens: Mapping[str, int] | None = None,
            content: bool = True) -> str:
    """``grammar`` (a built reply parser) as an llguidance Lark grammar. ``lazy``: only its trigger rules (llama.cpp's
    lazy grammar, which the caller starts at the trigger's position), else the whole reply from its first character
    (the generation prompt included: llama.cpp feeds it to the grammar before the reply).

    ``special_tokens``: the model's special tokens (gpt-oss's ``<|start|>``, Cohere's ``<|START_ACTION|>``…), text
    -> token id. llguidance matches a special token only as itself (``<[id]>`` in the grammar), never as the text of
    a literal, so a literal that holds one is written as its text around the token; text lexemes end where a special
    token comes.

    ``content`` False: the reply's free text (its content, what a format lets come before a tool call) is left out,
    so a required call comes right after the thinking, as OpenAI's ``tool_choice: required`` has it, instead of after
    whatever preamble a weak model would write first (llama.cpp's grammar lets one come)."""
    tokens = {text: token for text, token in (special_tokens or {}).items() if text}
    return _Compiler(grammar, special=tuple(sorted(tokens, key=len, reverse=True)), token_ids=tokens,
                     content=content).compile(lazy)


def schema_lark(schema: Any, lenient: bool = True) -> str:
    """A JSON schema as llguidance's ``%json``, its whitespace llama.cpp's, keywords llguidance does not implement
    left unenforced where ``lenient`` (llama.cpp's schema converter ignores what it does not know: a tool's
    parameters); a response format the caller asked to be held to keeps its own choice (backends/json_schema.py:
    a strict schema's unenforceable keyword is refused in words, not ignored)."""
    if schema is True or schema is None:
        schema = {}  # any JSON value
    if isinstance(schema, dict):
        options = {"whitespace_flexible": False, "whitespace_pattern": SPACE_REGEX,
                   **({"lenient": True} if lenient else {}), **(schema.get("x-guidance") or {})}
        schema = {**schema, "x-guidance": options}
    return "%json " + json.dumps(schema, ensure_ascii=False)


def lark_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


_REGEX_SPECIAL = set("\\.+*?()|[]{}^$#&-~")


def regex_escape(text: str) -> str:
    """``text`` as a Rust regex (llguidance's) matching it literally; control characters as escapes."""
    out = []
    for c in text:
        if c in _REGEX_SPECIAL:
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{{{ord(c):02X}}}")
        else:
            out.append(c)
    return "".join(out)


def _regex(pattern: str) -> str:
    return "/" + pattern.replace("/", "\\/") + "/"


def _quantified(body: str, min_count: int, max_count: int) -> str:
    if (min_count, max_count) == (1, 1):
        return body
    if (min_count, max_count) == (0, 1):
        return body + "?"
    if (min_count, max_count) == (0, -1):
        return body + "*"
    if (min_count, max_count) == (1, -1):
        return body + "+"
    if max_count == -1:
        return f"{body}{{{min_count},}}"
    if min_count == max_count:
        return f"{body}{{{min_count}}}"
    return f"{body}{{{min_count},{max_count}}}"


def _delegates(schema: peg.Schema) -> bool:
    """A schema node whose grammar is its child's (llama.cpp's schema_delegates): none given, or a raw value that may
    be a string (the text itself is the value, not its JSON)."""
    if schema.schema is None:
        return True
    return schema.raw and tool_schema.may_be_string(schema.schema, schema.schema)


# in a given Lark expression: a string, a regex (left alone) or a name
_GIVEN_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|/(?:[^/\\]|\\.)+/|[A-Za-z_][A-Za-z0-9_-]*')
_EMPTY = (peg.Epsilon, peg.Start, peg.End, peg.Peek, peg.Not)
_NOTHING = peg.Epsilon()  # what the reply's content is where the grammar leaves it out


class _UpToFirst(peg.Parser):
    """Text up to and including the first of ``delimiters`` (llama.cpp's ``ac``, and an ``until`` with the delimiter
    that follows it): a language no word of which extends another, so that llguidance's lexer ends it right there
    even where a delimiter overlaps itself (``\n</parameter>\n``: text that ends with ``\n</parameter>`` and then
    the delimiter holds the delimiter earlier)."""

    def __init__(self, delimiters: Sequence[str], ends: Sequence[str] = ()) -> None:
        self.delimiters = tuple(delimiters)
        self.ends = tuple(ends) or self.delimiters  # the delimiters it may end with


class _Token(peg.Parser):
    """A special token inside a literal (see to_lark's ``special_tokens``)."""

    def __init__(self, text: str) -> None:
        self.text = text


class _Unrolled(peg.Repeat):
    """What is left of a repetition once its first turn was joined to the text before it: not unrolled again."""


@dataclass
class _Compiler:
    grammar: peg.Grammar_
    special: tuple[str, ...] = ()  # special tokens' texts, longest first
    token_ids: dict[str, int] = field(default_factory=dict)
    content: bool = True  # False: the reply's free text (CONTENT tags) matches nothing
    lines: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # a PEG rule's name -> its Lark rule or terminal
    taken: set[str] = field(default_factory=lambda: {"start"})
    terminals: dict[str, str] = field(default_factory=dict)  # a terminal's body -> its name
    lowered: dict[int, tuple[peg.Grammar, peg.Parser]] = field(default_factory=dict)  # ac -> _UpToFirst
    schemas: dict[int, tuple[peg.Schema, str]] = field(default_factory=dict)  # a schema node -> its rule
    # id(node) -> (node, whether regular): the node is kept so that its id is not reused for another
    _regular: dict[int, tuple[peg.Parser, bool]] = field(default_factory=dict)
    _recursive: dict[str, bool] = field(default_factory=dict)
    # memos, keyed by the ids of the parts (kept in the values, so that no id is reused for another part)
    _joined: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[Any, Any, str | None]] = field(default_factory=dict)
    _sequences: dict[tuple[tuple[int, ...], frozenset[str]], tuple[Any, list[_Alternative] | None]] = field(
        default_factory=dict)
    _unrolled: dict[int, tuple[peg.Repeat, _Unrolled]] = field(default_factory=dict)
    _literals: dict[str, peg.Literal] = field(default_factory=dict)
    _pieces: dict[str, list[peg.Parser]] = field(default_factory=dict)
    _visiting: set[str] = field(default_factory=set)

    def compile(self, lazy: bool) -> str:
        if lazy:
            triggers = sorted(name for name, rule in self.grammar.rules.items()
                              if isinstance(rule, peg.Rule) and rule.trigger)
            root = " | ".join(self.rule_ref(name) for name in triggers)
        else:
            root = self.expr(self.grammar.root)
        return "\n".join([f"start: {root}", *self.lines]) + "\n"

    # --- names

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def rule_body(self, name: str) -> peg.Parser:
        rule = self.grammar.rules[name]
        return rule.child if isinstance(rule, peg.Rule) else rule

    def rule_ref(self, name: str) -> str:
        """A PEG rule as a Lark rule (lowercase) or, where its language is regular, a terminal (uppercase)."""
        if name in self.names:
            return self.names[name]
        body = self.rule_body(name)
        base = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "rule"
        if self.regular(body):
            lark = self.names[name] = self.fresh("R_" + base.upper())
            self.lines.append(f"{lark}: {self.term(body)}")
        else:
            lark = self.names[name] = self.fresh("r_" + base)
            self.lines.append(f"{lark}: {self.expr(body)}")
        return lark

    def terminal(self, body: str) -> str:
        """A named terminal for a terminal expression (one lexeme, however long)."""
        if body not in self.terminals:
            self.terminals[body] = name = self.fresh(f"T{len(self.terminals) + 1}")
            self.lines.append(f"{name}: {body}")
        return self.terminals[body]

    def pieces(self, text: str) -> list[peg.Parser]:
        """A literal's text as its plain text and the special tokens in it."""
        if text not in self._pieces:
            self._pieces[text] = self._split(text)
        return self._pieces[text]

    def _split(self, text: str) -> list[peg.Parser]:
        out: list[peg.Parser] = []
        start = i = 0
        while i < len(text):
            token = next((t for t in self.special if t and text.startswith(t, i)), None)
            if token is None:
                i += 1
                continue
            if i > start:
                out.append(self.literal(text[start:i]))
            out.append(_Token(token))
            start = i = i + len(token)
        if start < len(text):
            out.append(self.literal(text[start:]))
        return out

    def has_token(self, node: peg.Parser) -> bool:
        return isinstance(node, peg.Literal) and any(t and t in node.literal for t in self.special)

    def unwrap(self, node: peg.Parser) -> peg.Parser:
        """The node that matters for the grammar: tags, atomics and delegating schemas are transparent, and ``ac``
        is text up to and including the first delimiter (where a delimiter holds a special token: text without one,
        then one)."""
        while True:
            if not self.content and isinstance(node, peg.Tag) and node.tag == builder.CONTENT:
                return _NOTHING
            if isinstance(node, (peg.Tag, peg.Atomic)):
                node = node.child
            elif isinstance(node, peg.Schema) and _delegates(node):
                node = node.child
            elif isinstance(node, peg.Grammar) and node.until_including:
                if id(node) not in self.lowered:
                    delimiters = node.until_including
                    if any(t and t in d for t in self.special for d in delimiters):  # a token ends the text
                        lowered: peg.Parser = peg.Sequence_([
                            peg.Until(delimiters), peg.choice([peg.Literal(d) for d in delimiters])])
                    else:
                        lowered = _UpToFirst(delimiters)
                    self.lowered[id(node)] = (node, lowered)
                node = self.lowered[id(node)][1]
            else:
                return node

    # --- which parts are regular languages

    def regular(self, node: peg.Parser) -> bool:
        key = id(node)
        if key not in self._regular:
            self._regular[key] = (node, self._is_regular(node))
        return self._regular[key][1]

    def _is_regular(self, node: peg.Parser) -> bool:
        node = self.unwrap(node)
        if isinstance(node, _Token) or self.has_token(node):
            return False  # a special token is no text: it cannot be part of a lexeme
        if isinstance(node, peg.Schema):
            return False  # JSON: a grammar of its own
        if isinstance(node, peg.Grammar):  # (``ac`` was unwrapped): a grammar given in Lark, or an empty one
            return not node.lark
        if isinstance(node, peg.Sequence_):  # (a token may also span literals side by side)
            return all(self.regular(c) for c in node.children) and not (
                self.special and any(isinstance(item, _Token) for item in self.items(node)))
        if isinstance(node, peg.Choice):
            return all(self.regular(c) for c in node.children)
        if isinstance(node, peg.Repeat):
            return self.regular(node.child)
        if isinstance(node, peg.Rule):
            return self.regular(node.child)
        if isinstance(node, peg.Ref):
            if node.name in self._visiting:
                return False  # a rule inside itself: JSON values nest
            self._visiting.add(node.name)
            try:
                return self.regular(self.rule_body(node.name))
            finally:
                self._visiting.discard(node.name)
        return True

    # --- terminal expressions (regular nodes only)

    def term(self, node: peg.Parser) -> str:
        node = self.unwrap(node)
        if isinstance(node, _EMPTY):
            return '""'
        if isinstance(node, peg.Literal):
            return lark_string(node.literal)
        if isinstance(node, peg.Sequence_):
            parts = [p for p in (self.term(c) for c in self.first_occurrences(self.items(node))) if p != '""']
            return "(" + " ".join(parts) + ")" if len(parts) > 1 else (parts or ['""'])[0]
        if isinstance(node, peg.Choice):
            if not node.children:
                return _regex("[^\\x00-\\x{10FFFF}]")  # an empty choice matches nothing
            return "(" + " | ".join(self.term(c) for c in node.children) + ")"
        if isinstance(node, peg.Repeat):
            return _quantified("(" + self.term(node.child) + ")", node.min_count, node.max_count)
        if isinstance(node, peg.Any_):
            return _regex("(?s:.)")
        if isinstance(node, peg.Space):
            return _regex(SPACE_REGEX)
        if isinstance(node, peg.Chars):
            body = node.classes if node.classes.startswith("[") else f"[{node.classes}]"
            return _regex(_quantified(body, node.min_count, node.max_count))
        if isinstance(node, peg.StringContent):
            d = regex_escape(node.delimiter)
            return _regex(STRING_CONTENT_REGEX.format(d=d))
        if isinstance(node, peg.Until):
            return self.until(node.delimiters)
        if isinstance(node, _UpToFirst):  # ends with a delimiter, and none comes before its end
            ends = "(?:" + "|".join(regex_escape(d) for d in node.ends) + ")"
            anywhere = "(?:" + "|".join(regex_escape(d) for d in node.delimiters) + ")"
            return self.terminal(f"{_regex('(?s:.*)' + ends)} & ~{_regex('(?s:.*)' + anywhere + '(?s:.+)')}")
        if isinstance(node, peg.Grammar):
            return '""'  # an empty given grammar: the part is not constrained at all
        if isinstance(node, peg.Rule):
            return self.term(node.child)
        if isinstance(node, peg.Ref):
            return self.rule_ref(node.name)
        raise TypeError(f"no grammar for {type(node).__name__}")

    def first_occurrences(self, items: list[peg.Parser]) -> list[peg.Parser]:
        """A regular sequence's parts, each ``until`` followed by a literal that starts with one of its delimiters
        read as text up to and including the first delimiter, then the rest of the literal: an until stops at the
        first delimiter, which a lexeme of "no delimiter inside, then the literal" does not say where the delimiter
        overlaps itself (see _UpToFirst)."""
        out: list[peg.Parser] = []
        i = 0
        while i < len(items):
            item = items[i]
            following = self.literal_of(items[i + 1]) if i + 1 < len(items) else None
            if isinstance(item, peg.Until) and item.delimiters and following is not None:
                starts = sorted((d for d in item.delimiters if following.startswith(d)), key=len)
                if starts:  # (the shortest: a longer one would hold it)
                    out.append(_UpToFirst(item.delimiters, starts[:1]))
                    if following[len(starts[0]):]:
                        out.append(peg.Literal(following[len(starts[0]):]))
                    i += 2
                    continue
            out.append(item)
            i += 1
        return out

    def literal_of(self, node: peg.Parser) -> str | None:
        """The text of a part that is one literal (directly, or a rule that is one), else None."""
        node = self.unwrap(node)
        if isinstance(node, peg.Ref) and not self.recursive(node.name):
            node = self.unwrap(self.rule_body(node.name))
        return node.literal if isinstance(node, peg.Literal) else None

    def until(self, delimiters: Sequence[str]) -> str:
        """Text that does not contain any of ``delimiters`` (any text, without any)."""
        if not delimiters:
            return _regex("(?s:.*)")
        alternatives = "|".join(regex_escape(d) for d in delimiters)
        return self.terminal(f"{_regex('(?s:.*)')} & ~{_regex(f'(?s:.*)(?:{alternatives})(?s:.*)')}")

    def recursive(self, name: str) -> bool:
        """Whether the rule ``name`` can reach itself."""
        if name not in self._recursive:
            seen: set[str] = set()
            stack: list[peg.Parser] = [self.rule_body(name)]
            found = False
            while stack and not found:
                node = stack.pop()
                if isinstance(node, peg.Ref):
                    found = node.name == name
                    if node.name not in seen:
                        seen.add(node.name)
                        stack.append(self.rule_body(node.name))
                elif isinstance(node, (peg.Sequence_, peg.Choice)):
                    stack.extend(node.children)
                elif isinstance(node, (peg.Repeat, peg.Peek, peg.Not, peg.Atomic, peg.Tag, peg.Schema, peg.Rule,
                                       peg.Grammar)):
                    stack.append(node.child)
            self._recursive[name] = found
        return self._recursive[name]

    # --- rule expressions (any node)

    def expr(self, node: peg.Parser) -> str:
        node = self.unwrap(node)
        if self.regular(node):
            if isinstance(node, peg.Ref):
                return self.rule_ref(node.name)
            body = self.term(node)
            return "" if body == '""' else self.terminal(body)
        if isinstance(node, _Token):
            return f"<[{self.token_ids[node.text]}]>"  # llguidance's reference to a token by its id
        if isinstance(node, (peg.Sequence_, peg.Literal)):  # (a literal here holds a special token)
            return self.sequence(self.items(node))
        if isinstance(node, peg.Choice):
            return "(" + " | ".join(self.expr(c) or '""' for c in node.children) + ")"
        if isinstance(node, peg.Repeat):
            return _quantified("(" + self.expr(node.child) + ")", node.min_count, node.max_count)
        if isinstance(node, peg.Schema):  # one rule each, however many alternatives lead to it
            if id(node) not in self.schemas:
                name = self.fresh("json_" + re.sub(r"[^a-z0-9]+", "_", node.name.lower()).strip("_"))
                response_format = node.name.startswith("response-format")  # the caller's own: its strictness
                self.lines.append(f"{name}: {schema_lark(node.schema, lenient=not response_format)}")
                self.schemas[id(node)] = (node, name)
            return self.schemas[id(node)][1]
        if isinstance(node, peg.Grammar):  # a grammar given in Lark
            name = self.fresh("given")
            self.lines.append(f"{name}: {self.given(node.lark)}")
            return name
        if isinstance(node, peg.Rule):
            return self.expr(node.child)
        if isinstance(node, peg.Ref):
            return self.rule_ref(node.name)
        raise TypeError(f"no grammar for {type(node).__name__}")

    def given(self, lark: str) -> str:
        """A Lark expression given by a parser (llama.cpp's ``gbnf``), where the parser's own rules go by their names
        (``xml-arg-string``), as GBNF names them: those names become the rules' Lark names."""
        def name(match: re.Match[str]) -> str:
            word = match.group(0)
            if word[0] in "\"/" or word not in self.grammar.rules:
                return word
            return self.rule_ref(word)

        return _GIVEN_TOKENS.sub(name, lark)

    def items(self, node: peg.Parser) -> list[peg.Parser]:
        """A sequence's parts, nested sequences and transparent wrappers flattened, empty parts left out; with special
        tokens, literals side by side read as one (``function`` + ``<｜tool▁sep｜>``) and split at the tokens."""
        flat = self.flat(node)
        if not self.special:
            return flat
        merged: list[peg.Parser] = []
        for item in flat:
            if isinstance(item, peg.Literal) and merged and isinstance(merged[-1], peg.Literal):
                merged[-1] = self.literal(merged[-1].literal + item.literal)
            else:
                merged.append(item)
        return [piece for item in merged
                for piece in (self.pieces(item.literal) if isinstance(item, peg.Literal) else [item])]

    def flat(self, node: peg.Parser) -> list[peg.Parser]:
        node = self.unwrap(node)
        if isinstance(node, peg.Sequence_):
            return [item for child in node.children for item in self.flat(child)]
        return [] if isinstance(node, _EMPTY) else [node]

    def literal(self, text: str) -> peg.Literal:
        """One literal object for each text (the memos go by the parts' ids)."""
        if text not in self._literals:
            self._literals[text] = peg.Literal(text)
        return self._literals[text]

    def sequence(self, items: list[peg.Parser]) -> str:
        out: list[str] = []
        i = 0
        while i < len(items):
            if not self.regular(items[i]):
                out.append(self.expr(items[i]))
                i += 1
                continue
            j = i
            while j < len(items) and self.regular(items[j]):
                j += 1
            if j < len(items):
                group = self.joined(tuple(items[i:j]), tuple(items[j:]))
                if group is not None:
                    out.append(group)
                    break
            out.append(self.expr(peg.Sequence_(items[i:j])))
            i = j
        return " ".join(p for p in out if p)

    def joined(self, run: tuple[peg.Parser, ...], following: tuple[peg.Parser, ...]) -> str | None:
        """The regular stretch ``run`` and what follows it, as a Lark rule whose alternatives each join the stretch
        and one regular beginning of what follows into one lexeme (see the module's doc); None where nothing can be
        joined. One rule for each stretch and continuation, however many alternatives lead to it."""
        key = (tuple(map(id, run)), tuple(map(id, following)))
        if key not in self._joined:
            name = None
            alternatives = self.alternatives(peg.Sequence_(list(following)))
            if alternatives is not None and any(prefix for prefix, _ in alternatives):
                joined = []
                for prefix, rest in alternatives:
                    head = self.expr(peg.Sequence_([*run, *prefix]))
                    tail = self.expr(rest) if rest is not None else ""
                    joined.append(" ".join(p for p in (head, tail) if p) or '""')
                name = self.fresh(f"joined_{len(self._joined) + 1}")
                self.lines.append(f"{name}: " + " | ".join(dict.fromkeys(joined)))
            self._joined[key] = (run, following, name)
        return self._joined[key][2]

    def alternatives(self, node: peg.Parser, expanding: frozenset[str] = frozenset()) -> list[_Alternative] | None:
        """``node`` as the ways it may begin: (a regular beginning, what follows it), or None beyond
        MAX_ALTERNATIVES. A repetition is unrolled once at most, a rule inside itself not at all."""
        node = self.unwrap(node)
        found: list[_Alternative]
        if self.regular(node):
            found = [((node,), None)]
        elif isinstance(node, (peg.Sequence_, peg.Literal)):  # (a literal here holds a special token)
            return self.sequence_alternatives(tuple(self.items(node)), expanding)
        elif isinstance(node, peg.Choice):
            found = []
            for child in node.children:
                child_alternatives = self.alternatives(child, expanding)
                if child_alternatives is None:
                    return None
                found.extend(child_alternatives)
        elif isinstance(node, peg.Repeat):
            if node.max_count == 0:
                return [((), None)]
            if isinstance(node, _Unrolled):
                return [((), node)]
            if id(node) not in self._unrolled:
                self._unrolled[id(node)] = (node, _Unrolled(node.child, max(node.min_count - 1, 0),
                                                            -1 if node.max_count == -1 else node.max_count - 1))
            again = self._unrolled[id(node)][1]
            first = self.alternatives(node.child, expanding)
            if first is None:
                return None
            more = again.max_count != 0
            found = [] if node.min_count > 0 else [((), None)]
            for prefix, rest in first:
                if rest is None and not more:
                    found.append((prefix, None))
                elif rest is None:
                    found.append((prefix, again))
                else:
                    found.append((prefix, peg.Sequence_([rest, again]) if more else rest))
        elif isinstance(node, peg.Rule):
            return self.alternatives(node.child, expanding)
        elif isinstance(node, peg.Ref):
            if node.name in expanding or self.recursive(node.name):
                return [((), node)]  # (JSON values nest: their rules stay rules)
            return self.alternatives(self.rule_body(node.name), expanding | {node.name})
        else:  # a JSON schema or a given grammar
            found = [((), node)]
        return found if len(found) <= MAX_ALTERNATIVES else None

    def sequence_alternatives(self, items: tuple[peg.Parser, ...],
                              expanding: frozenset[str]) -> list[_Alternative] | None:
        """The ways a sequence of ``items`` may begin (see alternatives)."""
        key = (tuple(map(id, items)), expanding)
        if key not in self._sequences:
            self._sequences[key] = (items, self._sequence_alternatives(items, expanding))
        return self._sequences[key][1]

    def _sequence_alternatives(self, items: tuple[peg.Parser, ...],
                               expanding: frozenset[str]) -> list[_Alternative] | None:
        if not items:
            return [((), None)]
        first = self.alternatives(items[0], expanding)
        if first is None:
            return None
        found: list[_Alternative] = []
        for prefix, rest in first:
            if rest is not None:
                found.append((prefix, peg.Sequence_([rest, *items[1:]]) if items[1:] else rest))
                continue
            following = self.sequence_alternatives(items[1:], expanding)
            if following is None:
                return None
            found.extend((prefix + more, after) for more, after in following)
            if len(found) > MAX_ALTERNATIVES:
                return None
        return found
