"""A cut reply never yields a tool call: every reply of the corpus (reply_corpus.py) that calls tools, cut at every
position inside each of its calls (max_tokens, a stop word, a cancel there), read by the engine's reader
(backends/chat_format/reply.ReplyReader) gives no call for the call it was writing; the calls before it stand as
the whole reply has them, and the content is what preceded the call, no markup of it. Streamed, a call goes out only
once its syntax has been read to its end, so a client never sees a call that the cut reply lacks."""

from __future__ import annotations

import pytest

from backends.chat_format import builder, formats, peg
from backends.chat_format.builder import ParsedReply
from backends.chat_format.reply import ReplyReader
from backends.chat_format.stream import accumulate
from tests.backends.chat_format import reply_corpus
from tests.backends.chat_format.reply_corpus import Reply

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"]}}}]


def call_spans(prepared: formats.Prepared, text: str, calls: int) -> list[tuple[int, int]]:
    """Where each call of the whole reply is written: its syntax tree's tool nodes (generic JSON: each call's span
    is the whole reply, whose calls are read once it is whole JSON)."""
    if prepared.format == "generic":
        return [(0, len(text))] * calls
    grammar = prepared.reader or prepared.parser  # what reads the reply (a family's wider reader, else its parser)
    assert grammar is not None
    result, _ = grammar.parse(prepared.generation_prompt + text, final=True)
    if result.fail:  # read up to where it stops matching the format (the rest is content)
        result, _ = grammar.parse(prepared.generation_prompt + text[:max(result.end - len(prepared.generation_prompt),
                                                                          0)])
    offset = len(prepared.generation_prompt)
    return [(node.start - offset, node.end - offset) for node in peg.walk(result.nodes) if node.tag == builder.TOOL]


def read(prepared: formats.Prepared, text: str, cut: bool) -> tuple[str, str, list[tuple[str, str]]]:
    reader = ReplyReader(prepared)
    reader.feed(text)
    content, reasoning, calls = reader.finish(cut=cut)
    return content, reasoning, [(c.name, c.arguments) for c in calls]


def calling_replies() -> list[Reply]:
    return [reply for reply in reply_corpus.replies() if not reply.cut and reply.every_width]


@pytest.mark.parametrize("family", reply_corpus.families())
def test_a_reply_cut_inside_a_call_gives_no_call_for_it(family, llama_cpp_templates):
    checked, wrong = 0, []
    for reply in [r for r in calling_replies() if r.family == family]:
        prepared = reply.prepared(llama_cpp_templates)
        content, _, calls = read(prepared, reply.text, cut=False)
        if not calls:
            continue
        spans = call_spans(prepared, reply.text, len(calls))
        assert len(spans) >= len(calls), f"{reply.id}: {len(calls)} calls read, {len(spans)} written"
        for index, (start, end) in enumerate(spans[:len(calls)]):
            for at in range(start + 1, end):
                checked += 1
                cut_content, _, cut_calls = read(prepared, reply.text[:at], cut=True)
                if cut_calls != (calls[:index] if prepared.format != "generic" else []):
                    wrong.append(f"{reply.id} cut at {at} ({reply.text[start:at][-40:]!r}): calls {cut_calls}")
                elif not content.strip().startswith(cut_content.strip()):
                    wrong.append(f"{reply.id} cut at {at}: content {cut_content[-60:]!r} is not the reply's "
                                 f"{content[-60:]!r}")
    assert not wrong, f"{len(wrong)} of {checked} cuts:\n" + "\n".join(wrong[:10])


@pytest.mark.parametrize("family", reply_corpus.families())
def test_a_streamed_call_goes_out_once_its_syntax_is_read_to_its_end(family, llama_cpp_templates):
    """One character at a time: after each, the calls handed out are those whose text has ended."""
    for reply in [r for r in calling_replies() if r.family == family]:
        prepared = reply.prepared(llama_cpp_templates)
        calls = read(prepared, reply.text, cut=False)[2]
        if not calls:
            continue
        ends = [end for _, end in call_spans(prepared, reply.text, len(calls))]
        reader, built = ReplyReader(prepared), ParsedReply()
        for at, char in enumerate(reply.text, start=1):
            reader.feed(char)
            accumulate(built, reader.deltas())
            ended = sum(end <= at for end in ends)
            assert len(built.tool_calls) <= ended, (
                f"{reply.id}: after {reply.text[:at][-40:]!r} {len(built.tool_calls)} calls went out, {ended} ended")


def _prepared(llama_cpp_templates, name: str) -> formats.Prepared:
    return formats.apply(formats.Template.of(llama_cpp_templates[name]),
                         formats.Request(messages=[{"role": "user", "content": "Save my notes."}], tools=TOOLS))


WRITE = ('<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n<parameter=content>\n'
         'line one\nline two\n</parameter>\n</function>\n</tool_call>')


def test_half_a_file_is_never_written_the_call_comes_whole_or_not_at_all(llama_cpp_templates):
    """The issue's case: an agent's write_file cut by max_tokens in its content."""
    prepared = _prepared(llama_cpp_templates, "Qwen3.5-4B.jinja")
    reply = "Saving them.\n</think>\n\nI'll save the notes.\n" + WRITE
    cut = reply[:reply.index("line two")]
    content, reasoning, calls = read(prepared, cut, cut=True)
    assert calls == [] and content.strip() == "I'll save the notes." and reasoning.strip() == "Saving them."
    assert read(prepared, reply, cut=False)[2] == [("write_file", '{"path":"notes.md","content":"line one\\nline two"}')]
    # streamed: the content and thinking as they come, the call not at all until its </function>
    reader = ReplyReader(prepared)
    reader.feed(cut)
    out = reader.deltas() + reader.deltas(final=True, cut=True)
    assert not [d for d in out if d.tool_index >= 0]
    assert "".join(d.content for d in out).strip() == "I'll save the notes."


def test_a_call_goes_out_in_one_delta_with_its_name_id_and_arguments(llama_cpp_templates):
    prepared = _prepared(llama_cpp_templates, "Qwen3.5-4B.jinja")
    reader = ReplyReader(prepared)
    pieces = ["Ok.\n</think>\n\n", WRITE[:60], WRITE[60:-30], WRITE[-30:-12], WRITE[-12:]]
    handed = []
    for piece in pieces:
        reader.feed(piece)
        handed.append([d for d in reader.deltas() if d.tool_index >= 0])
    assert handed[:3] == [[], [], []]  # </function> not yet written
    calls = [d for batch in handed for d in batch]
    assert len(calls) == 1 and calls[0].tool_name == "write_file" and calls[0].tool_id.startswith("call_")
    assert calls[0].tool_arguments == '{"path":"notes.md","content":"line one\\nline two"}'
    assert reader.deltas(final=True) == [] and reader.finish()[2][0].id == calls[0].tool_id


def test_a_call_whose_end_marker_is_missing_stands_only_in_a_reply_the_model_ended(llama_cpp_templates):
    """Kimi K2's parser lets a call's <|tool_call_end|> be left out: at the model's own end (its end-of-text token)
    arguments that are whole JSON make the call; cut there (max_tokens), more of the call might have come, so no
    call; arguments cut short make none either way."""
    prepared = _prepared(llama_cpp_templates, "Kimi-K2-Thinking.jinja")
    call = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>'
            '{"path": "a.md", "content": "x"}')
    assert read(prepared, call, cut=False)[2] == [("write_file", '{"path": "a.md", "content": "x"}')]
    assert read(prepared, call, cut=True)[2] == []
    assert read(prepared, call + "<|tool_call_end|>", cut=True)[2] == [("write_file", '{"path": "a.md", "content": "x"}')]
    assert read(prepared, call[:-8], cut=False)[2] == read(prepared, call[:-8], cut=True)[2] == []


def test_gpt_oss_s_call_is_whole_once_its_json_closes(llama_cpp_templates):
    """gpt-oss ends a call with <|call|>, its turn's end: the arguments' closing brace is the call's last text."""
    prepared = _prepared(llama_cpp_templates, "openai-gpt-oss-120b.jinja")
    call = '<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{"path":"a.md","content":"x"}'
    for cut in (False, True):
        assert read(prepared, call, cut)[2] == [("write_file", '{"path":"a.md","content":"x"}')]
        assert read(prepared, call[:-1], cut)[2] == []


def test_a_stop_word_that_cuts_a_call_leaves_the_text_before_it(llama_cpp_templates):
    prepared = _prepared(llama_cpp_templates, "Qwen3-Coder.jinja")
    content, _, calls = read(prepared, "Let me write it.\n<tool_call>\n<function=write_fi", cut=True)
    assert calls == [] and content.strip() == "Let me write it."
    # the same text from a reply the model ended is no call either (no name yet), and its text stays
    assert read(prepared, "Let me write it.\n<tool_call>\n<function=write_fi", cut=False)[2] == []
