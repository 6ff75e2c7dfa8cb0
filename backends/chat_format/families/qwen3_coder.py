"""Qwen3-Coder's XML tool calls, also written by Qwen3.5, NVIDIA Nemotron 3 Nano and StepFun 3.5 Flash:

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

A value the schema declares a string is the raw text up to ``\\n</parameter>\\n``; any other is JSON. The thinking
models among them (their template names ``<think>``) open a thinking block that a tool call may cut short. A port of
llama.cpp's common/parsers/qwen3-coder.cpp.
"""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

GEN_PREFIX = "<|im_start|>assistant\n"


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)

    supports_reasoning = "<think>" in template.source
    preserved = ["<tool_call>", "</tool_call>"]
    thinking_end_tags: tuple[str, ...] = ()
    if supports_reasoning:
        # Both </think> and <tool_call> end the reasoning; the newline variant comes first so that it is part of the
        # message forced when a budget closes the thinking. <function= is left out: it only works around
        # Qwen3-Coder, which does not think.
        thinking_end_tags = ("\n</think>", "</think>", "<tool_call>")
        preserved += ["<think>", "</think>"]
    is_qwen3_coder = not supports_reasoning

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict) and bool(request.json_schema)
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")

    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = GEN_PREFIX
        if supports_reasoning:
            gen += "<think>\n" + str(msg.get("reasoning_content") or "")
            if request.continue_final_message == "content":
                gen += "\n</think>\n\n"
        if request.continue_final_message == "content":
            gen += render_content(msg)
        prompt += gen

    tool_call_starts = ["<tool_call>"]
    if is_qwen3_coder:
        # Qwen3-Coder now and then leaves out the <tool_call> before a call: a whole <function=NAME> opener starts one
        # too. The model may make up a name, but that beats starting on "<function", which content may well hold
        # (#include <functional>).
        tool_call_starts += [f"<function={tool['function']['name']}>" for tool in functions(request.tools)]

    def make(p: ChatBuilder) -> Parser:
        prefix = p.literal(GEN_PREFIX)

        reasoning = p.eps()
        if supports_reasoning and extract_reasoning:
            reasoning = p.optional("<think>" + p.space() + p.reasoning(p.until_one_of(["</think>", "<tool_call>"]))
                                   + (p.literal("</think>") | p.peek(p.literal("<tool_call>"))))

        if has_schema:
            return prefix + (reasoning << p.content(p.schema(p.json(), "response-format", request.json_schema)))

        if has_tools and request.tool_choice != "none":
            arg_close = p.tool_arg_close(p.literal("\n</parameter>\n"))
            arg_string = p.rule("xml-arg-string", p.ac(p.tool_arg_string_value(p.until("\n</parameter>\n"))
                                                       + arg_close, "\n</parameter>\n"))
            choices = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                required_args: list[Parser] = []
                optional_args: list[Parser] = []
                for param in parameters(function):
                    rule_name = f"tool-{name}-arg-{param.name}"
                    arg_open = p.tool_arg_open("<parameter=" + p.tool_arg_name(p.literal(param.name)) + ">\n")
                    types = param.value_types()
                    if "string" not in types:
                        arg_value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", param.schema)) \
                            + arg_close
                    elif types == {"string"}:
                        arg_value = arg_string
                    else:
                        # The string alternative takes any text, so the grammar keeps only the raw string rule; the
                        # parser still tries the JSON alternatives first, to type the value.
                        json_value = p.choice()
                        if "object" in types:
                            json_value = json_value | p.json_object()
                        if "array" in types:
                            json_value = json_value | p.json_array()
                        if "number" in types or "integer" in types:
                            json_value = json_value | p.json_number()
                        if "boolean" in types:
                            json_value = json_value | p.json_bool()
                        if "null" in types:
                            json_value = json_value | p.json_null()
                        arg_value = p.gbnf(p.atomic(p.tool_arg_json_value(json_value) + arg_close) | arg_string,
                                           "xml-arg-string")
                    arg_rule = p.rule(rule_name, p.tool_arg(arg_open + arg_value))
                    (required_args if param.required else optional_args).append(arg_rule)

                # The required arguments in any order: Qwen does not always keep to the order given.
                args = p.permute(f"tool-{name}-args", required_args)
                if optional_args:
                    args = args + p.zero_or_more(p.choice(optional_args))
                func = p.tool(p.tool_open("<function=" + p.tool_name(p.literal(name)) + ">\n") + p.tool_args(args)
                              + p.tool_close(p.literal("</function>\n")))
                choices = choices | p.rule(f"tool-{name}", func)

            min_calls = 1 if request.tool_choice == "required" else 0
            tool_call_body = choices + "</tool_call>" + p.space()
            tool_call = p.rule("tool-call", "<tool_call>\n" + tool_call_body)
            # Qwen3-Coder may leave out the <tool_call> of its first call.
            tool_call_first = (p.rule("tool-call-first", p.optional(p.literal("<tool_call>\n")) + tool_call_body)
                               if is_qwen3_coder else tool_call)
            calls = tool_call_first + p.zero_or_more(tool_call) if request.parallel_tool_calls else tool_call_first
            tool_calls = p.trigger_rule("tool-call-root", p.repeat(calls, min_calls, 1))
            return prefix + (reasoning << p.content(p.until_one_of(tool_call_starts)) << tool_calls)

        return prefix + (reasoning << p.content(p.rest()))

    grammar_lazy = include_grammar and has_tools and request.tool_choice == "auto"
    return Prepared(
        prompt, gen, build(make), supports_thinking=supports_reasoning,
        thinking_start_tag="<think>" if supports_reasoning else "", thinking_end_tags=thinking_end_tags,
        grammar=include_grammar, grammar_lazy=grammar_lazy,
        grammar_triggers=tuple(("word", start) for start in tool_call_starts) if grammar_lazy else (),
        preserved_tokens=tuple(preserved))
