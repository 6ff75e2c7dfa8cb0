"""The differential analysis of a chat template: its markers read off renders of probe conversations.

A template that no family module recognises (backends/chat_format/formats.py's ``FAMILIES``) is rendered with small
conversations that differ in one thing — a reply with and without reasoning, with one tool call and with two, with
one argument and with another — and where the two renders part, the template shows its markers: the tag that opens
thinking, what wraps a tool call, how a function's name and each argument are written, where a call's id goes. This is
llama.cpp's ``common/chat-diff-analyzer.cpp`` with its helpers (``common/chat-auto-parser-helpers.cpp``), ported
function by function so that a template is read as llama-server reads it (the template's capabilities, which it
needs, come from ``backends/chat_format/capabilities.py``); ``backends/chat_format/autoparser.py`` builds the reply's
parser from the result.

The probe strings (``FFF_FIRST_FUN_F``, ``AA_ARG_FST_AA``, ``REASON_PART I am thinking END_R``…) are llama.cpp's: they
are chosen to be found, and never to look like a marker themselves.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from backends.chat_format import peg
from backends.chat_format.capabilities import Capabilities, capabilities
from backends.chat_format.request import Request, Template, apply_template
from backends.chat_format.peg import Parser
from backends.chat_format.template import TemplateError

# --- helpers (common/chat-auto-parser-helpers.cpp)

_SPACE = " \t\n\v\f\r"  # C's isspace in the C locale


def trim_whitespace(text: str) -> str:
    return text.strip(_SPACE)


def trim_leading_whitespace(text: str) -> str:
    return text.lstrip(_SPACE)


def trim_trailing_whitespace(text: str) -> str:
    return text.rstrip(_SPACE)


def trim_trailing_newlines(text: str) -> str:
    return text.rstrip("\n")


class SegmentType(enum.Enum):
    TEXT = "TEXT"
    MARKER = "MARKER"


@dataclass(frozen=True)
class Segment:
    type: SegmentType
    value: str


def segmentize_markers(text: str) -> list[Segment]:
    """``text`` as markers (``<…>`` or ``[…]``) and the text between them.

    llama.cpp notes that a JSON array inside tags (``<calls>[{…}]</calls>``) reads as a marker too; no template has
    been hurt by it."""
    segments: list[Segment] = []
    in_marker = False
    opener = ""
    last_border = 0
    for pos, c in enumerate(text):
        if not in_marker and c in "<[":
            if last_border < pos:
                segments.append(Segment(SegmentType.TEXT, text[last_border:pos]))
            last_border = pos
            in_marker = True
            opener = c
        elif in_marker and ((opener == "<" and c == ">") or (opener == "[" and c == "]")):
            segments.append(Segment(SegmentType.MARKER, text[last_border:pos + 1]))
            last_border = pos + 1
            in_marker = False
            opener = ""
    if last_border < len(text):
        segments.append(Segment(SegmentType.TEXT, text[last_border:]))
    return segments


def prune_whitespace_segments(segments: list[Segment]) -> list[Segment]:
    return [s for s in segments if trim_whitespace(s.value)]


def _common_prefix_len(left: str, right: str) -> int:
    n = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        n += 1
    return n


def _common_suffix_len(left: str, right: str) -> int:
    n = 0
    for a, b in zip(reversed(left), reversed(right), strict=False):
        if a != b:
            break
        n += 1
    return n


@dataclass
class DiffSplit:
    """Two renders as what they share before (``prefix``) and after (``suffix``), and what each has in between."""

    prefix: str = ""
    suffix: str = ""
    left: str = ""
    right: str = ""


def calculate_diff_split(left: str, right: str) -> DiffSplit:
    """The longest common prefix and suffix of ``left`` and ``right``, aligned on whole markers (a shared ``<`` of
    ``<div>`` and ``<p>`` is no prefix), and the parts that differ."""
    result = DiffSplit()
    left_seg = segmentize_markers(left)
    right_seg = segmentize_markers(right)
    if not left_seg:
        result.right = right
        return result
    if not right_seg:
        result.left = left
        return result

    left_start, left_end = 0, len(left_seg) - 1
    right_start, right_end = 0, len(right_seg) - 1
    left_fully_consumed = right_fully_consumed = False

    while left_start != left_end and right_start != right_end:
        advanced = False
        if left_seg[left_start] == right_seg[right_start]:
            result.prefix += left_seg[left_start].value
            left_start += 1
            right_start += 1
            advanced = True
        if left_seg[left_end] == right_seg[right_end]:
            result.suffix = left_seg[left_end].value + result.suffix
            if left_start != left_end:
                left_end -= 1
            else:
                left_fully_consumed = True
            if right_start != right_end:
                right_end -= 1
            else:
                right_fully_consumed = True
            advanced = True
        if not advanced:
            break

    if left_start == left_end and right_start != right_end:
        if left_seg[left_start] == right_seg[right_end]:
            result.suffix = right_seg[right_end].value + result.suffix
            right_end -= 1
            left_fully_consumed = True
        elif left_seg[left_start] == right_seg[right_start]:
            result.prefix += right_seg[right_start].value
            right_start += 1
            left_fully_consumed = True
    elif right_start == right_end and left_start != left_end:
        if left_seg[left_end] == right_seg[right_start]:
            result.suffix = left_seg[left_end].value + result.suffix
            left_end -= 1
            right_fully_consumed = True
        elif left_seg[left_start] == right_seg[right_start]:
            result.prefix += left_seg[left_start].value
            left_start += 1
            right_fully_consumed = True
    elif (left_start == left_end and right_start == right_end and left_seg[left_start] == right_seg[right_start]
          and left_seg[left_start].type == SegmentType.MARKER):
        result.prefix += right_seg[right_start].value
        left_fully_consumed = right_fully_consumed = True

    can_have_text_suffix = (left_seg[left_end].type == SegmentType.TEXT
                            and right_seg[right_end].type == SegmentType.TEXT)
    can_have_text_prefix = (right_seg[right_start].type == SegmentType.TEXT
                            and left_seg[left_start].type == SegmentType.TEXT)

    remainder_left = "".join(s.value for s in left_seg[left_start:left_end if left_fully_consumed else left_end + 1])
    remainder_right = "".join(s.value for s in
                              right_seg[right_start:right_end if right_fully_consumed else right_end + 1])

    suffix_len = _common_suffix_len(remainder_left, remainder_right) if can_have_text_suffix else 0
    # the prefix may not overlap the suffix
    prefix_len = (_common_prefix_len(remainder_left[:len(remainder_left) - suffix_len],
                                     remainder_right[:len(remainder_right) - suffix_len])
                  if can_have_text_prefix else 0)

    result.prefix += remainder_left[:prefix_len]
    result.suffix = remainder_left[len(remainder_left) - suffix_len:] + result.suffix
    result.left = remainder_left[prefix_len:len(remainder_left) - suffix_len]
    result.right = remainder_right[prefix_len:len(remainder_right) - suffix_len]

    if not result.left and not result.right:  # no difference: all of it is the prefix
        result.prefix = left
        result.suffix = ""

    # When left is all shared with right, matching prefix and suffix segments at once can take left's trailing
    # segments as suffix where right ends with the same ones ("\n" at the end of both the shared content and the
    # generation prompt), which rotates the diff. A left that is a prefix of right is that prefix.
    if not result.left and result.right and len(left) <= len(right) and right.startswith(left):
        result.prefix = left
        result.suffix = ""
        result.right = right[len(left):]
    return result


def until_common_prefix(full: str, left: str, right: str) -> str:
    """``full`` up to the first place the common prefix of ``left`` and ``right`` occurs in it ("" if none)."""
    n = _common_prefix_len(left, right)
    if n == 0:
        return ""
    pos = full.find(left[:n])
    return "" if pos < 0 else full[:pos]


def after_common_suffix(full: str, left: str, right: str) -> str:
    """``full`` after the last place the common suffix of ``left`` and ``right`` occurs in it ("" if none)."""
    n = _common_suffix_len(left, right)
    if n == 0:
        return ""
    pos = full.rfind(left[len(left) - n:])
    return "" if pos < 0 else full[pos + n:]


# --- small parsers whose tagged parts are read out (llama.cpp's build_tagged_peg_parser)


@dataclass
class Tagged:
    success: bool
    tags: dict[str, str]

    def __getitem__(self, tag: str) -> str:
        return self.tags.get(tag, "")


def tagged(make: Callable[[peg.Builder], Parser]) -> peg.Grammar_:
    builder = peg.Builder()
    return builder.build(make(builder))


def _extract(result: peg.Result) -> dict[str, str]:
    return {node.tag: node.text for node in peg.walk(result.nodes) if node.tag}


def parse_and_extract(grammar: peg.Grammar_, text: str) -> Tagged:
    """``text`` parsed from its start (as a complete input), with the text of each tag."""
    result, _ = grammar.parse(text, lenient=False)
    return Tagged(result.success, _extract(result) if result.success else {})


def parse_anywhere_and_extract(grammar: peg.Grammar_, text: str) -> Tagged:
    """The first place in ``text`` from which ``grammar`` parses, with the text of each tag."""
    if not text:
        return parse_and_extract(grammar, text)
    ctx = peg.Context(text, grammar.rules, lenient=False)
    for i in range(len(text)):
        result = grammar.root.parse(ctx, i)
        if result.success:
            return Tagged(True, _extract(result))
    return Tagged(False, {})


# --- the template's capabilities: backends/chat_format/capabilities.py probes them as llama.cpp's caps.cpp does


def template_caps(template: Template) -> Capabilities:
    return capabilities(template.source)


# --- rendering probe conversations (chat-auto-parser-helpers.cpp's apply_template and compare_variants)


@dataclass
class TemplateParams:
    messages: list[Any]
    tools: list[Any] | None = None
    add_generation_prompt: bool = False
    enable_thinking: bool = True


@dataclass
class Comparison:
    diff: DiffSplit
    output_a: str
    output_b: str


def render_probe(template: Template, params: TemplateParams) -> str | None:
    """The template's render of a probe conversation, or None where it fails."""
    request = Request(messages=copy.deepcopy(params.messages), tools=copy.deepcopy(params.tools),
                      add_generation_prompt=params.add_generation_prompt, enable_thinking=params.enable_thinking,
                      extra_context={"enable_thinking": params.enable_thinking})
    try:
        return apply_template(template, request)
    except TemplateError:
        return None


def compare_variants(template: Template, params_a: TemplateParams,
                     modify: Callable[[TemplateParams], None]) -> Comparison | None:
    """The renders of ``params_a`` and of a copy changed by ``modify``, and their diff (None if either fails)."""
    params_b = copy.deepcopy(params_a)
    modify(params_b)
    output_a = render_probe(template, params_a)
    output_b = render_probe(template, params_b)
    if output_a is None or output_b is None:
        return None
    return Comparison(calculate_diff_split(output_a, output_b), output_a, output_b)


# --- the analysis (common/chat-diff-analyzer.cpp)

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
USER_MSG = "U_USER_MSG Hello END_U"
USER_MSG_TWO = "V_USER_MSG Hello END_V"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING_CONTENT = "REASON_PART I am thinking END_R"
CALL_ID_001 = "call00001"
CALL_ID_002 = "call00002"
CALL_ID_999 = "call99999"

_PARAMS_SCHEMA = {
    "type": "object",
    "properties": {ARG_FIRST: {"type": "string", "description": "First argument"},
                   ARG_SECOND: {"type": "string", "description": "Second argument"}},
    "required": [],
}
TOOLS = [
    {"type": "function", "function": {"name": FUN_FIRST, "description": "Test function foo",
                                      "parameters": _PARAMS_SCHEMA}},
    {"type": "function", "function": {"name": FUN_SECOND, "description": "Test function bar",
                                      "parameters": _PARAMS_SCHEMA}},
]
USER = {"role": "user", "content": USER_MSG}


def tool_call(name: str, args: dict[str, Any], call_id: str = CALL_ID_001) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


FIRST_CALL_ZERO_ARGS = tool_call(FUN_FIRST, {}, CALL_ID_001)
FIRST_CALL_ONE_ARG = tool_call(FUN_FIRST, {ARG_FIRST: "XXXX"}, CALL_ID_001)
FIRST_CALL_ONE_ARG_OTHER_VAL = tool_call(FUN_FIRST, {ARG_FIRST: "YYYY"}, CALL_ID_001)
FIRST_CALL_OTHER_ARG = tool_call(FUN_FIRST, {ARG_SECOND: "YYYY"}, CALL_ID_001)
FIRST_CALL = tool_call(FUN_FIRST, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_001)
SECOND_CALL = tool_call(FUN_SECOND, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_002)
FIRST_CALL_ALT_ID = tool_call(FUN_FIRST, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_999)


def _assistant(content: str | None = ASSISTANT_MSG, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, **extra}


def _with_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return _assistant("", tool_calls=list(calls))


class ReasoningMode(enum.Enum):
    NONE = "NONE"  # no reasoning markers
    TAG_BASED = "TAG_BASED"  # <think>…</think> (the start may be empty: delimiter style)
    TOOLS_ONLY = "TOOLS_ONLY"  # reasoning only shown with tool calls


class ContentMode(enum.Enum):
    PLAIN = "PLAIN"
    ALWAYS_WRAPPED = "ALWAYS_WRAPPED"
    WRAPPED_WITH_REASONING = "WRAPPED_WITH_REASONING"  # wrapped only where there is reasoning


class CallIdPosition(enum.Enum):
    NONE = "NONE"
    PRE_FUNC_NAME = "PRE_FUNC_NAME"  # [CALL_ID]id[FUNC]name{args}
    BETWEEN_FUNC_AND_ARGS = "BETWEEN_FUNC_AND_ARGS"  # [FUNC]name[CALL_ID]id{args}
    POST_ARGS = "POST_ARGS"  # [FUNC]name{args}[CALL_ID]id


class ToolFormat(enum.Enum):
    NONE = "NONE"
    JSON_NATIVE = "JSON_NATIVE"  # {"name": "X", "arguments": {...}}
    TAG_WITH_JSON = "TAG_WITH_JSON"  # <function=X>{...}</function>
    TAG_WITH_TAGGED = "TAG_WITH_TAGGED"  # <param=key>value</param>


@dataclass
class ToolFormatAnalysis:
    mode: ToolFormat = ToolFormat.NONE
    section_start: str = ""  # "<tool_call>", "[TOOL_CALLS]"
    section_end: str = ""
    per_call_start: str = ""  # "<|tool_call_begin|>" (several calls in one section)
    per_call_end: str = ""
    fun_name_is_key: bool = False  # {"<name>": {…arguments…}}
    tools_array_wrapped: bool = False  # calls in a JSON array
    openai_wrapper_trigger: bool = False  # the model writes the OpenAI function wrapper: trigger on it
    function_field: str = "function"
    name_field: str = "name"
    args_field: str = "arguments"
    id_field: str = ""
    gen_id_field: str = ""
    parameter_order: list[str] = field(default_factory=list)


@dataclass
class FunctionAnalysis:
    name_prefix: str = ""  # "<function=", "\"name\": \"", "functions."
    name_suffix: str = ""  # ">", "\"", ":0"
    args_separator: str = ""  # "<tool_sep>"
    close: str = ""  # "</function>"


@dataclass
class ArgumentsAnalysis:
    start: str = ""  # "<|tool_call_argument_begin|>", "<args>"
    end: str = ""
    name_prefix: str = ""  # "<param=", "<arg_key>", "\""
    name_suffix: str = ""  # ">", "</arg_key>", "\":"
    value_prefix: str = ""  # "<arg_value>"
    value_suffix: str = ""  # "</param>", "</arg_value>"
    separator: str = ""  # "\n", ","
    tolerate_intertag_whitespace: bool = False  # Laguna: optional whitespace between argument tags


@dataclass
class CallIdAnalysis:
    pos: CallIdPosition = CallIdPosition.NONE
    prefix: str = ""  # "[CALL_ID]"
    suffix: str = ""


@dataclass
class ReasoningAnalysis:
    mode: ReasoningMode = ReasoningMode.NONE
    start: str = ""  # "<think>", "[THINK]", "<|START_THINKING|>", ""
    end: str = ""  # "</think>", "[BEGIN FINAL RESPONSE]", "<|END_THINKING|>"


@dataclass
class ContentAnalysis:
    mode: ContentMode = ContentMode.PLAIN
    start: str = ""  # "<response>", ">>>all\n"
    end: str = ""
    requires_nonnull_content: bool = False

    def is_always_wrapped(self) -> bool:
        return self.mode == ContentMode.ALWAYS_WRAPPED and bool(self.start) and bool(self.end)


@dataclass
class ToolsAnalysis:
    format: ToolFormatAnalysis = field(default_factory=ToolFormatAnalysis)
    function: FunctionAnalysis = field(default_factory=FunctionAnalysis)
    arguments: ArgumentsAnalysis = field(default_factory=ArgumentsAnalysis)
    call_id: CallIdAnalysis = field(default_factory=CallIdAnalysis)


@dataclass
class Analysis:
    """What the differential analysis found in a template (llama.cpp's ``autoparser`` struct)."""

    caps: Capabilities = field(default_factory=Capabilities)
    user_start: str = ""
    assistant_start: str = ""
    reasoning: ReasoningAnalysis = field(default_factory=ReasoningAnalysis)
    content: ContentAnalysis = field(default_factory=ContentAnalysis)
    tools: ToolsAnalysis = field(default_factory=ToolsAnalysis)
    preserved_tokens: list[str] = field(default_factory=list)  # every marker found, for the tokenizer
    additional_stops: list[str] = field(default_factory=list)  # stop strings caught however they are tokenized


# --- phase 1: reasoning


def _analyze_reasoning(template: Template, supports_tools: bool) -> ReasoningAnalysis:
    r = ReasoningAnalysis()
    _compare_reasoning_presence(template, r)
    _compare_thinking_enabled(template, r)
    if supports_tools:
        _compare_reasoning_scope(template, r)
    return r


def _compare_reasoning_presence(template: Template, r: ReasoningAnalysis) -> None:
    """A reply with reasoning against one without: the markers around the reasoning."""
    params = TemplateParams([USER, _assistant()])
    comparison = compare_variants(template, params, lambda p: setattr(
        p, "messages", [USER, _assistant(reasoning_content=THINKING_CONTENT)]))
    if comparison is None:
        return
    diff = comparison.diff
    if not diff.right or THINKING_CONTENT not in diff.right:
        return
    parser_delimiter = tagged(lambda p: p.literal(THINKING_CONTENT) + p.space()
                              + p.optional(p.tag("post", p.marker() + p.space())) + p.rest())
    parser_wrapped = tagged(lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(THINKING_CONTENT)
                            + p.tag("post", p.space() + p.marker() + p.space()) + p.rest())
    # the stricter reading first, then the delimiter one
    result = parse_anywhere_and_extract(parser_wrapped, comparison.output_b)
    if not result.success:
        result = parse_anywhere_and_extract(parser_delimiter, comparison.output_b)
    if result.success:
        if result["pre"] and result["post"]:
            r.mode = ReasoningMode.TAG_BASED
            r.start = result["pre"]
            r.end = result["post"]
        elif result["post"]:
            r.mode = ReasoningMode.TAG_BASED
            r.end = result["post"]


def _compare_thinking_enabled(template: Template, r: ReasoningAnalysis) -> None:
    """The generation prompt with thinking on against off: a thinking block the template opens (or closes)."""
    params = TemplateParams([USER], add_generation_prompt=True, enable_thinking=False)
    comparison = compare_variants(template, params, lambda p: setattr(p, "enable_thinking", True))
    if comparison is None:
        return
    diff = comparison.diff
    left_trimmed = trim_whitespace(diff.left)
    right_trimmed = trim_whitespace(diff.right)
    if not left_trimmed and diff.right:
        if right_trimmed and comparison.output_b.endswith(right_trimmed) and not r.start:
            r.start = diff.right
            r.mode = ReasoningMode.TAG_BASED
    elif not right_trimmed and diff.left:
        if left_trimmed and comparison.output_a.endswith(left_trimmed) and not r.end:
            seg = prune_whitespace_segments(segmentize_markers(comparison.output_a))
            if len(seg) >= 2 and seg[-1].value == left_trimmed and seg[-2].type == SegmentType.MARKER:
                r.start = seg[-2].value
            r.end = diff.left
            r.mode = ReasoningMode.TAG_BASED
    elif left_trimmed and right_trimmed:
        # The whole renders differ too much (SmolLM3 changes its system message with enable_thinking): anchor on the
        # tail of one generation prompt, which the other may repeat with the reasoning markers after it.
        anchor_len = 64
        for base, extended in ((comparison.output_b, comparison.output_a),
                               (comparison.output_a, comparison.output_b)):
            n = min(len(base), anchor_len)
            anchor = base[len(base) - n:]
            pos = extended.rfind(anchor)
            if pos < 0 or pos + n >= len(extended):
                continue
            extra = trim_whitespace(extended[pos + n:])
            if not extra:
                continue
            seg = prune_whitespace_segments(segmentize_markers(extra))
            if len(seg) == 2 and seg[0].type == SegmentType.MARKER and seg[1].type == SegmentType.MARKER:
                if not r.start:
                    r.start = seg[0].value
                if not r.end:
                    r.end = seg[1].value
                r.mode = ReasoningMode.TAG_BASED
                break
    if r.mode == ReasoningMode.NONE and not r.start and r.end:
        r.mode = ReasoningMode.TAG_BASED


def _compare_reasoning_scope(template: Template, r: ReasoningAnalysis) -> None:
    """Reasoning shown only beside tool calls (TOOLS_ONLY)?"""
    with_content = _assistant(reasoning_content=THINKING_CONTENT)
    with_tools = _assistant(None, reasoning_content=THINKING_CONTENT,
                            tool_calls=[tool_call(FUN_FIRST, {ARG_FIRST: "VVVV", ARG_SECOND: "XXXX"})])
    params = TemplateParams([USER, with_content], tools=TOOLS)
    comparison = compare_variants(template, params, lambda p: setattr(p, "messages", [USER, with_tools]))
    if comparison is None:
        return
    in_a = THINKING_CONTENT in comparison.output_a
    in_b = THINKING_CONTENT in comparison.output_b
    if in_a or not in_b:
        return
    r.mode = ReasoningMode.TOOLS_ONLY
    parser_wrapped = tagged(lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(THINKING_CONTENT) + p.space()
                            + p.tag("post", p.marker() + p.space()))
    result = parse_anywhere_and_extract(parser_wrapped, comparison.output_b)
    if result.success:
        r.start = result["pre"]
        r.end = result["post"]
        return
    parser_delimiter = tagged(lambda p: p.literal(THINKING_CONTENT) + p.space()
                              + p.optional(p.tag("post", p.marker() + p.space())))
    result = parse_anywhere_and_extract(parser_delimiter, comparison.output_b)
    if result.success:
        r.end = result["post"]
    else:  # no markers to be found: no reasoning
        r.mode = ReasoningMode.NONE


# --- phase 2: content


def _analyze_content(template: Template, reasoning: ReasoningAnalysis) -> ContentAnalysis:
    c = ContentAnalysis()
    params = TemplateParams([USER, _assistant()], tools=TOOLS)
    with_tools = _with_calls(tool_call("test_func", {"arg1": "value1"}))
    with_reasoning = _assistant("", reasoning_content=THINKING_CONTENT)
    comparison_tools = compare_variants(template, params, lambda p: setattr(p, "messages", [USER, with_tools]))
    comparison_reasoning = compare_variants(template, params, lambda p: setattr(p, "messages",
                                                                                [USER, with_reasoning]))
    if comparison_tools is None or comparison_reasoning is None:
        return c
    diff_tools = comparison_tools.diff
    diff_reasoning = comparison_reasoning.diff

    found_plain_content = False
    if trim_whitespace(diff_tools.left) == ASSISTANT_MSG:
        plain = tagged(lambda p: p.space() + diff_reasoning.left + p.space() + p.optional(p.marker()) + p.space()
                       + p.end())
        if parse_and_extract(plain, diff_reasoning.left).success:
            # only the reply's text differs (perhaps with a stray end-of-generation marker): no markers
            c.mode = ContentMode.PLAIN
            found_plain_content = True
        elif reasoning.mode != ReasoningMode.NONE and reasoning.end:
            post_reasoning = tagged(lambda p: p.literal(reasoning.end) + p.space() + p.literal(ASSISTANT_MSG))
            if parse_anywhere_and_extract(post_reasoning, diff_reasoning.left).success:
                c.mode = ContentMode.PLAIN
                found_plain_content = True
    if not found_plain_content:
        rdiff = diff_reasoning.left
        if reasoning.end and reasoning.end in rdiff:
            rdiff = rdiff[rdiff.find(reasoning.end) + len(reasoning.end):]
        pure_content = rdiff if len(rdiff) > len(diff_tools.left) else diff_tools.left  # the more promising
        wrapped = tagged(lambda p: p.tag("pre", p.marker() + p.space()) + p.literal(ASSISTANT_MSG) + p.space()
                         + p.tag("post", p.marker() + p.space()) + p.rest())
        result = parse_anywhere_and_extract(wrapped, pure_content)
        c.start = result["pre"]
        c.end = result["post"]
    if c.start or c.end:
        c.mode = ContentMode.ALWAYS_WRAPPED
    return c


# --- phase 3: tool calls


def _in_json_haystack(haystack: str, needle: str) -> bool:
    parser = tagged(lambda p: p.choice(["{", ":"]) << p.choice([p.tag("dq", p.literal('"') + p.literal(needle)
                                                                      + p.literal('"'))]))
    return parse_anywhere_and_extract(parser, haystack).success


class _ToolsAnalyzer:
    def __init__(self, template: Template, caps: Capabilities, reasoning: ReasoningAnalysis) -> None:
        self.template = template
        self.t = ToolsAnalysis()
        self._analyze_tool_calls(reasoning, caps.supports_parallel_tool_calls)
        f = self.t.format
        if f.mode not in (ToolFormat.NONE, ToolFormat.JSON_NATIVE):
            if caps.supports_parallel_tool_calls:
                self._check_per_call_markers()
            self._extract_function_markers()
            if f.mode == ToolFormat.TAG_WITH_TAGGED:
                self._extract_argument_name_markers()
                self._extract_argument_value_markers()
            self._extract_argument_separator()
            self._extract_args_markers()
            self._extract_call_id_markers()

    def _compare(self, first: dict[str, Any], second: dict[str, Any]) -> Comparison | None:
        params = TemplateParams([USER, first], tools=TOOLS)
        return compare_variants(self.template, params, lambda p: setattr(p, "messages", [USER, second]))

    def _analyze_tool_calls(self, reasoning: ReasoningAnalysis, parallel: bool) -> None:
        comparison = self._compare(_assistant(), _with_calls(FIRST_CALL))
        if comparison is None or not comparison.diff.right:
            return
        self._analyze_tool_call_format(comparison.diff.right, FUN_FIRST, ARG_FIRST, reasoning, parallel)

    def _analyze_tool_call_format(self, haystack: str, fun_name_needle: str, arg_name_needle: str,
                                  reasoning: ReasoningAnalysis, parallel: bool) -> None:
        f = self.t.format
        if not fun_name_needle or not arg_name_needle or not haystack:
            return
        if _in_json_haystack(haystack, fun_name_needle):
            f.mode = ToolFormat.JSON_NATIVE  # JSON all the way
        elif _in_json_haystack(haystack, arg_name_needle):
            f.mode = ToolFormat.TAG_WITH_JSON
        else:
            f.mode = ToolFormat.TAG_WITH_TAGGED
        # the reasoning markers out first
        clean = haystack
        if reasoning.start:
            pos = haystack.find(reasoning.start)
            if pos >= 0:
                clean = haystack[:pos] + haystack[pos + len(reasoning.start):]
        if reasoning.end:
            pos = clean.find(reasoning.end)
            if pos >= 0:
                clean = clean[:pos] + clean[pos + len(reasoning.end):]
        if f.mode == ToolFormat.JSON_NATIVE:
            self._analyze_tool_call_format_json_native(clean, fun_name_needle, arg_name_needle)
            if parallel:
                self._analyze_json_native_parallel_calls()
        else:
            self._analyze_tool_call_format_non_json(clean, fun_name_needle)
        # end markers need no exact whitespace: they do not shape the content
        f.section_end = trim_whitespace(f.section_end)
        f.per_call_end = trim_whitespace(f.per_call_end)

    def _analyze_json_native_parallel_calls(self) -> None:
        """Two JSON calls: each in its own section markers (per-call markers), or both in one section?"""
        f = self.t.format
        comparison = self._compare(_with_calls(FIRST_CALL), _with_calls(FIRST_CALL, SECOND_CALL))
        if comparison is None:
            return
        if f.section_start and f.section_start in comparison.diff.right:
            f.per_call_start, f.per_call_end = f.section_start, f.section_end
            f.section_start = f.section_end = ""

    def _analyze_tool_call_format_json_native(self, clean: str, fun_name_needle: str, arg_name_needle: str) -> None:
        f = self.t.format
        # not necessarily OpenAI's structure
        json_start = clean.find("{")
        json_end = clean.rfind("}")
        if json_start < 0:
            raise ValueError("the template's tool call holds no JSON object")
        cut = clean[json_start:json_end + 1]
        call_struct = json.loads(cut)
        if not isinstance(call_struct, dict):
            raise ValueError("the template's tool call is no JSON object")

        def dump(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

        def register_field(prefix: str, key: str, value: Any) -> None:
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, str) and "call0000" in value:
                f.id_field = name
            elif isinstance(value, str) and value == fun_name_needle:
                f.name_field = name
            elif arg_name_needle in dump(value):  # arguments as a string or as an object
                f.args_field = name
            elif "id" in key:  # an id the model makes up
                f.gen_id_field = name

        for key, value in call_struct.items():
            if key == fun_name_needle:
                # the function's name is the key: no name field, and the arguments are its value
                f.fun_name_is_key = True
                f.name_field = ""
                f.args_field = ""
            else:
                if isinstance(value, dict) and arg_name_needle not in dump(value):  # not the arguments object
                    f.function_field = key
                    for sub_key, sub_value in value.items():
                        register_field(key, sub_key, sub_value)
                register_field("", key, value)

        array_parser = tagged(lambda p: p.tag("pre", p.literal("[") + p.space()) + p.literal(cut)
                              + p.tag("post", p.space() + p.literal("]")))
        array = parse_anywhere_and_extract(array_parser, clean)
        if array.success:
            f.tools_array_wrapped = True
            json_start -= len(array["pre"])
            json_end += len(array["post"])
        json_end += 1  # past the closing character, where the end marker starts

        located: list[tuple[int, str]] = []
        for name in (f.name_field, f.args_field, f.id_field, f.gen_id_field):
            if name:
                pos = clean.find(name)
                located.append((pos if pos >= 0 else _NPOS, name))
        located.sort()
        f.parameter_order.extend(name for _, name in located)
        # the markers around the call come with it
        f.section_start = trim_leading_whitespace(clean[:json_start])
        f.section_end = trim_whitespace(clean[json_end:])
        # an array's closing bracket belongs to the array, not to the section's end
        if f.tools_array_wrapped and f.section_end == "]":
            f.section_end = ""

    def _analyze_tool_call_format_non_json(self, clean: str, fun_name_needle: str) -> None:
        f = self.t.format
        # the function's name in a tag of its own, or standing alone?
        fun_marker_parser = tagged(lambda p: p.tag("fun_marker", p.choice([
            p.tag("fun_pre", p.literal("<") + p.until_one_of([">", fun_name_needle])) + p.literal(fun_name_needle)
            + p.tag("fun_post", p.negate(p.space() + p.literal("<")) + p.until(">") + p.literal(">")) + p.space(),
            p.tag("fun_pre", p.literal("[") + p.until_one_of(["]", fun_name_needle])) + p.literal(fun_name_needle)
            + p.tag("fun_post", p.negate(p.space() + p.literal("[") + p.until("]") + p.literal("]")) + p.space()),
        ])))
        fun_res = parse_anywhere_and_extract(fun_marker_parser, clean)
        fun_marker = fun_res["fun_marker"] if fun_res.success else fun_name_needle
        # up to two markers, then everything up to the function's marker is the name's prefix
        per_tool_parser = tagged(lambda p: p.tag("sec_start", p.marker() + p.space())
                                 + p.tag("call_start", p.marker() + p.space()) + p.tag("fun_pre", p.until(fun_marker))
                                 + fun_marker + p.tag("rest", p.rest()))
        section_parser = tagged(lambda p: p.tag("sec_start", p.marker() + p.space()) + fun_marker
                                + p.tag("rest", p.rest()))
        result = parse_anywhere_and_extract(per_tool_parser, clean)
        if result.success:
            double_closer = tagged(lambda p: p.tag("call_end", p.marker() + p.space())
                                   + p.tag("sec_end", p.marker() + p.space()) + p.end())
            result_end = parse_anywhere_and_extract(double_closer, result["rest"])
            self.t.function.name_prefix = fun_res["fun_pre"] + self.t.function.name_prefix
        else:
            result = parse_anywhere_and_extract(section_parser, clean)
            single_closer = tagged(lambda p: p.tag("sec_end", p.marker() + p.space()) + p.end())
            result_end = parse_anywhere_and_extract(single_closer, result["rest"])
        f.per_call_start = result["call_start"]
        f.per_call_end = result_end["call_end"]
        f.section_start = result["sec_start"]
        f.section_end = result_end["sec_end"]

    def _check_per_call_markers(self) -> None:
        """Markers that wrap each call rather than the section of calls."""
        f = self.t.format
        one_vs_two = self._compare(_with_calls(FIRST_CALL), _with_calls(FIRST_CALL, SECOND_CALL))
        if one_vs_two is None:
            return
        common_call_part = calculate_diff_split(one_vs_two.diff.suffix, one_vs_two.diff.right)
        second_tool_content = trim_leading_whitespace(common_call_part.right)
        if f.section_start and second_tool_content.startswith(f.section_start):
            f.per_call_start, f.per_call_end = f.section_start, f.section_end
            f.section_start = f.section_end = ""
        if f.per_call_end:
            calls_one = _count(one_vs_two.output_a, f.per_call_end)
            calls_two = _count(one_vs_two.output_b, f.per_call_end)
            if calls_one > 0 and calls_one == calls_two:
                f.section_end = f.per_call_end
                f.per_call_end = ""

    def _extract_function_markers(self) -> None:
        f, fn = self.t.format, self.t.function
        params = TemplateParams([USER, _with_calls(FIRST_CALL)], tools=TOOLS)
        comparison = compare_variants(self.template, params, lambda p: setattr(p, "messages",
                                                                               [USER, _with_calls(SECOND_CALL)]))
        if comparison is None:
            return
        diff = comparison.diff
        if FUN_FIRST not in diff.left or FUN_SECOND not in diff.right:
            return
        prefix_marker = f.per_call_start or f.section_start
        if prefix_marker and diff.prefix.rfind(prefix_marker) >= 0:
            fn.name_prefix = diff.prefix[diff.prefix.rfind(prefix_marker) + len(prefix_marker):]

        # the name's prefix and suffix in diff.left, up to the next marker
        name_parser = tagged(lambda p: p.tag("pre", p.until(FUN_FIRST)) + p.literal(FUN_FIRST)
                             + p.tag("post", p.zero_or_more(p.negate(p.marker()) + p.any())))
        name_result = parse_and_extract(name_parser, diff.left)
        if name_result.success:
            fn.name_prefix += name_result["pre"]
            fn.name_suffix = name_result["post"]

        # the name's suffix goes on in diff.suffix up to where the arguments begin
        if f.mode == ToolFormat.TAG_WITH_JSON:
            # up to the first { or [ outside a marker, markers on the way included; only where a marker follows
            # the JSON
            def json_suffix(p: peg.Builder) -> Parser:
                non_json = p.marker() | (p.negate(p.literal("{")) + p.negate(p.literal("[")) + p.any())
                after_json = p.zero_or_more(p.negate(p.marker()) + p.any()) + p.marker()
                return p.tag("ext", p.zero_or_more(non_json)) + after_json

            suf_result = parse_and_extract(tagged(json_suffix), diff.suffix)
            if suf_result.success:
                fn.name_suffix += suf_result["ext"]
        else:
            # tagged: up to the first marker (an argument's)
            suffix_parser = tagged(lambda p: p.tag("ext", p.zero_or_more(p.negate(p.marker()) + p.any())))
            suf_result = parse_and_extract(suffix_parser, diff.suffix)
            if suf_result.success:
                fn.name_suffix += suf_result["ext"]

                def arg_start(p: peg.Builder) -> Parser:
                    return p.marker() + p.space() + p.choice([p.literal(ARG_FIRST), p.literal(ARG_SECOND)])

                sep_parser = tagged(lambda p: p.tag("sep", p.zero_or_more(p.negate(arg_start(p)) + p.any()))
                                    + arg_start(p))
                sep_result = parse_and_extract(sep_parser, diff.suffix[len(suf_result["ext"]):])
                if sep_result.success:
                    fn.args_separator = trim_whitespace(sep_result["sep"])

        # the closer, between the last argument and the end of the call or section
        suffix_marker = f.per_call_end or f.section_end
        closer_suffix = ""
        if not suffix_marker:
            # a diff with the reply without calls tells
            nocall = compare_variants(self.template, params, lambda p: setattr(p, "messages", [USER, _assistant()]))
            if nocall is not None:
                left = nocall.diff.left
                closer_suffix = left[left.find("YYYY") + 4:]  # not found: npos + 4 wraps to 3 in C++, and -1 + 4 here
        else:
            at = diff.suffix.find(suffix_marker)
            closer_suffix = diff.suffix if at < 0 else diff.suffix[:at]
        if closer_suffix:
            if f.mode == ToolFormat.TAG_WITH_TAGGED:
                # past the last value's closing marker, the rest closes the call
                closer_parser = tagged(lambda p: p.until("YYYY") + p.literal("YYYY") + p.space() + p.marker()
                                       + p.space() + p.tag("close", p.rest()))
                close_result = parse_and_extract(closer_parser, closer_suffix)
                if close_result.success:
                    fn.close = close_result["close"]
            elif f.mode == ToolFormat.TAG_WITH_JSON:
                # past the end of the JSON arguments, the rest closes the call
                closer_parser = tagged(lambda p: p.until("YYYY") + p.literal("YYYY") + p.tag("post_val", p.rest()))
                close_result = parse_and_extract(closer_parser, closer_suffix)
                if close_result.success:
                    post = close_result["post_val"]
                    pos = max(post.rfind("}"), post.rfind("]"))
                    if 0 <= pos < len(post) - 1:
                        fn.close = trim_leading_whitespace(post[pos + 1:])
        fn.close = trim_leading_whitespace(fn.close)

    def _extract_argument_name_markers(self) -> None:
        a = self.t.arguments
        comparison = self._compare(_with_calls(FIRST_CALL_ONE_ARG), _with_calls(FIRST_CALL_OTHER_ARG))
        if comparison is None:
            return
        diff = comparison.diff
        if not diff.left or not diff.right:
            return
        left_parser = tagged(lambda p: p.tag("pre", p.until(ARG_FIRST)) + p.literal(ARG_FIRST)
                             + p.tag("suffix", p.until_one_of(['"', "X"])))
        right_parser = tagged(lambda p: p.tag("pre", p.until(ARG_SECOND)) + p.literal(ARG_SECOND)
                              + p.tag("suffix", p.until_one_of(['"', "Y"])))
        left_result = parse_anywhere_and_extract(left_parser, diff.left)
        right_result = parse_anywhere_and_extract(right_parser, diff.right)
        if (left_result.success and right_result.success and left_result["pre"]
                and left_result["pre"] == right_result["pre"] and left_result["suffix"] == right_result["suffix"]):
            # the name inside a structure (a JSON key): the shared wrapper is the prefix
            a.name_prefix = left_result["pre"]
            a.name_suffix = left_result["suffix"]
        elif diff.left.startswith(ARG_FIRST) and diff.right.startswith(ARG_SECOND):
            # the name right in the diff: its prefix is the last marker of diff.prefix
            def last_marker_parser(p: peg.Builder) -> Parser:
                last_marker = p.marker() + p.zero_or_more(p.negate(p.marker()) + p.any()) + p.end()
                return p.zero_or_more(p.negate(last_marker) + p.any()) + p.tag("name_prefix", last_marker)

            pre_result = parse_and_extract(tagged(last_marker_parser), diff.prefix)
            a.name_prefix = pre_result["name_prefix"] if pre_result.success else diff.prefix
            # the suffix runs from past ARG_FIRST to the first marker (and whitespace after it), in diff.left or on
            # in diff.suffix
            after_first = diff.left[len(ARG_FIRST):] + diff.suffix
            suffix_parser = tagged(lambda p: p.tag("suffix", p.zero_or_more(p.negate(p.marker()) + p.any())
                                                   + p.marker() + p.space()))
            suf_result = parse_anywhere_and_extract(suffix_parser, after_first)
            if suf_result.success:
                a.name_suffix = suf_result["suffix"]

    def _extract_argument_value_markers(self) -> None:
        a, f, fn = self.t.arguments, self.t.format, self.t.function
        comparison = self._compare(_with_calls(FIRST_CALL_ONE_ARG), _with_calls(FIRST_CALL_ONE_ARG_OTHER_VAL))
        if comparison is None:
            return
        diff = comparison.diff
        if diff.left != "XXXX" or diff.right != "YYYY":
            return
        arg_name_ending = ARG_FIRST + a.name_suffix
        prefix = diff.prefix
        if prefix.rfind(arg_name_ending) >= 0:
            prefix = prefix[prefix.rfind(arg_name_ending) + len(arg_name_ending):]
        if prefix:
            # the last marker and any text after it, to the end
            def last_marker_parser(p: peg.Builder) -> Parser:
                last_marker = p.marker() + p.zero_or_more(p.negate(p.marker()) + p.any()) + p.end()
                return p.zero_or_more(p.negate(last_marker) + p.any()) + p.tag("val_prefix", last_marker)

            pre_result = parse_and_extract(tagged(last_marker_parser), prefix)
            a.value_prefix = pre_result["val_prefix"] if pre_result.success else prefix

        value_suffix = diff.suffix
        if fn.close:
            at = value_suffix.find(fn.close)
            if at >= 0:
                value_suffix = value_suffix[:at]
        elif f.per_call_end or f.section_end:
            end_marker = f.per_call_end or f.section_end
            at = value_suffix.find(end_marker)
            if at >= 0:
                value_suffix = value_suffix[:at]
        if trim_whitespace(value_suffix):
            a.value_suffix = value_suffix

    def _extract_argument_separator(self) -> None:
        comparison = self._compare(_with_calls(FIRST_CALL_ONE_ARG), _with_calls(FIRST_CALL))
        if comparison is None:
            return
        if comparison.diff.right:
            self.t.arguments.separator = until_common_prefix(comparison.diff.right, ARG_FIRST, ARG_SECOND)

    def _extract_args_markers(self) -> None:
        """Markers around the arguments (``<args>…</args>``); only JSON_NATIVE reads them."""
        f, a = self.t.format, self.t.arguments
        if f.mode != ToolFormat.JSON_NATIVE:  # llama.cpp renders the comparison first, to the same effect
            return
        comparison = self._compare(_with_calls(FIRST_CALL_ZERO_ARGS), _with_calls(FIRST_CALL_ONE_ARG))
        if comparison is None:
            return
        diff = comparison.diff
        prefix_marker = f.section_start or f.per_call_start
        suffix_marker = f.section_end or f.per_call_end
        # these may come earlier too (an example in the tools' description): the closest ones count
        prefix_pos = 0 if not prefix_marker else diff.prefix.rfind(prefix_marker)
        suffix_pos = len(diff.suffix) if not suffix_marker else diff.suffix.find(suffix_marker)
        if prefix_pos < 0:
            prefix_pos = 0
        if suffix_pos < 0:
            suffix_pos = len(diff.suffix)
        prefix_cut = diff.prefix[prefix_pos + len(prefix_marker):]
        suffix_cut = diff.suffix[:suffix_pos]
        args_start = until_common_prefix(prefix_cut, "{}", '{"first":')
        args_end = after_common_suffix(suffix_cut, "{}", '"XXXX"}')
        if args_start or args_end:
            find_fun = args_start.find(FUN_FIRST)
            if find_fun >= 0:
                args_start = args_start[find_fun + len(FUN_FIRST):]
            find_call_id = args_start.find(CALL_ID_001)
            if find_call_id >= 0:
                args_start = args_start[find_call_id + len(CALL_ID_001):]
            a.start = args_start
            a.end = args_end

    def _extract_call_id_markers(self) -> None:
        f, a, cid = self.t.format, self.t.arguments, self.t.call_id
        comparison = self._compare(_with_calls(FIRST_CALL), _with_calls(FIRST_CALL_ALT_ID))
        if comparison is None:
            return
        diff = comparison.diff
        if not diff.left and not diff.right:
            return
        common_id_part = CALL_ID_001[:_common_prefix_len(CALL_ID_001, CALL_ID_999)]

        # the function's name before the id (BETWEEN_FUNC_AND_ARGS, POST_ARGS) or after it (PRE_FUNC_NAME)?
        func_name_in_prefix = diff.prefix.rfind(FUN_FIRST)
        func_name_in_suffix = diff.suffix.find(FUN_FIRST)

        def find_last_marker(text: str) -> str:
            def make(p: peg.Builder) -> Parser:
                last = p.marker() + p.zero_or_more(p.negate(p.marker()) + p.any()) + p.end()
                return p.zero_or_more(p.negate(last) + p.any()) + p.tag("m", p.marker())

            return parse_anywhere_and_extract(tagged(make), text)["m"]

        def find_first_marker(text: str) -> str:
            return parse_anywhere_and_extract(tagged(lambda p: p.tag("m", p.marker())), text)["m"]

        if func_name_in_prefix >= 0 > func_name_in_suffix:
            # the arguments' "{" in the prefix or in the suffix?
            args_in_prefix = diff.prefix.find("{", func_name_in_prefix)
            args_in_suffix = diff.suffix.find("{")
            if args_in_suffix >= 0 and (args_in_prefix < 0 or args_in_prefix > len(diff.prefix)):
                cid.pos = CallIdPosition.BETWEEN_FUNC_AND_ARGS
                # the marker right before the id, no marker between
                after_func = diff.prefix[func_name_in_prefix + len(FUN_FIRST):]
                id_prefix_parser = tagged(lambda p: p.tag("prefix", p.marker()) + p.zero_or_more(
                    p.negate(p.marker()) + p.negate(p.literal(common_id_part)) + p.any()) + p.literal(common_id_part))
                id_res = parse_anywhere_and_extract(id_prefix_parser, after_func)
                cid.prefix = id_res["prefix"] if id_res.success else find_last_marker(after_func)
                # the first marker of the suffix before the arguments' "{"
                suffix_parser = tagged(lambda p: p.zero_or_more(p.negate(p.marker()) + p.negate(p.literal("{"))
                                                                + p.any()) + p.tag("suffix", p.marker()))
                suf_res = parse_anywhere_and_extract(suffix_parser, diff.suffix)
                if suf_res.success:
                    cid.suffix = suf_res["suffix"]
            elif args_in_prefix >= 0:
                cid.pos = CallIdPosition.POST_ARGS
                # the last marker between the arguments' closing brace and the id
                after_args = diff.prefix[args_in_prefix:]
                closing_brace = after_args.rfind("}")
                if closing_brace >= 0:
                    cid.prefix = find_last_marker(after_args[closing_brace + 1:])
                cid.suffix = find_first_marker(diff.suffix)
        elif func_name_in_suffix >= 0 > func_name_in_prefix:
            cid.pos = CallIdPosition.PRE_FUNC_NAME
            cid.prefix = find_last_marker(diff.prefix)
            cid.suffix = find_first_marker(diff.suffix[:func_name_in_suffix])

        if cid.prefix == a.end:
            cid.prefix = ""
        if cid.suffix == a.start:
            cid.suffix = ""
        # with an id, per_call_end may have taken the id's suffix and the sample arguments
        if cid.pos != CallIdPosition.NONE and cid.suffix and f.per_call_end.startswith(cid.suffix):
            f.per_call_end = ""


_NPOS = 1 << 62  # std::string::npos: what is not found sorts last


def _count(haystack: str, needle: str) -> int:
    return haystack.count(needle) if needle else 0


# --- the assistant's and the user's turn markers


def _detect_assistant_start_marker(template: Template, reasoning: ReasoningAnalysis) -> str:
    params = TemplateParams([USER])
    comparison = compare_variants(template, params, lambda p: setattr(p, "messages", [USER, _assistant()]))
    if comparison is None:
        return ""
    message = comparison.diff.right
    at = message.find(ASSISTANT_MSG)
    ast_prefix = message if at < 0 else message[:at]
    for marker in (reasoning.start, reasoning.end):
        trimmed = trim_whitespace(marker)
        if marker and trimmed in ast_prefix:
            ast_prefix = ast_prefix[:ast_prefix.find(trimmed)]
    return trim_whitespace(ast_prefix)


def _detect_user_start_marker(template: Template) -> str:
    assistant = _assistant()
    user_two = {"role": "user", "content": USER_MSG_TWO}
    comparison = compare_variants(template, TemplateParams([]), lambda p: setattr(p, "messages", [USER]))
    if comparison is None:  # no empty conversations? a longer one
        comparison = compare_variants(template, TemplateParams([user_two, assistant]),
                                      lambda p: setattr(p, "messages", [user_two, assistant, USER]))
        if comparison is None:
            return ""
    message = comparison.diff.right
    if ASSISTANT_MSG in message:
        message = message[message.find(ASSISTANT_MSG) + len(ASSISTANT_MSG):]
    at = message.find(USER_MSG)
    candidate = message if at < 0 else message[:at]
    result = ""
    encountered_marker = False
    for segment in segmentize_markers(candidate):
        lower = segment.value.lower()
        # what looks like the end of the turn before, at the start only
        if (segment.type == SegmentType.MARKER and not encountered_marker
                and ("end" in lower or "close" in lower)):
            continue
        if segment.type == SegmentType.TEXT and not encountered_marker and not trim_whitespace(segment.value):
            continue
        encountered_marker |= segment.type == SegmentType.MARKER
        result += segment.value
    return trim_whitespace(result)


# --- workarounds: templates whose markers the analysis cannot see, as llama.cpp patches them


def _old_qwen_thinking(source: str, a: Analysis) -> None:
    # old reasoning Qwen templates show no reasoning, but the model thinks all the same
    if ("content.split('</think>')" in source and "reasoning_content" not in source and "<SPECIAL_12>" not in source
            and a.reasoning.mode == ReasoningMode.NONE):
        a.reasoning.mode = ReasoningMode.TAG_BASED
        a.reasoning.start, a.reasoning.end = "<think>", "</think>"
        a.preserved_tokens += ["<think>", "</think>"]


def _granite_3_3(source: str, a: Analysis) -> None:
    # separate reasoning and content markers
    if ("Write your thoughts between <think></think> and write your response between <response></response>"
            in source):
        a.reasoning.mode = ReasoningMode.TAG_BASED
        a.reasoning.start, a.reasoning.end = "<think>", "</think>"
        a.preserved_tokens += ["<think>", "</think>"]
        a.content.mode = ContentMode.WRAPPED_WITH_REASONING
        a.content.start, a.content.end = "<response>", "</response>"
        a.preserved_tokens += ["<response>", "</response>"]


def _command_r_plus(source: str, a: Analysis) -> None:
    # content wrapped in <|CHATBOT_TOKEN|>…<|END_OF_TURN_TOKEN|>
    if "<|CHATBOT_TOKEN|>" in source and "<|END_OF_TURN_TOKEN|>" in source and not a.content.start:
        a.content.mode = ContentMode.ALWAYS_WRAPPED
        a.content.start, a.content.end = "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"
        a.preserved_tokens += ["<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"]
        a.user_start = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"


def _functionary_3_1(source: str, a: Analysis) -> None:
    # no marker around the section of calls
    if ('set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") | list | length > 0'
            in source):
        a.content.mode = ContentMode.PLAIN
        a.content.end = ""
        a.tools.function.name_prefix = ""
        a.tools.format.section_start = a.tools.format.section_end = ""
        a.tools.format.per_call_start = "<function="
        a.tools.format.per_call_end = "</function>"
        a.tools.function.close = ""
        a.preserved_tokens = ["<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"]


def _deepseek_r1_distill_qwen(source: str, a: Analysis) -> None:
    if ("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'"
            in source):
        f = a.tools.format
        f.section_start = "<｜tool▁calls▁begin｜>"
        f.section_end = "<｜tool▁calls▁end｜>"
        f.per_call_start = "<｜tool▁call▁begin｜>function"
        a.tools.function.name_prefix = "<｜tool▁sep｜>"
        f.per_call_end = "<｜tool▁call▁end｜>"
        a.tools.function.close = "```"


def _nemotron_nano_v2(source: str, a: Analysis) -> None:
    if all(s in source for s in ("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<TOOL_RESPONSE>")):
        f = a.tools.format
        f.mode = ToolFormat.JSON_NATIVE
        f.section_start = f.section_end = ""
        f.per_call_start, f.per_call_end = "<TOOLCALL>", "</TOOLCALL>"
        f.tools_array_wrapped = True
        a.content.mode = ContentMode.PLAIN
        a.content.start = a.content.end = ""
        a.reasoning.mode = ReasoningMode.TAG_BASED
        a.reasoning.start, a.reasoning.end = "<think>\n", "</think>"
        a.assistant_start = "<SPECIAL_11>Assistant"
        a.user_start = "<SPECIAL_11>User"
        a.preserved_tokens = ["<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"]


def _fireworks_v2(source: str, a: Analysis) -> None:
    if ("{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n' + message['content'] "
            "| trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}" in source):
        a.assistant_start = "<|start_header_id|>assistant<|end_header_id|>"
        a.user_start = "<|start_header_id|>user<|end_header_id|>"


def _solar_open(source: str, a: Analysis) -> None:
    if "<|begin|>assistant<|think|><|end|>" in source:
        a.assistant_start = "<|begin|>assistant"


def _apriel_1_6(source: str, a: Analysis) -> None:
    if "if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text" in source:
        a.user_start = "<|begin_user|>"
        a.assistant_start = "<|begin_assistant|>"


def _openai_wrapper(source: str, a: Analysis) -> None:
    # the template asks for {"name", "parameters"} JSON, and the model answers in OpenAI's function wrapper
    if 'Respond in the format {"name": function name' in source and "Do not use variables." in source:
        a.tools.format.openai_wrapper_trigger = True


def _laguna(source: str, a: Analysis) -> None:
    # Laguna's v4 template renders reasoning and argument delimiters with formatting whitespace ("<think>\n",
    # "</arg_value>\n") the model does not write: the bare tags (v8 renders without, where this changes nothing)
    if "laguna_glm_thinking" in source:
        args = a.tools.arguments
        a.reasoning.start = trim_whitespace(a.reasoning.start)
        a.reasoning.end = trim_whitespace(a.reasoning.end)
        args.value_prefix = trim_whitespace(args.value_prefix)
        args.value_suffix = trim_whitespace(args.value_suffix)
        args.separator = trim_whitespace(args.separator)
        args.tolerate_intertag_whitespace = True
        # </assistant> stops generation only as the one control token; after tool calls the model may spell it out
        a.additional_stops.append("</assistant>")


def _bailing_v3(source: str, a: Analysis) -> None:
    if "Bailing V3 chat template" in source:
        a.tools.arguments.value_suffix = trim_whitespace(a.tools.arguments.value_suffix)
        a.tools.arguments.tolerate_intertag_whitespace = True


WORKAROUNDS: tuple[Callable[[str, Analysis], None], ...] = (
    _old_qwen_thinking, _granite_3_3, _command_r_plus, _functionary_3_1, _deepseek_r1_distill_qwen,
    _nemotron_nano_v2, _fireworks_v2, _solar_open, _apriel_1_6, _openai_wrapper, _laguna, _bailing_v3,
)


def _collect_preserved_tokens(a: Analysis) -> None:
    r, c, t = a.reasoning, a.content, a.tools
    for marker in (r.start, r.end, c.start, c.end, t.format.section_start, t.format.section_end,
                   t.format.per_call_start, t.format.per_call_end, t.function.name_prefix, t.function.name_suffix,
                   t.function.args_separator, t.function.close, t.arguments.start, t.arguments.end,
                   t.arguments.name_prefix, t.arguments.name_suffix, t.arguments.separator, t.arguments.value_prefix,
                   t.arguments.value_suffix, t.call_id.prefix, t.call_id.suffix):
        token = trim_whitespace(marker)
        if token and token not in a.preserved_tokens:
            a.preserved_tokens.append(token)


@lru_cache(maxsize=32)
def analyze_template(template: Template) -> Analysis:
    """The full differential analysis of ``template`` (llama.cpp's autoparser::analyze_template). It depends on the
    template alone, so it is made once per template."""
    a = Analysis(caps=template_caps(template))
    a.reasoning = _analyze_reasoning(template, a.caps.supports_tool_calls)
    a.content = _analyze_content(template, a.reasoning)
    if a.caps.supports_tool_calls:
        a.tools = _ToolsAnalyzer(template, a.caps, a.reasoning).t
    a.assistant_start = _detect_assistant_start_marker(template, a.reasoning)
    a.user_start = _detect_user_start_marker(template)
    _collect_preserved_tokens(a)
    for workaround in WORKAROUNDS:
        workaround(template.source, a)
    return a
