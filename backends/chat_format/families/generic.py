"""Tools for a model whose template shows it none (SmolLM2's, plain ChatML): llama.cpp's generic tool format.

A port of ``common_chat_params_init_generic`` and ``common_chat_parse_generic`` (``common/chat.cpp``, llama.cpp
before its PEG rewrite dropped the format) with the message polyfills minja's ``chat_template::apply`` made for it
(``common/minja/chat-template.hpp``): the system prompt asks for a JSON reply and lists the tools; the reply is one
JSON object, ``{"tool_call": {"name", "arguments"[, "id"]}}``, ``{"tool_calls": [...]}`` (parallel calls, each with
an id) or ``{"response": "..."}``, held to that shape by grammar from its first character (llama.cpp's grammar is
not lazy here: with ``tool_choice`` "required" only a call is allowed). A template that cannot render an assistant's
calls gets them as that JSON in the message's content, and one that cannot render a ``tool`` message gets the
result as a user message ``{"tool_response": {...}}``, as minja wrote them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from backends.chat_format import peg
from backends.chat_format.builder import ChatBuilder, ParsedCall, ParsedReply, build
from backends.chat_format.tool_schema import functions
from backends.chat_format.request import Prepared, Request, Template, apply_template, generation_prompt

NAME = "generic"
RESPOND_IN_JSON = ("Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` "
                   "reply to the user's request")
TOOLS_INTRO = "You can call any of the following tools to satisfy the user's requests: "
_MARKER = "TOOL_RESPONSE_MARKER"


def schema(request: Request) -> dict[str, Any]:
    """The reply's JSON schema, as common_chat_params_init_generic builds it, but with no key beyond those named
    (llama.cpp's schema converter lets an object without ``additionalProperties`` take more: a weak model wanders off
    into one after its call and never ends the reply)."""
    calls = []
    for tool in functions(request.tools):
        function = tool["function"]
        call: dict[str, Any] = {"type": "object", "properties": {
            "name": {"type": "string", "const": function.get("name", "")},
            "arguments": function.get("parameters") or {"type": "object"}}, "required": ["name", "arguments"],
            "additionalProperties": False}
        if function.get("description"):
            call["description"] = function["description"]
        if request.parallel_tool_calls:
            call["properties"]["id"] = {"type": "string", "minLength": 4}
            call["required"].append("id")
        calls.append(call)
    one: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    tool_call = ({"type": "object", "properties": {"tool_calls": {"type": "array", "items": one, "minItems": 1}},
                  "required": ["tool_calls"], "additionalProperties": False} if request.parallel_tool_calls else
                 {"type": "object", "properties": {"tool_call": one}, "required": ["tool_call"],
                  "additionalProperties": False})
    if request.tool_choice == "required":
        return tool_call
    response = request.json_schema if isinstance(request.json_schema, dict) and request.json_schema \
        else {"type": "string"}
    return {"anyOf": [tool_call, {"type": "object", "properties": {"response": response},
                                  "required": ["response"], "additionalProperties": False}]}


@lru_cache(maxsize=32)
def renders_tool_results(source: str) -> bool:
    """Whether the template renders a ``tool`` message's content (minja's caps ``supports_tool_responses``)."""
    from backends.chat_format.template import TemplateError, render

    try:
        text = render(source, [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                               {"role": "tool", "content": _MARKER}], add_generation_prompt=False)
    except (TemplateError, ValueError, TypeError):
        return False
    return _MARKER in text


def with_tools(source: str, messages: list[dict[str, Any]], request: Request) -> list[dict[str, Any]]:
    """The messages as the generic format renders them: the JSON instruction and the tool list in the system
    prompt (minja's add_system, twice), calls and results written as JSON where the template cannot render them."""
    from backends.chat_format.capabilities import capabilities

    caps = capabilities(source)
    tools = json.dumps(request.tools or [], indent=2, ensure_ascii=False)
    out = _add_system(_add_system(messages, RESPOND_IN_JSON), TOOLS_INTRO + tools)
    results = renders_tool_results(source)
    polyfilled = []
    for message in out:
        message = dict(message)
        calls = message.get("tool_calls")
        if calls and not caps.supports_tool_calls:
            written = []
            for call in calls:
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except ValueError:
                        pass
                entry = {"name": function.get("name", ""), "arguments": arguments}
                if call.get("id"):
                    entry["id"] = call["id"]
                written.append(entry)
            obj: dict[str, Any] = {"tool_calls": written}
            if message.get("content"):
                obj["content"] = message["content"]
            message["content"] = json.dumps(obj, indent=2, ensure_ascii=False)
            del message["tool_calls"]
        if message.get("role") == "tool" and not results:
            response: dict[str, Any] = {}
            if message.get("name"):
                response["tool"] = message["name"]
            response["content"] = message.get("content", "")
            if message.get("tool_call_id"):
                response["tool_call_id"] = message["tool_call_id"]
            message = {"role": "user", "content": json.dumps({"tool_response": response}, indent=2,
                                                             ensure_ascii=False)}
        polyfilled.append(message)
    return polyfilled


def _add_system(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0].get("role") == "system":
        first = messages[0].get("content")
        existing = first if isinstance(first, str) else "\n".join(
            str(p.get("text", "")) for p in first or () if isinstance(p, dict) and p.get("type") == "text")
        return [{"role": "system", "content": existing + "\n\n" + text}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


class GenericPrepared(Prepared):
    """The reply read as common_chat_parse_generic reads it: one JSON object. While it streams, a ``response``
    string goes out as it grows and calls once they are whole; a reply that is no JSON object is content."""

    def parse(self, reply: str, partial: bool = False) -> ParsedReply:
        text = reply.strip()
        if not text.startswith("{"):
            if partial and not text:
                return ParsedReply()
            return ParsedReply(content=reply)
        try:
            value = json.loads(text)
        except ValueError:
            if not partial:
                return ParsedReply(content=reply)
            return ParsedReply(content=_partial_response(text))
        if not isinstance(value, dict):
            return ParsedReply(content=reply)
        if "tool_calls" in value or "tool_call" in value:
            calls = value.get("tool_calls") if "tool_calls" in value else [value.get("tool_call")]
            parsed = [ParsedCall(name=str(c.get("name", "")), arguments=json.dumps(c.get("arguments", {}),
                                                                                   ensure_ascii=False),
                                 id=str(c.get("id", "") or "")) for c in calls or () if isinstance(c, dict)]
            return ParsedReply(content=str(value.get("content") or ""), tool_calls=parsed)
        if "response" in value:
            response = value["response"]
            return ParsedReply(content=response if isinstance(response, str) else json.dumps(response, indent=2))
        return ParsedReply(content=reply)


    def read(self, reply: str, partial: bool = False, cut: bool = False) -> tuple[ParsedReply | None, int]:
        # a reply that is no JSON object is content; one cut short is the response written so far, as it streamed
        return self.parse(reply, partial or cut), -1


def _partial_response(text: str) -> str:
    """The part of a ``{"response": "...`` string written so far (its escapes decoded, a cut one left out)."""
    head = text.replace(" ", "").replace("\n", "")
    if not head.startswith('{"response":"'):
        return ""
    at = text.index('"', text.index(":")) + 1
    body = text[at:]
    for cut in range(len(body), max(len(body) - 8, -1), -1):  # a cut escape is at most \uXXXX long
        try:
            return str(json.loads('"' + body[:cut] + '"'))
        except ValueError:
            continue
    return ""


def prepare(template: Template, request: Request) -> Prepared:
    """``request`` (its messages already given the tools by ``with_tools``) in the generic format."""
    prompt = apply_template(template, request)
    gen = generation_prompt(template, request)
    reply_schema = schema(request)

    def make(p: ChatBuilder) -> peg.Parser:
        return p.prefix(gen) + p.schema(p.json(), "generic-reply", reply_schema) + p.end()

    return GenericPrepared(prompt, gen, build(make), format=NAME, grammar=True, grammar_lazy=False)
