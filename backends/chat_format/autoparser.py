"""The reply parser of a template no family module reads, built from its differential analysis.

``backends/chat_format/analysis.py`` reads a template's markers off renders of probe conversations (where thinking
opens and closes, what wraps the answer, how a tool call, its name, its arguments and its id are written); this
module turns them into the PEG parser of the reply and the request's ``Prepared`` fields — the grammar's triggers,
the tokens to keep, the thinking tags. It is llama.cpp's ``common/chat-auto-parser-generator.cpp`` with the part of
``common_chat_templates_apply_jinja`` (``common/chat.cpp``) that follows ``common_chat_try_specialized_template``,
ported line by line so that such a template's replies are read exactly as llama-server reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from backends.chat_format.analysis import (
    Analysis,
    CallIdPosition,
    ContentAnalysis,
    ReasoningAnalysis,
    ReasoningMode,
    ToolFormat,
    ToolsAnalysis,
    analyze_template,
    trim_whitespace,
)
from backends.chat_format.builder import ChatBuilder, build
from backends.chat_format.tool_schema import functions, parameters, tool_parameters
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Parser


@dataclass
class _Context:
    """What every part's parser needs (llama.cpp's parser_build_context)."""

    p: ChatBuilder
    request: Request
    reasoning_parser: Parser
    extracting_reasoning: bool
    reasoning: ReasoningAnalysis
    content: ContentAnalysis
    wide: bool = False  # the reader's parser: the variants models write beyond what the template renders
    unopened: bool = False  # the reader's: thinking may be closed without being opened (see thinking_left_unopened)
    tool_markers: tuple[str, ...] = ()  # where a tool call begins, which ends such thinking unclosed


def prepare(template: Template, request: Request) -> Prepared:
    """``request`` rendered through ``template`` and read by the parser its analysis builds. A template whose
    markers cannot be read (a tool call that is no JSON where the analysis expects JSON) raises ValueError, with
    llama.cpp's words."""
    try:
        analysis = analyze_template(template)
    except ValueError as exc:  # json.JSONDecodeError included
        raise ValueError(f"Unable to generate parser for this template. Automatic parser generation failed: {exc}") \
            from exc
    return generate_parser(template, request, analysis)


def generate_parser(template: Template, request: Request, analysis: Analysis) -> Prepared:
    """llama.cpp's peg_generator::generate_parser, and the thinking fields common_chat_templates_apply_jinja adds."""
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    parser_generation_prompt = gen

    if request.has_continuation:
        # the generation prompt, built by hand up to where the continued message goes on
        msg = request.continue_msg or {}
        r = analysis.reasoning
        if r.start:
            at = gen.find(r.start)
            gen = (gen if at < 0 else gen[:at]) + r.start + str(msg.get("reasoning_content") or "")
            if request.continue_final_message == "content":
                gen += r.end
        if request.continue_final_message == "content":
            gen += render_content(msg)
        prompt += gen

    grammar = build(lambda p: build_parser(p, analysis, request, parser_generation_prompt))
    unopened = thinking_left_unopened(template, analysis, request, parser_generation_prompt)
    reader = (build(lambda p: build_parser(p, analysis, request, parser_generation_prompt, wide=True,
                                           unopened=unopened))
              if reads_wider(analysis, request) or unopened else None)

    fmt = analysis.tools.format
    has_tools = fmt.mode != ToolFormat.NONE and request.has_tools
    trigger_marker = fmt.section_start or fmt.per_call_start
    has_response_format = isinstance(request.json_schema, dict) and bool(request.json_schema)
    include_grammar = has_response_format or (has_tools and (
        (request.tool_choice == "auto" and bool(trigger_marker)) or request.tool_choice == "required"))
    grammar_lazy = False
    triggers: list[tuple[str, str]] = []
    if include_grammar:
        grammar_lazy = not has_response_format and request.tool_choice == "auto"
        if grammar_lazy:
            # the tool section's marker starts the grammar (or each call's, where there is no section marker)
            triggers.append(("word", trigger_marker))
            if fmt.openai_wrapper_trigger:  # the model writes OpenAI's function wrapper: that starts it too
                triggers.append(("word", '{"type": "function",'))

    supports_thinking = analysis.reasoning.mode != ReasoningMode.NONE
    start_tag = end_tag = ""
    if supports_thinking:
        start_tag = trim_whitespace(analysis.reasoning.start)
        end_tag = trim_whitespace(analysis.reasoning.end)
    return Prepared(
        prompt, gen, grammar, supports_thinking=supports_thinking, thinking_start_tag=start_tag,
        thinking_end_tags=(end_tag,) if end_tag else (), grammar=include_grammar, grammar_lazy=grammar_lazy,
        grammar_triggers=tuple(triggers), preserved_tokens=tuple(analysis.preserved_tokens),
        additional_stops=tuple(analysis.additional_stops), reader=reader)


def _flat_json_calls(fmt: Any) -> bool:
    """Whether the calls are bare JSON objects ``{"name": …, "parameters": {…}}`` with no marker around them (Llama
    3.x's template)."""
    return (fmt.mode == ToolFormat.JSON_NATIVE and not fmt.section_start and not fmt.per_call_start
            and not fmt.fun_name_is_key and not fmt.tools_array_wrapped and "." not in fmt.name_field
            and "." not in fmt.args_field)


def thinking_left_unopened(template: Template, analysis: Analysis, request: Request, generation_prompt_: str) -> bool:
    """Whether the reply may close its thinking without opening it: a template with thinking tags (Qwen3's
    ``<think>…</think>``) whose generation prompt, with thinking on, neither opens the block nor closes it, and which
    itself reads an assistant's turn that way — it splits the turn's content at the closing tag
    (``content.split('</think>')``: Qwen3, GLM 4.6/4.7), taking what precedes it as the thinking whether or not the
    opening tag is there. The model may have been trained with the block opened for it (Qwen3's Thinking models) or
    leave out the tag; the text up to a ``</think>`` that comes before any ``<think>`` or tool call is then its
    reasoning, as vLLM's Qwen3 reasoning parser reads it (tests/reasoning/test_qwen3_reasoning_parser.py, "prefix
    format"). Until that ``</think>`` (or the end, or a call) comes the reply cannot be placed, so it is held back:
    hence only where the template says so (Granite 3.3's or SmolLM3's replies, which need not think, are not held)."""
    r = analysis.reasoning
    if request.reasoning_format == "none" or not request.enable_thinking:
        return False
    if r.mode not in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) or not r.start or not r.end:
        return False
    if isinstance(request.json_schema, dict) and request.json_schema:
        return False
    start, end = trim_whitespace(r.start), trim_whitespace(r.end)
    if not start or not end or start in generation_prompt_ or end in generation_prompt_:
        return False
    return re.search(r"""split\(\s*(['"])""" + re.escape(end) + r"\1\s*\)", template.source) is not None


def reads_wider(analysis: Analysis, request: Request) -> bool:
    """Whether the reply is read by a wider parser than the grammar (``Prepared.reader``): where the request has tools
    and the template writes its calls in one of the shapes whose models write more than the template renders, as
    vLLM's parsers read them —

    - tagged arguments in per-call markers (GLM 4.5/4.6's
      ``<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n…``, read so as
      vllm/tool_parsers/glm4_moe_tool_parser.py and tests/tool_parsers/test_glm4_moe_tool_parser.py do; the same
      shape's other templates, Seed-OSS's, Laguna's, Spark's, are read alike): whitespace
      (indentation) around the tags, text between two calls (dropped: the content is what precedes the first call),
      a value that is no string in the tool's schema read as JSON where it is JSON, as text where it is not;
    - bare JSON calls (Llama 3.x, vllm/tool_parsers/llama_tool_parser.py and tests/tool_parsers/
      test_llama3_json_tool_parser.py): several calls one after another, separated by ``;``, ``,`` or whitespace,
      and ``"arguments"`` where the template writes ``"parameters"`` (or the other way round).

    Everywhere else the grammar's parser reads the reply, as llama.cpp's does."""
    if not request.has_tools or request.tool_choice == "none" or not analysis.caps.supports_tool_calls:
        return False
    if isinstance(request.json_schema, dict) and request.json_schema:
        return False
    fmt = analysis.tools.format
    return (fmt.mode == ToolFormat.TAG_WITH_TAGGED and bool(fmt.per_call_start) and not fmt.section_start) \
        or _flat_json_calls(fmt)


def build_parser(p: ChatBuilder, analysis: Analysis, request: Request, generation_prompt_: str,
                 wide: bool = False, unopened: bool = False) -> Parser:
    """The reply's parser (llama.cpp's autoparser::build_parser); ``wide``, the reader's (see reads_wider), which
    reads thinking closed without being opened where ``unopened`` (see thinking_left_unopened)."""
    reasoning, content, tools = analysis.reasoning, analysis.content, analysis.tools
    extracting = request.reasoning_format != "none" and reasoning.mode != ReasoningMode.NONE
    fmt = tools.format
    markers = tuple(m for m in (fmt.section_start, fmt.per_call_start) if m) if request.has_tools else ()
    ctx = _Context(p, request, p.eps(), extracting, reasoning, content, wide, wide and unopened, markers)
    ctx.reasoning_parser = _reasoning_parser(ctx)

    has_tools = request.has_tools
    has_response_format = isinstance(request.json_schema, dict) and bool(request.json_schema)
    pure_content = reasoning.mode == ReasoningMode.NONE

    if has_response_format:
        response_format = p.rule("response-format", p.content(p.schema(p.json(), "response-format-schema",
                                                                       request.json_schema)))
        parser = ctx.reasoning_parser + p.space() + p.choice([
            p.literal("```json") + p.space() + response_format + p.space() + p.literal("```"),
            p.space() + response_format + p.space()]) + p.end()
        pure_content = False
    elif has_tools and request.tool_choice != "none" and analysis.caps.supports_tool_calls:
        parser = _tools_parser(ctx, tools)
        pure_content = False
    else:
        parser = _content_parser(ctx)
    reasoning_start = trim_whitespace(reasoning.start)
    prefix = p.prefix(generation_prompt_, reasoning_start)
    return prefix + parser if pure_content else prefix << parser


def _reasoning_parser(ctx: _Context) -> Parser:
    p, r = ctx.p, ctx.reasoning
    if not ctx.extracting_reasoning:
        return p.eps()
    if r.mode in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) and r.end:
        if r.start:  # <think>reasoning</think>
            block = p.optspace(r.start) + p.reasoning(p.until(trim_whitespace(r.end))) + p.optspace(r.end)
            if ctx.unopened:  # reasoning</think>, its <think> left out (thinking_left_unopened)
                end = trim_whitespace(r.end)
                block = block | (p.ahead(end, [trim_whitespace(r.start), *ctx.tool_markers])
                                 + p.reasoning(p.until(end)) + p.optspace(r.end))
            return p.optional(block)
        # delimiter style: no start tag
        return p.optional(p.reasoning(p.until(trim_whitespace(r.end))) + p.optspace(r.end))
    return p.eps()


def _content_parser(ctx: _Context) -> Parser:
    p, c = ctx.p, ctx.content
    if c.is_always_wrapped():
        if ctx.extracting_reasoning:
            return ctx.reasoning_parser + c.start + p.content(p.until(c.end)) + c.end + p.end()
        return p.content(p.until(c.start)) + c.start + p.content(p.until(c.end)) + c.end + p.end()
    return ctx.reasoning_parser + p.content(p.rest()) + p.end()


def _optional_wrapped_content(ctx: _Context) -> Parser:
    p, c = ctx.p, ctx.content
    if c.is_always_wrapped():
        return p.optional(c.start + p.content(p.until(c.end)) + c.end)
    return p.eps()


def _tools_parser(ctx: _Context, tools: ToolsAnalysis) -> Parser:
    mode = tools.format.mode
    if mode == ToolFormat.JSON_NATIVE:
        if ctx.wide and _flat_json_calls(tools.format):
            return _json_calls_wide(ctx, tools)
        return _json_native(ctx, tools)
    if mode == ToolFormat.TAG_WITH_JSON:
        return _tag_with_json(ctx, tools)
    if mode == ToolFormat.TAG_WITH_TAGGED:
        return _tag_with_tagged(ctx, tools)
    # llama.cpp logs that the template seems to support tool calls but their format was not found
    return ctx.p.eps()


def _json_native(ctx: _Context, tools: ToolsAnalysis) -> Parser:
    p, request, fmt = ctx.p, ctx.request, tools.format
    # the field names dotted where the call sits in a function object
    name_field, args_field = fmt.name_field, fmt.args_field
    if fmt.function_field and fmt.function_field != "function" and "." not in name_field:
        name_field = f"{fmt.function_field}.{name_field}"
        args_field = f"{fmt.function_field}.{args_field}"
    required = request.tool_choice == "required"

    def json_tools(start: str, end: str) -> Parser:
        return p.standard_json_tools(start, end, request.tools, request.parallel_tool_calls, required, name_field,
                                     args_field, fmt.tools_array_wrapped, fmt.fun_name_is_key, fmt.id_field,
                                     fmt.gen_id_field, fmt.parameter_order, fmt.openai_wrapper_trigger)

    if not fmt.section_start and fmt.per_call_start:
        single = json_tools(fmt.per_call_start, fmt.per_call_end)
        if request.parallel_tool_calls or not required:
            tools_parser = p.trigger_rule("tool-calls", p.one_or_more(single + p.space()))
        else:
            # A forced call the client asked to be one call: llama.cpp repeats the wrapped call here whatever
            # parallel_tool_calls says (chat-auto-parser-generator.cpp, the per-call branch), so its grammar lets a
            # model write call after call and then whitespace up to max_tokens; the forced grammar takes one. A
            # free reply's parse stays llama.cpp's (several calls read even so).
            tools_parser = p.trigger_rule("tool-calls", single + p.space())
    else:
        tools_parser = json_tools(fmt.section_start, fmt.section_end)

    if ctx.content.is_always_wrapped():
        return ctx.reasoning_parser + _optional_wrapped_content(ctx) + tools_parser + p.end()
    tool_start = fmt.section_start or fmt.per_call_start or "{"
    return ctx.reasoning_parser + p.optional(p.content(p.until(tool_start))) + tools_parser + p.end()


def _json_calls_wide(ctx: _Context, tools: ToolsAnalysis) -> Parser:
    """Bare JSON calls as vLLM's Llama 3 JSON parser reads them (the reader's, see reads_wider): one or more calls,
    each ``{"name": NAME, "parameters" | "arguments": {…}}`` (the keys in the template's order), separated by ``;``,
    ``,`` or whitespace; the arguments any JSON (the reader does not hold them to the schema: the grammar does)."""
    p, request, fmt = ctx.p, ctx.request, tools.format
    keys = [fmt.args_field, *(k for k in ("parameters", "arguments") if k != fmt.args_field)]
    args_key = p.choice([p.literal(f'"{key}"') for key in keys])
    args_first = (fmt.args_field in fmt.parameter_order and fmt.name_field in fmt.parameter_order
                  and fmt.parameter_order.index(fmt.args_field) < fmt.parameter_order.index(fmt.name_field))
    tool_choice = p.choice()
    for tool in functions(request.tools):
        name = tool["function"]["name"]
        name_pair = (p.literal(f'"{fmt.name_field}"') + p.space() + ":" + p.space()
                     + p.atomic('"' + p.tool_name(p.literal(name)) + '"'))
        args_pair = args_key + p.space() + ":" + p.space() + p.tool_args(p.json())
        first, second = (args_pair, name_pair) if args_first else (name_pair, args_pair)
        body = p.tool_open(p.literal("{")) + p.space()
        if fmt.openai_wrapper_trigger:
            body = body + p.optional('"type"' + p.space() + ":" + p.space() + '"function"' + p.space() + ","
                                     + p.space())
        body = body + first + p.space() + "," + p.space() + second + p.space() + p.tool_close(p.literal("}"))
        tool_choice = tool_choice | p.rule(f"tool-{name}", p.tool(body))
    separator = p.space() + p.optional(p.choice([p.literal(";"), p.literal(",")])) + p.space()
    calls = tool_choice
    if request.parallel_tool_calls:
        calls = calls + p.zero_or_more(separator + tool_choice)
    section = p.trigger_rule("tool-call", calls + p.space())
    if request.tool_choice != "required":
        section = p.optional(section)
    return ctx.reasoning_parser + p.optional(p.content(p.until("{"))) + section + p.end()


def _func_parser(p: ChatBuilder, tools: ToolsAnalysis, name: str, call_id_section: Parser, have_call_id: bool,
                 args: Parser, atomic_peek: Parser | None, wide: bool = False) -> Parser:
    """One function's call from its name's markers, its id and its arguments (llama.cpp's build_func_parser)."""
    fn, fmt = tools.function, tools.format
    open_ = p.tool_open(fn.name_prefix + p.tool_name(p.literal(name)) + fn.name_suffix)
    if fn.args_separator:
        open_ = open_ + p.space() + p.literal(fn.args_separator)
    matched_atomic = True
    if fn.name_suffix:
        func = open_ + call_id_section + p.space() + args
    elif have_call_id:
        func = p.atomic(open_ + call_id_section) + p.space() + args
    elif atomic_peek is not None:
        func = p.atomic(open_ + call_id_section + p.space() + atomic_peek) + args
    else:
        func = open_ + call_id_section + p.space() + args
        matched_atomic = False

    if fn.close:
        func = func + p.space() + p.tool_close(p.literal(fn.close))
    elif fmt.per_call_end:
        # No closer of its own but a per-call end: close only once the end marker is in sight, so that a partial
        # "</" (the end, or an argument's tag that failed to match) closes nothing yet. Laguna (v4) may write
        # whitespace before </tool_call> where the template writes none: tolerated in the lookahead.
        close_peek = (p.peek(p.space() + p.literal(fmt.per_call_end))
                      if tools.arguments.tolerate_intertag_whitespace or wide
                      else p.peek(p.literal(fmt.per_call_end)))
        func = func + p.tool_close(close_peek)
    else:
        func = func + p.tool_close(p.space())  # the mapper closes the call
    return p.tool(func if matched_atomic else p.atomic(func))  # the call's extent: read to its end or not


def _call_id_section(p: ChatBuilder, tools: ToolsAnalysis, optional_suffix: bool) -> tuple[Parser, bool]:
    """The call id's parser where it sits between the function's name and its arguments."""
    cid, args = tools.call_id, tools.arguments
    if (cid.pos != CallIdPosition.BETWEEN_FUNC_AND_ARGS or not cid.prefix
            or not (cid.suffix or args.start)):
        return p.eps(), False
    if cid.suffix:
        if optional_suffix:  # TAG_WITH_TAGGED: the suffix is part of the optional id
            return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix)) + cid.suffix), True
        return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix))) + cid.suffix, True
    return p.optional(cid.prefix + p.tool_id(p.until(args.start))), True


def _tool_calls(ctx: _Context, tools: ToolsAnalysis, tool_choice: Parser, tagged: bool) -> Parser:
    """The calls, in their section (llama.cpp's tail of build_tool_parser_tag_json / _tag_tagged)."""
    p, request, fmt = ctx.p, ctx.request, tools.format
    sp = p.space() if tagged else p.eps()  # the tagged form allows whitespace around each call
    if fmt.per_call_start and ctx.wide and not fmt.section_start:
        # vLLM's GLM 4.5 parser: the text between two calls is no part of the message; until the next call or the
        # end comes, it cannot be placed (held back). What follows the last call is content, read at the end.
        wrapped_call = fmt.per_call_start + sp + tool_choice + sp + fmt.per_call_end
        calls = wrapped_call
        if request.parallel_tool_calls:
            calls = calls + p.zero_or_more(p.ahead(fmt.per_call_start) + p.until(fmt.per_call_start)
                                           + wrapped_call)
        calls = p.trigger_rule("tool-call", calls + sp)
        if request.tool_choice != "required":
            calls = p.optional(calls)
        after = p.optional(p.content(p.rest()))
        return (ctx.reasoning_parser + p.optional(p.content(p.until(fmt.per_call_start))) + calls + after
                + p.end())
    if fmt.per_call_start:
        wrapped_call = fmt.per_call_start + sp + tool_choice + sp + fmt.per_call_end
        if request.parallel_tool_calls:
            calls = p.trigger_rule("tool-call", wrapped_call + p.zero_or_more(p.space() + wrapped_call) + sp)
        else:
            calls = p.trigger_rule("tool-call", wrapped_call + sp)
        if fmt.section_start:
            end = p.end() if not fmt.section_end else p.literal(fmt.section_end) + sp
            calls = p.trigger_rule("tool-calls", p.literal(fmt.section_start) + p.space() + calls + p.space() + end)
    else:
        separator = ", "  # llama.cpp's default
        if request.parallel_tool_calls:
            calls = p.trigger_rule("tool-call", fmt.section_start + sp + tool_choice
                                   + p.zero_or_more(separator + tool_choice) + sp + fmt.section_end)
        else:
            calls = p.trigger_rule("tool-call", fmt.section_start + sp + tool_choice + sp + fmt.section_end)
    if request.tool_choice != "required":
        calls = p.optional(calls)
    trigger_marker = fmt.section_start or fmt.per_call_start
    content_before_tools = p.until(trigger_marker) if trigger_marker else p.eps()
    return ctx.reasoning_parser + p.optional(p.content(content_before_tools)) + calls + p.end()


def _tag_with_json(ctx: _Context, tools: ToolsAnalysis) -> Parser:
    """``<function=NAME>{…}</function>``: the name in markers, the arguments as JSON."""
    p, args = ctx.p, tools.arguments
    tool_choice = p.choice()
    for tool in functions(ctx.request.tools):
        function = tool["function"]
        name = function["name"]
        call_id_section, have_call_id = _call_id_section(p, tools, optional_suffix=False)
        args_parser = p.tool_args(p.schema(p.json(), f"tool-{name}-schema", tool_parameters(function)))
        if args.start:
            args_parser = p.literal(args.start) + args_parser
        if args.end:
            args_parser = args_parser + p.literal(args.end)
        atomic_peek = p.peek(p.literal(args.start)) if args.start else None
        func = _func_parser(p, tools, name, call_id_section, have_call_id, args_parser, atomic_peek)
        tool_choice = tool_choice | p.rule(f"tool-{name}", func)
    return _tool_calls(ctx, tools, tool_choice, tagged=False)


def _tag_with_tagged(ctx: _Context, tools: ToolsAnalysis) -> Parser:
    """``<function=NAME><param=KEY>VALUE</param>…</function>``: the name and each argument in markers."""
    p, args = ctx.p, tools.arguments
    # the wide reader (reads_wider): whitespace between the tags, each tag without the whitespace the template puts
    # after it
    name_suffix = args.name_suffix.rstrip(" \n\r\t") if ctx.wide else args.name_suffix
    value_suffix = args.value_suffix.rstrip(" \n\r\t") if ctx.wide else args.value_suffix
    gap = p.space() if ctx.wide else p.eps()
    until_suffix = p.rule("until-suffix", p.until(value_suffix))
    tool_choice = p.choice()
    for tool in functions(ctx.request.tools):
        function = tool["function"]
        name = function["name"]
        required: list[Parser] = []
        optional: list[Parser] = []
        for param in parameters(function):
            string_value = p.ac(p.tool_arg_string_value(until_suffix) + p.tool_arg_close(p.literal(value_suffix)),
                                value_suffix)
            if param.may_be_string():
                value: Parser = string_value
            else:
                value = (p.tool_arg_json_value(p.schema(p.json(), f"tool-{name}-arg-{param.name}-schema",
                                                        param.schema))
                         + p.tool_arg_close(p.literal(value_suffix)))
                if ctx.wide:  # typed by the schema where it is JSON, else the text as written (vLLM's GLM parser)
                    value = value | string_value
            arg = p.tool_arg(p.tool_arg_open(args.name_prefix + p.tool_arg_name(p.literal(param.name))
                                             + name_suffix) + gap + args.value_prefix + value)
            named = p.rule(f"tool-{name}-arg-{param.name}", arg)
            (required if param.required else optional).append(named)

        # the required arguments in their declared order, then the optional ones in any order
        args_seq: Parser = p.eps()
        for i, parser in enumerate(required):
            if i > 0:
                args_seq = args_seq + p.space()
            args_seq = args_seq + parser
        if optional:
            any_optional = p.choice()
            for parser in optional:
                any_optional = any_optional | parser
            args_seq = args_seq + p.repeat(p.space() + any_optional, 0, -1)
        if args.start:
            args_seq = p.literal(args.start) + args_seq
        if args.end:
            args_seq = args_seq + p.literal(args.end)

        call_id_section, have_call_id = _call_id_section(p, tools, optional_suffix=True)
        # peek for an argument's tag only where a required one must follow: with all of them optional, the model
        # may write none (https://github.com/ggml-org/llama.cpp/issues/20650)
        atomic_peek = p.peek(p.literal(args.name_prefix)) if args.name_prefix and required else None
        func = _func_parser(p, tools, name, call_id_section, have_call_id, args_seq, atomic_peek, ctx.wide)
        tool_choice = tool_choice | p.rule(f"tool-{name}", func)
    return _tool_calls(ctx, tools, tool_choice, tagged=True)


def describe(analysis: Analysis) -> dict[str, Any]:
    """The analysis as plain data (what llama.cpp logs at the end of analyze_template), for debugging."""
    import dataclasses

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return getattr(value, "value", value)

    result: dict[str, Any] = plain(analysis)
    return result
