"""LFM2 and LFM2.5 (Liquid AI): almost Python-style calls, parallel ones in one list, always wrapped as
``<|tool_call_start|>[name(arg="value", other=2)]<|tool_call_end|>`` (a dotted name and JSON's true, false and null
allowed too), after an optional ``<think>`` block. A port of llama.cpp's common/parsers/lfm2.cpp
(``common_chat_params_init_lfm2``); LFM2's template also wraps the tool list in ``<|tool_list_start|>`` and
``<|tool_list_end|>``, which are kept as tokens (``tool_list_tokens``), LFM2.5's (families/lfm2_5.py) does not.
"""

from __future__ import annotations

from typing import Any

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

TOOL_CALL_START = "<|tool_call_start|>"
TOOL_CALL_END = "<|tool_call_end|>"
TOOL_LIST_START = "<|tool_list_start|>"
TOOL_LIST_END = "<|tool_list_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_start|>assistant\n"


def prepare(template: Template, request: Request, tool_list_tokens: bool = True) -> Prepared:
    messages: list[dict[str, Any]] = []
    for message in request.messages:  # the template reads the reasoning as "thinking"
        message = dict(message)
        if isinstance(message.get("reasoning_content"), str):
            message["thinking"] = message["reasoning_content"]
        messages.append(message)
    prompt = apply_template(template, request, messages=messages)
    gen = generation_prompt(template, request, messages=messages)
    preserved = [TOOL_CALL_START, TOOL_CALL_END, THINK_START, THINK_END]
    if tool_list_tokens:
        preserved += [TOOL_LIST_START, TOOL_LIST_END]

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    # only a template that knows <think> has its reasoning read apart
    extract_reasoning = request.reasoning_format != "none" and THINK_START in template.source
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")

    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = GEN_PROMPT + THINK_START + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += THINK_END + render_content(msg)
        prompt += gen

    def make(p: ChatBuilder) -> Parser:
        prefix = p.literal(GEN_PROMPT)
        end = p.end()
        reasoning = p.eps()
        if extract_reasoning:
            reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END)
        if not has_tools or request.tool_choice == "none":
            if has_schema:
                response = p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
                return prefix + reasoning + response + end
            return prefix + reasoning + p.content(p.rest()) + end
        tool_calls = p.rule("tool-calls", p.trigger_rule("tool-call", p.literal(TOOL_CALL_START)
                                                         + p.python_style_tool_calls(request.tools,
                                                                                     request.parallel_tool_calls,
                                                                                     allow_json_literals=True)
                                                         + p.literal(TOOL_CALL_END)))
        content = p.content(p.until(TOOL_CALL_START))
        return prefix + reasoning + content + tool_calls + end

    grammar_lazy = include_grammar and not (has_schema or (has_tools and request.tool_choice == "required"))
    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END,), grammar=include_grammar, grammar_lazy=grammar_lazy,
        grammar_triggers=(("word", TOOL_CALL_START),) if include_grammar else (),
        preserved_tokens=tuple(preserved))
