"""A file's sections cut into the passages that are stored, searched and cited.

A chunk is at most ``max_chars`` long and gathers whole paragraphs (runs of text between blank lines) while they
fit, so a passage reads as the author wrote it. A paragraph longer than ``max_chars`` (a PDF page's text often has
no blank line at all) is cut at a line end, else a sentence end, else a space, and each of its pieces after the
first starts ``overlap_chars`` before the previous one ended, so a sentence cut in two is whole in one of them.
Whole paragraphs need no overlap: they already end where the text pauses.

A chunk never spans two pages nor two headings (its citation names one place): consecutive sections of the same
page and heading are one stream (a long text file comes in many sections of one heading). Its ``line`` is the line
its first character stands on, from its section's ``line`` and the newlines before it; ``ordinal`` counts 0, 1, 2…
over the file. Lazy: one page's or heading's paragraphs are held at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from app.documents.passages import Chunk, Section

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_CUTS = (re.compile(r"\n"), re.compile(r"[.!?…。][\"')\]]*\s"), re.compile(r"\s"))


def chunks(sections: Iterable[Section], *, max_chars: int = 1200, overlap_chars: int = 150) -> Iterator[Chunk]:
    """The sections' text as chunks in reading order."""
    if max_chars < 1 or not 0 <= overlap_chars < max_chars:
        raise ValueError(f"chunks: max_chars {max_chars} and overlap_chars {overlap_chars} (need 0 <= overlap < max)")
    ordinal = 0
    place: tuple[int | None, str] | None = None
    pending: list[tuple[str, int | None]] = []  # (paragraph, its line) of the chunk being filled
    size = 0

    def emit() -> Iterator[Chunk]:
        nonlocal ordinal, pending, size
        if pending and place is not None:
            yield Chunk("\n\n".join(p for p, _ in pending), ordinal, page=place[0], heading=place[1],
                        line=pending[0][1])
            ordinal += 1
        pending, size = [], 0

    for section in sections:
        here = (section.page, section.heading)
        if here != place:
            yield from emit()
            place = here
        for paragraph, line in _paragraphs(section):
            if len(paragraph) > max_chars:
                yield from emit()
                for piece, piece_line in _cut(paragraph, line, max_chars, overlap_chars):
                    pending, size = [(piece, piece_line)], len(piece)
                    yield from emit()
                continue
            joined = size + (2 if pending else 0) + len(paragraph)
            if joined > max_chars:
                yield from emit()
                joined = len(paragraph)
            pending.append((paragraph, line))
            size = joined
    yield from emit()


def _paragraphs(section: Section) -> Iterator[tuple[str, int | None]]:
    """Each paragraph of the section (stripped) with the line it starts on (None where the section has none)."""
    text, start, newlines, counted = section.text, 0, 0, 0
    for match in [*_PARAGRAPH_BREAK.finditer(text), None]:
        end = match.start() if match else len(text)
        raw = text[start:end]
        lead = len(raw) - len(raw.lstrip())
        paragraph = raw.strip()
        if paragraph:
            newlines += text.count("\n", counted, start + lead)
            counted = start + lead
            yield paragraph, None if section.line is None else section.line + newlines
        if match:
            start = match.end()


def _cut(text: str, line: int | None, max_chars: int, overlap: int) -> Iterator[tuple[str, int | None]]:
    """A paragraph too long for one chunk as pieces of at most ``max_chars``, each after the first starting
    ``overlap`` characters before its predecessor's end, at a word's start where there is one near."""
    start = 0
    while start < len(text):
        end = min(len(text), start + max_chars)
        if end < len(text):
            end = _cut_point(text, start, end, max_chars)
        piece = text[start:end].strip()
        if piece:
            lead = len(text[start:end]) - len(text[start:end].lstrip())
            yield piece, None if line is None else line + text.count("\n", 0, start + lead)
        if end >= len(text):
            return
        following = max(end - overlap, start + 1)
        if overlap:  # the overlap starts at a word, not inside one
            space = text.find(" ", following, end)
            following = space + 1 if space != -1 else following
        start = following


def _cut_point(text: str, start: int, end: int, max_chars: int) -> int:
    """Where to end a piece in text[start:end]: after the last line end, sentence end or space in its second half
    (in that order of preference); at ``end`` when there is none (a run without spaces)."""
    floor = start + max_chars // 2
    window = text[floor:end]
    for cut in _CUTS:
        found = [m.end() for m in cut.finditer(window)]
        if found:
            return floor + found[-1]
    return end
