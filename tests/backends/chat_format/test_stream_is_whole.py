"""The stream is the whole: every reply of the corpus (reply_corpus.py), split at every position — one character at
a time, two, and a token's width — and read as the engine reads it (backends/chat_format/reply.ReplyReader: a read
after each piece, then the finished reply's), gives deltas whose sum is the message the whole reply gives when read
in one piece: every character of its content and reasoning, each call's name, id and arguments. What cannot be
placed yet is held back: a delta is never taken back (the sum never shrinks), and a call goes out whole once."""

from __future__ import annotations

from functools import cache

import pytest

from app.datatypes import ToolCall
from backends.chat_format.builder import ParsedReply
from backends.chat_format.reply import ReplyReader
from backends.chat_format.stream import accumulate
from tests.backends.chat_format import reply_corpus
from tests.backends.chat_format.reply_corpus import Reply, message


@cache
def _tokenizer():
    """A byte-level BPE as small models have (the tiny test model's): marker tags come in several pieces."""
    from tests.fixtures.models import TINY, build_tokenizer

    return build_tokenizer(TINY)


def token_pieces(text: str) -> list[str]:
    """``text`` cut where the tokenizer's tokens begin (on characters: a token inside one is joined to it)."""
    starts = sorted({start for start, _ in _tokenizer().encode(text).offsets if 0 < start < len(text)})
    bounds = [0, *starts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def widths(text: str, width: int) -> list[str]:
    return [text[i:i + width] for i in range(0, len(text), width)]


def _model_ids(calls: tuple[ToolCall, ...], text: str) -> tuple[ToolCall, ...]:
    """The calls with the ids the reader made up blanked (each reader makes its own); the model's own kept."""
    return tuple(ToolCall(c.id if c.id in text else "", c.name, c.arguments) for c in calls)


def whole(prepared, reply: Reply) -> dict:
    reader = ReplyReader(prepared)
    reader.feed(reply.text)
    content, reasoning, calls = reader.finish(cut=reply.cut)
    return message(content, reasoning, _model_ids(calls, reply.text))


def streamed(prepared, reply: Reply, pieces: list[str]) -> tuple[dict, dict]:
    """What a client of the stream builds, checked as it goes (nothing taken back, each call once and whole), and
    the same reader's finished message."""
    reader = ReplyReader(prepared)
    built = ParsedReply()
    for piece in [*pieces, None]:
        if piece is None:
            deltas = reader.deltas(final=True, cut=reply.cut)
        else:
            reader.feed(piece)
            deltas = reader.deltas()
        for delta in deltas:
            if delta.tool_index >= 0:
                assert delta.tool_index == len(built.tool_calls) and delta.tool_name and delta.tool_id, (
                    f"{reply.id}: a call that does not go out whole and once: {delta}")
            accumulate(built, [delta])
    content, reasoning, calls = reader.finish(cut=reply.cut)
    assert message(built.content, built.reasoning, [ToolCall(c.id, c.name, c.arguments) for c in built.tool_calls]) \
        == message(content, reasoning, calls), f"{reply.id}: the reader's message is not what it handed out"
    return message(built.content, built.reasoning, _model_ids(calls, reply.text)), message(content, reasoning, calls)


def splits(reply: Reply) -> dict[str, list[str]]:
    """How the reply is split: llama.cpp's own replies at every width; the variations one character at a time and
    by tokens (the slowest and the likeliest)."""
    out = {"1": widths(reply.text, 1), "tokens": token_pieces(reply.text)}
    if reply.every_width:
        out["2"] = widths(reply.text, 2)
        out["2+1"] = [reply.text[:1], *widths(reply.text[1:], 2)]
        out["3"] = widths(reply.text, 3)
    return out


@pytest.mark.parametrize("family", reply_corpus.families())
def test_the_stream_adds_up_to_the_whole_reply_at_every_split(family, llama_cpp_templates):
    differ = []
    for reply in reply_corpus.of_family(family):
        prepared = reply.prepared(llama_cpp_templates)
        want = whole(prepared, reply)
        for name, pieces in splits(reply).items():
            got, _ = streamed(prepared, reply, pieces)
            if got != want:
                differ.append(f"{reply.id} split {name}: the stream built {got}, the whole reply reads {want}")
    assert not differ, f"{len(differ)} splits differ:\n" + "\n".join(differ[:10])


def test_the_corpus_has_llama_cpp_s_cases_and_the_variations():
    ids = {reply.id for reply in reply_corpus.replies()}
    assert len(ids) > 2000 and "002-Qwen3.5-4B" in ids and "002-Qwen3.5-4B-twice" in ids and "generic-calls" in ids
    assert len(reply_corpus.families()) >= 58


def test_token_pieces_cut_on_characters_and_keep_every_one():
    text = "Sure.\n<tool_call>\n{\"city\": \"Zürich\"}\n</tool_call>"
    pieces = token_pieces(text)
    assert "".join(pieces) == text and len(pieces) > 5 and all(pieces)
