"""Ling 3.0 / Bailing V3 (inclusionAI): ``<role>X</role>`` sections, tool calls tagged as

    <tool_call>NAME
    <arg_key>KEY</arg_key>
    <arg_value>VALUE</arg_value>
    </tool_call>

with string values raw and others JSON. The generation prompt ends in ``<role>ASSISTANT</role>\\n<think>``, so the model
never writes the opening think tag and may call a tool before any ``</think>``: the reasoning ends at the close tag or
at a call (as Qwen3-Coder's and Kimi K3's do). With thinking off the template closes the block itself and all the
model writes is content. A port of llama.cpp's common/parsers/ling3.cpp.
"""

from __future__ import annotations

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser

ROLE = "<role>ASSISTANT</role>"
THINK_START = "<think>"
THINK_END = "</think>"
CALL_START = "<tool_call>"
CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VAL = "<arg_value>"
ROLE_END = "<|role_end|>"
ARG_VAL_END = "</arg_value>"


def prepare(template: Template, request: Request) -> Prepared:
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)

    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = ROLE + "\n" + THINK_START + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += THINK_END + render_content(msg)
        prompt += gen

    # The generation prompt opens the think block when thinking is on, so the opening tag is optional and the
    # reasoning runs until </think> or a call; with thinking off the template has closed the block already.
    if request.has_continuation:
        think_open = request.continue_final_message != "content"
    else:
        last_open, last_close = gen.rfind(THINK_START), gen.rfind(THINK_END)
        think_open = last_open >= 0 and (last_close < 0 or last_open > last_close)

    has_tools = request.has_tools
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_tools and request.tool_choice != "none"

    def make(p: ChatBuilder) -> Parser:
        end = p.end()
        # what is parsed is the generation prompt and then the reply: the assistant's opener may come first
        opener = p.optional(p.literal(ROLE) + p.optional(p.space()))
        # a missing close tag does not swallow a tool call
        body_end = p.until_one_of([THINK_END, CALL_START]) if think_open else p.until_one_of([THINK_END])
        think_body = p.reasoning(body_end) if extract_reasoning else p.content(body_end)
        reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END)))
        # the text between the think block and the first call, and after the last, is content
        content = p.optional(p.content(p.until_one_of([CALL_START])))
        # an end-of-turn token at the end is taken, not left in the content
        tail = p.optional(p.content(p.until(ROLE_END))) + p.optional(p.literal(ROLE_END))

        if not has_tools or request.tool_choice == "none":
            return opener + reasoning + tail + end

        choices = p.choice()
        arg_close = p.tool_arg_close(p.literal(ARG_VAL_END))
        arg_string = p.rule("ling3-arg-string", p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close)
        for tool in functions(request.tools):
            function = tool["function"]
            name = function["name"]
            required_args: list[Parser] = []
            optional_args: list[Parser] = []
            # whitespace may come before each argument: the model writes newlines between them, the template's
            # history does not
            for param in parameters(function):
                rule_name = f"ling3-arg-{name}-{param.name}"
                types = param.value_types()
                # string values are the raw text up to the closing tag, others JSON as their schema says; each
                # alternative takes the closing tag itself, so that a JSON prefix cannot settle the choice before the
                # tag matches
                if "string" not in types:
                    arg_value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", param.schema)) \
                        + arg_close
                elif types == {"string"}:
                    arg_value = arg_string
                else:  # the JSON alternative first, to type the value
                    arg_value = p.gbnf(p.atomic(p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema",
                                                                               param.schema)) + arg_close)
                                       | arg_string, "ling3-arg-string")
                arg = p.rule(rule_name, p.optional(p.space()) + p.tool_arg(
                    p.tool_arg_open(p.literal(ARG_KEY) + p.tool_arg_name(p.literal(param.name))
                                    + p.literal(ARG_KEY_END))
                    + p.optional(p.space()) + p.literal(ARG_VAL) + arg_value))
                (required_args if param.required else optional_args).append(arg)

            # the required arguments in any order (as for Qwen3-Coder), then the optional ones in any order and number
            args = p.permute(f"ling3-{name}-args", required_args)
            if optional_args:
                args = args + p.zero_or_more(p.choice(optional_args))
            call = p.tool(p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(name)) + p.optional(p.space()))
                          + p.tool_args(args) + p.tool_close(p.optional(p.space()) + p.literal(CALL_END)))
            choices = choices | p.rule(f"ling3-tool-{name}", call)

        calls = choices + p.zero_or_more(p.space() + choices) if request.parallel_tool_calls else choices
        section = p.trigger_rule("ling3-tool-call", calls + p.space() + p.optional(p.content(p.until(ROLE_END)))
                                 + p.optional(p.literal(ROLE_END)))
        tools = section if request.tool_choice == "required" else p.optional(section)
        return opener + reasoning + content + tools + tail + end

    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag=THINK_START,
        # a call may come before the think block is closed
        thinking_end_tags=(THINK_END, CALL_START), grammar=include_grammar,
        grammar_lazy=include_grammar and request.tool_choice != "required",
        grammar_triggers=(("word", CALL_START),) if include_grammar else (),
        preserved_tokens=(THINK_START, THINK_END, CALL_START, CALL_END, ARG_KEY, ARG_KEY_END, ARG_VAL, ARG_VAL_END,
                          ROLE_END),
        # the model may spell the end-of-turn token out as text, which stops nothing: a stop string catches it
        # either way (as for Laguna's </assistant>)
        additional_stops=(ROLE_END,))
