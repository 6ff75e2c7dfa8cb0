"""What a template can render (capabilities.capabilities, probed as llama.cpp's jinja/caps.cpp probes), the
messages made ready for it (capabilities.prepare, llama.cpp's normalisation before it renders) and the variables a
request gives it (template.template_variables). The expectations are llama.cpp's own where its tests state them
(tests/test-jinja.cpp's test_caps, tests/test-chat.cpp's test_reasoning_effort_caps and its DeepSeek V4 checks,
tests/test-chat-auto-parser.cpp); the real templates come from llama-cpp-python's source archive."""

from __future__ import annotations

import json

import pytest

from backends.chat_format import capabilities, formats, template
from backends.chat_format.capabilities import Capabilities, prepare

# --- the probes' reading of what a template does with content (test-jinja.cpp, test_caps)


def test_a_template_printing_string_content_takes_strings_only():
    caps = capabilities.capabilities("{% for message in messages %}{{ message['role'] + ': ' + message['content'] }}"
                                     "{% endfor %}")
    assert caps.supports_string_content and not caps.supports_typed_content


def test_a_template_filtering_content_parts_takes_parts_only():
    caps = capabilities.capabilities("{% for message in messages %}{% for content in message['content'] | "
                                     "selectattr('type', 'equalto', 'text') %}{{ content['text'] }}{% endfor %}"
                                     "{% endfor %}")
    assert not caps.supports_string_content and caps.supports_typed_content


def test_a_template_indexing_content_parts_drops_strings_silently_and_takes_parts_only():
    caps = capabilities.capabilities("{% for message in messages %}{{ message['content'][0]['text'] }}{% endfor %}")
    assert not caps.supports_string_content and caps.supports_typed_content


def test_a_template_telling_strings_from_parts_takes_both():
    caps = capabilities.capabilities("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
                                     "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}")
    assert caps.supports_string_content and caps.supports_typed_content


def test_capabilities_are_probed_once_per_template():
    source = "{{ messages[0].content }}"
    assert capabilities.capabilities(source) is capabilities.capabilities(source)


# --- real templates, as llama.cpp's tests read them


@pytest.mark.parametrize(("name", "expected"), [
    # test-chat.cpp, test_reasoning_effort_caps
    ("deepseek-ai-DeepSeek-V4.jinja", True), ("muse-glimmer.jinja", True), ("tencent-Hy3.jinja", True),
    ("openai-gpt-oss-120b.jinja", True), ("upstage-Solar-Open-100B.jinja", True), ("Cohere2MoE.jinja", True),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", False), ("Qwen-Qwen3-0.6B.jinja", False),
])
def test_reasoning_effort_is_found_where_llama_cpp_finds_it(llama_cpp_templates, name, expected):
    assert capabilities.capabilities(llama_cpp_templates[name]).supports_reasoning_effort is expected


@pytest.mark.parametrize("name", ["poolside-Laguna-S-2.1.jinja", "deepseek-ai-DeepSeek-V4.jinja"])
def test_templates_that_keep_earlier_reasoning(llama_cpp_templates, name):
    """test-chat-auto-parser.cpp (Laguna-S v8) and test-chat.cpp (DeepSeek V4) assert supports_preserve_reasoning."""
    assert capabilities.capabilities(llama_cpp_templates[name]).supports_preserve_reasoning


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", {"supports_tools": True, "supports_parallel_tool_calls": True}),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
     {"supports_tools": True, "supports_parallel_tool_calls": True}),
    # raises "System role not supported" before it reads the system message; refuses a tool turn
    ("google-gemma-2-2b-it.jinja", {"supports_system_role": False, "supports_tools": False,
                                     "supports_tool_calls": False}),
    # raises "This model only supports single tool-calls at once!"
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", {"supports_parallel_tool_calls": False,
                                                "supports_object_arguments": True}),
    # '<function=' + name + '>' + arguments: a JSON string
    ("meetkai-functionary-medium-v3.2.jinja", {"supports_tool_calls": True, "supports_object_arguments": False}),
    # renders a call's arguments, never the tool list
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", {"supports_tools": False, "supports_tool_calls": True}),
    ("Qwen-Qwen3-0.6B.jinja", {"supports_enable_thinking": True, "supports_typed_content": False}),
    ("Qwen3.5-4B.jinja", {"supports_enable_thinking": True, "supports_typed_content": True,
                          "supports_string_content": True}),
    ("moonshotai-Kimi-K2.jinja", {"supports_enable_thinking": False}),
])
def test_capabilities_of_real_templates(llama_cpp_templates, name, expected):
    caps = capabilities.capabilities(llama_cpp_templates[name]).to_dict()
    assert {k: caps[k] for k in expected} == expected


def test_every_real_template_takes_string_content(llama_cpp_templates):
    """One of string or typed content must work (caps.h); every template llama.cpp carries takes strings."""
    assert [n for n, s in llama_cpp_templates.items() if not capabilities.capabilities(s).supports_string_content] \
        == []


# --- prepare: llama.cpp's message normalisation

# A template with a system role that reads everything it is given (caps: tools, calls, object arguments).
PLAIN = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% for c in m.tool_calls or [] %}"
         "[{{ c.function.name }} {{ c.function.arguments|tojson }}]{% endfor %}{% endfor %}"
         "{% for t in tools or [] %}{{ t.function.name }}{% endfor %}")


def test_developer_becomes_system_except_for_gpt_oss(llama_cpp_templates):
    """test-chat.cpp, test_developer_role_to_system_workaround; gpt-oss has a developer role of its own."""
    mock = ("{%- for message in messages -%}{{- '<|' + message.role + '|>' + message.content + '<|end|>' -}}"
            "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}")
    developer = [{"role": "developer", "content": "You are a helpful developer assistant."}]
    prompt = template.render(mock, prepare(mock, developer), add_generation_prompt=False)
    assert prompt == "<|system|>You are a helpful developer assistant.<|end|>"
    assert prepare(llama_cpp_templates["openai-gpt-oss-120b.jinja"], developer)[0]["role"] == "developer"


def test_a_system_message_is_folded_into_the_next_where_the_template_has_no_system_role(llama_cpp_templates):
    source = llama_cpp_templates["google-gemma-2-2b-it.jinja"]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert prepare(source, messages) == [{"role": "user", "content": "Be brief.\nHi"}]
    assert "<start_of_turn>user\nBe brief.\nHi<end_of_turn>" in template.render(source, prepare(source, messages))
    assert prepare(source, messages[:1]) == []  # alone, it is dropped
    assert prepare(PLAIN, messages) == messages  # a template with a system role keeps it


def test_messages_take_llama_cpps_shape():
    """common_chat_msg::to_json_oaicompat: content always there, empty optional fields left out, each call as
    {type, function: {name, arguments}, id}; other keys kept."""
    given = [{"role": "assistant", "content": None, "reasoning_content": "", "name": "", "tool_call_id": None,
              "tool_calls": [{"id": "call00001", "function": {"name": "f", "arguments": {"a": 1}}}],
              "images": ["x"]}]
    assert prepare(PLAIN, given) == [{
        "role": "assistant", "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}, "id": "call00001"}],
        "images": ["x"]}]


def test_arguments_are_objects_or_json_strings_as_the_template_reads_them(llama_cpp_templates):
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call00001", "type": "function", "function": {"name": "f", "arguments": '{"city": "Paris"}'}}]}
    as_object = prepare(llama_cpp_templates["Qwen3-Coder.jinja"], [call])[0]["tool_calls"][0]["function"]
    assert as_object["arguments"] == {"city": "Paris"}
    as_string = prepare(llama_cpp_templates["meetkai-functionary-medium-v3.2.jinja"],
                        [{**call, "tool_calls": [{**call["tool_calls"][0],
                                                  "function": {"name": "f", "arguments": {"city": "Paris"}}}]}])
    assert as_string[0]["tool_calls"][0]["function"]["arguments"] == '{"city":"Paris"}'  # nlohmann's dump()
    broken = {**call, "tool_calls": [{**call["tool_calls"][0], "function": {"name": "f", "arguments": "{"}}]}
    assert prepare(llama_cpp_templates["Qwen3-Coder.jinja"], [broken])[0]["tool_calls"][0]["function"][
        "arguments"] == "{"  # a stored conversation with a broken call still renders


def test_typed_parts_are_joined_where_the_template_takes_strings_only():
    source = "{% for m in messages %}{{ m.role + ': ' + m.content }}\n{% endfor %}"
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "media_marker", "text": "<img>"},
             {"type": "text", "text": "c"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert prepare(source, [{"role": "user", "content": parts}])[0]["content"] == "a\nb<img>c"


def test_a_string_becomes_a_part_where_the_template_takes_parts_only():
    source = "{% for m in messages %}{{ m.content[0].text }}{% endfor %}"
    assert prepare(source, [{"role": "user", "content": "hi"}])[0]["content"] == [{"type": "text", "text": "hi"}]
    both = "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}"
    assert prepare(both, [{"role": "user", "content": "hi"}])[0]["content"] == "hi"


def test_stepfun_gets_its_contents_trimmed(llama_cpp_templates):
    """ggml-org/llama.cpp#24181: leftover whitespace sends StepFun 3.5 into reasoning loops."""
    source = llama_cpp_templates["StepFun3.5-Flash.jinja"]
    messages = [{"role": "user", "content": [{"type": "text", "text": "  hi \n"}]},
                {"role": "assistant", "content": " ok ", "reasoning_content": "\nhm\n"}]
    prepared = prepare(source, messages)
    assert prepared[1]["content"] == "ok" and prepared[1]["reasoning_content"] == "hm"
    assert "hi" in json.dumps(prepared[0]["content"]) and "  hi" not in json.dumps(prepared[0]["content"])
    assert prepare(PLAIN, messages)[1]["content"] == " ok "


# --- what each family's own handler does to the messages (backends/chat_format/families/, as llama.cpp's
# common/parsers/*.cpp): seen in the prompt formats.apply renders


def _prompt(source: str, messages: list, **request) -> str:
    return formats.apply(formats.Template.of(source), formats.Request(messages=messages, **request)).prompt


def test_gpt_oss_reads_the_reasoning_as_thinking(llama_cpp_templates):
    source = llama_cpp_templates["openai-gpt-oss-120b.jinja"]
    call = {"role": "assistant", "content": "Let me look.", "reasoning_content": "I need the weather.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    prompt = _prompt(source, [{"role": "user", "content": "Weather?"}, call,
                              {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])
    assert "<|channel|>analysis<|message|>I need the weather." in prompt and "Let me look." not in prompt


def test_ministral_3_reads_the_reasoning_as_a_thinking_part(llama_cpp_templates):
    source = llama_cpp_templates["mistralai-Ministral-3-14B-Reasoning-2512.jinja"]
    prompt = _prompt(source, [{"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."},
                              {"role": "user", "content": "And?"}])
    assert "[THINK]Greet back.[/THINK]Hello" in prompt


def test_deepseek_v4_gets_parallel_results_in_call_order(llama_cpp_templates):
    source = llama_cpp_templates["deepseek-ai-DeepSeek-V4.jinja"]
    calls = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}
    results = [{"role": "tool", "tool_call_id": "b", "content": "RESULT-B"},
               {"role": "tool", "tool_call_id": "a", "content": "RESULT-A"}]
    prompt = _prompt(source, [{"role": "user", "content": "Go"}, calls, *results])
    assert prompt.index("RESULT-A") < prompt.index("RESULT-B")


def test_older_gemma_4_templates_get_tool_responses_on_the_calling_turn(llama_cpp_templates):
    """parsers/gemma4.cpp's workaround for Gemma 4 templates from before "OpenAI Chat Completions" support."""
    older = llama_cpp_templates["google-gemma-4-31B-it-interleaved.jinja"]
    assert "{#- OpenAI Chat Completions:" not in older
    turn = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "reasoning_content": "Look it up.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"P"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"t": 22}'},
            {"role": "assistant", "content": "It is 22."}]
    prompt = _prompt(older, turn, add_generation_prompt=False)
    assert "get_weather" in prompt and "22" in prompt.split("It is 22.")[0]  # the result shown with its call


def test_llama_cpps_source_patches(llama_cpp_templates):
    """common_chat_templates_init edits gpt-oss's and Ministral's checks that refuse llama.cpp's own messages."""
    gpt_oss = llama_cpp_templates["openai-gpt-oss-120b.jinja"]
    assert "in message.content or" in gpt_oss and "in message.content or" not in capabilities.patch_source(gpt_oss)
    ministral = llama_cpp_templates["mistralai-Ministral-3-14B-Reasoning-2512.jinja"]
    assert capabilities.patch_source(ministral) != ministral
    qwen = llama_cpp_templates["Qwen3.5-4B.jinja"]
    assert capabilities.patch_source(qwen) == qwen
    message = [{"role": "user", "content": "Hi"},
               {"role": "assistant", "content": "<|channel|>final<|message|>Hello"}]
    with pytest.raises(template.TemplateError):
        template.render(gpt_oss, message)
    template.render(capabilities.patch_source(gpt_oss), message)


# --- the variables a request gives (test-chat.cpp's DeepSeek V4 checks, with llama.cpp's default enable_thinking)

SYSTEM = {"role": "system", "content": "You are a helpful assistant"}
USER = {"role": "user", "content": "Hey there!"}
MAX = "Reasoning Effort: Absolute maximum"


def v4(llama_cpp_templates, messages, **request):
    source = llama_cpp_templates["deepseek-ai-DeepSeek-V4.jinja"]
    variables = template.template_variables(**{"enable_thinking": True, **request})
    return template.render(source, prepare(source, messages), variables=variables)


def test_reasoning_effort_reaches_the_template(llama_cpp_templates):
    assert MAX in v4(llama_cpp_templates, [SYSTEM, USER], chat_template_kwargs={"reasoning_effort": "max"})
    assert MAX in v4(llama_cpp_templates, [SYSTEM, USER], reasoning_effort="max")
    for effort in ("high", "low"):
        assert MAX not in v4(llama_cpp_templates, [SYSTEM, USER], reasoning_effort=effort)
    assert MAX not in v4(llama_cpp_templates, [SYSTEM, USER])
    assert MAX not in v4(llama_cpp_templates, [SYSTEM, USER], reasoning_effort="max", enable_thinking=False)


def test_preserve_reasoning_reaches_each_familys_switch(llama_cpp_templates):
    history = [USER, {"role": "assistant", "content": "Previous answer", "reasoning_content": "Previous reasoning"},
               {"role": "user", "content": "Follow up"}]
    assert "<｜Assistant｜></think>Previous answer" in v4(llama_cpp_templates, history)
    kept = "<｜Assistant｜><think>Previous reasoning</think>Previous answer"
    assert kept in v4(llama_cpp_templates, history, chat_template_kwargs={"drop_thinking": False})
    assert kept in v4(llama_cpp_templates, history, chat_template_kwargs={"preserve_reasoning": True})
    assert kept in v4(llama_cpp_templates, history, preserve_reasoning=True)
    assert "<｜Assistant｜></think>Previous answer" in v4(llama_cpp_templates, history, preserve_reasoning=False)


def test_template_variables_are_llama_cpps():
    assert template.template_variables() == {}
    assert template.template_variables(enable_thinking=False, reasoning_effort="low") == {
        "enable_thinking": False, "reasoning_effort": "low", "reasoning_strength": "low"}
    assert template.template_variables(preserve_reasoning=True) == {
        "preserve_reasoning": True, "preserve_thinking": True, "clear_thinking": False,
        "truncate_history_thinking": False, "drop_thinking": False}
    # the request's own fields win over its kwargs; the kwargs' own switches over the derived ones
    assert template.template_variables(enable_thinking=True, chat_template_kwargs={"enable_thinking": False})[
        "enable_thinking"] is True
    assert template.template_variables(chat_template_kwargs={"preserve_reasoning": True, "drop_thinking": True})[
        "drop_thinking"] is True


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"messages": []}, "the renderer sets it itself"),
    ({"bos_token": "<s>"}, "the renderer sets it itself"),
    ({"tools": []}, "the renderer sets it itself"),
    ({"raise_exception": 1}, "the renderer sets it itself"),
    ({"not a name": 1}, "a name is letters, digits and _"),
    ({"x": object()}, "is a object, not a JSON value"),
    ({"x": {"a": [1, {"b": float("nan")}]}}, "x.a[1].b is nan"),
    ({"x": {1: 2}}, "has a key that is not a string"),
    ({"x": json.loads("[" * 40 + "]" * 40)}, "nests deeper than 32"),
])
def test_variables_a_template_may_not_be_given_are_refused(kwargs, words):
    with pytest.raises(template.VariableError, match=words.replace("[", r"\[")):
        template.template_variables(chat_template_kwargs=kwargs)
    with pytest.raises(template.TemplateError, match=words.replace("[", r"\[")):
        template.render("{{ x }}", [], variables=kwargs)


def test_the_dates_llama_cpp_adds_are_given_unless_the_request_sets_them():
    import datetime

    today = datetime.datetime.now()
    assert template.render("{{ date_string }}|{{ datetime }}", []) in (
        f"{d.strftime('%d %b %Y')}|{d.strftime('%b %d %Y')}" for d in (today, datetime.datetime.now()))
    assert template.render("{{ date_string }}", [], variables={"date_string": "26 Jul 2024"}) == "26 Jul 2024"
    assert template.date_variables(datetime.datetime(2026, 11, 6)) == {"datetime": "Nov 06 2026",
                                                                       "date_string": "06 Nov 2026"}


def test_capabilities_describe_themselves():
    assert Capabilities().to_dict()["supports_string_content"] is True
