"""Kimi K3: a message of tagged sections — thinking, the response, tool calls — built from the ``<|open|>``,
``<|close|>`` and ``<|sep|>`` markers by the template's open_tag / close_tag macros (llama.cpp's
common/parsers/kimi-k3.cpp)::

    <|open|>message role="assistant"<|sep|><|open|>think<|sep|>The user wants…<|close|>think<|sep|>
    <|open|>response<|sep|>Let me look.<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="get_weather" index="0"<|sep|>
    <|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>
    <|close|>tools<|sep|>
    <|close|>message<|sep|><|end_of_msg|>

The generation prompt already opens the thinking (or the response), so each section's opener is optional, as for
Kimi K2 Thinking. The template's own switch is ``thinking`` (true unless given): a request with thinking off
(``enable_thinking=False``) sets it false unless its ``chat_template_kwargs`` say otherwise, so that the generation
prompt opens the response (``<|open|>response<|sep|>``, what the template writes then) and the answer is read as
content, not as the thinking the generation prompt would otherwise have opened. An argument's value is JSON or plain
text as the tool's schema says, not as its ``type`` attribute.
"""

from __future__ import annotations

import copy
from typing import Any

from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format import peg
from backends.chat_format.peg import Parser

SEP = "<|sep|>"
MSG_START = '<|open|>message role="assistant"<|sep|>'
THINK_START = "<|open|>think<|sep|>"
THINK_END = "<|close|>think<|sep|>"
RESP_START = "<|open|>response<|sep|>"
RESP_END = "<|close|>response<|sep|>"
TOOLS_START = "<|open|>tools<|sep|>"
TOOLS_END = "<|close|>tools<|sep|>"
CALL_START = '<|open|>call tool="'
CALL_END = "<|close|>call<|sep|>"
ARG_START = '<|open|>argument key="'
ARG_END = "<|close|>argument<|sep|>"
MSG_END = "<|close|>message<|sep|>"
EOM_TOKEN = "<|end_of_msg|>"


def _declared_type(schema: Any) -> str:
    """A property's declared type, "string" where it declares none (or a list of them)."""
    if isinstance(schema, dict) and isinstance(schema.get("type"), str):
        return str(schema["type"])
    return "string"


def reply_parser(request: Request) -> peg.Grammar_:
    """The parser of a reply to ``request``."""
    has_tools = request.has_tools
    extract_reasoning = request.reasoning_format != "none"

    def make(p: ChatBuilder) -> Parser:
        end = p.end()
        start = p.optional(p.literal(MSG_START))
        # The think section is read even when reasoning is not extracted: the generation prompt opens it, so it is
        # always there. It ends at its closer, or at the response's opener where the model leaves the closer out.
        think_body = (p.reasoning(p.until_one_of([THINK_END, RESP_START])) if extract_reasoning
                      else p.content(p.until_one_of([THINK_END, RESP_START])))
        reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END)))
        # the content runs to the response's closer, or to the next section where the reply was cut short
        response = (p.optional(p.literal(RESP_START)) + p.content(p.until_one_of([RESP_END, TOOLS_START, MSG_END]))
                    + p.optional(p.literal(RESP_END)))
        # the end-of-generation token after the message's closer reaches the parser as text: it must be read, or
        # the parse stays unfinished
        trailer = p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM_TOKEN))

        if not has_tools or request.tool_choice == "none":
            return start + reasoning + response + trailer + end

        tool_choices = p.choice()
        for tool in functions(request.tools):
            function = tool["function"]
            name = function["name"]
            schema = tool_parameters(function)
            args: Parser = p.eps()
            properties = schema.get("properties")
            if isinstance(properties, dict) and properties:
                arg_choices = p.choice()
                for key, prop in properties.items():
                    # One tag per argument, its JSON type in a type="…" attribute; the schema's type is taken
                    # instead, as it says whether the value is JSON or plain text.
                    value = (p.tool_arg_string_value(p.until(ARG_END)) if _declared_type(prop) == "string"
                             else p.tool_arg_value(p.until(ARG_END)))
                    # the type="…" attribute is skipped: anything up to <|sep|>
                    arg_choices = arg_choices | p.rule(f"kimi-k3-arg-{name}-{key}", p.tool_arg(
                        p.tool_arg_open(p.literal(ARG_START)) + p.tool_arg_name(p.literal(key)) + p.literal('"')
                        + p.until(SEP) + p.literal(SEP) + value + p.tool_arg_close(p.literal(ARG_END))))
                args = p.zero_or_more(arg_choices)
            # the index="N" attribute is skipped the same way
            call = p.tool(p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(name)) + p.literal('"')
                                      + p.until(SEP) + p.literal(SEP))
                          + p.tool_args(args) + p.tool_close(p.literal(CALL_END)))
            tool_choices = tool_choices | p.rule(f"kimi-k3-tool-{name}", call)

        # Every call is in one tools section, then the message is closed. The message's closer belongs to the
        # trigger rule, or the lazy grammar would refuse it once the calls have started.
        tools_section = p.trigger_rule("kimi-k3-tool-call", p.literal(TOOLS_START) + p.one_or_more(tool_choices)
                                       + p.literal(TOOLS_END) + p.optional(p.literal(MSG_END))
                                       + p.optional(p.literal(EOM_TOKEN)))
        tools = tools_section if request.tool_choice == "required" else p.optional(tools_section)
        return start + reasoning + response + tools + trailer + end

    return build(make)


def thinking(request: Request) -> bool:
    """Whether the template thinks for ``request``: its ``thinking`` variable, given by the request's template kwargs
    or, where they leave it out, by its ``enable_thinking``."""
    given = request.extra_context.get("thinking")
    return bool(given) if given is not None else request.enable_thinking


def prepare(template: Template, request: Request) -> Prepared:
    thinks = thinking(request)
    if "thinking" not in request.extra_context and not thinks:
        request = copy.copy(request)
        request.extra_context = {**request.extra_context, "thinking": False}
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    if request.has_continuation:
        msg = request.continue_msg or {}
        if thinks or request.continue_final_message != "content":
            gen = MSG_START + THINK_START + str(msg.get("reasoning_content") or "")
            if request.continue_final_message == "content":
                gen += THINK_END + RESP_START + render_content(msg)
        else:  # no thinking: the response goes on where the template opens it
            gen = MSG_START + RESP_START + render_content(msg)
        prompt += gen
    include_grammar = request.has_tools and request.tool_choice != "none"
    return Prepared(
        prompt, gen, reply_parser(request), supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END,), grammar=include_grammar,
        grammar_lazy=include_grammar and request.tool_choice != "required",
        grammar_triggers=(("word", TOOLS_START),) if include_grammar else (),
        # only the markers are special tokens: the tag names (think, response, …) are ordinary words, and
        # preserving them would break prose that uses them
        preserved_tokens=("<|open|>", "<|close|>", SEP, EOM_TOKEN))
