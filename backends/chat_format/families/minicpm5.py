"""MiniCPM5 (llama.cpp's common/parsers/minicpm5.cpp): reasoning in ``<think>…</think>``, then content, then tool
calls as XML — ``<function name="NAME"><param name="KEY">VALUE</param>…</function>`` — where a string value is
raw text (or a ``<![CDATA[…]]>`` section, for a value that holds ``</param>``) and any other value is JSON."""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = "<|im_start|>assistant\n<think>\n" + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += "\n</think>\n\n" + render_content(msg)
        prompt += gen

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict) and bool(request.json_schema)
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")

    def make(p: ChatBuilder) -> Parser:
        prefix = p.literal("<|im_start|>assistant\n")
        reasoning = p.eps()
        if extract_reasoning:
            reasoning = ("<think>" << p.reasoning(p.until("</think>")) << "</think>") + p.space()
        if has_schema:
            return prefix + reasoning + p.content(p.schema(p.json(), "response-format", request.json_schema))
        if has_tools and request.tool_choice != "none":
            # CDATA lets a value hold what would otherwise close its tag (</param>); only the inside is the value
            string_value = p.choice([
                p.literal("<![CDATA[") + p.ac(p.tool_arg_string_value(p.until("]]>")) + p.literal("]]>"), "]]>")
                + p.tool_arg_close(p.literal("</param>")),
                p.negate(p.literal("<![CDATA["))
                + p.ac(p.tool_arg_string_value(p.until("</param>")) + p.tool_arg_close(p.literal("</param>")),
                       "</param>"),
            ])
            tool_choice = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                args = p.named_parameters(function, '<param name="', '</param>', string_value)
                tool_parser = p.tool(
                    p.tool_open(p.literal('<function name="') + p.tool_name(p.literal(name)) + p.literal('">'))
                    << p.tool_args(args) << p.tool_close(p.literal("</function>")))
                tool_choice = tool_choice | p.rule(f"tool-{name}", tool_parser)
            max_calls = -1 if request.parallel_tool_calls else 1
            tool_calls = p.trigger_rule("tool-call", p.repeat(tool_choice + p.space(), 1, max_calls))
            content = p.content(p.until("<function"))
            return prefix + reasoning + content + tool_calls + p.end()
        return prefix + reasoning + p.content(p.rest()) + p.end()

    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag="<think>", thinking_end_tags=("</think>",),
        grammar=include_grammar,
        grammar_lazy=include_grammar and not (has_schema or (has_tools and request.tool_choice == "required")),
        grammar_triggers=(("word", "<function"),) if include_grammar else (),
        preserved_tokens=("<function", "<param", "</function>", "</param>", "<think>", "</think>"))
