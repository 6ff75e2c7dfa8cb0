"""gpt-oss ("harmony"): every part of a reply is a message on a channel — ``analysis`` (the reasoning), ``commentary``
(a preamble, or a tool call addressed ``to=functions.NAME``) and ``final`` (the answer) — with special tokens that the
engine must keep in the text for this parser to see (llama.cpp's common/parsers/gpt-oss.cpp; openai-harmony is the
reference renderer and parser)."""

from __future__ import annotations

from typing import Any

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser


def prepare(template: Template, request: Request) -> Prepared:
    messages: list[dict[str, Any]] = []
    for message in request.messages:  # the template reads the reasoning as "thinking"
        message = dict(message)
        if isinstance(message.get("reasoning_content"), str):
            message["thinking"] = message["reasoning_content"]
            if message.get("tool_calls"):
                message.pop("content", None)
        messages.append(message)
    prompt = apply_template(template, request, messages=messages)
    if not request.add_generation_prompt:
        # A finished final message ends with <|return|> in the template, but continues with <|end|> in a
        # conversation the model reads: https://github.com/ggml-org/llama.cpp/issues/15417
        at = prompt.rfind("<|return|>")
        if at >= 0:
            prompt = prompt[:at] + "<|end|>" + prompt[at + len("<|return|>"):]
    gen = generation_prompt(template, request, messages=messages)
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = "<|start|>assistant<|channel|>analysis<|message|>" + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += "<|end|><|start|>assistant<|channel|>final<|message|>" + render_content(msg)
        prompt += gen

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    extract_reasoning = request.reasoning_format != "none"

    def make(p: ChatBuilder) -> Parser:
        start = p.rule("start", p.literal("<|start|>assistant"))
        end = p.rule("end", p.literal("<|end|>"))
        content = p.rule("message-content", p.until("<|end|>"))
        channel = p.literal("<|channel|>") + (p.literal("commentary") | p.literal("analysis"))
        constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)
        # gpt-oss-20b now and then opens a channel with a stray commentary header
        stray = p.optional(p.literal("<|channel|>commentary") + p.optional(p.literal(" to=assistant")))
        start_analysis = stray + p.literal("<|channel|>analysis<|message|>")
        if extract_reasoning:
            p.rule("analysis", start_analysis + p.reasoning(content) + end)
        else:
            p.rule("analysis", p.content(start_analysis + content + end))
        analysis = p.ref("analysis")
        preamble = p.rule("preamble", p.literal("<|channel|>commentary<|message|>") + p.content(content) + end)
        final = p.rule("final", stray + p.literal("<|channel|>final<|message|>") + p.content(content))
        unsolicited = p.rule("unsolicited", p.atomic(p.optional(channel) + p.literal(" to=") + content + end))
        any_message = p.rule("any", preamble | analysis)
        if has_schema:
            constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
            response = p.rule("response-format", p.literal("<|channel|>final") + constraint + p.literal("<|message|>")
                              + p.content(p.schema(p.json(), "response-format-schema", request.json_schema)))
            return p.zero_or_more(start + analysis) + start + response
        if has_tools and request.tool_choice != "none":
            choices = p.choice()
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                func_name = p.literal(" to=functions.") + p.tool_name(p.literal(name))
                constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
                args = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", tool_parameters(function)))
                # the recipient in the role header, or in the channel header
                in_role = p.tool(p.tool_open(func_name + channel + constraint + p.literal("<|message|>")) + args)
                in_channel = p.tool(p.tool_open(channel + func_name + constraint + p.literal("<|message|>")) + args)
                choices = choices | p.rule(f"tool-{name}", in_role | in_channel)
            tool_call = p.trigger_rule("tool-call", choices)
            if request.tool_choice == "required":
                return p.zero_or_more(start + any_message) + start + tool_call
            return p.zero_or_more(start + any_message) + start + (tool_call | final)
        return p.zero_or_more(start + any_message) + start + (final | unsolicited)

    grammar = has_schema or (has_tools and request.tool_choice != "none")
    return Prepared(
        prompt, gen, build(make), supports_thinking=True, thinking_start_tag="<|channel|>analysis<|message|>",
        thinking_end_tags=("<|end|>",), grammar=grammar,
        grammar_lazy=grammar and not (has_schema or (has_tools and request.tool_choice == "required")),
        grammar_triggers=(("pattern", r"^\s+to$"),
                          ("pattern", r"^<\|channel\|>(?:commentary|analysis)\s+to=functions$"),
                          ("pattern", r"<\|start\|>assistant(\s+to)"),
                          ("pattern", r"<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)"))
        if grammar else (),
        preserved_tokens=("<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"))
