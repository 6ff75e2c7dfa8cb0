"""A model's chat format for one request: the prompt, and how to read the reply.

``apply(template, request)`` is llama.cpp's ``common_chat_templates_apply`` (``common/chat.cpp``): it renders the
request through the model's template and gives back, in a ``Prepared``, the prompt, the *generation prompt* (what the
template appends to start the assistant's turn, often opening a thinking block) and the parser that reads the reply —
reasoning, content and tool calls — plus the tags that open and close thinking and what a grammar needs to force a
tool call. Families whose syntax no analysis can find (gpt-oss's channels, Kimi's sections, DeepSeek's DSML, Gemma 4,
LFM2's Python calls, …) have a module each under ``backends/chat_format/families/``, recognised by their template's
source in llama.cpp's order; every other template goes through the differential analysis of
``backends/chat_format/autoparser.py``, which renders it with probe messages and reads its markers off the output.

Everything here is pure Python: the engine host calls it once per request, the server and tests call it too.
"""

from __future__ import annotations

import copy
import datetime
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from backends.chat_format import peg
from backends.chat_format.builder import ChatBuilder, ParsedReply
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
        from backends.chat_format.capabilities import patch_source

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
        from backends.chat_format import builder

        if self.reader is not None:
            return builder.parse(self.reader, self.generation_prompt + reply, partial,
                                 self.reader_mapper or self.mapper or builder.Mapper)
        if self.parser is None:
            return ParsedReply(content=reply)
        return builder.parse(self.parser, self.generation_prompt + reply, partial, self.mapper or builder.Mapper)

    def read(self, reply: str, partial: bool = False, cut: bool = False) -> tuple[ParsedReply | None, int]:
        """The reply (or the reply so far, ``partial``; a finished reply the model did not end, ``cut``) read, and
        -1; or None and where it stops matching the model's format (counted in the reply: 0 where it never does)."""
        from backends.chat_format import builder

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


# --- which family reads a template: llama.cpp's common_chat_try_specialized_template, in its order


def _has(source: str, *needles: str) -> bool:
    return all(n in source for n in needles)


FAMILIES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    # Ministral / Magistral 3 ([CALL_ID] tells Mistral Small 3.2 apart)
    ("ministral3", lambda s: _has(s, "[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]") and "[CALL_ID]" not in s),
    ("gpt_oss", lambda s: "<|channel|>" in s),
    ("muse_glimmer", lambda s: _has(s, "<atem:function_calls>", "<|eom|>")),
    ("functionary_v3_2", lambda s: _has(s, ">>>all", ">>>${recipient}")),
    ("kimi_k2", lambda s: _has(s, "<|tool_calls_section_begin|>", "<|tool_call_begin|>")),
    ("kimi_k3", lambda s: _has(s, "<|open|>", "<|close|>", "<|end_of_msg|>")),
    ("ling3", lambda s: _has(s, "<role>ASSISTANT</role>", "<arg_key>")),
    ("cohere2moe", lambda s: _has(s, "<|START_TEXT|>", "<|START_ACTION|>")),
    ("lfm2", lambda s: _has(s, "<|tool_list_start|>", "<|tool_list_end|>")),
    ("lfm2_5", lambda s: "List of tools: [" in s and "<|tool_list_start|>" not in s),
    ("gigachat_v3", lambda s: _has(s, "<|role_sep|>", "<|message_sep|>") and "<|function_call|>" not in s),
    ("minimax_m3", lambda s: _has(s, "]<]minimax[>[", "<tool_call>", "<invoke name=")),
    ("deepseek_v3_2", lambda s: _has(s, "dsml_token", "DSML") and ("function_calls" in s or "tool_calls" in s)),
    ("gemma4", lambda s: "'<|tool_call>call:'" in s),
    ("minicpm5", lambda s: _has(s, "Tool usage guidelines:", '<function name="', '<param name="')),
    ("qwen3_coder", lambda s: _has(s, "<tool_call>", "<function=", "<parameter=")
     and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in s),
)


def family(source: str) -> str:
    """The name of the family module that reads ``source``'s replies, or "" for the differential analysis."""
    return next((name for name, matches in FAMILIES if matches(source)), "")


# --- the request, made ready


def extra_context(now: datetime.datetime | None = None) -> dict[str, str]:
    """The date variables llama.cpp gives every template (common_chat_extra_context)."""
    now = now or datetime.datetime.now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}


def apply(template: Template, request: Request) -> Prepared:
    """``request`` rendered through ``template``, with the parser for its reply."""
    from backends.chat_format.capabilities import prepare

    request = copy.copy(request)
    messages = list(request.messages)
    source = template.source
    request.extra_context = {**extra_context(), **request.extra_context}
    if request.continue_final_message != "none":
        request.add_generation_prompt = False
        if messages:
            # the continued message as given (llama.cpp: inputs.messages.back()); the rest rendered as always
            request.continue_msg = copy.deepcopy(messages.pop())
        if request.continue_final_message == "auto" and request.continue_msg:
            msg = request.continue_msg
            reasoning_only = msg.get("reasoning_content") and not msg.get("content")  # no text, no parts
            request.continue_final_message = "reasoning" if reasoning_only else "content"
    # A template that shows the model no tools gets them in llama.cpp's generic format (families/generic.py): the
    # tool list and the JSON reply shape in the system prompt, before the normalisation folds a system prompt
    generic = request.has_tools and request.tool_choice != "none" and tools_name(source) == GENERIC
    if generic:
        generic_family = importlib.import_module("backends.chat_format.families.generic")
        messages = generic_family.with_tools(source, messages, request)
    # llama.cpp's message normalisation (developer as system, Gemma 2's system folded, arguments as the template
    # reads them, StepFun's trimming…); the family modules make their own changes on top
    request.messages = prepare(source, messages)
    if generic:
        generic_prepared: Prepared = generic_family.prepare(template, request)
        return generic_prepared
    name = family(source)
    if name:
        module = importlib.import_module(f"backends.chat_format.families.{name}")
        prepared: Prepared = module.prepare(template, request)
        return prepared
    # by name, as the families: the autoparser imports this module (an import statement here would be a circle)
    autoparser = importlib.import_module("backends.chat_format.autoparser")
    auto_prepared: Prepared = autoparser.prepare(template, request)
    return auto_prepared


def content_only(template: Template, request: Request) -> Prepared:
    """A template with nothing to read but content (no thinking, no tools)."""
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)

    def make(p: ChatBuilder) -> peg.Parser:
        return p.prefix(gen) + p.content(p.rest()) + p.end()

    from backends.chat_format.builder import build

    return Prepared(prompt, gen, build(make))


GENERIC = "generic"


def tools_name(source: str) -> str:
    """The name of a template's tool-call syntax: its family's, "auto" for one the differential analysis reads,
    "generic" where the template shows the model neither tools nor calls (llama.cpp's generic JSON format:
    families/generic.py), "" for no template or one that writes calls but never shows the tools."""
    from backends.chat_format.template import declares_tools

    if not source:
        return ""
    if declares_tools(source):
        return family(source) or "auto"
    from backends.chat_format.capabilities import capabilities

    # one that renders an assistant's calls but never the tool list is read as llama.cpp reads it (no generic format:
    # its own calls' syntax), and refused tools here as before; one that renders neither gets the generic format
    if family(source) or capabilities(source).supports_tool_calls:
        return ""
    return GENERIC
