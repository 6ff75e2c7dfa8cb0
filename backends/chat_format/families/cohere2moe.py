"""Cohere2 MoE ("North Code", llama.cpp's common/parsers/cohere2moe.cpp): an assistant turn is wrapped in markers —
``<|START_THINKING|>`` reasoning ``<|END_THINKING|>``, then *either* ``<|START_TEXT|>`` content ``<|END_TEXT|>``
*or* ``<|START_ACTION|>`` a JSON array of ``{"tool_call_id": "0", "tool_name": …, "parameters": {…}}``
``<|END_ACTION|>`` — and ``<|END_OF_TURN_TOKEN|>``.

The generation prompt opens the thinking block (thinking is on by default), so the model writes from inside it: the
parser's literal covers only the stable ``<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>`` and the reasoning rule reads
the thinking markers itself, whether the generation prompt or the reply wrote them."""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

TURN_START = "<|START_OF_TURN_TOKEN|>"
TURN_END = "<|END_OF_TURN_TOKEN|>"
CHATBOT = "<|CHATBOT_TOKEN|>"
USER = "<|USER_TOKEN|>"
SYSTEM = "<|SYSTEM_TOKEN|>"
THINK_START = "<|START_THINKING|>"
THINK_END = "<|END_THINKING|>"
TEXT_START = "<|START_TEXT|>"
TEXT_END = "<|END_TEXT|>"
ACTION_START = "<|START_ACTION|>"
ACTION_END = "<|END_ACTION|>"
RESULT_START = "<|START_TOOL_RESULT|>"
RESULT_END = "<|END_TOOL_RESULT|>"

GEN_PREFIX = TURN_START + CHATBOT  # what precedes the (forced) <|START_THINKING|> in the generation prompt


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = GEN_PREFIX + THINK_START + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += THINK_END + TEXT_START + render_content(msg)
        prompt += gen

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict) and bool(request.json_schema)
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")

    def make(p: ChatBuilder) -> Parser:
        prefix = p.literal(GEN_PREFIX)
        end = p.end()
        # The thinking block is always there (the generation prompt opens it). Without reasoning extraction the
        # whole block, markers included, stays in the content, as reasoning_format "none" does everywhere.
        if extract_reasoning:
            reasoning = p.optional(p.literal(THINK_START)
                                   + p.reasoning(p.until_one_of([THINK_END, TEXT_START, ACTION_START]))
                                   + p.optional(p.literal(THINK_END)))
        else:
            reasoning = p.optional(p.content(p.literal(THINK_START)
                                             + p.until_one_of([THINK_END, TEXT_START, ACTION_START])
                                             + p.optional(p.literal(THINK_END))))
        if has_schema:
            text = (p.literal(TEXT_START) + p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
                    + p.optional(p.literal(TEXT_END)))
        else:
            text = p.literal(TEXT_START) + p.content(p.until(TEXT_END)) + p.optional(p.literal(TEXT_END))
        if not has_tools or request.tool_choice == "none":
            return prefix + reasoning + text + p.optional(p.literal(TURN_END)) + end
        # <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, ...]<|END_ACTION|>
        tool_calls = p.standard_json_tools(
            ACTION_START, ACTION_END, request.tools, request.parallel_tool_calls, force_tool_calls=True,
            name_key="tool_name", args_key="parameters", array_wrapped=True, gen_call_id_key="tool_call_id",
            parameters_order=("tool_call_id", "tool_name", "parameters"))
        # content and tool calls exclude each other in this format
        body = tool_calls if request.tool_choice == "required" else p.choice([tool_calls, text])
        return prefix + reasoning + body + p.optional(p.literal(TURN_END)) + end

    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END,), grammar=include_grammar,
        grammar_lazy=include_grammar and not has_schema and request.tool_choice == "auto",
        grammar_triggers=(("word", ACTION_START),) if include_grammar else (),
        preserved_tokens=(TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START, TEXT_END,
                          ACTION_START, ACTION_END, RESULT_START, RESULT_END))
