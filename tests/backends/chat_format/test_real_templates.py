"""Every real chat template llama.cpp carries, rendered through QuantDesk's renderer as the engines render it
(``capabilities.patch_source``, ``capabilities.prepare``, then ``template.render``), held to two references:

- transformers' own Jinja environment (``render_jinja_template``, what ``apply_chat_template`` runs): the same text
  for the same messages, tools and variables, wherever transformers renders the template;
- llama.cpp's own prompts for every case of its chat tests (``data/llama_cpp_chat_cases.json``, made by
  ``extract_llama_cpp_cases.py`` from the same llama-cpp-python version): the same text for the same request.

The templates come from llama-cpp-python's source archive (tests/fixtures/llama_cpp_sources.py); without it these
tests skip, saying how to get it.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from backends.chat_format import capabilities, template
from tests.fixtures.llama_cpp_sources import VERSION, missing_reason, sources_or_none

SOURCES = sources_or_none()
TEMPLATES = SOURCES.templates if SOURCES else {}


def names(tools: bool | None = None) -> list[Any]:
    """The archive's template names (those that read ``tools``, or those that do not), or one skip without it."""
    if not TEMPLATES:
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing_reason()))]
    return [n for n in sorted(TEMPLATES) if tools is None or template.declares_tools(TEMPLATES[n]) == tools]


DATES = {"datetime": "Nov 26 2026", "date_string": "26 Nov 2026"}  # llama.cpp's date variables, fixed
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Météo d'une ville",  # non-ASCII: tojson(ensure_ascii=…) shows
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
ASK = {"role": "user", "content": "What is the capital of France?"}
ANSWER = {"role": "assistant", "content": "Paris."}
AGAIN = {"role": "user", "content": "And of Japan?"}
THOUGHT = {"role": "assistant", "content": "Paris.", "reasoning_content": "France's capital is Paris."}
WEATHER = {"role": "user", "content": "What are the weather and the time in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [  # ids of 9 letters and digits: Mistral's rule
    {"id": "call00001", "type": "function", "function": {"name": "get_weather",
                                                         "arguments": {"city": "Paris", "unit": "c"}}}]}
RESULT = {"role": "tool", "tool_call_id": "call00001", "content": '{"temperature": 22, "sky": "ensoleillé"}'}
TWO_CALLS = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
    {"id": "call00002", "type": "function", "function": {"name": "get_time", "arguments": {"city": "Paris"}}}]}
SECOND_RESULT = {"role": "tool", "tool_call_id": "call00002", "content": "14:05"}

WITHOUT_TOOLS = {"system and user": [SYSTEM, ASK], "three turns": [ASK, ANSWER, AGAIN],
                 "earlier reasoning": [ASK, THOUGHT, AGAIN]}
WITH_TOOLS = {"system and user": [SYSTEM, WEATHER], "a call and its result": [WEATHER, CALL, RESULT],
              "two parallel calls": [WEATHER, TWO_CALLS, RESULT, SECOND_RESULT]}

# Where transformers fails and QuantDesk renders (as llama.cpp's engine does): template → transformers' error.
TRANSFORMERS_FAILS_WITHOUT_TOOLS = {
    # tools=None, looped over unguarded: llama.cpp gives no tools at all, which loops as nothing
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "'NoneType' object is not iterable",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "'NoneType' object is not iterable",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "'NoneType' object is not iterable",
    # 'text' + functions, a variable nobody gives: llama.cpp adds an undefined value to text as ""
    "fireworks-ai-llama-3-firefunction-v2.jinja": "'functions' is undefined",
}
TRANSFORMERS_FAILS_WITH_TOOLS = {
    # Command R+ reads tool.description at the top (Cohere's own tool shape); llama.cpp adds the undefined as ""
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": "'dict object' has no attribute 'description'",
    # a namespace list of call ids the template appends to: llama.cpp's engine lets a template change its own lists
    "Kimi-K2-Instruct.jinja": "access to attribute 'append' of 'list' object is unsafe",
    "Kimi-K2-Thinking.jinja": "access to attribute 'append' of 'list' object is unsafe",
    # tools|map(attribute='function')|tojson: Jinja's map gives a generator, llama.cpp's a list
    "llama-cpp-deepseek-r1.jinja": "Object of type generator is not JSON serializable",
}
# Where both fail, on purpose: the template refuses the conversation. (template, conversation) → the reason.
BOTH_FAIL = {
    (name, "two parallel calls"): "This model only supports single tool-calls at once!"
    for name in ("meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
                 "meta-llama-Llama-3.3-70B-Instruct.jinja")
}
# Where both render and the texts differ, on purpose: template → why.
DIFFERS_FROM_TRANSFORMERS = {
    # "Use the function '"|safe + description + "'\n"|safe + tool|tojson: transformers' |safe makes Markup, and
    # Markup + text HTML-escapes the text (every quote of the tool's JSON becomes &#34;); QuantDesk's |safe keeps the
    # text as it is, as llama.cpp does (and the prompt the model reads is JSON, not HTML)
    "meetkai-functionary-medium-v3.1.jinja": "html",
}


def transformers_render(source: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        add_generation_prompt: bool, variables: dict[str, Any]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], tools=tools, chat_template=source,
                                        add_generation_prompt=add_generation_prompt, bos_token="<s>",
                                        eos_token="</s>", **variables)
    return rendered[0]


def renders_of(name: str, conversations: dict[str, list[dict[str, Any]]], tools: list[dict[str, Any]] | None):
    """Each conversation, with and without the generation prompt, with enable_thinking unset, true and false where
    the template reads it: (what was rendered, QuantDesk's text or error, transformers' text or error)."""
    source = capabilities.patch_source(TEMPLATES[name])
    thinking = (None, True, False) if "enable_thinking" in source else (None,)
    for (label, conversation), add, enable in itertools.product(conversations.items(), (True, False), thinking):
        variables = dict(DATES) if enable is None else {**DATES, "enable_thinking": enable}
        messages = capabilities.prepare(source, conversation)
        what = f"{label}, generation prompt {add}, enable_thinking {enable}"
        try:
            ours: str | Exception = template.render(source, messages, bos_token="<s>", eos_token="</s>",
                                                    add_generation_prompt=add, tools=tools, variables=variables)
        except template.TemplateError as exc:
            ours = exc
        try:
            theirs: str | Exception = transformers_render(source, messages, tools, add, variables)
        except Exception as exc:  # noqa: BLE001 - whatever transformers raises is its answer
            theirs = exc
        yield label, what, ours, theirs


def check(name: str, conversations: dict[str, list[dict[str, Any]]], tools: list[dict[str, Any]] | None,
          transformers_fails: dict[str, str]) -> None:
    problems, transformers_failed = [], False
    for label, what, ours, theirs in renders_of(name, conversations, tools):
        if isinstance(ours, Exception):
            refusal = BOTH_FAIL.get((name, label))
            if not (refusal and isinstance(theirs, Exception) and refusal in str(ours) and refusal in str(theirs)):
                problems.append(f"{what}: QuantDesk failed ({ours}); transformers: {theirs}")
        elif isinstance(theirs, Exception):
            transformers_failed = True
            if transformers_fails.get(name, "\0") not in str(theirs):
                problems.append(f"{what}: transformers failed unexpectedly ({type(theirs).__name__}: {theirs})")
        elif ours != theirs:
            if DIFFERS_FROM_TRANSFORMERS.get(name) == "html":
                import html

                if html.unescape(theirs) == ours:
                    continue
            problems.append(f"{what}: the texts differ\n--- QuantDesk\n{ours}\n--- transformers\n{theirs}")
    if name in transformers_fails and not transformers_failed:
        problems.append(f"transformers renders it now: drop it from the list ({transformers_fails[name]})")
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("name", names())
def test_every_template_renders_without_tools_as_transformers_does(name):
    check(name, WITHOUT_TOOLS, None, TRANSFORMERS_FAILS_WITHOUT_TOOLS)


@pytest.mark.parametrize("name", names(tools=True))
def test_every_template_that_shows_tools_renders_them_as_transformers_does(name):
    check(name, WITH_TOOLS, TOOLS, TRANSFORMERS_FAILS_WITH_TOOLS)


def test_the_archive_is_the_installed_version(llama_cpp_sources):
    assert llama_cpp_sources.version == VERSION, (
        f"the archive is llama-cpp-python {llama_cpp_sources.version}, the installed one is {VERSION}")
    assert len(llama_cpp_sources.templates) >= 70


# llama.cpp's own prompt for each request of its chat tests is the conformance suite's to check
# (test_llama_cpp_conformance.py renders each through formats.apply, as the engines do).


# --- templates that never show the model its tools


@pytest.mark.parametrize("name", names(tools=False))
def test_a_template_that_never_reads_tools_renders_no_tool_list(name):
    """llama.cpp adds no tool list where a template does not render ``tools`` (common_chat_templates_apply_jinja
    only warns: "Template supports tool calls but does not natively describe tools"; no code path gives a template
    other tools than the request's): the prompt with tools is the prompt without them."""
    source = capabilities.patch_source(TEMPLATES[name])
    messages = capabilities.prepare(source, [SYSTEM, WEATHER])
    with_tools = template.render(source, messages, tools=TOOLS, variables=DATES)
    assert with_tools == template.render(source, messages, variables=DATES)
    assert "get_weather" not in with_tools
