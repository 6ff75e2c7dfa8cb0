"""A file's text with where each part stands (page, headings, line), read lazily and within bounds.

``sections(path)`` yields ``Section``s as it reads: a PDF page by page (pypdf), a text file in pieces of
``PIECE_BYTES`` (a 2 GB log never sits in memory; ``max_bytes`` refuses a file over the limit before reading it, and
the reader stops at the limit anyway, since a file may grow while it is read), a DOCX by its paragraphs and tables
(python-docx; the XML's size is checked in the zip's directory before it is parsed), HTML through the stdlib's
``html.parser`` fed in pieces. Whatever a file cannot give is an ``ExtractError`` whose message is the report line's
sentence ("encrypted: it needs a password"), never a traceback; it may come after some sections were yielded, and
the indexer then drops what it had of that file.

The positions are what a citation shows: ``page`` (1-based) for a PDF, ``heading`` (the headings above, joined
with " › ") for Markdown, HTML and DOCX, ``line`` (1-based line of the section's first line) for text, Markdown and
code, so that ``chunk`` can give each chunk the line it starts on by counting the newlines before it.
"""

from __future__ import annotations

import codecs
import logging
import re
import threading
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from app.documents.passages import DocumentsError, Section

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

DEFAULT_MAX_BYTES = 100 * 2**20  # one file's limit unless the caller (the settings) says otherwise
PIECE_BYTES = 1 << 16  # what a text reader holds of the file at once
SECTION_CHARS = 16_000  # a section is cut at a blank line past this size, and hard at twice it
DOCX_XML_MAX = 64 * 2**20  # word/document.xml's uncompressed size: lxml builds the whole tree (≈10× in memory)
HEADING_JOIN = " › "

PDF_SUFFIXES = frozenset({".pdf"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".log", ".rst", ".csv", ".tsv", ".tex", ".org", ".adoc"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
DOCX_SUFFIXES = frozenset({".docx"})
CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
    ".rs", ".go", ".java", ".kt", ".kts", ".scala", ".swift", ".m", ".mm", ".cs", ".fs", ".rb", ".php", ".pl", ".lua",
    ".r", ".jl", ".dart", ".zig", ".nim", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj", ".el", ".vim",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".cmd",
    ".toml", ".yaml", ".yml", ".json", ".jsonl", ".ini", ".cfg", ".conf", ".xml", ".proto", ".graphql",
    ".css", ".scss", ".less", ".sql", ".cmake", ".mk", ".gradle", ".vue", ".svelte",
})
_KINDS = {
    **dict.fromkeys(PDF_SUFFIXES, "pdf"), **dict.fromkeys(TEXT_SUFFIXES, "text"),
    **dict.fromkeys(MARKDOWN_SUFFIXES, "markdown"), **dict.fromkeys(HTML_SUFFIXES, "html"),
    **dict.fromkeys(DOCX_SUFFIXES, "docx"), **dict.fromkeys(CODE_SUFFIXES, "code"),
}
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_KINDS)


class ExtractError(DocumentsError):
    """A file whose text cannot be read. ``reason`` is one of "encrypted", "damaged", "no-text", "binary",
    "too-large", "unreadable", "unsupported"; the message is the sentence the report shows for the file."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type[ExtractError], tuple[str, str]]:
        return ExtractError, (self.reason, self.message)  # across a process boundary as well (pickle)


def kind_of(path: Path) -> str | None:
    """"pdf", "text", "markdown", "html", "docx" or "code" by the file's suffix; None for what is no document."""
    return _KINDS.get(path.suffix.lower())


def size_words(n: int) -> str:
    """A size as the report says it: "2.0 GiB", "340 KiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} bytes"


def unsupported(path: Path) -> str:
    return f"unsupported: QuantDesk does not read {path.suffix or 'suffix-less'} files"


def too_large(size: int, max_bytes: int) -> str:
    return f"too large: {size_words(size)}, over the {size_words(max_bytes)} limit for one file"


def sections(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[Section]:
    """The file's text in reading order with its positions, lazily. Raises ``ExtractError`` (maybe after some
    sections): the caller keeps nothing of a file that failed part way."""
    kind = kind_of(path)
    if kind is None:
        raise ExtractError("unsupported", unsupported(path))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise _unreadable(exc) from exc
    if size > max_bytes:  # before a byte is read: the sentence costs nothing, the file could cost the memory
        raise ExtractError("too-large", too_large(size, max_bytes))
    if kind == "pdf":
        yield from _pdf_sections(path)
    elif kind == "docx":
        yield from _docx_sections(path)
    elif kind == "html":
        yield from _html_sections(_text_pieces(path, max_bytes, html=True))
    elif kind == "markdown":
        yield from _markdown_sections(_lines(_text_pieces(path, max_bytes)))
    else:  # text and code: plain lines, numbered
        yield from _plain_sections(_lines(_text_pieces(path, max_bytes)))


def _unreadable(exc: OSError) -> ExtractError:
    return ExtractError("unreadable", f"unreadable: {exc.strerror or exc}")


def _open(path: Path) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(exc) from exc


# --- text: bounded pieces, an encoding guessed from the first piece, lines --------------------------------------

_BINARY = "binary: it is not text (it holds bytes no text encoding gives)"
# Control bytes that text does not hold (tab, newlines, form feed and escape are text): in a file that is not
# UTF-8 they tell a binary file from a legacy 8-bit text (Windows-1252, which is what such text mostly is).
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\x0b\x0c\x1b")


_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)


def _encoding_of(first: bytes, html: bool = False) -> str:
    """The codec a text file is read with, from its first piece; ``ExtractError("binary")`` for what is no text.
    An HTML page's ``<meta charset>`` is believed (a Shift_JIS page is not UTF-8 and not Windows-1252 either)."""
    if first.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if first.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"  # its NUL bytes are text: decided before the NUL test
    if b"\0" in first:
        raise ExtractError("binary", _BINARY)
    if html and (declared := _META_CHARSET.search(first[:4096])):
        try:
            name = codecs.lookup(declared.group(1).decode("ascii")).name
        except LookupError:
            name = ""
        if name and not name.startswith("utf-16"):  # HTML reads a page declared UTF-16 without a BOM as UTF-8
            return name
    try:
        codecs.getincrementaldecoder("utf-8")().decode(first, final=False)  # a character cut at the piece's end is fine
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if sum(first.count(c) for c in _CONTROL) > len(first) // 100:
        raise ExtractError("binary", _BINARY)
    return "cp1252"


def _text_pieces(path: Path, max_bytes: int, *, html: bool = False) -> Iterator[str]:
    """The file decoded ``PIECE_BYTES`` at a time; at most ``max_bytes`` are read whatever the file's size became.
    UTF-8 past the first piece decodes with replacement: one stray byte in a log costs a character, not the file."""
    with _open(path) as fh:
        try:
            first = fh.read(PIECE_BYTES)
            encoding = _encoding_of(first, html)
            decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
            read = len(first)
            yield decoder.decode(first)
            while piece := fh.read(PIECE_BYTES):
                read += len(piece)
                if read > max_bytes:
                    raise ExtractError("too-large", too_large(read, max_bytes))
                if encoding != "utf-16" and b"\0" in piece:
                    raise ExtractError("binary", _BINARY)
                yield decoder.decode(piece)
            yield decoder.decode(b"", final=True)
        except OSError as exc:
            raise _unreadable(exc) from exc


def _lines(pieces: Iterator[str]) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, continued) for each line; a line longer than ``SECTION_CHARS`` comes in parts, the
    later ones ``continued`` (same number), so a file without a newline is still read in bounded pieces."""
    number, buffer, continued = 1, "", False
    for piece in pieces:
        buffer += piece
        *whole, buffer = buffer.split("\n")
        for line in whole:
            yield number, line.removesuffix("\r"), continued
            number, continued = number + 1, False
        while len(buffer) > SECTION_CHARS:
            yield number, buffer[:SECTION_CHARS], continued
            buffer, continued = buffer[SECTION_CHARS:], True
    if buffer:
        yield number, buffer.removesuffix("\r"), continued


class _Builder:
    """Lines gathered into a section under one heading; cut at a blank line past ``SECTION_CHARS``, hard at twice
    it, and before a continued line (so each section's ``line`` plus its newlines is every line's number)."""

    def __init__(self) -> None:
        self.heading = ""
        self.lines: list[str] = []
        self.size = 0
        self.start: int | None = None

    def add(self, number: int | None, line: str, continued: bool = False) -> Iterator[Section]:
        if continued:
            yield from self.flush()
        if not self.lines:
            self.start = number
        self.lines.append(line)
        self.size += len(line) + 1
        if self.size >= 2 * SECTION_CHARS or (self.size >= SECTION_CHARS and not line.strip()):
            yield from self.flush()

    def flush(self) -> Iterator[Section]:
        text = "\n".join(self.lines)
        if text.strip():
            yield Section(text, heading=self.heading, line=self.start)
        self.lines, self.size, self.start = [], 0, None


def _plain_sections(lines: Iterator[tuple[int, str, bool]]) -> Iterator[Section]:
    builder = _Builder()
    for number, line, continued in lines:
        yield from builder.add(number, line, continued)
    yield from builder.flush()


class _Headings:
    """The headings above the current line: a new heading of level n closes those of level n and deeper."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []

    def enter(self, level: int, title: str) -> str:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        if title:
            self.stack.append((level, title))
        return HEADING_JOIN.join(t for _, t in self.stack)


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A line that is no paragraph text: a list item, a quote, indented code, a table row. "---" under it is a rule
# (or a table's delimiter), not a setext underline.
_NOT_PARAGRAPH = re.compile(r"^(?: {4,}|\t| {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)| {0,3}>| {0,3}\|)")


def _markdown_sections(lines: Iterator[tuple[int, str, bool]]) -> Iterator[Section]:
    """Markdown cut at its headings (ATX "## x" and setext "x" over "===" / "---"), none taken inside a code
    fence or the YAML front matter. A setext heading is known only at its underline, so each line waits one line
    before it is placed."""
    builder, headings = _Builder(), _Headings()
    fence = ""  # the open fence's marker ("```", "~~~~"): only a fence of the same kind and at least as long closes it
    pending: tuple[int, str, bool] | None = None  # the previous line, not placed yet
    front = False  # inside a front matter block ("---" on line 1 to the next "---" or "..."): text, no headings

    def start(number: int, level: int, title: str, line: str) -> Iterator[Section]:
        yield from builder.flush()
        builder.heading = headings.enter(level, title.strip())
        yield from builder.add(number, line)

    for number, line, continued in lines:
        if number == 1 and not continued and line.rstrip() == "---":
            front = True
        elif front and not continued and line.rstrip() in ("---", "..."):
            front = False
        elif front:
            pass
        elif not continued and (m := _FENCE.match(line)):
            marker = m.group(1)
            if not fence:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not line.strip().strip(marker[0]):
                fence = ""
        elif not fence and not continued:
            if (underline := _SETEXT.match(line)) and pending is not None and pending[1].strip() \
                    and not _ATX.match(pending[1]) and not _NOT_PARAGRAPH.match(pending[1]) and not pending[2]:
                yield from start(pending[0], 1 if underline.group(1)[0] == "=" else 2, pending[1], pending[1])
                pending = None
                yield from builder.add(number, "")  # the underline: a line kept (so the numbers hold), no text
                continue
            if atx := _ATX.match(line):
                if pending is not None:
                    yield from builder.add(*pending)
                    pending = None
                yield from start(number, len(atx.group(1)), atx.group(2) or "", line)
                continue
        if pending is not None:
            yield from builder.add(*pending)
        pending = (number, line, continued)
    if pending is not None:
        yield from builder.add(*pending)
    yield from builder.flush()


# --- HTML: the stdlib's parser, fed in pieces ------------------------------------------------------------------

_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "math"})
_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_BLOCK_TAGS = frozenset({
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "section", "article", "aside", "header", "footer",
    "main", "nav", "blockquote", "pre", "figure", "figcaption", "hr", "form", "fieldset", "details", "summary",
    "address", "caption", "tbody", "thead", "tfoot", "body", "html",
})


class _HtmlText(HTMLParser):
    """Visible text of an HTML page as sections under its headings (h1–h6). Script, style and the head are left
    out; block elements end paragraphs; whitespace runs collapse outside <pre>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.done: list[Section] = []
        self.headings = _Headings()
        self.heading = ""
        self.paragraphs: list[str] = []
        self.size = 0
        self.words: list[str] = []  # the paragraph being read
        self.skip = 0  # depth inside elements whose text is not shown
        self.pre = 0
        self.title: list[str] | None = None  # the heading being read, with its level
        self.level = 0
        self.head = False  # inside <head> (its <title> is the tab's, not the text's); HTML may omit </head>

    def parse_marked_section(self, i: int, report: bool = True) -> int:
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:  # "<![foo[": the stdlib asserts; skipped to its ">" as a browser does
            end = self.rawdata.find(">", i)
            return -1 if end < 0 else end + 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "head":
            self.head = True
        elif tag == "body":
            self.head = False
        if tag in _SKIP_TAGS:
            self.skip += 1
        elif tag in _HEADING_TAGS and not self.skip:
            self.end_paragraph()
            self.title, self.level = [], _HEADING_TAGS[tag]
        elif tag == "br":
            self.words.append("\n")
        elif tag in _BLOCK_TAGS:
            self.end_paragraph()
            if tag == "pre":
                self.pre += 1
        elif tag in ("td", "th") and self.words:
            self.words.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self.words.append("\n")
        elif tag in _BLOCK_TAGS:
            self.end_paragraph()

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self.head = False
        if tag in _SKIP_TAGS:
            self.skip = max(0, self.skip - 1)
        elif tag in _HEADING_TAGS and self.title is not None:
            title = " ".join("".join(self.title).split())
            self.title = None
            self.flush()
            self.heading = self.headings.enter(self.level, title)
            if title:
                self.paragraphs.append(title)
                self.size += len(title)
        elif tag in _BLOCK_TAGS:
            self.end_paragraph()
            if tag == "pre":
                self.pre = max(0, self.pre - 1)

    def handle_data(self, data: str) -> None:
        if self.skip or self.head:
            return
        if self.title is not None:
            self.title.append(data)
        elif self.pre:
            self.words.append(data)
        else:
            self.words.append(re.sub(r"\s+", " ", data))

    def end_paragraph(self) -> None:
        text = "".join(self.words)
        self.words = []
        text = text.strip("\n") if self.pre else "\n".join(" ".join(line.split()) for line in text.split("\n"))
        if text.strip():
            self.paragraphs.append(text.strip())
            self.size += len(text)
            if self.size >= SECTION_CHARS:
                self.flush()

    def flush(self) -> None:
        if self.paragraphs:
            self.done.append(Section("\n\n".join(self.paragraphs), heading=self.heading))
        self.paragraphs, self.size = [], 0


def _html_sections(pieces: Iterator[str]) -> Iterator[Section]:
    parser = _HtmlText()
    try:
        for piece in pieces:
            parser.feed(piece)
            yield from parser.done
            parser.done = []
        parser.close()
    except AssertionError as exc:  # the stdlib parser's remaining way to give up on markup
        raise ExtractError("damaged", f"damaged: the HTML cannot be parsed ({exc})") from exc
    parser.end_paragraph()
    parser.flush()
    yield from parser.done


class _DocxStyle(Protocol):
    """What the heading test reads of python-docx's paragraph style (``docx.styles.style.ParagraphStyle``)."""

    @property
    def name(self) -> str | None: ...

    @property
    def base_style(self) -> _DocxStyle | None: ...


# --- DOCX: python-docx, after the zip's directory says the XML is of a size to parse ---------------------------

_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a compound file: how Word stores an encrypted .docx (and old .doc)


def _docx_sections(path: Path) -> Iterator[Section]:
    import docx  # python-docx (and lxml) only when a DOCX is read
    from docx.opc.exceptions import PackageNotFoundError

    with _open(path) as fh:
        head = fh.read(len(_OLE))
    if head == _OLE:
        raise ExtractError("encrypted", "encrypted: it needs a password (or it is an old Word .doc file renamed)")
    try:
        with zipfile.ZipFile(path) as archive:
            body = archive.getinfo("word/document.xml").file_size
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ExtractError("damaged", f"damaged: not a readable Word document ({exc})") from exc
    if body > DOCX_XML_MAX:  # a zip bomb or a huge document: both would be a DOM of gigabytes
        raise ExtractError("too-large", f"too large: its text is {size_words(body)} unpacked, over the "
                                        f"{size_words(DOCX_XML_MAX)} QuantDesk reads from one Word document")
    try:
        document = docx.Document(str(path))
        blocks = list(document.iter_inner_content())
    except (PackageNotFoundError, KeyError, ValueError, AttributeError, SyntaxError, zipfile.BadZipFile) as exc:
        # lxml's XMLSyntaxError is a SyntaxError; python-docx raises KeyError/ValueError on missing or odd parts
        raise ExtractError("damaged", f"damaged: not a readable Word document ({exc})") from exc

    headings = _Headings()
    heading, paragraphs, size = "", list[str](), 0

    def section() -> Iterator[Section]:
        if paragraphs:
            yield Section("\n\n".join(paragraphs), heading=heading)

    for block in blocks:
        try:
            text, level = _docx_block(block)
        except Exception as exc:
            # python-docx on an odd table grid or style part: IndexError, TypeError, ValueError… each the sentence
            raise ExtractError("damaged", f"damaged: part of the Word document cannot be read ({exc})") from exc
        if level is not None and text:
            yield from section()
            heading, paragraphs, size = headings.enter(level, " ".join(text.split())), [], 0
        if text:
            paragraphs.append(text)
            size += len(text)
            if size >= SECTION_CHARS:
                yield from section()
                paragraphs, size = [], 0
    yield from section()


def _docx_block(block: Paragraph | Table) -> tuple[str, int | None]:
    """A body block's text and, for a heading paragraph, its level. A table is its rows, cells joined by " | "."""
    from docx.table import Table

    if not isinstance(block, Table):
        return block.text.strip(), _docx_heading_level(block.style)
    rows = []
    for row in block.rows:
        seen: set[int] = set()
        cells = []
        for cell in row.cells:  # a merged cell comes once per grid column it spans: kept once
            if id(cell._tc) not in seen:
                seen.add(id(cell._tc))
                cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows), None


def _docx_heading_level(style: _DocxStyle | None) -> int | None:
    """A paragraph style's heading level: "Title" 0, "Heading 2" 2, a style based on "Heading 2" 2; None for body
    text. Word keeps the built-in styles' English names in the file whatever the user's language (only the style
    ids are translated)."""
    for _ in range(8):  # a chain of "based on" styles; a cycle in a damaged file ends here
        if style is None:
            return None
        name = (style.name or "").strip().lower()
        if name == "title":
            return 0
        if m := re.fullmatch(r"heading\s*([1-9])", name):
            return int(m.group(1))
        style = style.base_style
    return None


# --- PDF: pypdf, page by page -----------------------------------------------------------------------------------

def _pdf_sections(path: Path) -> Iterator[Section]:
    from pypdf import PasswordType, PdfReader
    from pypdf.generic import DictionaryObject
    from pypdf.errors import DependencyError

    with _open(path) as fh:
        if not fh.read(1):
            raise ExtractError("damaged", "damaged: the file is empty")
        try:
            fh.seek(-1024, 2)
        except OSError:
            fh.seek(0)
        if b"%%EOF" not in fh.read():
            # pypdf rebuilds a missing cross-reference table and reads what it can of a cut file: the pages it
            # finds would be indexed as if they were all. A PDF ends with %%EOF (trailing junk is allowed after).
            raise ExtractError("damaged", "damaged: the file is cut short (no end-of-file marker): a download or "
                                          "copy that did not finish?")
        fh.seek(0)
        try:
            reader = PdfReader(fh, strict=False)
            if reader.is_encrypted:
                try:
                    opened = reader.decrypt("")  # many "protected" PDFs only restrict printing: the empty password
                except DependencyError as exc:
                    raise ExtractError("encrypted", "encrypted: reading it needs the cryptography package") from exc
                if opened == PasswordType.NOT_DECRYPTED:
                    raise ExtractError("encrypted", "encrypted: it needs a password")
            count = len(reader.pages)
            tree = reader.root_object["/Pages"].get_object()
            declared = tree.get("/Count", count) if isinstance(tree, DictionaryObject) else count
        except ExtractError:
            raise
        except Exception as exc:
            # pypdf's errors on garbage are not all PdfReadError (KeyError, ValueError, zlib's, recursion): each
            # becomes the report's sentence
            raise ExtractError("damaged", f"damaged: not a readable PDF ({_pdf_error(exc)})") from exc
        if isinstance(declared, int) and declared > count:
            # pypdf leaves out a page whose object is missing or broken, without a word: the page tree still
            # counts it
            raise ExtractError("damaged", f"damaged: {declared - count} of its {declared} pages cannot be read")
        if count == 0:
            raise ExtractError("no-text", "no text: the PDF has no pages")
        texts = images = 0
        complaints = _PypdfComplaints()
        logging.getLogger("pypdf").addHandler(complaints)
        try:
            for number in range(1, count + 1):
                complaints.messages.clear()
                try:
                    page = reader.pages[number - 1]
                    text = page.extract_text()
                    if not text.strip():
                        images += _has_images(page)
                except Exception as exc:
                    raise ExtractError("damaged", f"damaged: page {number} cannot be read ({_pdf_error(exc)})") \
                        from exc
                if not text.strip() and complaints.messages:
                    # a content stream pypdf could not decode: it logs and gives the page no text
                    raise ExtractError("damaged", f"damaged: page {number} cannot be read "
                                                  f"({_pdf_error(complaints.messages[0])})")
                text = "\n".join(line.rstrip() for line in text.replace("\0", "").splitlines()).strip()
                if text:
                    texts += 1
                    yield Section(text, page=number)
        finally:
            logging.getLogger("pypdf").removeHandler(complaints)
        if not texts:
            raise ExtractError("no-text", "no text: scanned pages need OCR, which QuantDesk does not do" if images
                               else "no text: its pages are empty")


class _PypdfComplaints(logging.Handler):
    """What pypdf logs on this thread while it reads a page. Not strict, it logs a stream it cannot decode and
    carries on with no text: for an empty page that log is the sentence that says the page is damaged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


def _has_images(page: object) -> bool:
    from pypdf import PageObject

    assert isinstance(page, PageObject)
    resources = page.get("/Resources")
    if resources is None:
        return False
    xobjects = resources.get_object().get("/XObject")
    if xobjects is None:
        return False
    return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.get_object().values())


def _pdf_error(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "…"
