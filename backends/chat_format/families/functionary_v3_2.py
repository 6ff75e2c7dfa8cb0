"""Functionary v3.2 (llama.cpp's common/parsers/functionary-v3-2.cpp): every part of a reply is addressed to a
recipient — ``>>>all\\n`` then text for the user, ``>>>NAME\\n`` then the JSON arguments of a call to NAME. The
generation prompt ends with ``>>>``, so the reply starts with the recipient."""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        gen = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n" + render_content(request.continue_msg or {})
        prompt += gen

    has_tools = request.has_tools
    include_grammar = has_tools and request.tool_choice != "none"

    def make(p: ChatBuilder) -> Parser:
        # with tools, the text for the user stops at the next ">>>" (a call); without, it runs to the end
        content_until_tool = p.literal("all\n") + p.content(p.until(">>>"))
        content_until_end = p.literal("all\n") + p.content(p.rest())
        prefix = p.literal("<|start_header_id|>assistant<|end_header_id|>\n\n>>>")
        if not include_grammar:
            return prefix + content_until_end + p.end()
        tool_choice = p.choice()
        for tool in functions(request.tools):
            function = tool["function"]
            name = function["name"]
            # >>>NAME\n{json arguments}
            tool_parser = p.tool(p.tool_open(p.tool_name(p.literal(name)) + p.literal("\n"))
                                 + p.tool_args(p.schema(p.json(), f"tool-{name}-schema", tool_parameters(function))))
            tool_choice = tool_choice | p.rule(f"tool-{name}", tool_parser)
        tools_only = p.trigger_rule("tools", p.one_or_more(tool_choice))
        content_and_tools = content_until_tool + tools_only
        if request.tool_choice == "required":
            if request.parallel_tool_calls:
                body = p.choice([content_and_tools, tools_only]) + p.end()
            else:
                body = p.choice([content_until_tool + tool_choice, tools_only]) + p.end()
        elif request.parallel_tool_calls:
            body = p.choice([content_and_tools, content_until_end, tools_only]) + p.end()
        else:
            body = p.choice([content_until_tool + tool_choice, content_until_end, tool_choice]) + p.end()
        return prefix + body

    return Prepared(
        prompt, gen, build(make), grammar=include_grammar,
        grammar_lazy=include_grammar and request.tool_choice == "auto",
        # a call starts when the model addresses anyone but "all" after the generation prompt's ">>>"
        grammar_triggers=(("pattern", ">>>(?!all)"),) if include_grammar else (),
        preserved_tokens=(">>>all",))
