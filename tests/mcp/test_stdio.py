"""app/mcp/stdio.py's line splitting, on its own (the transport itself runs real servers in test_client.py)."""

from __future__ import annotations

from app.mcp import stdio
from app.mcp.stdio import LineTooLong, Lines


def test_lines_split_at_newlines_across_chunks():
    lines = Lines()
    assert list(lines.feed(b'{"a"')) == []
    assert list(lines.feed(b': 1}\n{"b": 2}\n{"c"')) == [b'{"a": 1}', b'{"b": 2}']
    assert list(lines.feed(b"\n")) == [b'{"c"']
    assert list(lines.feed(b"\n\n")) == [b"", b""]  # empty lines are lines (the transport skips them)


def test_a_line_over_the_limit_is_dropped_to_its_newline_and_said_once(monkeypatch):
    monkeypatch.setattr(stdio, "MAX_LINE_BYTES", 8)
    lines = Lines()
    assert list(lines.feed(b"ok\n12345")) == [b"ok"]
    dropped = list(lines.feed(b"6789"))
    assert len(dropped) == 1 and isinstance(dropped[0], LineTooLong)
    assert list(lines.feed(b"more of it")) == []  # the rest of the long line is skipped
    assert list(lines.feed(b" end\nnext\n")) == [b"next"]
