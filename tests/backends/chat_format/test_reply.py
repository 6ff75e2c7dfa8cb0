"""The engine's reading of a reply as it is generated (backends/chat_format/reply.py), on real templates."""

from __future__ import annotations

from backends.chat_format import formats
from backends.chat_format.reply import ReplyReader, ThinkingTracker, new_call_id

ASK = [{"role": "user", "content": "hi"}]


def _prepared(llama_cpp_templates, name: str, **request):
    return formats.apply(formats.Template.of(llama_cpp_templates[name]), formats.Request(messages=ASK, **request))


def test_thinking_is_followed_token_by_token_with_tags_split_across_tokens(llama_cpp_templates):
    tracker = ThinkingTracker(_prepared(llama_cpp_templates, "Qwen3.5-4B.jinja"))
    assert tracker.inside  # Qwen3.5's generation prompt opened <think>
    pieces = ["Let", " me", " think", ".\n</", "thi", "nk>", "\n\nHello", " <thi", "nk> again"]
    counted = [tracker.feed(p) for p in pieces]
    # the closing tag's tokens count; an opening tag is known once whole (its first half is still the answer)
    assert counted == [True, True, True, True, True, True, False, False, True]
    assert tracker.inside  # the model opened the block again


def test_thinking_that_the_template_closed_is_not_counted(llama_cpp_templates):
    tracker = ThinkingTracker(_prepared(llama_cpp_templates, "Qwen3.5-4B.jinja", enable_thinking=False,
                                        extra_context={"enable_thinking": False}))
    assert not tracker.inside and not tracker.feed("Hello")


def test_a_template_without_thinking_counts_nothing(llama_cpp_templates):
    tracker = ThinkingTracker(_prepared(llama_cpp_templates, "meta-llama-Llama-3.1-8B-Instruct.jinja"))
    assert not tracker.active and not tracker.feed("<think>no</think>")


def test_the_reader_hands_out_thinking_answer_and_a_call_with_one_id(llama_cpp_templates):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    reader = ReplyReader(_prepared(llama_cpp_templates, "Qwen3.5-4B.jinja", tools=tools))
    out = []
    for piece in ["Hmm.\n</think>\n\nSure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPa", "ris\n",
                  "</parameter>\n</function>\n</tool_call>"]:
        reader.feed(piece)
        out += reader.deltas()
    out += reader.deltas(final=True)
    content, reasoning, calls = reader.finish()
    assert "".join(d.reasoning for d in out).strip() == reasoning.strip() == "Hmm."
    assert "".join(d.content for d in out).strip() == content.strip() == "Sure."
    ids = {d.tool_id for d in out if d.tool_id}
    assert ids == {calls[0].id} and calls[0].id.startswith("call_") and calls[0].name == "get_weather"
    assert calls[0].arguments == '{"city":"Paris"}'


def test_a_reply_in_no_format_keeps_all_its_text(llama_cpp_templates):
    schema = {"type": "object"}
    reader = ReplyReader(_prepared(llama_cpp_templates, "Qwen-Qwen2.5-7B-Instruct.jinja", json_schema=schema))
    reader.feed("not json at all")
    assert reader.finish()[0] == "not json at all"


def test_mistral_call_ids_are_nine_letters_or_digits(llama_cpp_templates):
    source = llama_cpp_templates["mistralai-Mistral-Nemo-Instruct-2407.jinja"]
    call_id = new_call_id(source)
    assert len(call_id) == 9 and call_id.isalnum()
    assert new_call_id("{{ messages }}").startswith("call_")
