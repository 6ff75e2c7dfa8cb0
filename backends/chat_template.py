"""Render a model's Jinja chat template safely.

Chat templates come from model files, i.e. from strangers. They are rendered in jinja2's
ImmutableSandboxedEnvironment, which refuses attribute access to Python internals (``__class__``,
``__globals__``...) — the hole behind llama-cpp-python's CVE-2024-34359 (GHSA-56xg-wfcc-g829).
The globals and filters mirror what Hugging Face's ``apply_chat_template`` offers, so real
templates render the same here as in transformers.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

# ChatML: what we use when a model ships no template (most base models).
FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TemplateError(Exception):
    """The template is broken or tried something the sandbox forbids."""


def _raise_exception(message: str) -> None:
    raise TemplateError(f"the chat template raised: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


@lru_cache(maxsize=8)
def _compile(source: str) -> Any:  # a jinja2 Template
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"], undefined=jinja2.Undefined)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def _tojson(value: Any, indent: int | None = None) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=indent)


def declares_tools(source: str) -> bool:
    """Whether the template reads the ``tools`` variable, i.e. can show the model the tools it may call."""
    import jinja2
    from jinja2 import meta

    try:
        return "tools" in meta.find_undeclared_variables(jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
                                                         .parse(source))
    except jinja2.TemplateError:
        return False


def render(source: str, messages: Sequence[dict[str, Any]], *, bos_token: str = "", eos_token: str = "",
           add_generation_prompt: bool = True, tools: Sequence[dict[str, Any]] | None = None) -> str:
    """Render ``messages`` with the template ``source``; TemplateError on any failure, with the reason.
    ``tools`` (OpenAI's list of function tools) reaches the template as Hugging Face passes it: None for none."""
    from jinja2.exceptions import SecurityError, TemplateError as JinjaTemplateError

    try:
        template = _compile(source)
        rendered: str = template.render(messages=list(messages), bos_token=bos_token, eos_token=eos_token,
                                        add_generation_prompt=add_generation_prompt,
                                        tools=list(tools) if tools else None)
        return rendered
    except SecurityError as exc:
        raise TemplateError(f"the chat template tried to reach Python internals and was refused ({exc})") from None
    except TemplateError:
        raise
    except JinjaTemplateError as exc:
        raise TemplateError(f"the chat template is malformed: {exc}") from None
    except Exception as exc:  # templates can fail in many ways (TypeError on bad data, ...)
        raise TemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
