"""Gemma 4: thinking in a ``thought`` channel, tool calls with arguments in Gemma's own value syntax — bare keys,
strings quoted by the ``<|"|>`` token (llama.cpp's common/parsers/gemma4.cpp and common_chat_peg_gemma4_mapper in
common/chat-peg-parser.cpp)::

    <|channel>thought
    The user wants the time.<channel|><|tool_call>call:get_time{city:<|"|>Paris<|"|>,days:[1,2]}<tool_call|>

The arguments are turned into JSON by walking the parse tree (``Gemma4Mapper``), not by the generic mapper. The older
Gemma 4 template (without the "OpenAI Chat Completions" notes) reads tool results from the assistant message that
made the calls, so for it the ``tool`` messages are folded into that message first (``convert_tool_responses``).
"""

from __future__ import annotations

import json
from typing import Any

from backends.chat_format.builder import (
    TOOL_ARGS,
    TOOL_NAME,
    ChatBuilder,
    ParsedCall,
    TreeMapper,
    build,
    escape_json_inner,
)
from backends.chat_format.tool_schema import functions
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt, render_content
from backends.chat_format.peg import Node, Parser

TURN_MODEL = "<|turn>model\n"
TURN_END = "<turn|>\n"
THOUGHT_START = "<|channel>thought"
CHANNEL_END = "<channel|>"
STRING_QUOTE = '<|"|>'


# --- the older template: tool results folded into the assistant message that called the tools


def _has_tool_calls(message: dict[str, Any]) -> bool:
    calls = message.get("tool_calls")
    return isinstance(calls, list) and bool(calls)


def _has_content(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return bool(content) and isinstance(content, (str, list))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads would take NaN and Infinity, which JSON has not


def _tool_response(message: dict[str, Any]) -> Any:
    """A tool message's content, read as JSON where it is JSON (as text where it is not)."""
    content = message.get("content")
    if isinstance(content, str):
        try:
            return json.loads(content, parse_constant=_reject_constant)
        except ValueError:
            return content
    return content


def convert_tool_responses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every ``assistant(tool calls) → tool… → assistant(content)`` run as one assistant message that carries the
    calls, their results in ``tool_responses`` and the answer, as Gemma 4's older template expects them
    (llama.cpp's workaround::convert_tool_responses_gemma4; https://ai.google.dev/gemma/docs/core/prompt-formatting-gemma4).
    """
    result: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.get("role", "") != "assistant" or not _has_tool_calls(message):
            result.append(message)
            i += 1
            continue
        tool_calls = list(message["tool_calls"])
        # The prompt guide keeps the reasoning between calls; the templates drop it, but it is kept all the same.
        reasoning = message.get("reasoning_content")
        i += 1
        responses: list[dict[str, Any]] = []
        while i < len(messages) and messages[i].get("role", "") == "tool":
            tool = messages[i]
            name = ""
            if len(responses) < len(tool_calls):  # the call this result answers, by position
                call = tool_calls[len(responses)]
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    name = str(function.get("name", ""))
            responses.append({"name": name or tool.get("tool_call_id", ""), "response": _tool_response(tool)})
            i += 1
        content: Any = None
        if i < len(messages) and messages[i].get("role", "") == "assistant":
            following = messages[i]
            if not _has_tool_calls(following) and _has_content(following):  # the final answer
                content = following["content"]
                i += 1
        folded: dict[str, Any] = {"role": "assistant", "tool_calls": tool_calls}
        if responses:
            folded["tool_responses"] = responses
        if content is not None:
            folded["content"] = content
        if isinstance(reasoning, str):
            folded["reasoning_content"] = reasoning
        result.append(folded)
    return result


# --- the arguments, from Gemma's value syntax to JSON


def to_json(node: Node) -> str:
    """A ``gemma4-*`` node of the parse tree as JSON text; a node the input ended inside stays open, so that the
    arguments of a call being written grow as it streams (llama.cpp's gemma4_to_json)."""
    if not node.text:
        return ""
    rule = node.rule
    if rule in ("gemma4-number", "gemma4-bool", "gemma4-null"):
        return node.text
    if rule == "gemma4-string-content":
        return escape_json_inner(node.text)
    if rule == "gemma4-string":
        out = '"'
        if node.children:
            out += to_json(node.children[0])
            if not node.partial:
                out += '"'
        return out
    if rule == "gemma4-array":
        return "[" + ",".join(to_json(child) for child in node.children) + ("" if node.partial else "]")
    if rule == "gemma4-dict-key-name":
        return node.text
    if rule == "gemma4-dict-key":
        out = '"'
        if node.children:
            out += escape_json_inner(to_json(node.children[0]))
        if not node.partial:
            out += '":'
        return out
    if rule == "gemma4-dict-kv":
        return "".join(to_json(child) for child in node.children)
    if rule == "gemma4-dict":
        return "{" + ",".join(to_json(child) for child in node.children) + ("" if node.partial else "}")
    if rule == "gemma4-value":
        return to_json(node.children[0]) if node.children else ""
    return ""


class Gemma4Mapper(TreeMapper):
    """Each call from its name and its arguments' tree (common_chat_peg_gemma4_mapper: none of the generic mapper's
    argument building, and an empty thought is kept as it is)."""

    def call_of(self, node: Node) -> ParsedCall | None:
        name = node.find(TOOL_NAME)
        args = node.find(TOOL_ARGS)
        if name is None or args is None or name.partial:
            return None
        return ParsedCall(name=name.text, arguments=to_json(args.children[0]) if args.children else "")


def _value_rules(p: ChatBuilder) -> None:
    """Gemma's value syntax; the rule names are what ``to_json`` walks."""
    p.rule("gemma4-string-content", p.until(STRING_QUOTE))
    p.rule("gemma4-string", p.literal(STRING_QUOTE) + p.ref("gemma4-string-content") + p.literal(STRING_QUOTE))
    p.rule("gemma4-bool", p.json_bool())
    p.rule("gemma4-null", p.json_null())
    p.rule("gemma4-number", p.json_number())
    p.rule("gemma4-dict-key", p.rule("gemma4-dict-key-name", p.chars("[^:}]", 1, -1)) + p.literal(":"))
    p.rule("gemma4-dict-kv", p.ref("gemma4-dict-key") + p.space() + p.ref("gemma4-value"))

    def dict_() -> Parser:
        ws = p.space()
        member = p.ref("gemma4-dict-kv")
        members = p.sequence([member, p.zero_or_more(p.sequence([p.literal(","), ws, member]))])
        return p.sequence([p.literal("{"), ws, p.choice([p.literal("}"), p.sequence([members, ws, p.literal("}")])])])

    def array() -> Parser:
        ws = p.space()
        value = p.ref("gemma4-value")
        elements = p.sequence([value, p.zero_or_more(p.sequence([p.literal(","), ws, value]))])
        return p.sequence([p.literal("["), ws, p.choice([p.literal("]"), p.sequence([elements, ws, p.literal("]")])])])

    p.rule("gemma4-dict", dict_)
    p.rule("gemma4-array", array)
    p.rule("gemma4-value", lambda: p.choice([
        p.ref("gemma4-string"), p.ref("gemma4-dict"), p.ref("gemma4-array"), p.ref("gemma4-number"),
        p.ref("gemma4-bool"), p.ref("gemma4-null")]))


def prepare(template: Template, request: Request) -> Prepared:
    if "{#- OpenAI Chat Completions:" not in template.source:
        # an outdated Gemma 4 template: llama.cpp warns and converts the messages (the official template is newer)
        messages = convert_tool_responses(request.messages)
    else:
        messages = request.messages
    prompt = apply_template(template, request, messages=messages)
    gen = generation_prompt(template, request, messages=messages)
    if request.add_generation_prompt and prompt.endswith(TURN_END):
        # After content and a tool call the template does not open the model's next turn, which keeps the model
        # from its thinking sequence: https://github.com/ggml-org/llama.cpp/pull/21760
        gen = TURN_MODEL
        prompt += gen
    if request.has_continuation:
        msg = request.continue_msg or {}
        gen = TURN_MODEL if prompt.endswith(TURN_END) else ""
        gen += THOUGHT_START + "\n" + str(msg.get("reasoning_content") or "")
        if request.continue_final_message == "content":
            gen += CHANNEL_END + render_content(msg)
        prompt += gen

    has_tools = request.has_tools
    has_schema = isinstance(request.json_schema, dict)
    include_grammar = has_schema or (has_tools and request.tool_choice != "none")
    extract_reasoning = request.reasoning_format != "none"

    def make(p: ChatBuilder) -> Parser:
        start = p.rule("start", p.optional(p.literal(TURN_MODEL)))
        if extract_reasoning:
            p.rule("thought", p.literal(THOUGHT_START) + p.space() + p.reasoning(p.until(CHANNEL_END))
                   + p.literal(CHANNEL_END))
        else:
            p.rule("thought", p.content(p.literal(THOUGHT_START) + p.space() + p.until(CHANNEL_END)
                                        + p.literal(CHANNEL_END)))
        # channels opened and left empty before the thought
        consume_empty_channels = p.gbnf(p.zero_or_more(p.literal("<|channel>") + p.negate(p.literal("thought"))), "")
        thought = ((p.peek(p.literal("<|channel>")) + consume_empty_channels + p.ref("thought"))
                   | p.negate(p.literal("<|channel>")))

        if has_schema:
            response = (p.literal("```json") << p.content(p.schema(p.json(), "response-format-schema",
                                                                  request.json_schema)) << p.literal("```"))
            return start + p.optional(thought) + response

        if has_tools and request.tool_choice != "none":
            _value_rules(p)
            tool_choice = p.choice()
            for tool in functions(request.tools):
                name = tool["function"]["name"]
                # the arguments' grammar is Gemma's dict, not the JSON schema (llama.cpp has a TODO for it)
                tool_choice = tool_choice | p.rule(f"tool-{name}", p.tool(p.sequence([
                    p.tool_open(p.tool_name(p.literal(name)) + p.peek(p.literal("{"))),
                    p.tool_args(p.ref("gemma4-dict"))])))
            tool_call = p.trigger_rule("tool-call", p.repeat(
                "<|tool_call>call:" + tool_choice + "<tool_call|>",
                1 if request.tool_choice == "required" else 0, -1 if request.parallel_tool_calls else 1))
            if request.tool_choice == "required":
                return start + thought + tool_call
            scan_to_toolcall = p.rule("scan-to-toolcall", p.until("<|tool_call>"))
            content = p.rule("content", p.content(p.until_one_of(["<|channel>", CHANNEL_END, "<|tool_call>"])))
            message = p.rule("message", thought + content)
            return start + p.zero_or_more(message) + scan_to_toolcall + tool_call

        # Gemma 4 may end its content with one more empty <|channel>thought\n<channel|>, or with a lone
        # <channel|>: every whole thought is read, and the reading stops at the first unmatched <channel|>.
        content = p.rule("content", p.content(p.until_one_of(["<|channel>", CHANNEL_END])))
        message = p.rule("message", thought + content)
        return start + p.one_or_more(message)

    return Prepared(
        prompt, gen, build(make), mapper=Gemma4Mapper, format="peg-gemma4", supports_thinking=True,
        thinking_start_tag=THOUGHT_START, thinking_end_tags=(CHANNEL_END,), grammar=include_grammar,
        grammar_lazy=include_grammar and not (has_schema or (has_tools and request.tool_choice == "required")),
        grammar_triggers=(("word", "<|tool_call>"),) if include_grammar else (),
        preserved_tokens=("<|channel>", CHANNEL_END, "<|tool_call>", "<tool_call|>", "<|turn>"))

