"""Chunking: whole paragraphs while they fit, long paragraphs cut with overlap, never across a page or a heading,
each chunk with its page, heading, line of its start and ordinal; lazy over the sections."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.documents.chunk import chunks
from app.documents.passages import Section
from tests.fixtures.documents import filler


def words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


def test_paragraphs_that_fit_are_kept_whole_and_together():
    paragraphs = [filler(n, 30) for n in range(10)]  # ~200 characters each
    cut = list(chunks([Section("\n\n".join(paragraphs), line=1)], max_chars=700, overlap_chars=100))
    assert all(len(c.text) <= 700 for c in cut) and len(cut) >= 3
    assert [p for c in cut for p in c.text.split("\n\n")] == paragraphs  # none split, none repeated, in order
    assert [c.ordinal for c in cut] == list(range(len(cut)))


def test_a_long_paragraph_is_cut_at_sentences_with_overlap():
    paragraph = filler(7, 600)  # one paragraph, ~4,000 characters of sentences
    cut = list(chunks([Section(paragraph, page=4)], max_chars=500, overlap_chars=120))
    assert len(cut) >= 8 and all(len(c.text) <= 500 and c.page == 4 for c in cut)
    for a, b in itertools.pairwise(cut):
        assert a.text.endswith(".")  # cut after a sentence (there is always one in the second half here)
        shared = next(n for n in range(min(len(a.text), len(b.text)), -1, -1) if a.text.endswith(b.text[:n]))
        assert 0 < shared <= 120, shared  # the next piece starts inside the previous one's last 120 characters
    # nothing lost: the words in order, each piece's words a run of the paragraph's
    flat = words(paragraph)
    position = 0
    for c in cut:
        w = words(c.text)
        start = next(i for i in range(max(0, position - 40), len(flat)) if flat[i:i + len(w)] == w)
        assert start <= position
        position = start + len(w)
    assert position == len(flat)


def test_text_without_spaces_is_cut_hard():
    cut = list(chunks([Section("x" * 2500)], max_chars=1000, overlap_chars=100))
    assert [len(c.text) for c in cut] == [1000, 1000, 700]


def test_never_across_pages_or_headings():
    sections = [Section("one", page=1), Section("two", page=1), Section("three", page=2),
                Section("four", heading="A"), Section("five", heading="A"), Section("six", heading="A › B")]
    cut = list(chunks(sections))
    assert [(c.text, c.page, c.heading, c.ordinal) for c in cut] == [
        ("one\n\ntwo", 1, "", 0), ("three", 2, "", 1), ("four\n\nfive", None, "A", 2), ("six", None, "A › B", 3)]


def test_line_numbers_across_sections_and_blank_runs():
    source = ["intro line", "", "", "  second paragraph", "continues here", "", "third"]
    sections = [Section("\n".join(source[:4]), line=1), Section("\n".join(source[4:]), line=5)]
    cut = list(chunks(sections, max_chars=20, overlap_chars=0))
    assert [(c.text, c.line) for c in cut] == [
        ("intro line", 1), ("second paragraph", 4), ("continues here", 5), ("third", 7)]


def test_empty_and_blank_sections_give_nothing():
    assert list(chunks([])) == []
    assert list(chunks([Section(" \n\n \t\n", page=1)])) == []


def test_lazy_over_an_endless_stream_of_sections():
    endless = (Section(f"paragraph {n} " + "word " * 50, line=n) for n in itertools.count(1))
    first = list(itertools.islice(chunks(endless, max_chars=600), 3))
    assert [c.ordinal for c in first] == [0, 1, 2] and first[0].text.startswith("paragraph 1 ")


def test_bad_sizes_are_refused():
    for bad in ({"max_chars": 0}, {"max_chars": 100, "overlap_chars": 100}, {"overlap_chars": -1}):
        with pytest.raises(ValueError):
            list(chunks([Section("text")], **bad))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab .\n\t"), max_size=300), min_size=1, max_size=8),
       st.integers(20, 200), st.data())
def test_every_chunk_fits_starts_on_its_line_and_no_word_is_lost(texts, max_chars, data):
    overlap = data.draw(st.integers(0, max_chars - 1))
    sections, start = [], 1
    for text in texts:
        sections.append(Section(text, line=start))
        start += text.count("\n") + 1
    source = "\n".join(texts).split("\n")
    cut = list(chunks(sections, max_chars=max_chars, overlap_chars=overlap))
    assert [c.ordinal for c in cut] == list(range(len(cut)))
    for c in cut:
        assert 0 < len(c.text) <= max_chars and c.text == c.text.strip()
        assert c.text.split("\n")[0].strip() in source[c.line - 1]
    seen = " ".join(c.text for c in cut)
    assert set(words("\n".join(texts))) <= set(words(seen))
