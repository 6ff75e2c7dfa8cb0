"""The chat format's base types and the template rendered for a request, shared by every reader of a reply.

``Template`` (a model's chat template and its special tokens), ``Request`` (what one generation asks of it) and
``Prepared`` (the prompt and how the reply is read), with ``apply_template`` and ``generation_prompt`` (llama.cpp's
``common_chat_template_direct_apply_impl``). The family modules (``families/``), the differential analysis
(``analysis.py``, ``autoparser.py``) and ``formats.py``, which picks one of them for a template, all build on this
module; it imports none of them, so the imports run one way.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from backends.chat_format import builder, peg
from backends.chat_format.builder import ParsedReply
from backends.chat_format.capabilities import patch_source
from backends.chat_format.template import render, template_variables

ReasoningFormat = Literal["none", "auto", "deepseek", "deepseek-legacy"]
Continuation = Literal["none", "auto", "reasoning", "content"]
ToolChoice = Literal["auto", "required", "none"]


@dataclass(frozen=True)
class Template:
    """A model's chat template with the special tokens it names."""

    source: str
    bos_token: str = ""
    eos_token: str = ""

    @classmethod
    def of(cls, source: str, bos_token: str = "", eos_token: str = "") -> Template:
        """The template as llama.cpp renders it (capabilities.patch_source: two templates' checks that refuse
        llama.cpp's own conversations taken out)."""
        return cls(patch_source(source), bos_token, eos_token)


@dataclass
class Request:
    """What one generation asks of the template (llama.cpp's generation_params)."""

    messages: list[dict[str, Any]]  # OpenAI-style messages; assistant turns may carry ``reasoning_content``
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice = "auto"
    json_schema: dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    reasoning_format: ReasoningFormat = "auto"
    add_generation_prompt: bool = True
    continue_final_message: Continuation = "none"
    enable_thinking: bool = True
    extra_context: dict[str, Any] = field(default_factory=dict)  # chat_template_kwargs and the date llama.cpp adds
    add_bos: bool = False
    add_eos: bool = False
    continue_msg: dict[str, Any] | None = None  # set by apply(): the message a continuation continues

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)

    @property
    def has_continuation(self) -> bool:
        return self.continue_final_message != "none" and bool(self.continue_msg)


@dataclass
class Prepared:
    """A request made ready for a model: the prompt and how its reply is read (llama.cpp's common_chat_params)."""

    prompt: str
    generation_prompt: str
    parser: peg.Grammar_ | None = None  # None: the reply is all content
    mapper: Callable[[], Any] | None = None  # builds the message from the parse tree (a family may have its own)
    format: str = "peg-native"
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: tuple[str, ...] = ()
    grammar_lazy: bool = False
    grammar: bool = False  # whether a grammar constrains the reply (a response format, or tool calls)
    grammar_triggers: tuple[tuple[str, str], ...] = ()  # ("word" | "pattern" | "pattern_full", value) for lazy ones
    preserved_tokens: tuple[str, ...] = ()
    additional_stops: tuple[str, ...] = ()
    # what reads the reply where it is not ``parser``: a family whose models (and other engines) write variants the
    # grammar does not force (Kimi K2's call ids without "functions.", DeepSeek's spaced DSML…) reads them with a
    # wider parser; the grammar stays llama.cpp's
    reader: peg.Grammar_ | None = None
    reader_mapper: Callable[[], Any] | None = None

    def parse(self, reply: str, partial: bool = False) -> ParsedReply:
        """The reply (or the reply so far, ``partial``) read into content, reasoning and tool calls."""
        if self.reader is not None:
            return builder.parse(self.reader, self.generation_prompt + reply, partial,
                                 self.reader_mapper or self.mapper or builder.Mapper)
        if self.parser is None:
            return ParsedReply(content=reply)
        return builder.parse(self.parser, self.generation_prompt + reply, partial, self.mapper or builder.Mapper)

    def read(self, reply: str, partial: bool = False, cut: bool = False) -> tuple[ParsedReply | None, int]:
        """The reply (or the reply so far, ``partial``; a finished reply the model did not end, ``cut``) read, and
        -1; or None and where it stops matching the model's format (counted in the reply: 0 where it never does)."""
        if self.reader is not None:
            grammar, mapper = self.reader, self.reader_mapper or self.mapper or builder.Mapper
        elif self.parser is not None:
            grammar, mapper = self.parser, self.mapper or builder.Mapper
        else:
            return ParsedReply(content=reply), -1
        read, failed_at = builder.read(grammar, self.generation_prompt + reply, mapper, final=not partial)
        return read, failed_at if read is not None else max(failed_at - len(self.generation_prompt), 0)


# --- rendering, as llama.cpp's common_chat_template_direct_apply_impl does it


def apply_template(template: Template, request: Request, *, messages: list[dict[str, Any]] | None = None,
                   tools: list[dict[str, Any]] | None = None, additional_context: dict[str, Any] | None = None,
                   add_generation_prompt: bool | None = None) -> str:
    """The prompt ``template`` renders for ``request`` (or for the messages, tools or context given instead)."""
    # llama.cpp always gives enable_thinking (its request default is true); the kwargs' reasoning effort and
    # preserve_reasoning reach each family's own switch as caps.cpp makes them (template.template_variables)
    variables = template_variables(enable_thinking=request.enable_thinking,
                                   chat_template_kwargs={**request.extra_context, **(additional_context or {})})
    add = request.add_generation_prompt if add_generation_prompt is None else add_generation_prompt
    given_tools = tools if tools is not None else request.tools
    result = render(template.source, messages if messages is not None else request.messages,
                    bos_token=template.bos_token, eos_token=template.eos_token, add_generation_prompt=add,
                    tools=given_tools or None, variables=variables)
    if request.add_bos and template.bos_token and result.startswith(template.bos_token):
        result = result[len(template.bos_token):]
    if request.add_eos and template.eos_token and result.endswith(template.eos_token):
        result = result[:-len(template.eos_token)]
    return result


def generation_prompt(template: Template, request: Request, *, messages: list[dict[str, Any]] | None = None,
                      tools: list[dict[str, Any]] | None = None,
                      additional_context: dict[str, Any] | None = None) -> str:
    """What the template appends for the assistant's turn: the render with the generation prompt, past where it
    stops agreeing with the render without."""
    without = apply_template(template, request, messages=messages, tools=tools, additional_context=additional_context,
                             add_generation_prompt=False)
    with_prompt = apply_template(template, request, messages=messages, tools=tools,
                                 additional_context=additional_context, add_generation_prompt=True)
    common = 0
    for a, b in zip(without, with_prompt, strict=False):
        if a != b:
            break
        common += 1
    return with_prompt[common:]


def render_content(message: dict[str, Any]) -> str:
    """A continued message's content as the parser's generation prompt carries it (parts joined by blank lines)."""
    content = message.get("content")
    if isinstance(content, list):
        return "\n\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def extra_context(now: datetime.datetime | None = None) -> dict[str, str]:
    """The date variables llama.cpp gives every template (common_chat_extra_context)."""
    now = now or datetime.datetime.now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}
