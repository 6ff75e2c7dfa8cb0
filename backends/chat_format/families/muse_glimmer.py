"""Muse Glimmer (llama.cpp's common/parsers/muse-glimmer.cpp): an assistant turn is one or more messages
``<|start|>assistant to=RECIPIENT<|message|>…END`` — the chain of thought addressed ``to=self`` and ended by
``<|eom|>`` (more follows), the answer ``to=user`` ended by ``<|eot|>``, and a tool call addressed to the tool, its
body ATEM markup: ``<atem:function_calls><atem:invoke name="NAME"><atem:parameter name="KEY">VALUE
</atem:parameter>…</atem:invoke></atem:function_calls>`` (a string value raw, any other JSON). The generation prompt
is only ``<|start|>assistant``: the model writes its own `` to=…<|message|>``."""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions
from backends.chat_format.request import Prepared, Request, Template, apply_template, render_content
from backends.chat_format.peg import Parser

GENERATION_PROMPT = "<|start|>assistant"


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = GENERATION_PROMPT
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = "<|start|>assistant to=self<|message|>" + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += "<|eom|><|start|>assistant to=user<|message|>" + render_content(msg)
        prompt += gen

    extract_reasoning = request.reasoning_format != "none"
    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    # a grammar constrains the reply whenever tools are offered or a response format is asked for
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")

    def make(p: ChatBuilder) -> Parser:
        start = p.rule("start", p.literal("<|start|>assistant"))
        if not extract_reasoning and not include_grammar:
            return start + p.content(p.rest())
        if extract_reasoning:
            p.rule("analysis", p.literal(" to=self<|message|>") + p.reasoning(p.until("<|eom|>"))
                   + p.literal("<|eom|>"))
        else:
            p.rule("analysis", p.literal(" to=self<|message|>") + p.content(p.until("<|eom|>")) + p.literal("<|eom|>"))
        analysis = p.ref("analysis")
        recipient = p.optional(p.literal(" to=user"))
        final_msg = p.rule("final", recipient + p.literal("<|message|>")
                           + p.content(p.until_one_of(["<|eot|>", "<|eom|>"])))
        if has_schema:
            response_json = p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
            response_format = p.rule("response-format", recipient + p.literal("<|message|>") + (
                (p.literal("```json") + p.space() + response_json + p.space() + p.literal("```")) | response_json))
            return p.zero_or_more(start + analysis) + start + response_format
        if has_tools and request.tool_choice != "none":
            string_value = p.ac(p.tool_arg_string_value(p.until("</atem:parameter>"))
                                + p.tool_arg_close(p.literal("</atem:parameter>")), "</atem:parameter>")
            tool_choice = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                args = p.named_parameters(function, '<atem:parameter name="', '</atem:parameter>', string_value)
                tool_parser = p.tool(
                    p.tool_open(p.literal(" to=") + p.until("<|message|>")
                                + p.literal("<|message|><atem:function_calls>") + p.space()
                                + p.literal('<atem:invoke name="') + p.tool_name(p.literal(name)) + p.literal('">')
                                + p.space())
                    << p.tool_args(args)
                    << p.tool_close(p.literal("</atem:invoke>") + p.space() + p.literal("</atem:function_calls>")))
                tool_choice = tool_choice | p.rule(f"tool-{name}", tool_parser)
            if request.parallel_tool_calls:
                tool_calls = p.trigger_rule("tool-call", tool_choice + p.zero_or_more(
                    p.literal("<|eom|>") + start + tool_choice))
            else:
                tool_calls = p.trigger_rule("tool-call", tool_choice)
            if request.tool_choice == "required":
                return p.zero_or_more(start + analysis) + start + tool_calls
            trailing_calls = p.optional(p.literal("<|eom|>") + start + tool_calls)
            return p.zero_or_more(start + analysis) + start + (tool_calls | (final_msg + trailing_calls))
        return p.zero_or_more(start + analysis) + start + final_msg

    return Prepared(
        prompt, gen, build(make), supports_thinking=True, grammar=include_grammar,
        grammar_lazy=include_grammar and not (has_schema or (has_tools and request.tool_choice == "required")),
        grammar_triggers=(("pattern", r"(?:^|<\|start\|>assistant)( to=(?!self<\|message\|>)(?!user<\|message\|>)"
                                      r"[^<]*?<\|message\|>)"),) if include_grammar else (),
        preserved_tokens=("<|start|>", "<|message|>", "<|eom|>", "<|eot|>",
                          # the ATEM markup of a call addressed to a tool
                          "<atem:function_calls>", "<atem:invoke", "<atem:parameter", "</atem:parameter>",
                          "</atem:invoke>", "</atem:function_calls>"))
