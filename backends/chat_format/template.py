"""Render a model's Jinja chat template safely, as Hugging Face's ``apply_chat_template`` renders it.

Chat templates come from model files, i.e. from strangers. They are rendered in jinja2's
ImmutableSandboxedEnvironment, which refuses attribute access to Python internals (``__class__``,
``__globals__``...) — the hole behind llama-cpp-python's CVE-2024-34359 (GHSA-56xg-wfcc-g829) — and refuses to
mutate what it is given (``messages.append(...)``).
The globals and filters mirror what transformers' ``apply_chat_template`` offers (``tojson`` with its keyword
arguments ``ensure_ascii``, ``indent``, ``separators``, ``sort_keys``; ``raise_exception``; ``strftime_now``; the
``{% generation %}`` tag, whose body is simply rendered), so real templates render the same here as in transformers.
Where transformers fails and llama.cpp's own Jinja engine (``common/jinja``) renders, three things follow llama.cpp:
a list the template built itself (``[]``, ``namespace(ids=[])``) may be changed with ``append``/``pop``/…
(Kimi K2 queues its tool-call ids that way), a missing value or ``none`` added to a string with ``+`` counts as
"" (FireFunction v2 adds an undefined ``functions``), and ``tojson`` takes the generator ``map`` returns.

The sandbox guards Python's internals, not the machine: ``{{ 'x' * 10**10 }}``, two nested loops over
``range(100000)`` or a string doubled thirty times would take the engine's memory or time. So every render runs
on a budget (``_Budget``) of steps (loop turns, calls, filters, items measured) and of characters built, both
in proportion to the messages plus a fixed allowance far above what real templates use. The template is
rewritten once, when it is compiled, so that loop and macro bodies, ``~`` joins and slices charge it (and list
literals become the template's own lists); the environment charges operators, calls, filters and printed values,
and refuses numeric arguments (widths, counts, exponents) beyond ``MAX_ARGUMENT``. Sizes are checked before the
work where the work could be large.

``probe`` renders the fixed conversations of ``backends/chat_format/capabilities.py`` with values that record what
the template did with them (read, iterated, tested as a string), as llama.cpp's ``caps.cpp`` does with its engine's
usage statistics; an ordinary render records nothing.
"""

from __future__ import annotations

import contextvars
import datetime
import functools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from backends.chat_format.probe_values import USES, Probe, note, note_deep, probe_value

# ChatML: what we use when a model ships no template (most base models).
FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Budget per render: this much, plus a share per message and per character of the messages. Real templates take
# tens of steps per message and print each message about once; a hostile one stops within a few seconds.
BASE_STEPS = 500_000
STEPS_PER_MESSAGE = 100
BASE_CHARS = 32 << 20
CHARS_PER_INPUT_CHAR = 16
MAX_ARGUMENT = 1 << 16  # the largest number a call, filter or operator may take (a width, a count, a power)
_FORMAT_WIDTH = re.compile(r"\d{6,}")  # a width or precision of 100,000 or more inside a format string

# The names the renderer itself gives a template: a request's variables may not replace them.
RESERVED_NAMES = frozenset({"messages", "tools", "bos_token", "eos_token", "add_generation_prompt", "raise_exception",
                            "strftime_now", "namespace", "range", "dict", "cycler", "joiner", "lipsum", "loop"})
_MAX_VARIABLE_DEPTH = 32


class TemplateError(Exception):
    """The template is broken or tried something the sandbox forbids."""


class VariableError(TemplateError):
    """A request's template variables are not what a template may be given (a reserved name, a non-JSON value)."""


class _Budget:
    def __init__(self, n_messages: int, input_chars: int) -> None:
        self.steps = BASE_STEPS + STEPS_PER_MESSAGE * n_messages
        self.chars = BASE_CHARS + CHARS_PER_INPUT_CHAR * input_chars
        self.total_steps, self.total_chars = self.steps, self.chars

    def step(self, n: int = 1) -> None:
        self.steps -= n
        if self.steps < 0:
            raise TemplateError(f"the chat template did more than {self.total_steps:,} steps of work and was "
                                "stopped")

    def text(self, n: int) -> None:
        self.chars -= n
        if self.chars < 0:
            raise TemplateError(f"the chat template built more than {self.total_chars:,} characters of text and "
                                "was stopped")


_BUDGET: contextvars.ContextVar[_Budget] = contextvars.ContextVar("chat_template_budget")


class _TemplateList(list[Any]):
    """A list the template made itself (a ``[...]`` literal, or ``+`` of one): the template may change it, as
    llama.cpp's engine lets it. What the template is given stays immutable."""


_LIST_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "reverse", "clear"})


def _text_size(value: Any) -> int:
    """An upper bound on len(str(value)), charged to the budget as it walks (a list holding one big string
    100,000 times prints as 100,000 copies of it). Stops as soon as the size passes what is left."""
    budget = _BUDGET.get()
    budget.step()
    if isinstance(value, str):  # most printed values: no walk
        return len(value)
    from jinja2.utils import Namespace

    uses = USES.set(None)  # measuring is not the template reading a probe's values
    try:
        total, stack = 0, [value]
        while stack and total <= budget.chars:
            item = stack.pop()
            budget.step()
            if isinstance(item, str):
                total += str.__len__(item)
            elif isinstance(item, (list, tuple, set, frozenset)):
                total += 2 + 2 * len(item)
                stack.extend(item)
            elif isinstance(item, dict):
                total += 2 + 4 * len(item)
                stack.extend(dict.keys(item))
                stack.extend(dict.values(item))
            elif isinstance(item, Namespace):
                stack.append(object.__getattribute__(item, "_Namespace__attrs"))
            elif isinstance(item, int):
                total += item.bit_length() // 3 + 2
            else:  # floats, None, undefined values, loop and macro objects: short reprs
                total += 40
        return total
    finally:
        USES.reset(uses)


def _charge_text(*values: Any) -> None:
    _BUDGET.get().text(sum(_text_size(v) for v in values))


def _check_numbers(values: Sequence[Any]) -> None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_ARGUMENT:
            raise TemplateError(f"the chat template passed the number {value} where at most {MAX_ARGUMENT:,} is "
                                "allowed")


def _check_format(text: Any) -> None:
    """A format string asking for a width of a million pads to a million characters."""
    if isinstance(text, str) and _FORMAT_WIDTH.search(text):
        raise TemplateError("the chat template used a format width of 100,000 characters or more")


# Filters that make text of their value (str() of a list holding one big string 100,000 times is 100,000 copies of
# it), and filters that walk their value item by item in Python.
_TEXT_FILTERS = {"capitalize", "center", "e", "escape", "forceescape", "format", "indent", "join", "lower", "pprint",
                 "replace", "string", "striptags", "title", "tojson", "trim", "truncate", "upper", "urlencode",
                 "urlize", "wordcount", "wordwrap", "xmlattr"}
_WALKING_FILTERS = {"batch", "dictsort", "groupby", "items", "join", "list", "map", "max", "min", "reject",
                    "rejectattr", "select", "selectattr", "slice", "sort", "sum", "unique"}


def _amplified_size(name: str, text: str, rest: Sequence[Any]) -> int:
    """What a str method or filter ``name`` can make beyond its input ``text``, given its other arguments."""
    width = max((a for a in rest if isinstance(a, int) and not isinstance(a, bool)), default=0)
    if name in ("center", "ljust", "rjust", "zfill"):
        return width
    if name in ("expandtabs", "indent", "wordwrap"):
        return (text.count("\t") + text.count("\n") + 1) * max(width, 8)
    if name == "replace" and len(rest) >= 2 and isinstance(rest[0], str):
        new = rest[1] if isinstance(rest[1], str) else ""
        return (text.count(rest[0]) + 1 if rest[0] else len(text) + 1) * len(new)
    if name in ("join", "format", "format_map"):
        return _text_size(list(rest))
    if name in ("batch", "slice"):
        _BUDGET.get().step(width)  # they loop that many times
        return width * 8
    return 0


def _guarded(name: str, function: Any) -> Any:
    """The builtin filter ``name``, charging the budget and refusing huge numeric arguments before it runs."""
    skip = 1 if getattr(function, "jinja_pass_arg", None) else 0  # the context, environment or eval context

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        value: Any = args[skip] if len(args) > skip else None
        rest = args[skip + 1:]
        note(value, name)
        if name in ("string", "tojson", "pprint"):
            note_deep(value)
        for arg in (*rest, *kwargs.values()):
            note(arg)
        _check_numbers(list(rest) + list(kwargs.values()))
        budget = _BUDGET.get()
        budget.step(1 + (len(value) if name in _WALKING_FILTERS and hasattr(value, "__len__") else 0))
        if name == "format":
            _check_format(value)
        text = value if isinstance(value, str) else ""
        if name in _TEXT_FILTERS and not isinstance(value, str):
            budget.text(_text_size(value))
        budget.text(_amplified_size(name, text, list(rest) + list(kwargs.values())))
        return function(*args, **kwargs)

    return guarded


def _guarded_test(name: str, function: Any) -> Any:
    """A builtin test (``is string``, ``is defined``…): recorded on a probe's value, as llama.cpp's ``test_is_…``."""

    @functools.wraps(function)
    def test(*args: Any, **kwargs: Any) -> Any:
        if args:
            note(args[0], f"test_is_{name}")
        return function(*args, **kwargs)

    return test


def _raise_exception(message: str) -> None:
    raise TemplateError(f"the chat template raised: {message}")


def _strftime_now(fmt: str) -> str:
    _check_format(fmt)  # glibc's strftime takes widths too (%1000000Y)
    return datetime.datetime.now().strftime(fmt)


def _safe(value: Any) -> str:
    """``|safe``: the text as it is. Jinja's makes it Markup, and Markup + text HTML-escapes the text (every quote of
    a tool's JSON becomes &#34; in Functionary v3.1's prompt); chat templates render without autoescaping, where
    ``safe`` can only mean "as it is", which is what llama.cpp's engine does."""
    return str(value)


def _json_default(value: Any) -> Any:
    """What ``tojson`` makes of the iterators Jinja's ``map``, ``select`` and ``reverse`` return: their items
    (llama.cpp's engine returns lists there; Python's json refuses a generator)."""
    if isinstance(value, Iterator):
        items = []
        for item in value:
            _BUDGET.get().step()
            items.append(item)
        _charge_text(items)
        return items
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _json_layout_size(value: Any, width: int, separators: int) -> int:
    """What ``indent`` and ``separators`` add to the JSON of ``value``: each item of a list or object goes on a
    line of its own, indented by its depth (100 nested lists at an indent of 60,000 are 300 million spaces)."""
    budget = _BUDGET.get()
    total, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        budget.step()
        if isinstance(item, (list, tuple)):
            total += len(item) * (depth * width + 1 + separators) + depth * width
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            total += len(item) * (depth * width + 1 + separators) + depth * width
            stack.extend((v, depth + 1) for v in dict.values(item))
        if total > budget.chars:
            break
    return total


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
            separators: Sequence[str] | None = None, sort_keys: bool = False) -> str:
    """transformers' ``tojson``: ``json.dumps`` with its keyword arguments (no HTML escaping, unlike Jinja's own)."""
    if indent is not None and not isinstance(indent, (int, str)):
        raise TemplateError(f"the chat template gave tojson an indent of type {type(indent).__name__}")
    if separators is not None:
        if (isinstance(separators, str) or len(separators) != 2
                or not all(isinstance(s, str) for s in separators)):
            raise TemplateError("the chat template gave tojson separators that are not two strings")
        separators = (separators[0], separators[1])
    width = len(indent) if isinstance(indent, str) else max(indent or 0, 0)
    _check_numbers([width])
    budget = _BUDGET.get()
    # Escapes: a control character becomes \u001f (6 characters); with ensure_ascii, a character outside the
    # BMP becomes two \ud83d\ude00 (12 for what len() counts as 1).
    budget.text((11 if ensure_ascii else 5) * _text_size(value))
    budget.text(_json_layout_size(value, width, sum(map(len, separators or ("", "")))))
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys, default=_json_default)


def _charged_step(_context: Any, _value: str, static_chars: int) -> str:
    """Injected at the top of every loop and macro body: one turn, and the fixed text the body prints."""
    budget = _BUDGET.get()
    budget.step()
    budget.text(static_chars)
    return ""


def _charged_join(_context: Any, parts: list[Any]) -> str:
    """``a ~ b ~ c``, sized before it is joined."""
    for part in parts:
        note(part)
    _charge_text(parts)
    return "".join(str(p) for p in parts)


def _charged_result(_context: Any, value: Any) -> Any:
    """A slice: the copy is no larger than its source, so it is charged after it is made."""
    _charge_text(value)
    return value


def _template_list(_context: Any, value: list[Any]) -> _TemplateList:
    """A ``[...]`` literal: a list the template owns (it was charged item by item as it was built)."""
    return _TemplateList(value)


def _rewrite(env: Any, source: str) -> Any:
    """The template's syntax tree with the budget's hooks put in (see the module docstring)."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    def hook(name: str, node: Any, *args: Any) -> Any:
        return nodes.Filter(node, name, [nodes.Const(a) for a in args], [], None, None)

    class Hooks(NodeTransformer):
        def _charge_body(self, node: Any) -> Any:
            node = self.generic_visit(node)
            static = sum(len(d.data) for d in node.find_all(nodes.TemplateData))
            node.body.insert(0, nodes.Output([hook("qd_step", nodes.Const(""), static)]))
            return node

        visit_For = visit_Macro = visit_CallBlock = _charge_body

        def visit_Concat(self, node: Any) -> Any:
            node = self.generic_visit(node)
            return hook("qd_join", nodes.List(node.nodes))

        def visit_Getitem(self, node: Any) -> Any:
            node = self.generic_visit(node)
            return hook("qd_result", node) if isinstance(node.arg, nodes.Slice) else node

        def visit_List(self, node: Any) -> Any:
            node = self.generic_visit(node)
            return hook("qd_list", node)

    tree = Hooks().visit(env.parse(source))
    tree.set_environment(env)
    for node in tree.find_all(nodes.Node):
        if node.lineno is None:
            node.lineno = 1
    return tree


def _extensions() -> list[Any]:
    """The Jinja extensions chat templates use: loop controls, and transformers' ``{% generation %}`` tag."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class GenerationTag(Extension):
        """``{% generation %}…{% endgeneration %}`` marks the assistant's own text for transformers' training masks
        (``return_assistant_tokens_mask``); rendering it is rendering its body, in a scope of its own as
        transformers' call block has (LFM2.5, Laguna)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            text: str = caller()
            return text

    return ["jinja2.ext.loopcontrols", GenerationTag]


@functools.cache
def _namespace_class() -> type:
    """transformers' ``namespace()`` (made at first use: jinja2 is imported only when a template is rendered)."""
    from jinja2.exceptions import SecurityError
    from jinja2.utils import Namespace

    class TemplateNamespace(Namespace):
        """transformers' namespace: no attribute beginning with "_" may be stored on it."""

        def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - Namespace's own signature trick
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check_name(name)
            Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise SecurityError(f"a namespace cannot hold the attribute {name!r}")

    return TemplateNamespace


@functools.cache
def _sandbox_class() -> type:
    """Jinja's immutable sandbox, charging the budget for operators and calls and noting what a probe's values go
    through; a list the template made itself may be changed (made at first use, as ``_namespace_class``)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

    class BudgetedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["+", "*", "**", "%"])

        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            if type(obj) is _TemplateList and attr in _LIST_MUTATORS:
                return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
            return super().is_safe_attribute(obj, attr, value)

        def getattr(self, obj: Any, attribute: str) -> Any:
            note(obj, attribute)
            return super().getattr(obj, attribute)

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            budget = _BUDGET.get()
            budget.step()
            note(left)
            note(right)
            if op == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
                bits = left.bit_length() * abs(right)
                if bits > 16 * MAX_ARGUMENT:  # 2**(2**20): a number of 300,000 digits
                    raise TemplateError(f"the chat template raised a number to the power {right}")
                budget.text(bits // 3)
            if op == "*":
                sized = left if hasattr(left, "__len__") else right if hasattr(right, "__len__") else None
                count = right if sized is left else left
                if sized is not None and isinstance(count, int):
                    _check_numbers([count])
                    budget.text(_text_size(sized) * max(count, 0))
                elif isinstance(left, int) and isinstance(right, int):
                    budget.text((left.bit_length() + right.bit_length()) // 3)
            elif op == "+" and hasattr(left, "__len__") and hasattr(right, "__len__"):
                _charge_text(left, right)
                if isinstance(left, list) and isinstance(right, list) and (
                        type(left) is _TemplateList or type(right) is _TemplateList):
                    return _TemplateList(left + right)
            elif op == "%" and isinstance(left, str):
                _check_format(left)
                _charge_text(left, right)
            if op == "+":
                # llama.cpp's engine adds a missing value or none to a string as "" (its
                # workaround_concat_null_with_str); Python's raises, so only templates that fail here change.
                if isinstance(left, str) and (right is None or isinstance(right, jinja2.Undefined)):
                    return str(left)
                if isinstance(right, str) and (left is None or isinstance(left, jinja2.Undefined)):
                    return str(right)
            return super().call_binop(context, op, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            budget = _BUDGET.get()
            budget.step()
            _check_numbers(list(args) + list(kwargs.values()))
            for arg in (*args, *kwargs.values()):
                note(arg)
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format in its own function
            target = getattr(method, "__self__", None)
            if isinstance(target, str):  # a str method: its output is its input's size, plus what it can add
                if method.__name__ in ("format", "format_map"):
                    _check_format(target)
                budget.text(_amplified_size(method.__name__, target, list(args) + list(kwargs.values())))
            elif type(target) is _TemplateList and method.__name__ == "extend" and args:
                budget.step(len(args[0]) if hasattr(args[0], "__len__") else 0)
            return super().call(__context, __obj, *args, **kwargs)

    return BudgetedSandbox


def _environment() -> Any:  # a jinja2 Environment
    """A budgeted sandbox with transformers' globals and filters, each builtin filter and test guarded."""
    import jinja2
    from jinja2 import pass_context

    env = _sandbox_class()(trim_blocks=True, lstrip_blocks=True, extensions=_extensions(),
                               undefined=jinja2.Undefined, optimized=False, finalize=_finalize)
    env.globals.pop("lipsum", None)  # paragraphs of filler text: no chat template needs them
    env.globals["namespace"] = _namespace_class()
    env.filters["tojson"] = _tojson
    env.filters["safe"] = _safe
    env.filters = {name: _guarded(name, f) for name, f in env.filters.items()}
    env.tests = {name: _guarded_test(name, f) for name, f in env.tests.items()}
    env.filters["qd_step"] = pass_context(_charged_step)
    env.filters["qd_join"] = pass_context(_charged_join)
    env.filters["qd_result"] = pass_context(_charged_result)
    env.filters["qd_list"] = pass_context(_template_list)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@lru_cache(maxsize=16)
def _compile(source: str) -> Any:  # a jinja2 Template
    env = _environment()
    return env.from_string(_rewrite(env, source))


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` is sized before it becomes text."""
    note(value)
    _charge_text(value)
    return value


@lru_cache(maxsize=16)
def declares_tools(source: str) -> bool:
    """Whether the template reads the ``tools`` variable, i.e. can show the model the tools it may call."""
    import jinja2
    from jinja2 import nodes

    # The syntax tree is walked rather than asked with jinja2.meta, whose code generator folds constant expressions
    # (it calls filters while it compiles, outside any sandbox or budget: ``{{ 'x'|center(10**9) }}`` would be a
    # gigabyte before anything is rendered).
    try:
        tree = jinja2.Environment(extensions=_extensions()).parse(source)
    except jinja2.TemplateError:
        return False
    return any(name.name == "tools" and name.ctx == "load" for name in tree.find_all(nodes.Name))


# --- Variables: what a request gives the template beyond its messages and tools.

def date_variables(now: datetime.datetime | None = None) -> dict[str, str]:
    """The dates llama.cpp gives every template (``common_chat_extra_context``): ``datetime`` ("Nov 26 2026",
    FireFunction v2) and ``date_string`` ("26 Nov 2026", Llama 3.x)."""
    now = now or datetime.datetime.now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}


def template_variables(*, enable_thinking: bool | None = None, reasoning_effort: str | None = None,
                       preserve_reasoning: bool | None = None,
                       chat_template_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The variables a request gives a template, as llama.cpp's chat layer makes them: the request's
    ``chat_template_kwargs`` (llama-server's field), over which the request's own ``enable_thinking`` and
    ``reasoning_effort`` win where given; a reasoning effort is also given as ``reasoning_strength``, and
    ``preserve_reasoning`` as each family's switch (``preserve_thinking``, ``clear_thinking``,
    ``truncate_history_thinking``, ``drop_thinking``) unless the kwargs set those themselves (caps.cpp's
    ``caps_apply_reasoning_effort`` / ``caps_apply_preserve_reasoning``). Unlike llama.cpp, which always passes
    ``enable_thinking`` (true by default), None leaves it to the template's own default."""
    given = dict(chat_template_kwargs or {})
    if enable_thinking is not None:
        given["enable_thinking"] = enable_thinking
    if reasoning_effort is not None:
        given["reasoning_effort"] = reasoning_effort
    if preserve_reasoning is not None:
        given["preserve_reasoning"] = preserve_reasoning
    derived: dict[str, Any] = {}
    effort = given.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        derived["reasoning_strength"] = effort
    preserve = given.get("preserve_reasoning")
    if isinstance(preserve, bool):
        derived.update(preserve_thinking=preserve, clear_thinking=not preserve,
                       truncate_history_thinking=not preserve, drop_thinking=not preserve)
    variables = {**derived, **given}
    check_variables(variables)
    return variables


def check_variables(variables: Mapping[str, Any]) -> None:
    """Refuse what a template may not be given: a name of the renderer's own (``messages``, ``tools``,
    ``bos_token``…), a name that is no identifier, a value that is not JSON (a string, number, boolean, null, or
    lists and objects of them)."""
    for name, value in variables.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise VariableError(f"{name!r} cannot be a chat template variable: a name is letters, digits and _")
        if name in RESERVED_NAMES:
            raise VariableError(f"{name!r} cannot be a chat template variable: the renderer sets it itself")
        _check_json(value, name, 0)


def _check_json(value: Any, where: str, depth: int) -> None:
    if depth > _MAX_VARIABLE_DEPTH:
        raise VariableError(f"the chat template variable {where} nests deeper than {_MAX_VARIABLE_DEPTH} levels")
    if value is None or type(value) in (str, bool, int):
        return
    if type(value) is float:
        if not math.isfinite(value):
            raise VariableError(f"the chat template variable {where} is {value}, which JSON has no word for")
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
        return
    if type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, str):
                raise VariableError(f"the chat template variable {where} has a key that is not a string")
            _check_json(item, f"{where}.{key}", depth + 1)
        return
    raise VariableError(f"the chat template variable {where} is a {type(value).__name__}, not a JSON value")


def render(source: str, messages: Sequence[Mapping[str, Any]], *, bos_token: str = "", eos_token: str = "",
           add_generation_prompt: bool = True, tools: Sequence[Mapping[str, Any]] | None = None,
           variables: Mapping[str, Any] | None = None) -> str:
    """Render ``messages`` with the template ``source``; TemplateError on any failure, with the reason.

    ``tools`` (OpenAI's list of function tools) reaches the template as Hugging Face passes it: None for none, as
    ``documents`` (unless ``variables`` gives them). ``variables`` are the request's others (``enable_thinking``,
    ``reasoning_effort``, any ``chat_template_kwargs``: see ``template_variables``), checked by
    ``check_variables``; the dates llama.cpp adds (``date_variables``) are given too unless ``variables`` names
    them. Messages are best passed through ``capabilities.prepare`` first, as llama.cpp normalises them."""
    variables = dict(variables or {})
    check_variables(variables)
    context: dict[str, Any] = {"documents": None, **date_variables(), **variables}
    plain_messages = list(messages)
    given = list(tools) if tools else None
    try:
        return _render(source, plain_messages, tools=given, bos_token=bos_token, eos_token=eos_token,
                       add_generation_prompt=add_generation_prompt, context=context)
    except TemplateError:
        # A template that loops over the tools unconditionally (Hermes 2 Pro's and Command R+'s "tool_use"
        # templates) fails on None; llama.cpp gives no ``tools`` at all when there are none, which Jinja loops over
        # as nothing. Only a render that failed is tried that way, so every other template renders as in transformers.
        # Where that fails too, its error is the one to tell (the template's own, not None's).
        if given is not None or not declares_tools(source):
            raise
    return _render(source, plain_messages, tools=_OMITTED, bos_token=bos_token, eos_token=eos_token,
                   add_generation_prompt=add_generation_prompt, context=context)


_OMITTED = object()  # ``tools`` not given to the template at all


def _input_size(value: Any) -> int:
    """About how many characters ``value`` prints as. Measured through the base types' own methods: a caller's dict
    that notes the keys read from it (probes, backends/chat_format/analysis.py) must not see the measuring as reads."""
    total, stack, seen = 0, [value], set()
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += str.__len__(item)
        elif isinstance(item, (dict, list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            total += 2
            if isinstance(item, dict):
                stack.extend(dict.keys(item))
                stack.extend(dict.values(item))
            else:
                stack.extend(list.__iter__(item) if isinstance(item, list) else item)
        else:
            total += 8
    return total


def _render(source: str, messages: list[Any], *, tools: Any, bos_token: str, eos_token: str,
            add_generation_prompt: bool, context: dict[str, Any]) -> str:
    from jinja2.exceptions import SecurityError, TemplateError as JinjaTemplateError

    # A template prints the messages, the tools and the variables it is given: the budget grows with them.
    input_chars = len(bos_token) + len(eos_token) + _input_size([messages, tools, context])
    token = _BUDGET.set(_Budget(len(messages), input_chars))
    try:
        template = _compile(source)
        given = {**context, "messages": messages, "bos_token": bos_token, "eos_token": eos_token,
                 "add_generation_prompt": add_generation_prompt}
        if tools is not _OMITTED:
            given["tools"] = tools
        rendered: str = template.render(given)
        return rendered
    except SecurityError as exc:
        raise TemplateError(f"the chat template tried to reach Python internals and was refused ({exc})") from None
    except TemplateError:
        raise
    except JinjaTemplateError as exc:
        raise TemplateError(f"the chat template is malformed: {exc}") from None
    except RecursionError:
        raise TemplateError("the chat template nests or calls itself too deeply") from None
    except Exception as exc:  # templates can fail in many ways (TypeError on bad data, ...)
        raise TemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


def probe(source: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
          variables: Mapping[str, Any] | None = None, add_generation_prompt: bool = True) -> Probe:
    """Render fixed probe data (``messages``, ``tools`` and ``variables``, each value named by its path) and
    record what the template did with it; a failed render is ``ok=False`` with what was recorded until then."""
    context: dict[str, Any] = {"documents": None, **date_variables()}
    context.update({k: probe_value(v, k) for k, v in (variables or {}).items()})
    probed_messages = [probe_value(m, f"messages.{i}") for i, m in enumerate(messages)]
    probed_tools = [probe_value(t, f"tools.{i}") for i, t in enumerate(tools)] if tools is not None else None
    uses: set[tuple[str, str]] = set()
    token = USES.set(uses)
    try:
        text = _render(source, probed_messages, tools=probed_tools, bos_token="", eos_token="",
                       add_generation_prompt=add_generation_prompt, context=context)
        return Probe(True, text, frozenset(uses))
    except TemplateError:
        return Probe(False, "", frozenset(uses))
    finally:
        USES.reset(token)
