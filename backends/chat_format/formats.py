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
from collections.abc import Callable

from backends.chat_format import autoparser, peg
from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.capabilities import capabilities, prepare
from backends.chat_format.families import (
    cohere2moe,
    deepseek_v3_2,
    functionary_v3_2,
    gemma4,
    generic,
    gigachat_v3,
    gpt_oss,
    kimi_k2,
    kimi_k3,
    lfm2,
    lfm2_5,
    ling3,
    minicpm5,
    minimax_m3,
    ministral3,
    muse_glimmer,
    qwen3_coder,
)
from backends.chat_format.request import (
    Continuation,
    Prepared,
    ReasoningFormat,
    Request,
    Template,
    ToolChoice,
    apply_template,
    extra_context,
    generation_prompt,
    render_content,
)
from backends.chat_format.template import declares_tools

# the base types live in request.py (the families and the analysis build on them); they are named here too, as the
# chat format's face that the engines, the server and the tests use
__all__ = ["GENERIC", "FAMILIES", "Continuation", "Prepared", "ReasoningFormat", "Request", "Template", "ToolChoice",
           "apply", "apply_template", "content_only", "extra_context", "family", "generation_prompt",
           "render_content", "tools_name"]

# --- which family reads a template: llama.cpp's common_chat_try_specialized_template, in its order


def _has(source: str, *needles: str) -> bool:
    return all(n in source for n in needles)


Prepare = Callable[[Template, Request], Prepared]

# (name, recognises the template's source, prepare): a static table, each family imported by name above
FAMILIES: tuple[tuple[str, Callable[[str], bool], Prepare], ...] = (
    # Ministral / Magistral 3 ([CALL_ID] tells Mistral Small 3.2 apart)
    ("ministral3", lambda s: _has(s, "[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]") and "[CALL_ID]" not in s,
     ministral3.prepare),
    ("gpt_oss", lambda s: "<|channel|>" in s, gpt_oss.prepare),
    ("muse_glimmer", lambda s: _has(s, "<atem:function_calls>", "<|eom|>"), muse_glimmer.prepare),
    ("functionary_v3_2", lambda s: _has(s, ">>>all", ">>>${recipient}"), functionary_v3_2.prepare),
    ("kimi_k2", lambda s: _has(s, "<|tool_calls_section_begin|>", "<|tool_call_begin|>"), kimi_k2.prepare),
    ("kimi_k3", lambda s: _has(s, "<|open|>", "<|close|>", "<|end_of_msg|>"), kimi_k3.prepare),
    ("ling3", lambda s: _has(s, "<role>ASSISTANT</role>", "<arg_key>"), ling3.prepare),
    ("cohere2moe", lambda s: _has(s, "<|START_TEXT|>", "<|START_ACTION|>"), cohere2moe.prepare),
    ("lfm2", lambda s: _has(s, "<|tool_list_start|>", "<|tool_list_end|>"), lfm2.prepare),
    ("lfm2_5", lambda s: "List of tools: [" in s and "<|tool_list_start|>" not in s, lfm2_5.prepare),
    ("gigachat_v3", lambda s: _has(s, "<|role_sep|>", "<|message_sep|>") and "<|function_call|>" not in s,
     gigachat_v3.prepare),
    ("minimax_m3", lambda s: _has(s, "]<]minimax[>[", "<tool_call>", "<invoke name="), minimax_m3.prepare),
    ("deepseek_v3_2", lambda s: _has(s, "dsml_token", "DSML") and ("function_calls" in s or "tool_calls" in s),
     deepseek_v3_2.prepare),
    ("gemma4", lambda s: "'<|tool_call>call:'" in s, gemma4.prepare),
    ("minicpm5", lambda s: _has(s, "Tool usage guidelines:", '<function name="', '<param name="'), minicpm5.prepare),
    ("qwen3_coder", lambda s: _has(s, "<tool_call>", "<function=", "<parameter=")
     and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in s, qwen3_coder.prepare),
)


def family(source: str) -> str:
    """The name of the family module that reads ``source``'s replies, or "" for the differential analysis."""
    return next((name for name, matches, _ in FAMILIES if matches(source)), "")


# --- the request, made ready


def apply(template: Template, request: Request) -> Prepared:
    """``request`` rendered through ``template``, with the parser for its reply."""
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
    use_generic = request.has_tools and request.tool_choice != "none" and tools_name(source) == GENERIC
    if use_generic:
        messages = generic.with_tools(source, messages, request)
    # llama.cpp's message normalisation (developer as system, Gemma 2's system folded, arguments as the template
    # reads them, StepFun's trimming…); the family modules make their own changes on top
    request.messages = prepare(source, messages)
    if use_generic:
        return generic.prepare(template, request)
    return next((prepare_family for _, matches, prepare_family in FAMILIES if matches(source)),
                autoparser.prepare)(template, request)


def content_only(template: Template, request: Request) -> Prepared:
    """A template with nothing to read but content (no thinking, no tools)."""
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)

    def make(p: ChatBuilder) -> peg.Parser:
        return p.prefix(gen) + p.content(p.rest()) + p.end()

    return Prepared(prompt, gen, build(make))


GENERIC = "generic"


def tools_name(source: str) -> str:
    """The name of a template's tool-call syntax: its family's, "auto" for one the differential analysis reads,
    "generic" where the template shows the model neither tools nor calls (llama.cpp's generic JSON format:
    families/generic.py), "" for no template or one that writes calls but never shows the tools."""
    if not source:
        return ""
    if declares_tools(source):
        return family(source) or "auto"
    # one that renders an assistant's calls but never the tool list is read as llama.cpp reads it (no generic format:
    # its own calls' syntax), and refused tools here as before; one that renders neither gets the generic format
    if family(source) or capabilities(source).supports_tool_calls:
        return ""
    return GENERIC
