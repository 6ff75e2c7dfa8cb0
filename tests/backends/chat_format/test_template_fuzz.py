"""Property-based tests of the chat-template renderer (backends/chat_format/template.py): any template, built from the
constructs real chat templates use and the ones that blow up (big numbers, ``*``, ``**``, ``~`` in loops, padding
filters, recursive macros, nested loops), renders or raises TemplateError with a sentence, and never takes memory
beyond the render's budget. The budget is made small here so each example stays fast; its size is a constant,
the mechanism is what is tested."""

from __future__ import annotations

import contextlib
import tracemalloc
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.chat_format import template as chat_template
from tests.fixtures.limits import capped_examples

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>hm</think>Hello"}]
STEPS, CHARS = 20_000, 1 << 20



@contextlib.contextmanager
def small_budget() -> Iterator[None]:
    saved = chat_template.BASE_STEPS, chat_template.BASE_CHARS
    chat_template.BASE_STEPS, chat_template.BASE_CHARS = STEPS, CHARS
    try:
        yield
    finally:
        chat_template.BASE_STEPS, chat_template.BASE_CHARS = saved


numbers = st.sampled_from([0, 1, 2, 3, 9, 64, 65, 65536, 65537, 10**6, 10**9, 2**63, -1, -(10**9)])
literals = (numbers.map(str) | st.sampled_from(["'x'", "'ab\\n'", "''", "'%s'", "'%9999999d'", "'{:>99999999}'",
                                               "'{}'", "'\\t'", "[1, 2]", "{'a': 1}", "none", "true", "'<|im_end|>'"]))
atoms = literals | st.sampled_from(["messages", "messages[0]", "messages[-1]['content']", "message", "ns.s", "ns.l",
                                    "bos_token", "loop.index", "x", "range(3)", "range(65536)", "add_generation_prompt"])
FILTERS = ["center({n})", "indent({n})", "join", "join({e})", "replace({e}, {e})", "batch({n}, {e})", "slice({n}, {e})",
           "format({e})", "tojson", "tojson(indent={n})", "tojson(ensure_ascii=true, indent={n}, sort_keys=true)",
           "tojson(separators=({e}, {e}))", "safe", "list", "length", "upper", "trim", "string", "first", "last",
           "map('upper')", "select", "reverse", "sort", "unique", "wordwrap({n})", "truncate({n})", "default({e})",
           "dictsort", "items", "int", "float", "abs", "round", "sum", "e", "urlize", "pprint"]
METHODS = ["center({n})", "ljust({n})", "zfill({n})", "expandtabs({n})", "replace({e}, {e})", "format({e})", "split({e})",
           "join({e})", "strip()", "startswith({e})", "get({e})", "items()", "upper()", "append({e})", "extend({e})",
           "pop()", "insert({n}, {e})"]


def expressions(depth: int = 3) -> st.SearchStrategy[str]:
    if depth == 0:
        return atoms
    sub = expressions(depth - 1)
    binary = st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from(["+", "*", "**", "%", "~", "//", "-"]),
                       sub)
    filtered = st.builds(lambda a, f, n, e: f"({a})|" + f.format(n=n, e=e), sub, st.sampled_from(FILTERS), numbers, sub)
    called = st.builds(lambda a, m, n, e: f"({a}).{m.format(n=n, e=e)}", sub, st.sampled_from(METHODS), numbers, sub)
    sliced = st.builds(lambda a, i: f"({a})[{i}]", sub, st.sampled_from(["1:", ":-1", "::-1", "0", "-9:"]))
    return atoms | binary | filtered | called | sliced | st.builds(lambda a: f"[{a}, {a}]", sub)


def statements(depth: int = 3) -> st.SearchStrategy[str]:
    expr = expressions()
    leaf = (expr.map(lambda e: "{{ " + e + " }}") | expr.map(lambda e: "{% set ns.s = " + e + " %}")
            | expr.map(lambda e: "{% set ns.l = ns.l + [" + e + "] %}") | expr.map(lambda e: "{% set x = " + e + " %}")
            | st.sampled_from(["text", "{{ f(x) }}"]))
    if depth == 0:
        return leaf
    body = st.lists(statements(depth - 1), min_size=1, max_size=3).map("".join)
    in_loop = st.sampled_from(["", "", "{{ loop(ns.l) }}", "{{ loop(x) }}", "{% break %}"])
    loop = st.builds(lambda it, b, extra: "{% for x in " + it + " recursive %}" + b + extra + "{% endfor %}",
                     expr, body, in_loop)
    cond = st.builds(lambda c, b: "{% if " + c + " %}" + b + "{% endif %}", expr, body)
    block = st.builds(lambda b: "{% set y %}" + b + "{% endset %}{{ y }}", body)
    return leaf | loop | cond | block


templates = st.builds(
    lambda macro, body: "{% set ns = namespace(s='', l=[]) %}"
                        + "{% macro f(x) %}" + macro + "{% endmacro %}" + body,
    statements(1), st.lists(statements(), min_size=1, max_size=4).map("".join))


@settings(max_examples=4 * settings().max_examples)  # bombs are rare among the shapes: more tries
@given(source=templates)
@capped_examples
def test_any_template_renders_or_says_why_within_its_budget(source):
    tracemalloc.start()
    try:
        try:
            with small_budget():
                text = chat_template.render(source, MESSAGES)
            assert isinstance(text, str)
        except chat_template.TemplateError as exc:
            assert str(exc) and "\n" not in str(exc)[:300]
            assert "MemoryError" not in str(exc), "the render hit the address-space cap: unbounded"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Text is at most 4 bytes a character; lists of it add pointers: a few times the character budget.
    assert peak < 40 * CHARS + (16 << 20), f"{peak >> 20} MiB"


@pytest.mark.usefixtures("address_space_cap")
@pytest.mark.parametrize("source", [
    "{{ 'x' * 10**10 }}",
    "{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(s='x' * 60000) %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{{ 'a'.center(10**9) }}",
    "{{ ('x' * 60000).replace('', 'y' * 60000) }}",
    "{{ '%999999999d' % 1 }}",
    "{{ '{:>999999999}'.format(1) }}",
    "{% set l = ['x' * 60000] * 60000 %}{{ l }}",
    "{% set l = ['x' * 60000] * 60000 %}{{ l|join }}",
    "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "{% for x in [1, 2] recursive %}{{ loop([1, 2]) }}{% endfor %}",
    "{% set s %}{% for i in range(60000) %}" + "x" * 1000 + "{% endfor %}{% endset %}{{ s|length }}",
    "{{ range(3)|batch(10**9, 'x')|list }}",
    "{{ lipsum(100000) }}",
    "{% set ns = namespace(x=10**60) %}{% for i in range(9) %}{% set ns.x = ns.x ** 60 %}{% endfor %}",
    "{{ ('\n' * 60000)|indent(60000) }}",
    # tojson's keyword arguments: 300 nested lists indented 60,000 each, every character escaped 12-fold
    "{% set ns = namespace(l=[]) %}{% for i in range(300) %}{% set ns.l = [ns.l] %}{% endfor %}"
    "{{ ns.l|tojson(indent=60000) }}",
    "{{ (('😀' * 60000) * 60)|tojson(ensure_ascii=true) }}",
    "{% set ns = namespace(l=[1]) %}{% for i in range(120) %}{% set ns.l = [ns.l] %}{% endfor %}"
    "{{ ns.l|tojson(indent='x' * 60000) }}",
    # a template's own lists: doubled by extend, filled two loops deep, holding themselves
    "{% set l = ['x' * 60000] %}{% for i in range(40) %}{% set _ = l.extend(l) %}{% endfor %}{{ l|length }}",
    "{% set l = [] %}{% for i in range(60000) %}{% for j in range(60000) %}{% set _ = l.append(j) %}{% endfor %}"
    "{% endfor %}",
    "{% set l = [] %}{% set _ = l.append(l) %}{{ l|tojson }}",
    "{% set l = [] %}{% set _ = l.append(l) %}{{ l }}",
])
def test_known_bombs_stop_with_a_sentence(source):
    """Each of these took gigabytes or minutes before the budget existed (with the real budget)."""
    with pytest.raises(chat_template.TemplateError, match="chat template") as error:
        chat_template.render(source, MESSAGES)
    assert "MemoryError" not in str(error.value)


@pytest.mark.usefixtures("address_space_cap")
@pytest.mark.parametrize("source", ["{{ 'x'|center(10**9) }}{{ tools }}", "{{ '%999999999d' % 1 }}{{ tools }}",
                                    "{{ ((10**9)[1:])|center(10**9) }}"])
def test_asking_whether_a_template_reads_tools_builds_nothing(source):
    """tool_calls.template_format asks at every load: jinja2.meta's code generator would fold the constants (call
    the filter, format the string) while compiling, outside the sandbox."""
    assert chat_template.declares_tools(source) == ("tools" in source)
