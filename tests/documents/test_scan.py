"""Scanning a folder on a real file system: document files only, hidden and tool folders left out, symbolic link
loops and broken links as report lines, too large files as report lines, a bound on the number of files."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.documents.scan import FoundFile, Skipped, scan
from tests.fixtures.documents import (
    make_symlink_loops,
    memory_folder,
    write_many_files,
    write_sparse_file,
    write_text_pdf,
)

MANY = 50_000


@pytest.fixture(scope="module")
def many() -> Iterator[Path]:
    with memory_folder() as folder:
        yield write_many_files(folder, MANY)


def relative(items, root: Path) -> list[tuple[str, str]]:
    return [(str(i.path.relative_to(root)), "found" if isinstance(i, FoundFile) else i.reason) for i in items]


def test_fifty_thousand_files_are_scanned_in_order_quickly(many):
    start = time.perf_counter()
    items = list(scan(many))
    took = time.perf_counter() - start
    assert len(items) == MANY and all(isinstance(i, FoundFile) and i.size == 0 for i in items)
    assert [i.path.name for i in items[:3]] == ["f000000.txt", "f000001.txt", "f000002.txt"]
    assert items[-1].path == many / "d0049" / "f049999.txt"
    assert took < 20, f"{took:.1f} s for {MANY:,} files"  # ~0.5 s here; the bound is for a loaded CI machine


def test_past_max_files_one_line_says_so_and_the_scan_stops(many):
    items = list(scan(many, max_files=MANY - 1))
    assert sum(isinstance(i, FoundFile) for i in items) == MANY - 1
    assert items[-1] == Skipped(many, f"more than {MANY - 1:,} files: the rest of the folder was not scanned")
    assert sum(isinstance(i, Skipped) for i in items) == 1
    assert len(list(scan(many, max_files=MANY))) == MANY  # exactly the bound: no line


def test_symbolic_link_loops_and_broken_links_are_report_lines(tmp_path):
    root = make_symlink_loops(tmp_path / "docs")
    items = list(scan(root))
    # a folder's files and links in name order, then its folders
    assert relative(items, root) == [
        ("gone.md", "a broken link: what it points to is gone"),
        ("self.txt", "a symbolic link loop: the link leads back to itself"),
        ("shortcut", f"a link to a folder scanned already ({root / 'real'})"),
        ("real/back", f"a symbolic link loop: it leads back to {root}"),
        ("real/kept.txt", "found"),
    ]


def test_a_folder_reached_by_a_link_first_is_entered_once(tmp_path):
    (tmp_path / "a-link").symlink_to(tmp_path / "b-real", target_is_directory=True)
    (tmp_path / "b-real").mkdir()
    (tmp_path / "b-real" / "note.md").write_text("note")
    items = list(scan(tmp_path))
    assert relative(items, tmp_path) == [("a-link/note.md", "found")]  # the real path is then a folder seen already


def test_hidden_and_tool_folders_and_other_files_are_left_out(tmp_path):
    for name in (".git/HEAD.md", ".venv/lib/site.py", "node_modules/pkg/index.js", "src/__pycache__/m.py",
                 "src/venv/x.py", ".hidden.md", "photo.jpg", "Makefile", "notes/.draft.md", "src/site-packages/x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    for name in ("README.md", "src/main.py", "notes/plan.txt", "notes/Report.PDF", "web/index.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("kept")
    assert relative(scan(tmp_path), tmp_path) == [
        ("README.md", "found"), ("notes/Report.PDF", "found"), ("notes/plan.txt", "found"), ("src/main.py", "found"),
        ("web/index.html", "found")]


def test_too_large_files_are_report_lines_and_found_files_carry_size_and_time(tmp_path):
    write_sparse_file(tmp_path / "huge.log")
    pdf = write_text_pdf(tmp_path / "guide.pdf", 2)
    os.utime(pdf, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    items = list(scan(tmp_path))
    assert items == [FoundFile(pdf, pdf.stat().st_size, 1_700_000_000_123_456_789),
                     Skipped(tmp_path / "huge.log", "too large: 2.0 GiB, over the 100 MiB limit for one file")]
    assert relative(scan(tmp_path, max_bytes=10), tmp_path) == [
        ("guide.pdf", f"too large: {pdf.stat().st_size / 1024:.1f} KiB, over the 10 bytes limit for one file"),
        ("huge.log", "too large: 2.0 GiB, over the 10 bytes limit for one file")]


def test_a_file_root_a_missing_root_and_a_pipe(tmp_path):
    pdf = write_text_pdf(tmp_path / "one.pdf", 1)
    assert [i.path for i in scan(pdf)] == [pdf]
    assert list(scan(tmp_path / "photo.jpg")) == [Skipped(tmp_path / "photo.jpg", "not found")]
    # a file named by hand: a hidden one is read, one of another kind is a line (not ignored as in a folder)
    (tmp_path / ".notes.md").write_text("mine")
    assert [type(i).__name__ for i in scan(tmp_path / ".notes.md")] == ["FoundFile"]
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    assert list(scan(tmp_path / "photo.jpg")) == [
        Skipped(tmp_path / "photo.jpg", "unsupported: QuantDesk does not read .jpg files")]
    (tmp_path / "photo.jpg").unlink()
    (tmp_path / ".notes.md").unlink()
    os.mkfifo(tmp_path / "pipe.txt")  # named like a document, but nothing to read: not listed, not waited on
    assert [i.path.name for i in scan(tmp_path)] == ["one.pdf"]
