"""Kimi K3 (backends/chat_format/families/kimi_k3.py): the tagged sections read as llama.cpp reads them — arguments
typed by the tool's schema, a reply cut short in any section — and the generation prompts of the real template.

The tool-call parser is exercised through ``reply_parser``: the real template renders tools with
``tojson(ensure_ascii=False)``, which llama.cpp's conformance cases cover once the renderer takes those arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import formats
from backends.chat_format.families.kimi_k3 import reply_parser

GEN = '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'
USER = {"role": "user", "content": "Hey there!"}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                                     "filters": {"type": "object"}, "tag": {"enum": ["a", "b"]}}}}}


def prepared(**request: Any) -> formats.Prepared:
    return formats.Prepared("", GEN, reply_parser(formats.Request(messages=[USER], **request)))


def argument(key: str, kind: str, value: str) -> str:
    return f'<|open|>argument key="{key}" type="{kind}"<|sep|>{value}<|close|>argument<|sep|>'


def test_arguments_are_text_or_json_as_the_schema_says():
    reply = ("Looking<|close|>think<|sep|><|open|>response<|sep|>On it.<|close|>response<|sep|><|open|>tools<|sep|>"
             '<|open|>call tool="search" index="0"<|sep|>'
             # the type attribute is not trusted: "42" stays text for a string, JSON for an integer
             + argument("query", "number", "42") + argument("limit", "string", "5")
             + argument("filters", "object", '{"lang": "en"}') + argument("tag", "string", "a")
             + "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>")
    parsed = prepared(tools=[SEARCH]).parse(reply)
    assert (parsed.reasoning, parsed.content) == ("Looking", "On it.")
    # a property without a declared type is read as text
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("search", {"query": "42", "limit": 5, "filters": {"lang": "en"}, "tag": "a"})]


def test_several_calls_in_one_section_even_without_parallel_calls():
    """llama.cpp's Kimi K3 parser takes one or more calls whatever parallel_tool_calls says."""
    call = '<|open|>call tool="search" index="{}"<|sep|>' + argument("query", "string", "{}") + "<|close|>call<|sep|>"
    reply = ("<|close|>think<|sep|><|open|>tools<|sep|>" + call.format(0, "x") + call.format(1, "y")
             + "<|close|>tools<|sep|><|close|>message<|sep|>")
    parsed = prepared(tools=[SEARCH], parallel_tool_calls=False).parse(reply)
    assert [json.loads(c.arguments)["query"] for c in parsed.tool_calls] == ["x", "y"]


@pytest.mark.parametrize("reply, reasoning, content", [
    ("I was still thinking", "I was still thinking", ""),
    ("Hmm<|open|>response<|sep|>Hi", "Hmm", "Hi"),  # the thinking's closer left out
    ("<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>message<|sep|>", "", "Hi"),
])
def test_a_reply_cut_short_or_loose_is_read_as_far_as_it_goes(reply, reasoning, content):
    parsed = prepared().parse(reply)
    assert (parsed.reasoning, parsed.content) == (reasoning, content)


def test_without_reasoning_extraction_the_thinking_is_content():
    parsed = prepared(reasoning_format="none").parse("Hmm<|close|>think<|sep|><|open|>response<|sep|>Hi")
    assert (parsed.reasoning, parsed.content) == ("", "Hmm" + "Hi")


def test_generation_prompts_of_the_real_template(llama_cpp_templates):
    template = formats.Template.of(llama_cpp_templates["Kimi-K3.jinja"])
    basic = formats.apply(template, formats.Request(messages=[USER]))
    assert basic.generation_prompt == GEN
    prefill = {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}
    content = formats.apply(template, formats.Request(messages=[USER, prefill], add_generation_prompt=False,
                                                      continue_final_message="content"))
    assert content.generation_prompt == GEN + "I'm thinking<|close|>think<|sep|><|open|>response<|sep|>Hello, "
    assert content.prompt.endswith(content.generation_prompt)
    parsed = content.parse("world!<|close|>response<|sep|><|close|>message<|sep|>")
    assert (parsed.reasoning, parsed.content) == ("I'm thinking", "Hello, world!")


def test_thinking_off_opens_the_response_and_the_answer_is_content(llama_cpp_templates):
    """The real template's switch is its ``thinking`` variable: with thinking off it opens the response, not the
    thinking, and the answer (and a call after it) is read as content."""
    template = formats.Template.of(llama_cpp_templates["Kimi-K3.jinja"])
    off = formats.apply(template, formats.Request(messages=[USER], tools=[SEARCH], enable_thinking=False))
    response_gen = '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>'
    assert off.generation_prompt == response_gen and off.prompt.endswith(response_gen)
    reply = ("Let me look.<|close|>response<|sep|><|open|>tools<|sep|>" + '<|open|>call tool="search" index="0"<|sep|>'
             + argument("query", "string", "kimi") + "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>")
    parsed = off.parse(reply)
    assert (parsed.reasoning, parsed.content) == ("", "Let me look.")
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [("search", {"query": "kimi"})]
    # the template's own kwarg wins over the request's switch, either way
    on = formats.apply(template, formats.Request(messages=[USER], enable_thinking=False,
                                                 extra_context={"thinking": True}))
    assert on.generation_prompt == GEN
    kwarg_off = formats.apply(template, formats.Request(messages=[USER], extra_context={"thinking": False}))
    assert kwarg_off.generation_prompt == response_gen
    assert (kwarg_off.parse("Hi!").reasoning, kwarg_off.parse("Hi!").content) == ("", "Hi!")


def test_thinking_off_continues_the_response(llama_cpp_templates):
    template = formats.Template.of(llama_cpp_templates["Kimi-K3.jinja"])
    prefill = {"role": "assistant", "content": "Hello, "}
    content = formats.apply(template, formats.Request(messages=[USER, prefill], enable_thinking=False,
                                                      add_generation_prompt=False, continue_final_message="content"))
    assert content.generation_prompt == '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>Hello, '
    assert content.prompt.endswith(content.generation_prompt)
    parsed = content.parse("world!<|close|>response<|sep|><|close|>message<|sep|>")
    assert (parsed.reasoning, parsed.content) == ("", "Hello, world!")
