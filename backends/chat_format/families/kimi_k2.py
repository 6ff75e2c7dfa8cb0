"""Kimi K2 (Instruct and Thinking): thinking in ``<think>…</think>``, tool calls in a section of special tokens whose
call ids name the function and count the calls (llama.cpp's common/parsers/kimi-k2.cpp)::

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>
    <|tool_calls_section_end|>

The call id (``functions.NAME:INDEX``) is kept as the call's id.

The reply is read more widely than the grammar writes it, as vLLM's and SGLang's Kimi K2 parsers read what the models
write (vllm tests/tool_parsers/test_kimi_k2_tool_parser.py): text before the section and after it, a call id without
``functions.`` and with spaces or newlines around it and the arguments, multi-line JSON arguments, stray text between
the section's markers (dropped), and — where the template is a thinking model's that does not open the block — the
thinking closed by ``</think>`` without ever being opened (Kimi K2 Thinking). Until such a reply's ``</think>`` or
end comes, what it says cannot be placed, so it is held back.
"""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = GEN_PROMPT + THINK_START + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += THINK_END + render_content(msg)
        prompt += gen

    has_tools = request.has_tools
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_tools and request.tool_choice != "none"

    def make(p: ChatBuilder) -> Parser:
        end = p.end()
        # The model strays from its format in many ways: it may, for one, call tools at the end of its thinking
        # without closing it, so the thinking also ends where a tool call section or a call begins.
        reasoning = (p.optional(THINK_START + p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
                                + p.optional(p.literal(THINK_END)))
                     if extract_reasoning else p.eps())
        generation = p.literal(GEN_PROMPT)

        if not has_tools or request.tool_choice == "none":
            return generation + reasoning + p.content(p.rest()) + end

        tool_choice = p.choice()
        for tool in functions(request.tools):
            function = tool["function"]
            name = function["name"]
            # the whole id, functions.NAME:INDEX, is the call's id
            tool_id = p.tool_id(p.literal("functions.") + p.tool_name(p.literal(name)) + p.literal(":")
                                + p.chars("[0-9]", 1, -1))
            call = p.tool(p.tool_open(tool_id + p.literal(ARGS_BEGIN))
                          + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", tool_parameters(function)))
                          + p.tool_close(p.optional(p.literal(CALL_END))))
            tool_choice = tool_choice | p.rule(f"tool-{name}", call)

        min_calls = 1 if request.tool_choice == "required" else 0
        max_calls = -1 if request.parallel_tool_calls else 1
        # the trigger rule tells a grammar where the forced part begins
        tool_calls = p.rule("tool-calls", p.optional(p.literal(SECTION_BEGIN)) + p.trigger_rule(
            "tool-call", p.repeat(CALL_BEGIN + tool_choice, min_calls, max_calls)
            + p.optional(p.literal(SECTION_END))))
        content_before_tools = p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN]))
        return generation + reasoning + content_before_tools + tool_calls + end

    # the thinking block of a thinking model the generation prompt left for the model to open
    closed_unopened = extract_reasoning and THINK_START in template.source and THINK_START not in gen

    def make_reader(p: ChatBuilder) -> Parser:
        end = p.end()
        generation = p.literal(GEN_PROMPT)
        reasoning: Parser = p.eps()
        if extract_reasoning:
            reasoning = (THINK_START + p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
                         + p.optional(p.literal(THINK_END)))
            if closed_unopened:
                reasoning = reasoning | (p.ahead(THINK_END, [SECTION_BEGIN, CALL_BEGIN])
                                         + p.reasoning(p.until(THINK_END)) + THINK_END)
            reasoning = p.optional(reasoning)
        if not has_tools or request.tool_choice == "none":
            return generation + reasoning + p.content(p.rest()) + end

        tool_choice = p.choice()
        for tool in functions(request.tools):
            function = tool["function"]
            name = function["name"]
            tool_id = p.tool_id(p.optional(p.literal("functions.")) + p.tool_name(p.literal(name)) + p.literal(":")
                                + p.chars("[0-9]", 1, -1))
            call = p.tool(p.tool_open(p.space() + tool_id + p.space() + p.literal(ARGS_BEGIN)) + p.space()
                          + p.tool_args(p.json()) + p.space() + p.tool_close(p.optional(p.literal(CALL_END))))
            tool_choice = tool_choice | call

        min_calls = 1 if request.tool_choice == "required" else 0
        max_calls = -1 if request.parallel_tool_calls else 1
        stray = p.until_one_of([CALL_BEGIN, SECTION_END])  # untagged: not part of the message
        calls = p.repeat(CALL_BEGIN + tool_choice + stray, min_calls, max_calls)
        section = (p.literal(SECTION_BEGIN) + stray + calls + p.optional(p.literal(SECTION_END))) | calls
        after = p.optional(p.negate(p.literal(CALL_BEGIN)) + p.negate(p.literal(SECTION_BEGIN)) + p.content(p.rest()))
        content_before_tools = p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN]))
        return generation + reasoning + content_before_tools + section + after + end

    return Prepared(
        prompt, gen, build(make), reader=build(make_reader), supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END,), grammar=include_grammar,
        grammar_lazy=include_grammar and request.tool_choice == "auto",
        grammar_triggers=(("word", CALL_BEGIN),) if include_grammar else (),
        preserved_tokens=(SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END))
