"""The Qwen3-Coder family (Qwen3-Coder, Qwen3.5, Nemotron 3 Nano, StepFun 3.5 Flash) beyond llama.cpp's own cases:
StepFun's message trimming, and the calls Qwen3-Coder writes without their <tool_call>."""

from __future__ import annotations

import json

from backends.chat_format import formats

# A template with StepFun's tool-list sentence and Qwen3-Coder's call markup, so that it is read by the qwen3_coder
# family and trimmed as llama.cpp trims StepFun's messages.
STEPFUN_LIKE = (
    "{#- You have access to the following functions in JSONSchema format: <tool_call> <function= <parameter= -#}"
    "{%- for m in messages %}<|im_start|>{{ m.role ~ '\\n' }}"
    "{%- if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{%- if m.content is string %}{{ m.content }}{% else %}{% for part in m.content %}[{{ part.text }}]"
    "{%- endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]


def test_stepfun_messages_are_trimmed_before_rendering():
    request = formats.Request(messages=[
        {"role": "system", "content": "  Be brief.\n"},
        {"role": "user", "content": [{"type": "text", "text": " one \n"}, {"type": "text", "text": "\ttwo "}]},
        {"role": "assistant", "content": "\n answer ", "reasoning_content": "\n thought \n"},
        {"role": "user", "content": "again  "}])
    prepared = formats.apply(formats.Template.of(STEPFUN_LIKE), request)
    assert prepared.prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n[one][two]<|im_end|>\n"
                               "<|im_start|>assistant\n<think>thought</think>answer<|im_end|>\n"
                               "<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n")
    assert request.messages[0]["content"] == "  Be brief.\n"  # the caller's messages are left alone


def test_stepfun_continues_the_message_as_given():
    """llama.cpp continues inputs.messages.back(), which its trimming did not touch."""
    request = formats.Request(messages=[{"role": "user", "content": " hi "},
                                        {"role": "assistant", "content": " Once upon ", "reasoning_content": " A tale. "}],
                              continue_final_message="content")
    prepared = formats.apply(formats.Template.of(STEPFUN_LIKE), request)
    assert prepared.generation_prompt == "<|im_start|>assistant\n<think>\n A tale. \n</think>\n\n Once upon "
    assert prepared.prompt == "<|im_start|>user\nhi<|im_end|>\n" + prepared.generation_prompt


def test_other_templates_keep_the_whitespace():
    template = formats.Template.of(STEPFUN_LIKE.replace("in JSONSchema format", "in this format"))
    prepared = formats.apply(template, formats.Request(messages=[{"role": "user", "content": " hi "}]))
    assert prepared.prompt == "<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n"


def test_qwen3_coder_call_without_its_tool_call_tag_streams():
    """Qwen3-Coder (no <think> in its template) may open a call with <function=NAME> alone."""
    template = formats.Template.of(STEPFUN_LIKE.replace("You have access", "Access").replace(
        "<think>{{ m.reasoning_content }}</think>", ""))
    prepared = formats.apply(template, formats.Request(messages=[{"role": "user", "content": "Weather?"}],
                                                       tools=TOOLS))
    assert not prepared.supports_thinking
    assert prepared.grammar_triggers == (("word", "<tool_call>"), ("word", "<function=get_weather>"))
    reply = ("Checking.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
             "</parameter>\n</function>\n</tool_call>")
    seen = []
    for i in range(1, len(reply) + 1):
        partial = prepared.parse(reply[:i], partial=i < len(reply))
        if partial.tool_calls:
            seen.append(partial.tool_calls[0].arguments)
    final = prepared.parse(reply)
    assert final.content == "Checking.\n"
    assert [(c.name, json.loads(c.arguments)) for c in final.tool_calls] == [("get_weather",
                                                                              {"city": "Paris", "days": 3})]
    assert all(later.startswith(earlier) for earlier, later in zip(seen, seen[1:], strict=False))
