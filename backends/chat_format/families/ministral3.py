"""Ministral 3 and Magistral (Mistral): ``[THINK]…[/THINK]`` reasoning, then content, then calls written as
``[TOOL_CALLS]NAME[ARGS]{…}`` one after the other. The template takes a system or assistant message's reasoning as a
``thinking`` block of its content (https://huggingface.co/mistralai/Ministral-3-14B-Reasoning-2512/blob/main/
chat_template.jinja). Mistral Small 3.2, whose calls carry a ``[CALL_ID]``, is not of this family. A port of
llama.cpp's common/parsers/ministral3.cpp.
"""

from __future__ import annotations

from typing import Any

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser


def _as_blocks(message: dict[str, Any]) -> dict[str, Any]:
    """A system or assistant message with its reasoning and content as the template's typed content blocks."""
    content: list[Any] = []
    if isinstance(message.get("reasoning_content"), str):
        content.append({"type": "thinking", "thinking": message["reasoning_content"]})
    if "content" in message:
        if isinstance(message["content"], str):
            content.append({"type": "text", "text": message["content"]})
        elif isinstance(message["content"], list):
            content.extend(message["content"])
    adjusted = {k: v for k, v in message.items() if k != "reasoning_content"}
    adjusted["content"] = content
    return adjusted


def prepare(template: Template, request: Request) -> Prepared:
    # only system and assistant messages change (a system message may carry thinking too)
    messages = [_as_blocks(m) if m.get("role") in ("system", "assistant") else m for m in request.messages]

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict) and bool(request.json_schema)
    extract_reasoning = request.reasoning_format != "none"

    prompt = apply_template(template, request, messages=messages)
    gen = generation_prompt(template, request, messages=messages)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = "[THINK]" + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += "[/THINK]" + render_content(msg)
        prompt += gen

    with_tools = has_tools and request.tool_choice != "none"
    include_grammar = has_schema or with_tools  # a content-only reply has no grammar

    def make(p: ChatBuilder) -> Parser:
        prefix = p.eps()
        reasoning = p.optional("[THINK]" + p.reasoning(p.until("[/THINK]")) + "[/THINK]") \
            if extract_reasoning else p.eps()

        if has_schema:
            # Ministral writes its JSON in a code fence
            return prefix + (reasoning << "```json" << p.content(p.schema(p.json(), "response-format",
                                                                          request.json_schema)) << "```")

        if with_tools:
            choices = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                schema = tool_parameters(function)
                choices = choices | p.rule(f"tool-{name}", p.tool(
                    p.tool_open(p.tool_name(p.literal(name)) + "[ARGS]")
                    + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", schema))))
            min_calls = 1 if request.tool_choice == "required" else 0
            max_calls = -1 if request.parallel_tool_calls else 1
            tool_calls = p.trigger_rule("tool-call", p.repeat("[TOOL_CALLS]" + choices, min_calls, max_calls))
            return prefix + (reasoning << p.content(p.until("[TOOL_CALLS]")) << tool_calls)

        return prefix + (reasoning << p.content(p.rest()))

    grammar_lazy = include_grammar and has_tools and request.tool_choice == "auto"
    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag="[THINK]",
        thinking_end_tags=("[/THINK]",), grammar=include_grammar, grammar_lazy=grammar_lazy,
        grammar_triggers=(("word", "[TOOL_CALLS]"),) if include_grammar else (),
        preserved_tokens=("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"))
