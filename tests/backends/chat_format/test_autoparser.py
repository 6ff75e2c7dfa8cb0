"""The differential autoparser (backends/chat_format/analysis.py, autoparser.py) against llama.cpp's own tests of it
(tests/test-chat-auto-parser.cpp in the llama.cpp that llama-cpp-python vendors: the diff helpers, the analysis of
real templates, the turn markers of every template it reads) and against what llama.cpp itself prepared for each
case of its chat tests whose template takes the autoparser's path (the prompt, the thinking tags, the tokens to
keep, the grammar's flags and triggers, and the reply read to the character)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.chat_format import autoparser, builder, formats
from backends.chat_format.analysis import (
    CallIdPosition,
    ContentMode,
    ReasoningMode,
    TemplateParams,
    ToolFormat,
    after_common_suffix,
    analyze_template,
    calculate_diff_split,
    compare_variants,
    segmentize_markers,
    until_common_prefix,
)
from tests.backends.chat_format import llama_cpp_cases

# --- the helpers (test-chat-auto-parser.cpp: test_marker_separation, test_calculate_diff_split_*, test_until_…)


@pytest.mark.parametrize(("text", "expected"), [
    ("pre_marker[marker]post_marker", [("TEXT", "pre_marker"), ("MARKER", "[marker]"), ("TEXT", "post_marker")]),
    ("pre_marker<marker>post_marker", [("TEXT", "pre_marker"), ("MARKER", "<marker>"), ("TEXT", "post_marker")]),
    ("<hello>world</hello>", [("MARKER", "<hello>"), ("TEXT", "world"), ("MARKER", "</hello>")]),
    ("<hello>[hello]<world>[world]", [("MARKER", "<hello>"), ("MARKER", "[hello]"), ("MARKER", "<world>"),
                                      ("MARKER", "[world]")]),
    ("im<blue>daba<dee>da[hey]", [("TEXT", "im"), ("MARKER", "<blue>"), ("TEXT", "daba"), ("MARKER", "<dee>"),
                                  ("TEXT", "da"), ("MARKER", "[hey]")]),
])
def test_segmentize_markers(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(s.type.value, s.value) for s in segmentize_markers(text)] == expected


_COHERE_PREFIX = "SOME_PREFIX"
_COHERE_SUFFIX = "|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
_COHERE_RIGHT = ('<|START_THINKING|><|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": '
                 '"test_function_name", "parameters": {"param1": "value1", "param2": "value2"}}\n]<|END_ACTION')
_CHATML_LEFT = "<|im_start|>user\nHello<|im_end|>\n"


@pytest.mark.parametrize(("left", "right", "prefix", "left_part", "right_part", "suffix"), [
    ("hello world", "hello test", "hello ", "world", "test", ""),
    ("abc", "xyz", "", "abc", "xyz", ""),
    ("prefixA suffix", "prefixB suffix", "prefix", "A", "B", " suffix"),
    ("hello", "hello", "hello", "", "", ""),
    ("", "", "", "", "", ""),
    ("a", "a", "a", "", "", ""),
    ("<row><row><row><your><boat><gently>", "<row><row><row><your><boat><gently>",
     "<row><row><row><your><boat><gently>", "", "", ""),
    ("abcdef", "abcxyz", "abc", "def", "xyz", ""),
    ("same", "sameagain", "same", "", "again", ""),
    ("test", "testing", "test", "", "ing", ""),
    ("123end", "456end", "", "123", "456", "end"),
    ("start", "end", "", "start", "end", ""),
    ("abcsuffix", "xyzsuffix", "", "abc", "xyz", "suffix"),
    ("helloXworld", "helloYworld", "hello", "X", "Y", "world"),
    ("ABCmiddleXYZ", "ABCdifferentXYZ", "ABC", "middle", "different", "XYZ"),
    ("startAend", "startBend", "start", "A", "B", "end"),
    ("aa", "ab", "a", "a", "b", ""),  # the prefix and the suffix would overlap
    ("", "hello", "", "", "hello", ""),
    ("hello", "", "", "hello", "", ""),
    ("a", "", "", "a", "", ""),
    ("", "a", "", "", "a", ""),
    ("left", "right", "", "lef", "righ", "t"),
    ("123", "456", "", "123", "456", ""),
    ("a", "b", "", "a", "b", ""),
    ("a", "ab", "a", "", "b", ""),
    ("ab", "a", "a", "b", "", ""),
    ("testing", "test", "test", "ing", "", ""),
    ("Xtest", "Ytest", "", "X", "Y", "test"),
    ("testX", "testY", "test", "X", "Y", ""),
    ("abc", "cba", "", "abc", "cba", ""),
    ("prefix<tag>", "prefix</tag>suffix", "prefix", "<tag>", "</tag>suffix", ""),
    ("prefix<div>content</div>", "prefix<div>different</div>", "prefix<div>", "cont", "differ", "ent</div>"),
    ("<tag>left</tag>", "<tag>righ</tag>", "<tag>", "left", "righ", "</tag>"),
    ("PREFIX</think>Sure", "PREFIX<think>Lemme think</think>Sure", "PREFIX", "", "<think>Lemme think",
     "</think>Sure"),
    (_CHATML_LEFT, _CHATML_LEFT + "<|im_start|>assistant\n<think>\n", _CHATML_LEFT, "",
     "<|im_start|>assistant\n<think>\n", ""),
])
def test_calculate_diff_split(left: str, right: str, prefix: str, left_part: str, right_part: str,
                              suffix: str) -> None:
    result = calculate_diff_split(left, right)
    assert (result.prefix, result.left, result.right, result.suffix) == (prefix, left_part, right_part, suffix)


def test_calculate_diff_split_keeps_markers_whole() -> None:
    result = calculate_diff_split("Hello <world>", "Hello test")
    assert (result.prefix, result.right, result.suffix) == ("Hello ", "test", "")
    assert "<world>" in result.left
    result = calculate_diff_split("test [array]", "test other")
    assert (result.prefix, result.right, result.suffix) == ("test ", "other", "")
    assert "[array]" in result.left
    # the |> that closes <|END_RESPONSE and <|END_ACTION belongs to them, not to the shared suffix
    result = calculate_diff_split(_COHERE_PREFIX + "<|START_RESPONSE|>Let me help you.<|END_RESPONSE" + _COHERE_SUFFIX,
                                  _COHERE_PREFIX + _COHERE_RIGHT + _COHERE_SUFFIX)
    assert result.prefix == _COHERE_PREFIX
    assert result.left == "<|START_RESPONSE|>Let me help you.<|END_RESPONSE|>"
    assert "<|END_ACTION|>" in result.right
    assert result.suffix == "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
    # a generation prompt after a long conversation stays whole
    common = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nSearch for files<|im_end|>\n"
              "<|im_start|>assistant\n<think>\nLet me search.\n</think>\n\n<tool_call>\n<function=search>\n</function>"
              "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nNo files found\n</tool_response>"
              "<|im_end|>\n")
    result = calculate_diff_split(common, common + "<|im_start|>assistant\n<think>\n")
    assert (result.left, result.right) == ("", "<|im_start|>assistant\n<think>\n")


@pytest.mark.parametrize(("full", "left", "right", "expected"), [
    ("<function name=foo><arg name=bar>", "<arg name=bar>", "<arg name=baz>", "<function name=foo>"),
    ("prefix<test>suffix", "<test>different", "<test>other", "prefix"),
    ("<common>rest", "<common>left", "<common>right", ""),
    ("something", "left", "right", ""),
    ("test", "", "right", ""),
    ("abcXYZ<shared_prefix>rest", "<shared_prefix>left", "<shared_prefix>right", "abcXYZ"),
])
def test_until_common_prefix(full: str, left: str, right: str, expected: str) -> None:
    assert until_common_prefix(full, left, right) == expected


@pytest.mark.parametrize(("full", "left", "right", "expected"), [
    ("<function name=foo><arg name=bar>100</arg></function>", "<arg name=bar>100</arg>", "<arg name=baz>535</arg>",
     "</function>"),
    ("rest<common>", "left<common>", "right<common>", ""),
    ("test", "left", "", ""),
    ("<outer><inner>value</inner></outer>", "<inner>value</inner>", "<inner>different</inner>", "</outer>"),
    ("prefix<shared>rest</shared>", "prefix<shared>left</shared>", "prefix<shared>right</shared>", ""),
    ("<tag>content</tag><extra>", "<tag>value</tag>", "<tag>other</tag>", "<extra>"),
    ("start<middle>end</middle>", "prefix<middle>left</middle>", "prefix<middle>right</middle>", ""),
])
def test_after_common_suffix(full: str, left: str, right: str, expected: str) -> None:
    assert after_common_suffix(full, left, right) == expected


# --- compare_variants (test_compare_variants_*)


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def modify(p: TemplateParams) -> None:
        target: Any = p
        for key in path[:-1]:
            target = getattr(target, key) if isinstance(key, str) and hasattr(target, key) else target[key]
        target[path[-1]] = value
    return modify


def test_compare_variants_renders_both_and_splits_them() -> None:
    template = formats.Template("{% for message in messages %}{{ message['role'] }}:{{ message['content'] }}"
                                "{% endfor %}")
    result = compare_variants(template, TemplateParams([{"role": "user", "content": "A"}]),
                              _set(("messages", 0, "content"), "B"))
    assert result is not None and (result.diff.left, result.diff.right) == ("A", "B")

    def both(p: TemplateParams) -> None:
        p.messages[0]["content"] = "B"
        p.messages[0]["role"] = "newuser"
    result = compare_variants(template, TemplateParams([{"role": "user", "content": "A"}]), both)
    assert result is not None and (result.diff.left, result.diff.right) == ("user:A", "newuser:B")

    tools = formats.Template("{% for tool in tools %}{{ tool['name'] }}{% endfor %}")
    result = compare_variants(tools, TemplateParams([], tools=[{"name": "foo"}]), _set(("tools", 0, "name"), "bar"))
    assert result is not None and (result.diff.left, result.diff.right) == ("foo", "bar")


def test_compare_variants_without_change_and_with_a_failing_template() -> None:
    echo = formats.Template("{{ messages[0]['content'] }}")
    result = compare_variants(echo, TemplateParams([{"role": "user", "content": "Hello"}]), lambda p: None)
    assert result is not None
    assert (result.diff.prefix, result.diff.left, result.diff.right, result.diff.suffix) == ("Hello", "", "", "")
    failing = formats.Template("{{ messages.cahoot()[0]['nonexistent_field'] }}")
    assert compare_variants(failing, TemplateParams([{"role": "user", "content": "Hello"}]),
                            _set(("messages", 0, "content"), "World")) is None


# --- real templates (test_seed_oss_*, test_nemotron_*, test_cohere_*, test_smollm3_*, test_laguna_*)

_TOOLS = [{"type": "function", "function": {
    "name": "test_function_name", "description": "A test function for debugging",
    "parameters": {"type": "object", "properties": {"param1": {"type": "string", "description": "First parameter"},
                                                    "param2": {"type": "string", "description": "Second parameter"}},
                   "required": ["param1", "param2"]}}}]
_USER = {"role": "user", "content": "Hello, please help me."}


def _call(args: dict[str, Any], call_id: str = "call_001") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "test_function_name", "arguments": args}}


def _template(templates: dict[str, str], name: str) -> formats.Template:
    return formats.Template.of(templates[name])


def test_seed_oss_tool_call_diffs(llama_cpp_templates: dict[str, str]) -> None:
    seed = _template(llama_cpp_templates, "ByteDance-Seed-OSS.jinja")
    one_call = {"role": "assistant", "content": None, "tool_calls": [_call({"param1": "value1", "param2": "value2"})]}
    no_call = TemplateParams([_USER, {"role": "assistant", "content": "Let me help you."}], tools=_TOOLS)
    result = compare_variants(seed, no_call, lambda p: setattr(p, "messages", [_USER, one_call]))
    assert result is not None
    diff = result.diff
    assert all(word in diff.prefix for word in ("system", "user", "assistant"))
    assert diff.left == "Let me help you."
    for part in ("<seed:tool_call>", "<function=test_function_name>", "<parameter=param1>", "<parameter=param2>",
                 "value1", "value2", "</seed:tool_call>"):
        assert part in diff.right
    assert diff.suffix == "<seed:eos>"

    two_calls = {"role": "assistant", "content": None, "tool_calls": [
        _call({"param1": "value1", "param2": "value2"}), _call({"param1": "value3", "param2": "value4"}, "call_002")]}
    result = compare_variants(seed, TemplateParams([_USER, one_call], tools=_TOOLS),
                              lambda p: setattr(p, "messages", [_USER, two_calls]))
    assert result is not None
    assert result.diff.left == ""
    assert all(part in result.diff.prefix for part in ("<seed:tool_call>", "value1", "value2", "</seed:tool_call>"))
    assert all(part in result.diff.right for part in ("<seed:tool_call>", "value3", "value4", "</seed:tool_call>"))
    assert result.diff.suffix.endswith("<seed:eos>")

    with_reasoning = {**one_call, "reasoning_content": "I need to call the tool first."}
    result = compare_variants(seed, TemplateParams([_USER, one_call], tools=_TOOLS),
                              lambda p: setattr(p, "messages", [_USER, with_reasoning]))
    assert result is not None
    assert result.diff.left == ""
    assert all(part in result.diff.right for part in ("<seed:think>", "I need to call the tool first.",
                                                      "</seed:think>"))
    assert "assistant" in result.diff.prefix
    assert all(part in result.diff.suffix for part in ("<seed:tool_call>", "test_function_name", "<seed:eos>"))


def test_nemotron_3_nano_analysis(llama_cpp_templates: dict[str, str]) -> None:
    a = analyze_template(_template(llama_cpp_templates, "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"))
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>\n",
                                                                      "\n</think>\n")
    assert (a.content.mode, a.content.start, a.content.end) == (ContentMode.PLAIN, "", "")
    f, fn, args = a.tools.format, a.tools.function, a.tools.arguments
    assert f.mode == ToolFormat.TAG_WITH_TAGGED
    assert (f.section_start, f.section_end, f.per_call_start, f.per_call_end) == ("", "", "<tool_call>\n",
                                                                                  "</tool_call>")
    assert (fn.name_prefix, fn.name_suffix, fn.close) == ("<function=", ">\n", "</function>\n")
    assert (args.name_prefix, args.name_suffix, args.value_suffix) == ("<parameter=", ">\n", "\n</parameter>\n")
    assert a.caps.supports_tools and a.caps.supports_parallel_tool_calls


def test_command_r7b_analysis(llama_cpp_templates: dict[str, str]) -> None:
    a = analyze_template(_template(llama_cpp_templates, "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"))
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TOOLS_ONLY, "<|START_THINKING|>",
                                                                      "<|END_THINKING|>")
    assert (a.content.mode, a.content.start, a.content.end) == (ContentMode.ALWAYS_WRAPPED, "<|START_RESPONSE|>",
                                                                "<|END_RESPONSE|>")
    f, fn, args = a.tools.format, a.tools.function, a.tools.arguments
    assert f.mode == ToolFormat.JSON_NATIVE
    assert (f.section_start, f.section_end, f.per_call_start, f.per_call_end) == ("<|START_ACTION|>",
                                                                                  "<|END_ACTION|>", "", "")
    assert (fn.name_prefix, fn.name_suffix, fn.close) == ("", "", "")
    assert (args.start, args.end, args.name_prefix, args.name_suffix, args.value_prefix, args.value_suffix,
            args.separator) == ("",) * 7
    # not an OpenAI call id: one the model makes up
    assert (f.name_field, f.args_field, f.id_field, f.gen_id_field) == ("tool_name", "parameters", "",
                                                                        "tool_call_id")
    assert f.tools_array_wrapped and not a.content.requires_nonnull_content
    assert a.caps.supports_tools and a.caps.supports_parallel_tool_calls


def test_smollm3_reasoning_with_a_system_message_that_changes(llama_cpp_templates: dict[str, str]) -> None:
    # the template rewrites its system message when enable_thinking flips: the generation prompts' tails tell
    a = analyze_template(_template(llama_cpp_templates, "HuggingFaceTB-SmolLM3-3B.jinja"))
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>", "</think>")
    assert (a.content.mode, a.content.start, a.content.end) == (ContentMode.PLAIN, "", "")
    assert {"<think>", "</think>"} <= set(a.preserved_tokens)


@pytest.mark.parametrize("name", ["poolside-Laguna-XS-2.1.jinja", "poolside-Laguna-S-2.1.jinja",
                                  "poolside-Laguna-XS.2.jinja"])
def test_laguna_analysis(llama_cpp_templates: dict[str, str], name: str) -> None:
    a = analyze_template(_template(llama_cpp_templates, name))
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>", "</think>")
    assert a.tools.arguments.value_suffix == "</arg_value>"
    assert "</assistant>" in a.additional_stops


_BAILING_V3 = r"""
{# Bailing V3 chat template #}
{%- if tools %}{{ tools | tojson }}{%- endif %}
{%- for message in messages %}
    {%- if message.role == "user" %}
        {{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}
    {%- elif message.role == "assistant" %}
        {{- '<role>ASSISTANT</role>' }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- set tc = tool_call.function %}
                {{- '<tool_call>' + tc.name }}
                {%- for k, v in tc.arguments.items() %}
                    {{- '<arg_key>' + k + '</arg_key>' }}
                    {{- '\n<arg_value>' + v + '</arg_value>' }}
                {%- endfor %}
                {{- '\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|role_end|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<role>ASSISTANT</role>' }}{%- endif %}
"""


def test_bailing_v3_reads_arguments_with_whitespace_between_tags() -> None:
    a = analyze_template(formats.Template(_BAILING_V3))
    assert a.tools.arguments.value_suffix == "</arg_value>"
    assert a.tools.arguments.tolerate_intertag_whitespace
    tools = [{"type": "function", "function": {"name": "test_function_name", "parameters": {
        "type": "object", "properties": {"param1": {"type": "string"}, "param2": {"type": "string"}}}}}]
    request = formats.Request(messages=[], tools=tools, reasoning_format="none")
    grammar = builder.build(lambda p: autoparser.build_parser(p, a, request, ""))
    reply = ("<tool_call>test_function_name\n<arg_key>param1</arg_key>\n<arg_value>value1</arg_value>"
             "<arg_key>param2</arg_key>\n<arg_value>value2</arg_value>\n</tool_call>")
    assert grammar.parse(reply)[0].success
    call = builder.parse(grammar, reply, partial=False).tool_calls[0]
    assert (call.name, json.loads(call.arguments)) == ("test_function_name", {"param1": "value1", "param2": "value2"})


def test_call_ids_between_the_name_and_the_arguments(llama_cpp_templates: dict[str, str]) -> None:
    a = analyze_template(_template(llama_cpp_templates, "Mistral-Small-3.2-24B-Instruct-2506.jinja"))
    assert a.tools.format.mode == ToolFormat.TAG_WITH_JSON
    # [TOOL_CALLS] opens each of several calls: a per-call marker
    assert (a.tools.format.section_start, a.tools.format.per_call_start) == ("", "[TOOL_CALLS]")
    assert (a.tools.call_id.pos, a.tools.call_id.prefix, a.tools.call_id.suffix) == (
        CallIdPosition.BETWEEN_FUNC_AND_ARGS, "[CALL_ID]", "[ARGS]")


# --- the turn markers of every template the autoparser reads (test_role_markers_all_templates)

ROLE_MARKERS = [
    ("Bielik-11B-v3.0-Instruct.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("HuggingFaceTB-SmolLM3-3B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("MiMo-VL.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen3.5-4B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen3-Coder.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-Qwen3-0.6B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Qwen-QwQ-32B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("StepFun3.5-Flash.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("deepseek-ai-DeepSeek-V3.1.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("llama-cpp-deepseek-r1.jinja", "<｜User｜>", "<｜Assistant｜>"),
    ("meetkai-functionary-medium-v3.1.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("meta-llama-Llama-3.3-70B-Instruct.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("fireworks-ai-llama-3-firefunction-v2.jinja", "<|start_header_id|>user<|end_header_id|>",
     "<|start_header_id|>assistant<|end_header_id|>"),
    ("microsoft-Phi-3.5-mini-instruct.jinja", "<|user|>", "<|assistant|>"),
    ("GLM-4.6.jinja", "<|user|>", "<|assistant|>"),
    ("unsloth-Apriel-1.5.jinja", "<|user|>", "<|assistant|>"),
    ("GLM-4.7-Flash.jinja", "<|user|>", "<|assistant|>"),
    ("google-gemma-2-2b-it.jinja", "<start_of_turn>user", "<start_of_turn>model"),
    ("ibm-granite-granite-3.3-2B-Instruct.jinja", "<|start_of_role|>user<|end_of_role|>",
     "<|start_of_role|>assistant<|end_of_role|>"),
    ("ibm-granite-granite-4.0.jinja", "<|start_of_role|>user<|end_of_role|>",
     "<|start_of_role|>assistant<|end_of_role|>"),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
     "<|START_RESPONSE|>"),
    ("CohereForAI-c4ai-command-r-plus-tool_use.jinja", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
    ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "[INST]", ""),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "[INST]", ""),
    ("Apertus-8B-Instruct.jinja", "<|user_start|>", "<|assistant_start|>"),
    ("Apriel-1.6-15b-Thinker-fixed.jinja", "<|begin_user|>", "<|begin_assistant|>"),
    ("ByteDance-Seed-OSS.jinja", "<seed:bos>user", "<seed:bos>assistant"),
    ("GigaChat3.1-10B-A1.8B.jinja", "user<|role_sep|>", "assistant<|role_sep|>"),
    ("MiniMax-M2.jinja", "]~b]user", "]~b]ai"),
    ("tencent-Hy3.jinja", "<｜hy_User:opensource｜>", "<｜hy_Assistant:opensource｜>"),
    ("NVIDIA-Nemotron-Nano-v2.jinja", "<SPECIAL_11>User", "<SPECIAL_11>Assistant"),
    ("Reka-Edge.jinja", "human:", "assistant:"),
    ("llama-cpp-rwkv-world.jinja", "User:", "Assistant:"),
    ("upstage-Solar-Open-100B.jinja", "<|begin|>user<|content|>", "<|begin|>assistant"),
]


@pytest.mark.parametrize(("name", "user_start", "assistant_start"), ROLE_MARKERS)
def test_turn_markers(llama_cpp_templates: dict[str, str], name: str, user_start: str, assistant_start: str) -> None:
    a = analyze_template(_template(llama_cpp_templates, name))
    assert (a.user_start, a.assistant_start) == (user_start, assistant_start)


# --- what llama.cpp prepared for each case of its chat tests that the autoparser reads

_TRIGGER_TYPES = {0: "token", 1: "word", 2: "pattern", 3: "pattern_full"}


def _autoparser_cases() -> list[Any]:
    from tests.fixtures.llama_cpp_sources import find_sdist, missing_reason

    sdist = find_sdist()
    if sdist is None:  # one skip that says why, not pytest's "got empty parameter set"
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing_reason()))]
    templates = llama_cpp_cases.templates_from_sdist(sdist)
    out = []
    for case in llama_cpp_cases.cases():
        if formats.family(formats.Template.of(templates[case["template"]]).source):
            continue
        out.append(pytest.param(case, id=case["id"]))
    return out


@pytest.mark.parametrize("case", _autoparser_cases())
def test_prepared_as_llama_cpp_prepared_it(case: dict[str, Any], llama_cpp_templates: dict[str, str]) -> None:
    prepared = formats.apply(formats.Template.of(llama_cpp_templates[case["template"]]),
                             llama_cpp_cases.request(case))
    want = case["llama_cpp"]
    assert llama_cpp_cases.without_dates(prepared.prompt) == llama_cpp_cases.without_dates(want["prompt"])
    assert prepared.generation_prompt == want["generation_prompt"]
    assert (prepared.supports_thinking, prepared.thinking_start_tag, list(prepared.thinking_end_tags)) == (
        want["supports_thinking"], want["thinking_start_tag"], want["thinking_end_tags"])
    assert list(prepared.preserved_tokens) == want["preserved_tokens"]
    assert list(prepared.additional_stops) == want["additional_stops"]
    assert (prepared.grammar, prepared.grammar_lazy) == (want["has_grammar"], want["grammar_lazy"])
    assert list(prepared.grammar_triggers) == [(_TRIGGER_TYPES[t["type"]], t["value"])
                                               for t in want["grammar_triggers"]]
    # the reply read to the character as llama.cpp's own parser read it (test-chat compares with whitespace stripped)
    if want["parsed"] is None:
        with pytest.raises(ValueError):
            prepared.parse(case["input"], partial=case["is_partial"])
        return
    read = prepared.parse(case["input"], partial=case["is_partial"])
    assert {"content": read.content, "reasoning_content": read.reasoning,
            "tool_calls": [{"name": c.name, "arguments": c.arguments, "id": c.id} for c in read.tool_calls]} == \
        want["parsed"]


def test_analysis_is_made_once_per_template(llama_cpp_templates: dict[str, str]) -> None:
    template = _template(llama_cpp_templates, "Qwen-QwQ-32B.jinja")
    assert analyze_template(template) is analyze_template(formats.Template.of(template.source))



def test_a_tool_call_that_is_no_json_fails_as_llama_cpp_fails() -> None:
    # the call reads as JSON (a quoted name after a colon), but the template prints the arguments as Python's repr
    template = formats.Template(
        "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{\"name\": \"{{ c.function.name }}"
        "\", \"arguments\": {{ c.function.arguments }}}</call>{% endfor %}{% else %}{{ m.content }}{% endif %}"
        "{% endfor %}")
    request = formats.Request(messages=[{"role": "user", "content": "hi"}], tools=_TOOLS)
    with pytest.raises(ValueError, match="Unable to generate parser for this template"):
        formats.apply(template, request)


# --- the reader (Prepared.reader): what models write beyond what the template renders


def _qwen3(llama_cpp_templates: dict[str, str], enable_thinking: bool) -> formats.Prepared:
    return formats.apply(formats.Template.of(llama_cpp_templates["Qwen-Qwen3-0.6B.jinja"]),
                         formats.Request(messages=[{"role": "user", "content": "Hi"}], enable_thinking=enable_thinking))


def test_thinking_closed_without_being_opened_is_held_back_until_its_close(llama_cpp_templates: dict[str, str]) -> None:
    prepared = _qwen3(llama_cpp_templates, enable_thinking=True)
    reply = "The user says hi.</think>\n\nHello!"
    for cut in range(1, reply.index("</think>")):  # not yet placeable: neither content nor reasoning
        so_far = prepared.parse(reply[:cut], partial=True)
        assert (so_far.content, so_far.reasoning) == ("", ""), reply[:cut]
    whole = prepared.parse(reply)
    assert (whole.reasoning, whole.content.strip()) == ("The user says hi.", "Hello!")
    # a reply that never closes thinking is content once it ends, as the grammar's parser reads it
    assert prepared.parse("Hello!").content == "Hello!"


@pytest.mark.parametrize("name", ["ibm-granite-granite-3.3-2B-Instruct.jinja", "HuggingFaceTB-SmolLM3-3B.jinja"])
def test_a_template_that_does_not_split_its_turns_at_the_close_holds_nothing_back(
        llama_cpp_templates: dict[str, str], name: str) -> None:
    """Only a template that itself reads an assistant's turn up to ``</think>`` as its thinking (Qwen3's, GLM's
    ``content.split('</think>')``) has its replies held back for a close that may come: the others' answers stream
    as they come."""
    prepared = formats.apply(formats.Template.of(llama_cpp_templates[name]),
                             formats.Request(messages=[{"role": "user", "content": "Hi"}]))
    assert prepared.reader is None
    assert prepared.parse("Hello the", partial=True).content == "Hello the"


def test_thinking_switched_off_keeps_a_stray_close_as_content(llama_cpp_templates: dict[str, str]) -> None:
    prepared = _qwen3(llama_cpp_templates, enable_thinking=False)
    assert prepared.reader is None  # the generation prompt closed the block: the grammar's parser reads the reply
    whole = prepared.parse("Hm.</think>Hello!")
    assert (whole.reasoning, whole.content) == ("", "Hm.</think>Hello!")


def test_glm_reads_a_value_that_is_no_string_as_json_and_text_after_the_calls_as_content(
        llama_cpp_templates: dict[str, str]) -> None:
    tools = [{"type": "function", "function": {"name": "set_volume", "parameters": {
        "type": "object", "properties": {"level": {"type": "integer"}, "note": {"type": "string"}}}}}]
    prepared = formats.apply(formats.Template.of(llama_cpp_templates["GLM-4.6.jinja"]),
                             formats.Request(messages=[{"role": "user", "content": "Hi"}], tools=tools))
    assert prepared.reader is not None and prepared.parser is not None
    reply = ("<tool_call>set_volume\n  <arg_key>level</arg_key>\n  <arg_value>42</arg_value>\n"
             "  <arg_key>note</arg_key>\n  <arg_value>42</arg_value>\n</tool_call>\nDone.")
    whole = prepared.parse(reply)
    assert [json.loads(call.arguments) for call in whole.tool_calls] == [{"level": 42, "note": "42"}]
    assert whole.content.strip() == "Done."
    # the text after a call is held back until the reply ends (another call may follow, and text between is dropped)
    assert prepared.parse(reply, partial=True).content == ""
