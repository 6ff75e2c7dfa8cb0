"""GigaChat 3 (llama.cpp's common/parsers/gigachat-v3.cpp): content, then at most one tool call in its own message,
``<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name": …, "arguments": {…}}``. GigaChat 3.1, whose template
has ``<|function_call|>``, is not this family (llama.cpp's differential analysis reads it)."""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

TOOL_CALL_START = "<|message_sep|>\n\nfunction call<|role_sep|>\n"


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        gen = "assistant<|role_sep|>\n" + render_content(request.continue_msg or {})
        prompt += gen

    has_tools = request.has_tools
    include_grammar = has_tools and request.tool_choice != "none"

    def make(p: ChatBuilder) -> Parser:
        if include_grammar:
            tool_choice = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                tool_name = p.json_member("name", '"' + p.tool_name(p.literal(name)) + '"')
                tool_args = p.json_member("arguments", p.tool_args(
                    p.schema(p.json(), f"tool-{name}-schema", tool_parameters(function))))
                tool_open = p.tool_open(p.literal("{") << tool_name)
                tool_choice = tool_choice | p.rule(f"tool-{name}", p.tool(tool_open << "," << tool_args << "}"))
            # one call at most: the format has no parallel calls
            min_calls = 1 if request.tool_choice == "required" else 0
            tool_call = p.rule("tool-call", p.literal(TOOL_CALL_START) + tool_choice)
            tool_calls = p.trigger_rule("tool-call-root", p.repeat(tool_call, min_calls, 1))
            body = p.content(p.until("<|message_sep|>\n\n")) << tool_calls
        else:
            body = p.content(p.rest())
        return p.literal("assistant<|role_sep|>\n") + body

    return Prepared(
        prompt, gen, build(make), grammar=include_grammar,
        grammar_lazy=include_grammar and request.tool_choice == "auto",
        grammar_triggers=(("word", TOOL_CALL_START),) if include_grammar else (),
        preserved_tokens=("<|message_sep|>\n\n", "<|role_sep|>\n"))
