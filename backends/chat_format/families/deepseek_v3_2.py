"""DeepSeek V3.2 and V4: thinking in ``<think>…</think>``, tool calls in DSML, DeepSeek's XML-like markup whose tags
carry the ``｜DSML｜`` token (llama.cpp's common/parsers/deepseek.cpp)::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

A parameter the schema lets be a string is written as it is (``string="true"``), any other as JSON. V4 writes the
same markup but names the block ``tool_calls``, renders tool results in the order of the calls they answer, and its
generation prompt without thinking ends with a bare ``</think>`` where V3.2's has an empty ``<think></think>``.
"""

from __future__ import annotations

from typing import Any

import json

from backends.chat_format import peg
from backends.chat_format.builder import TOOL_ARG_CLOSE, TOOL_ARG_VALUE, TOOL_CLOSE, ChatBuilder, Mapper, build
from backends.chat_format.tool_schema import functions, parameters, typed_arguments
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Node, Parser

DSML = "｜DSML｜"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<｜Assistant｜>"
TC_SEPARATOR = "\n\n"


def sort_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each run of tool results in the order of the calls they answer (matched by call id), as
    DeepSeek V4's reference implementation renders consecutive tool results into one user block in call order
    rather than in the order they came in (llama.cpp's deepseek_v4_sort_tool_results)."""
    adjusted = list(messages)
    call_order: dict[str, int] = {}
    i = 0
    while i < len(adjusted):
        message = adjusted[i]
        role = message.get("role", "")
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            call_order = {}
            for index, call in enumerate(calls):
                call_id = call.get("id", "") if isinstance(call, dict) else ""
                if call_id:
                    call_order[call_id] = index
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        # a maximal run of user and tool messages: they render into one user block
        tool_positions: list[int] = []
        run_end = i
        while run_end < len(adjusted):
            run_role = adjusted[run_end].get("role", "")
            if run_role == "tool":
                tool_positions.append(run_end)
            elif run_role != "user":
                break
            run_end += 1
        if len(tool_positions) > 1 and call_order:
            results = sorted((adjusted[pos] for pos in tool_positions),  # sorted() is stable, as std::stable_sort
                             key=lambda m: call_order.get(m.get("tool_call_id", ""), 0))
            for pos, result in zip(tool_positions, results, strict=True):
                adjusted[pos] = result
        i = run_end
    return adjusted


def prepare(template: Template, request: Request) -> Prepared:
    # V4 uses the same DSML markup as V3.2 but names its tool call block "tool_calls"
    is_v4 = "function_calls" not in template.source
    messages = sort_tool_results(request.messages) if is_v4 else None

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    extract_reasoning = request.reasoning_format != "none"
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")
    additional_context = {"response_format": request.json_schema} if is_v4 and has_schema else None

    block = "tool_calls" if is_v4 else "function_calls"
    fc_start = f"<{DSML}{block}>"
    fc_end = f"</{DSML}{block}>"
    invoke_start = f"<{DSML}invoke"
    invoke_end = f"</{DSML}invoke>"
    param_start = f"<{DSML}parameter"
    param_end = f"</{DSML}parameter>"

    prompt = apply_template(template, request, messages=messages, additional_context=additional_context)
    gen = generation_prompt(template, request, messages=messages, additional_context=additional_context)
    if request.has_continuation:
        msg = request.continue_msg or {}
        reasoning_so_far = str(msg.get("reasoning_content") or "")
        if is_v4 and not reasoning_so_far:
            gen = GEN_PROMPT + THINK_END
            if request.continue_final_message == "content":
                gen += render_content(msg)
        else:
            gen = GEN_PROMPT + THINK_START + reasoning_so_far
            if request.continue_final_message == "content":
                gen += THINK_END + render_content(msg)
        prompt += gen

    require_tools = request.tool_choice == "required"
    has_tool_calls = has_tools and request.tool_choice != "none"

    # what the reader also takes (vLLM's and SGLang's DeepSeek parsers; the model's own encoder for V4.1): the DSML
    # token followed by a space (<｜DSML｜ calls>, <｜DSML｜ invoke …>), any of the three block names, an invoke
    # closed on itself (<｜DSML｜invoke name="submit"/>), parameters in any order, string="false" values that are
    # not JSON kept as text, and every value typed by the tool's schema
    wide_opens = [f"<{DSML}{space}{name}>" for name in ("tool_calls", "function_calls", "calls") for space in ("", " ")]

    def dsml(p: ChatBuilder, name: str, closing: bool = False) -> Parser:
        return p.literal(("</" if closing else "<") + DSML) + p.optional(p.literal(" ")) + p.literal(name)

    def wide_call(p: ChatBuilder, function: dict[str, Any]) -> Parser:
        name = function["name"]
        param_ends = [f"</{DSML}parameter>", f"</{DSML} parameter>"]
        args = []
        for param in parameters(function):
            opened = dsml(p, "parameter") + p.literal(' name="') + p.tool_arg_name(p.literal(param.name)) + '"'
            value = ((p.literal(' string="false">') + p.tool_arg_value(p.until_one_of(param_ends)))
                     | (p.optional(p.literal(' string="true"')) + ">"
                        + p.tool_arg_string_value(p.until_one_of(param_ends))))
            args.append(p.tool_arg(p.tool_arg_open(opened) + value
                                   + p.tool_arg_close(dsml(p, "parameter>", closing=True))))
        body = p.zero_or_more(p.space() + p.choice(args)) if args else p.eps()
        opened = dsml(p, "invoke") + p.literal(' name="') + p.tool_name(p.literal(name)) + p.literal('"') + p.space()
        return p.tool(p.tool_open(opened) + (p.tool_close(p.literal("/>"))
                                             | (p.literal(">") + body + p.space()
                                                + p.tool_close(dsml(p, "invoke>", closing=True)))))

    def make(p: ChatBuilder, wide: bool = False) -> Parser:
        generation = p.literal(GEN_PROMPT)
        end = p.end()
        opens = wide_opens if wide else [fc_start]
        block_start = p.choice([p.literal(o) for o in opens]) if wide else p.literal(fc_start)
        block_end = (p.choice([dsml(p, f"{n}>", closing=True) for n in ("tool_calls", "function_calls", "calls")])
                     if wide else p.literal(fc_end))

        # the tool call section first: the reasoning may run straight into it
        tool_choice = p.choice()
        if has_tool_calls and wide:
            for tool in functions(request.tools):
                tool_choice = tool_choice | wide_call(p, tool["function"])
        if has_tool_calls and not wide:
            for tool in functions(request.tools):
                function = tool["function"]
                name = function["name"]
                required: list[Parser] = []
                optional: list[Parser] = []
                for param in parameters(function):
                    is_string = param.may_be_string()
                    value = (p.tool_arg_string_value(p.until(param_end)) if is_string else
                             p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{param.name}-schema",
                                                            param.schema)))
                    arg = p.tool_arg(
                        p.tool_arg_open(p.literal(param_start + ' name="') + p.tool_arg_name(p.literal(param.name))
                                        + p.literal(f'" string="{"true" if is_string else "false"}">'))
                        + value + p.tool_arg_close(p.literal(param_end)))
                    named = p.rule(f"tool-{name}-arg-{param.name}", arg)
                    (required if param.required else optional).append(named)
                args: Parser = p.eps()
                for i, part in enumerate(required):
                    if i > 0:
                        args = args + p.space()
                    args = args + part
                if optional:
                    args = args + p.repeat(p.space() + p.choice(optional), 0, -1)
                call = p.tool(p.tool_open(p.literal(invoke_start + ' name="') + p.tool_name(p.literal(name))
                                          + p.literal('">\n'))
                              + args + p.space() + p.tool_close(p.literal(invoke_end)))
                tool_choice = tool_choice | p.rule(f"tool-{name}", call)

        if request.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", block_start + p.space() + tool_choice
                                        + p.zero_or_more(p.space() + tool_choice) + p.space() + block_end)
        else:
            tool_calls = p.trigger_rule("tool-call", block_start + p.space() + tool_choice + p.space() + block_end)

        reasoning: Parser = p.eps()
        reasoning_with_tc: Parser = p.eps()
        obligatory_tool_calls = tool_calls
        allow_reasoning_with_tc = False
        if not require_tools:
            tool_calls = p.optional(tool_calls)

        if extract_reasoning and request.enable_thinking:
            reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END)
            # the model may open the tool calls without closing its thinking
            reasoning_with_tc = (THINK_START + p.reasoning(p.until_one_of([*(TC_SEPARATOR + o for o in opens), *opens,
                                                                            THINK_END]))
                                 + p.space() + obligatory_tool_calls)
            allow_reasoning_with_tc = True
        elif extract_reasoning:
            # thinking off, but the generation prompt holds an empty <think></think> (V3.2) or a bare </think>
            # (V4) that must still be read
            reasoning = (p.optional(p.literal(THINK_END)) if is_v4 else
                         p.optional(p.literal(THINK_START) + p.until(THINK_END) + p.literal(THINK_END)))

        if has_schema:
            response = p.rule("response-format", p.literal("```json") + p.space()
                              + p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
                              + p.space() + p.literal("```"))
            return generation + reasoning + response + end

        if not has_tool_calls:
            return generation + reasoning + p.content(p.rest()) + end

        content_before_tools = (p.negate(p.literal(THINK_START))
                                + p.content(p.until_one_of([*(TC_SEPARATOR + o for o in opens), *opens])) + p.space())
        if allow_reasoning_with_tc:
            return generation + (reasoning_with_tc | (reasoning + content_before_tools + tool_calls)) + end
        return generation + reasoning + content_before_tools + tool_calls + end

    tools_by_name = {tool["function"]["name"]: tool["function"] for tool in functions(request.tools)}

    class TypedMapper(Mapper):
        """Values written string="false" that are not JSON kept as text; each call's arguments typed by its schema."""

        raw: tuple[int, str] | None = None  # where the last string="false" value begins in the arguments, as written

        def map(self, node: Node) -> None:
            current = self._current
            if node.tag == TOOL_ARG_VALUE and current is not None and current.name:
                self.raw = (len(current.arguments), node.text)
            elif node.tag == TOOL_ARG_CLOSE and current is not None and self.raw is not None:
                at, text = self.raw
                self.raw = None
                try:
                    json.loads(text)
                except ValueError:  # not JSON after all: the text as written, once the value is whole
                    current.arguments = current.arguments[:at] + peg.json_text(text)
            super().map(node)
            if node.tag == TOOL_CLOSE and current is not None and current.name in tools_by_name:
                current.arguments = typed_arguments(current.arguments, tools_by_name[current.name])

    return Prepared(
        prompt, gen, build(make), reader=build(lambda p: make(p, wide=True)), reader_mapper=TypedMapper,
        supports_thinking=True, thinking_start_tag=THINK_START,
        thinking_end_tags=(THINK_END, fc_start), grammar=include_grammar,
        grammar_lazy=include_grammar and has_tools and not require_tools,
        grammar_triggers=(("word", fc_start),) if include_grammar else (),
        preserved_tokens=(DSML, THINK_START, THINK_END))
