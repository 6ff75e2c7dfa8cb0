"""Extraction from real files of each format: the text with its page, heading and line, and every file that cannot
be read turned into its reason and sentence (never a traceback), within bounded memory."""

from __future__ import annotations

import codecs
import os
import threading
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pypdf import PdfReader

from app.documents.chunk import chunks
from app.documents.extract import (
    PIECE_BYTES,
    SECTION_CHARS,
    SUPPORTED_SUFFIXES,
    ExtractError,
    kind_of,
    sections,
)
from tests.fixtures.documents import (
    CODE_FILE,
    MARKDOWN_DOC,
    page_phrase,
    write_binary_txt,
    write_blank_pdf,
    write_code,
    write_docx,
    write_encrypted_pdf,
    write_garbage_pdf,
    write_html,
    write_image_pdf,
    write_markdown,
    write_sparse_file,
    write_text_pdf,
    write_truncated_pdf,
)


def failure(path: Path, **kwargs: int) -> ExtractError:
    with pytest.raises(ExtractError) as caught:
        for _ in sections(path, **kwargs):
            pass
    return caught.value


def test_kinds_by_suffix():
    assert {kind_of(Path(n)) for n in ("a.pdf", "B.PDF")} == {"pdf"}
    assert [kind_of(Path(n)) for n in ("a.txt", "a.md", "a.markdown", "a.htm", "a.html", "a.docx", "a.py", "a.rs")] \
        == ["text", "markdown", "markdown", "html", "html", "docx", "code", "code"]
    assert kind_of(Path("photo.jpg")) is None and kind_of(Path("Makefile")) is None
    assert all(s == s.lower() and s.startswith(".") for s in SUPPORTED_SUFFIXES)
    assert {".pdf", ".txt", ".md", ".markdown", ".html", ".htm", ".docx", ".py", ".js", ".ts", ".c", ".h", ".cpp",
            ".rs", ".go", ".java", ".sh", ".toml", ".yaml", ".json", ".css", ".sql"} <= SUPPORTED_SUFFIXES


def test_each_pdf_page_is_a_section_with_its_number_and_a_phrase_finds_its_page(tmp_path):
    pdf = write_text_pdf(tmp_path / "guide.pdf", 6)
    found = list(sections(pdf))
    assert [s.page for s in found] == [1, 2, 3, 4, 5, 6]
    for n in range(1, 7):
        assert [s.page for s in found if page_phrase(n) in s.text] == [n]
    # and through the chunker: each chunk keeps its page, the phrase's chunk is on the phrase's page
    cut = list(chunks(found, max_chars=300, overlap_chars=40))
    assert len({c.page for c in cut}) == 6 and [c.ordinal for c in cut] == list(range(len(cut)))
    for n in range(1, 7):
        assert {c.page for c in cut if page_phrase(n) in c.text} == {n}


def test_pdf_pages_are_read_one_at_a_time(tmp_path):
    """Lazy: the first page's section comes before the later pages are read from the file. Emptied after the
    first page, the file has nothing more to give: a reader that had read ahead would still yield all 40."""
    pdf = write_text_pdf(tmp_path / "long.pdf", 40)
    reader = sections(pdf)
    first = next(reader)
    assert first.page == 1 and page_phrase(1) in first.text
    with open(pdf, "r+b") as fh:
        fh.truncate(0)
    got = []
    with pytest.raises(ExtractError) as caught:
        for section in reader:
            got.append(section.page)
    assert caught.value.reason == "damaged" and str(caught.value).startswith("damaged: page ")
    assert len(got) < 5, got


def test_an_encrypted_pdf_needs_its_password(tmp_path):
    for algorithm in ("AES-256", "RC4-128"):
        error = failure(write_encrypted_pdf(tmp_path / f"locked-{algorithm}.pdf", algorithm=algorithm))
        assert (error.reason, str(error)) == ("encrypted", "encrypted: it needs a password")


def test_a_pdf_encrypted_with_the_empty_password_is_read(tmp_path):
    """Many "protected" PDFs only restrict printing or copying: anyone may open them, and so does the indexer."""
    found = list(sections(write_encrypted_pdf(tmp_path / "open.pdf", user_password="")))
    assert [s.page for s in found] == [1, 2] and page_phrase(2, "secret") in found[1].text


def test_a_scanned_pdf_has_no_text_and_says_why(tmp_path):
    error = failure(write_image_pdf(tmp_path / "scan.pdf"))
    assert (error.reason, str(error)) == ("no-text", "no text: scanned pages need OCR, which QuantDesk does not do")
    error = failure(write_blank_pdf(tmp_path / "blank.pdf"))
    assert (error.reason, str(error)) == ("no-text", "no text: its pages are empty")


@pytest.mark.parametrize("keep", [0.2, 0.6, 0.95])
def test_a_cut_pdf_is_damaged(tmp_path, keep):
    error = failure(write_truncated_pdf(tmp_path / "cut.pdf", keep))
    assert error.reason == "damaged" and str(error).startswith("damaged: the file is cut short")


@pytest.mark.parametrize("seed", range(6))
def test_garbage_named_pdf_is_damaged_with_a_sentence(tmp_path, seed):
    error = failure(write_garbage_pdf(tmp_path / "junk.pdf", seed=seed))
    assert error.reason == "damaged" and str(error).startswith("damaged: not a readable PDF (")
    assert "Traceback" not in str(error) and "\n" not in str(error) and len(str(error)) < 200


def test_an_empty_pdf_and_a_pdf_that_is_text_are_damaged(tmp_path):
    (tmp_path / "empty.pdf").write_bytes(b"")
    assert str(failure(tmp_path / "empty.pdf")) == "damaged: the file is empty"
    (tmp_path / "notes.pdf").write_text("just some notes\n%%EOF\n")
    assert failure(tmp_path / "notes.pdf").reason == "damaged"


def test_a_pdf_with_a_page_object_missing_is_damaged(tmp_path):
    """pypdf leaves such a page out without a word; the page tree's count still has it."""
    pdf = write_text_pdf(tmp_path / "broken.pdf", 3)
    data = pdf.read_bytes()
    third = PdfReader(pdf).pages[2].indirect_reference
    assert third is not None
    at = data.index(f"\n{third.idnum} 0 obj".encode()) + 1
    pdf.write_bytes(data[:at] + b"X" + data[at + 1:])  # "X 0 obj": the object is gone
    error = failure(pdf)
    assert (error.reason, str(error)) == ("damaged", "damaged: 1 of its 3 pages cannot be read")


def test_a_page_whose_text_cannot_be_decoded_fails_after_the_pages_before_it(tmp_path):
    """Page 3's compressed content is garbage: pages 1 and 2 come out, then the sentence names page 3 (the indexer
    drops the file's chunks)."""
    pdf = write_text_pdf(tmp_path / "broken.pdf", 4)
    data = pdf.read_bytes()
    contents = PdfReader(pdf).pages[2]["/Contents"].indirect_reference
    start = data.index(b"stream\n", data.index(f"\n{contents.idnum} 0 obj".encode())) + 7
    end = data.index(b"\nendstream", start)
    pdf.write_bytes(data[:start] + bytes(end - start) + data[end:])
    got: list[int | None] = []
    with pytest.raises(ExtractError) as caught:
        for section in sections(pdf):
            got.append(section.page)
    assert got == [1, 2] and caught.value.reason == "damaged"
    assert str(caught.value).startswith("damaged: page 3 cannot be read (") and "\n" not in str(caught.value)


def test_docx_headings_become_the_heading_path_and_tables_are_read(tmp_path):
    found = list(sections(write_docx(tmp_path / "guide.docx")))
    where = {phrase: s.heading for s in found for phrase in ("docx-intro", "docx-install", "docx-linux", "docx-table")
             if phrase in s.text}
    assert where == {"docx-intro": "User Guide", "docx-install": "User Guide › Installation",
                     "docx-linux": "User Guide › Installation › Linux", "docx-table": "User Guide › Reference"}
    table = next(s.text for s in found if "docx-table" in s.text)
    assert "option | default | meaning\nthreads | 4 | docx-table workers\ncontext | 4096 | tokens kept" in table
    assert all(s.page is None and s.line is None for s in found)


def test_bad_docx_files_say_why(tmp_path):
    (tmp_path / "text.docx").write_text("not a zip at all")
    error = failure(tmp_path / "text.docx")
    assert error.reason == "damaged" and str(error).startswith("damaged: not a readable Word document")
    good = write_docx(tmp_path / "good.docx").read_bytes()
    (tmp_path / "cut.docx").write_bytes(good[: len(good) // 2])
    assert failure(tmp_path / "cut.docx").reason == "damaged"
    with zipfile.ZipFile(tmp_path / "nodoc.docx", "w") as archive:
        archive.writestr("hello.txt", "a zip, but no Word document in it")
    assert failure(tmp_path / "nodoc.docx").reason == "damaged"
    # Word writes a password-protected document as an OLE compound file, not a zip
    (tmp_path / "locked.docx").write_bytes(bytes.fromhex("d0cf11e0a1b11ae1") + bytes(1024))
    error = failure(tmp_path / "locked.docx")
    assert error.reason == "encrypted" and str(error).startswith("encrypted: it needs a password")


def test_a_docx_whose_text_unpacks_to_too_much_is_refused_before_parsing(tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as fh:
            block = b" " * (1 << 20)
            for _ in range(65):
                fh.write(block)
    assert bomb.stat().st_size < 1 << 20
    error = failure(bomb)
    assert error.reason == "too-large" and "65 MiB unpacked" in str(error)


def test_html_headings_text_and_tables_without_scripts_or_styles(tmp_path):
    found = list(sections(write_html(tmp_path / "page.html")))
    text = "\n".join(s.text for s in found)
    assert "Leak" not in text and "leak" not in text and "color: red" not in text and "Ignored title" not in text
    headings = {phrase: s.heading for s in found for phrase in ("html-intro", "html-setup", "html-table")
                if phrase in s.text}
    assert headings == {"html-intro": "Manual", "html-setup": "Manual › Setup", "html-table": "Manual › Usage"}
    assert "html-intro The manual & its bold words." in text  # entities decoded, inline tags joined
    assert "html-setup Run the installer\nthen restart." in text  # whitespace collapsed, <br> a line end
    assert "key | value" in text and "html-table | 42" in text
    assert "code   kept\n    as is" in text  # <pre> kept as written


def test_html_without_a_closing_head_and_with_a_declared_charset(tmp_path):
    page = tmp_path / "old.htm"
    page.write_bytes('<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
                     '<title>tab title</title><body><h1>見出し</h1><p>本文のテキスト</p>'.encode("shift_jis"))
    found = list(sections(page))
    assert [(s.heading, s.text) for s in found] == [("見出し", "見出し\n\n本文のテキスト")]
    assert "tab title" not in found[0].text


def test_docx_heading_styles_by_their_base_and_custom_styles(tmp_path):
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    custom = document.styles.add_style("Chapter Title", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 1"]
    document.add_paragraph("Chapter One", style="Chapter Title")
    document.add_paragraph("chapter-body text")
    document.add_heading("A Section", level=2)
    document.add_paragraph("section-body text")
    document.add_paragraph("Quoted", style="Quote")  # another built-in style: body text
    path = tmp_path / "styled.docx"
    document.save(str(path))
    assert [(s.heading, s.text) for s in sections(path)] == [
        ("Chapter One", "Chapter One\n\nchapter-body text"),
        ("Chapter One › A Section", "A Section\n\nsection-body text\n\nQuoted")]


def test_markdown_front_matter_lists_and_rules_are_not_headings(tmp_path):
    source = "---\ntitle: Notes\ntags: [a]\n---\n\n# Notes\n\n- an item\n---\n\n> quoted\n---\n\nText\n---\n\nbody\n"
    found = list(sections(write_markdown(tmp_path / "notes.md", source)))
    assert [(s.heading, s.line) for s in found] == [("", 1), ("Notes", 6), ("Notes › Text", 14)]
    assert found[0].text.startswith("---\ntitle: Notes")


def test_an_extract_error_crosses_a_process_boundary():
    import pickle

    error = pickle.loads(pickle.dumps(ExtractError("encrypted", "encrypted: it needs a password")))
    assert (type(error), error.reason, str(error)) == (ExtractError, "encrypted", "encrypted: it needs a password")


def source_line_check(source: str, cut: list) -> None:
    """Each chunk's ``line`` is the line of the source its first line stands on."""
    lines = source.splitlines()
    for chunk in cut:
        first = chunk.text.splitlines()[0].strip()
        assert first in lines[chunk.line - 1], (chunk.line, first)


def test_markdown_headings_atx_and_setext_not_in_code_fences_with_lines(tmp_path):
    md = write_markdown(tmp_path / "guide.md")
    found = list(sections(md))
    heading_of = {p: s.heading for s in found for p in ("md-intro", "md-start", "md-options", "md-fenced",
                                                        "md-advanced", "md-appendix") if p in s.text}
    assert heading_of == {"md-intro": "Guide", "md-start": "Guide › Getting started", "md-options": "Guide › Options",
                          "md-fenced": "Guide › Options", "md-advanced": "Guide › Options › Advanced",
                          "md-appendix": "Appendix"}
    lines = MARKDOWN_DOC.splitlines()
    for s in found:
        assert lines[s.line - 1].strip() == s.text.splitlines()[0].strip()
    cut = list(chunks(found, max_chars=40, overlap_chars=10))
    source_line_check(MARKDOWN_DOC, cut)
    assert next(c.line for c in cut if "md-advanced" in c.text) == lines.index("md-advanced Only for experts.") + 1


def test_code_keeps_its_line_numbers(tmp_path):
    found = list(sections(write_code(tmp_path / "module.py")))
    assert [s.line for s in found] == [1] and found[0].text == CODE_FILE.rstrip("\n")
    cut = list(chunks(found, max_chars=60, overlap_chars=0))
    source_line_check(CODE_FILE, cut)
    assert next(c.line for c in cut if "code-second" in c.text) == CODE_FILE.splitlines().index("def second():") + 1


def test_a_long_text_file_comes_in_bounded_sections_with_true_line_numbers(tmp_path):
    source = "".join(f"line {n} of the log {'word ' * (n % 17)}\n" + ("\n" if n % 9 == 0 else "")
                     for n in range(1, 40_001))
    path = tmp_path / "big.log"
    path.write_text(source)
    found = list(sections(path))
    assert len(found) > 10 and all(len(s.text) <= 2 * SECTION_CHARS + 200 for s in found)
    assert "\n".join(s.text for s in found) == source.rstrip("\n")
    source_line_check(source, list(chunks(found)))


def test_a_line_without_end_is_read_in_pieces(tmp_path):
    path = tmp_path / "one-line.txt"
    path.write_text("abcdefghij" * 100_000)  # 1 MB, no newline
    found = list(sections(path))
    assert len(found) > 1 and all(len(s.text) <= SECTION_CHARS and s.line == 1 for s in found)
    assert "".join(s.text for s in found) == "abcdefghij" * 100_000
    assert all(c.line == 1 and len(c.text) <= 1200 for c in chunks(found))


def test_text_encodings(tmp_path):
    (tmp_path / "bom.txt").write_bytes(codecs.BOM_UTF8 + "café au lait\n".encode())
    (tmp_path / "utf16.txt").write_text("über alles\nzweite Zeile\n", encoding="utf-16")
    (tmp_path / "legacy.txt").write_bytes("naïve café, 20 €\n".encode("cp1252"))
    (tmp_path / "empty.txt").write_bytes(b"")
    assert [s.text for s in sections(tmp_path / "bom.txt")] == ["café au lait"]
    assert [s.text for s in sections(tmp_path / "utf16.txt")] == ["über alles\nzweite Zeile"]
    assert [s.text for s in sections(tmp_path / "legacy.txt")] == ["naïve café, 20 €"]
    assert list(sections(tmp_path / "empty.txt")) == []


def test_a_binary_file_named_txt_is_binary(tmp_path):
    error = failure(write_binary_txt(tmp_path / "program.txt"))
    assert (error.reason, str(error)) == ("binary", "binary: it is not text (it holds bytes no text encoding gives)")
    # no NUL byte, but not UTF-8 and full of control bytes
    (tmp_path / "noise.md").write_bytes(bytes(range(1, 32)) * 50 + b"\xff\xfe\xfd" * 10)
    assert failure(tmp_path / "noise.md").reason == "binary"
    # text first, binary later: the sections before it came out, then the error
    (tmp_path / "mixed.txt").write_bytes(b"plain words\n" * (PIECE_BYTES // 6) + b"\0\0\0binary tail")
    assert failure(tmp_path / "mixed.txt").reason == "binary"


def test_a_2_gib_file_is_refused_before_it_is_read(tmp_path):
    big = write_sparse_file(tmp_path / "huge.txt")
    error = failure(big)
    assert (error.reason, str(error)) == ("too-large", "too large: 2.0 GiB, over the 100 MiB limit for one file")
    assert failure(big, max_bytes=1000).reason == "too-large"
    # allowed by the limit: the first piece's NUL bytes (a hole reads as zeros) end it at once
    assert failure(big, max_bytes=4 * 2**30).reason == "binary"
    pdf = write_sparse_file(tmp_path / "huge.pdf")
    assert failure(pdf).reason == "too-large"


def test_the_text_reader_stops_at_the_limit_whatever_the_size_said(tmp_path):
    """A file that grows while it is read (here a pipe, whose size reads 0): the reader stops at ``max_bytes``."""
    fifo = tmp_path / "stream.txt"
    os.mkfifo(fifo)
    written = [0]

    def writer() -> None:
        try:
            with open(fifo, "wb") as fh:
                while written[0] < 64 * 2**20:  # far past the limit: the reader must stop first
                    fh.write(b"an endless log line\n" * 1000)
                    written[0] += 20_000
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    got = []
    with pytest.raises(ExtractError) as caught:
        for section in sections(fifo, max_bytes=2**20):
            got.append(section)
    thread.join(10)
    assert caught.value.reason == "too-large" and got
    assert "over the 1.0 MiB limit for one file" in str(caught.value)
    assert written[0] < 8 * 2**20


def test_reading_a_large_text_file_holds_a_bounded_share_of_it(tmp_path):
    path = tmp_path / "large.txt"
    with open(path, "w") as fh:
        for n in range(8):
            fh.write(f"paragraph {n}\n" + ("some words of text " * 40 + "\n") * 1400 + "\n")
    assert path.stat().st_size > 8 * 2**20
    tracemalloc.start()
    try:
        count = sum(1 for _ in chunks(sections(path)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count > 7000
    assert peak < 2 * 2**20, f"peak {peak / 2**20:.1f} MiB for an {path.stat().st_size / 2**20:.0f} MiB file"


def test_unsupported_and_missing_files(tmp_path):
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    error = failure(tmp_path / "photo.jpg")
    assert (error.reason, str(error)) == ("unsupported", "unsupported: QuantDesk does not read .jpg files")
    error = failure(tmp_path / "gone.txt")
    assert (error.reason, str(error)) == ("unreadable", "unreadable: No such file or directory")
    (tmp_path / "folder.md").mkdir()
    assert failure(tmp_path / "folder.md").reason == "unreadable"


def test_html_with_a_marked_section_the_stdlib_asserts_on(tmp_path):
    page = write_html(tmp_path / "odd.html", "<html><body><p>before</p><![foo[ bar ]]><p>after</p></body></html>")
    assert [s.text for s in sections(page)] == ["before\n\nafter"]


MARKUP = st.sampled_from(["<", ">", "</", "<!", "<![", "[", "]]>", "--", "<!--", "<h1>", "</h1>", "<h3>", "<p>", "<br>",
                          "<script>", "</script>", "<style>", "<pre>", "</pre>", "<head>", "<body>", "<td>", "&", "&amp;",
                          "&#", "&#x", ";", "=", "\"", "'", "#", "##", "###", "```", "~~~", "---", "===", "- ", "> ",
                          "\n", "\n\n", " ", "\t", "\r", "word", "é", "💡", "\x00", "\x0c"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(MARKUP, max_size=60), suffix=st.sampled_from([".html", ".md", ".txt", ".py"]))
def test_any_markup_gives_sections_or_a_sentence(tmp_path, parts, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes("".join(parts).encode("utf-8"))
    try:
        found = list(sections(path))
    except ExtractError as error:
        assert error.reason in ("binary", "damaged") and "\n" not in str(error)
        return
    assert all(s.text.strip() for s in found)
    for c in chunks(found, max_chars=50, overlap_chars=10):
        assert 0 < len(c.text) <= 50
