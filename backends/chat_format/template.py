"""Render a model's Jinja chat template safely.

Chat templates come from model files, i.e. from strangers. They are rendered in jinja2's
ImmutableSandboxedEnvironment, which refuses attribute access to Python internals (``__class__``,
``__globals__``...) — the hole behind llama-cpp-python's CVE-2024-34359 (GHSA-56xg-wfcc-g829).
The globals and filters mirror what Hugging Face's ``apply_chat_template`` offers, so real
templates render the same here as in transformers.

The sandbox guards Python's internals, not the machine: ``{{ 'x' * 10**10 }}``, two nested loops over
``range(100000)`` or a string doubled thirty times would take the engine's memory or time. So every render runs
on a budget (``_Budget``) of steps (loop turns, calls, filters, items measured) and of characters built, both
in proportion to the messages plus a fixed allowance far above what real templates use. The template is
rewritten once, when it is compiled, so that loop and macro bodies, ``~`` joins and slices charge it; the
environment charges operators, calls, filters and printed values, and refuses numeric arguments (widths,
counts, exponents) beyond ``MAX_ARGUMENT``. Sizes are checked before the work where the work could be large.
"""

from __future__ import annotations

import contextvars
import datetime
import functools
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

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


class TemplateError(Exception):
    """The template is broken or tried something the sandbox forbids."""


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


def _text_size(value: Any) -> int:
    """An upper bound on len(str(value)), charged to the budget as it walks (a list holding one big string
    100,000 times prints as 100,000 copies of it). Stops as soon as the size passes what is left."""
    budget = _BUDGET.get()
    budget.step()
    if isinstance(value, str):  # most printed values: no walk
        return len(value)
    from jinja2.utils import Namespace

    total, stack = 0, [value]
    while stack and total <= budget.chars:
        item = stack.pop()
        budget.step()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 + 2 * len(item)
            stack.extend(item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, Namespace):
            stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        else:  # floats, None, undefined values, loop and macro objects: short reprs
            total += 40
    return total


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


def _raise_exception(message: str) -> None:
    raise TemplateError(f"the chat template raised: {message}")


def _strftime_now(fmt: str) -> str:
    _check_format(fmt)  # glibc's strftime takes widths too (%1000000Y)
    return datetime.datetime.now().strftime(fmt)


def _tojson(value: Any, indent: int | None = None) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=indent)


def _charged_step(_context: Any, _value: str, static_chars: int) -> str:
    """Injected at the top of every loop and macro body: one turn, and the fixed text the body prints."""
    budget = _BUDGET.get()
    budget.step()
    budget.text(static_chars)
    return ""


def _charged_join(_context: Any, parts: list[Any]) -> str:
    """``a ~ b ~ c``, sized before it is joined."""
    _charge_text(parts)
    return "".join(str(p) for p in parts)


def _charged_result(_context: Any, value: Any) -> Any:
    """A slice: the copy is no larger than its source, so it is charged after it is made."""
    _charge_text(value)
    return value


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

    tree = Hooks().visit(env.parse(source))
    tree.set_environment(env)
    for node in tree.find_all(nodes.Node):
        if node.lineno is None:
            node.lineno = 1
    return tree


@lru_cache(maxsize=8)
def _compile(source: str) -> Any:  # a jinja2 Template
    import jinja2
    from jinja2 import pass_context
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BudgetedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["+", "*", "**", "%"])

        def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
            budget = _BUDGET.get()
            budget.step()
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
            elif op == "%" and isinstance(left, str):
                _check_format(left)
                _charge_text(left, right)
            return super().call_binop(context, op, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            budget = _BUDGET.get()
            budget.step()
            _check_numbers(list(args) + list(kwargs.values()))
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format in its own function
            target = getattr(method, "__self__", None)
            if isinstance(target, str):  # a str method: its output is its input's size, plus what it can add
                if method.__name__ in ("format", "format_map"):
                    _check_format(target)
                budget.text(_amplified_size(method.__name__, target, list(args) + list(kwargs.values())))
            return super().call(__context, __obj, *args, **kwargs)

    env = BudgetedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"],
                          undefined=jinja2.Undefined, optimized=False, finalize=_finalize)
    env.globals.pop("lipsum", None)  # paragraphs of filler text: no chat template needs them
    env.filters["tojson"] = _tojson
    env.filters = {name: _guarded(name, f) for name, f in env.filters.items()}
    env.filters["qd_step"] = pass_context(_charged_step)
    env.filters["qd_join"] = pass_context(_charged_join)
    env.filters["qd_result"] = pass_context(_charged_result)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(_rewrite(env, source))


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` is sized before it becomes text."""
    _charge_text(value)
    return value


def declares_tools(source: str) -> bool:
    """Whether the template reads the ``tools`` variable, i.e. can show the model the tools it may call."""
    import jinja2
    from jinja2 import nodes

    # The syntax tree is walked rather than asked with jinja2.meta, whose code generator folds constant expressions
    # (it calls filters while it compiles, outside any sandbox or budget: ``{{ 'x'|center(10**9) }}`` would be a
    # gigabyte before anything is rendered).
    try:
        tree = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(source)
    except jinja2.TemplateError:
        return False
    return any(name.name == "tools" and name.ctx == "load" for name in tree.find_all(nodes.Name))


def render(source: str, messages: Sequence[dict[str, Any]], *, bos_token: str = "", eos_token: str = "",
           add_generation_prompt: bool = True, tools: Sequence[dict[str, Any]] | None = None,
           variables: dict[str, Any] | None = None) -> str:
    """Render ``messages`` with the template ``source``; TemplateError on any failure, with the reason.
    ``tools`` (OpenAI's list of function tools) reaches the template as Hugging Face passes it: None for none;
    ``variables`` are further names the template may read (``enable_thinking``, a request's chat_template_kwargs)."""
    from jinja2.exceptions import SecurityError, TemplateError as JinjaTemplateError

    input_chars = (len(bos_token) + len(eos_token) + sum(len(str(v)) for m in messages for v in m.values())
                   + (len(str(tools)) if tools else 0)  # a template prints the tools it is given
                   + (len(str(variables)) if variables else 0))
    token = _BUDGET.set(_Budget(len(messages), input_chars))
    try:
        template = _compile(source)
        rendered: str = template.render({**(variables or {}), "messages": list(messages), "bos_token": bos_token,
                                         "eos_token": eos_token, "add_generation_prompt": add_generation_prompt,
                                         "tools": list(tools) if tools else None})
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
