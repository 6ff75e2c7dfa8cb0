"""The Chat's citations (issue 28): a reply that was given passages of the chat's documents shows them as numbered
chips under its text ("[1] guide.pdf · page 3"), its "[1]" marks become links, and either opens the passage in the
side panel beside the messages (the file, where in it, the passage's text, "Open file").

A citation is the dict the chat store keeps (``Citation.to_dict()`` of app/documents/passages.py, plus its
``where``): this module reads those, so a reply reopened from the store shows the same chips as when it streamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSizePolicy, QToolButton,
                               QVBoxLayout, QWidget)

from app.ui.common.widgets import announce

CITE_SCHEME = "quantdesk-cite"  # a "[n]" mark in a reply's text links to quantdesk-cite:n
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?(?:^(?P=fence)[ \t]*$|\Z)", re.S | re.M)
_INLINE_CODE = re.compile(r"(`+)(?:.+?)\1", re.S)
# "[3]" not already a link's text or target ("[3](…)", "][3]", "[3][x]") and not escaped; a line that starts with
# "[3]:" is a link reference definition (left as it is), "see [3]: …" inside a line is a mark
_MARK = re.compile(r"(?<![\\\]])\[(\d{1,3})\](?![(\[])")
_DEFINITION = re.compile(r"^ {0,3}$")


def file_name(citation: Mapping[str, Any]) -> str:
    return str(citation.get("path") or "").replace("\\", "/").rsplit("/", 1)[-1]


def place(citation: Mapping[str, Any]) -> str:
    """Where the passage stands in its file, in the user's language: "page 3", the heading above it, "line 12"."""
    if citation.get("page") is not None:
        return QCoreApplication.translate("citations", "page {page}").format(page=citation["page"])
    if citation.get("heading"):
        return str(citation["heading"])
    if citation.get("line") is not None:
        return QCoreApplication.translate("citations", "line {line}").format(line=citation["line"])
    return ""


def label(citation: Mapping[str, Any]) -> str:
    """A chip's text: "[1] guide.pdf · page 3"."""
    where = place(citation)
    name = file_name(citation)
    return f"[{citation.get('number', '?')}] " + (f"{name} · {where}" if where else name)


def with_citation_links(markdown: str, numbers: Iterable[int]) -> str:
    """``markdown`` with each "[n]" of a cited number made a link to ``quantdesk-cite:n``; code (fenced blocks and
    inline spans) and existing links are left as they are, and so is a number nothing was cited under."""
    cited = set(numbers)
    if not cited or "[" not in markdown:
        return markdown
    out: list[str] = []
    last = 0
    for fence in _FENCE.finditer(markdown):
        out.append(_link_prose(markdown[last:fence.start()], cited))
        out.append(fence.group(0))
        last = fence.end()
    out.append(_link_prose(markdown[last:], cited))
    return "".join(out)


def _link_prose(text: str, cited: set[int]) -> str:
    out: list[str] = []
    last = 0
    for code in _INLINE_CODE.finditer(text):
        out.append(_link_marks(text[last:code.start()], cited))
        out.append(code.group(0))
        last = code.end()
    out.append(_link_marks(text[last:], cited))
    return "".join(out)


def _link_marks(text: str, cited: set[int]) -> str:
    def link(match: re.Match[str]) -> str:
        number = int(match.group(1))
        line_start = text.rfind("\n", 0, match.start()) + 1
        definition = text.startswith(":", match.end()) and _DEFINITION.match(text[line_start:match.start()])
        if number not in cited or definition:
            return match.group(0)
        return f"[\\[{number}\\]]({CITE_SCHEME}:{number})"

    return _MARK.sub(link, text)


def cited_number(url: QUrl) -> int | None:
    """The number a "[n]" link names, or None for any other link."""
    if url.scheme() != CITE_SCHEME:
        return None
    try:
        return int(url.path())
    except ValueError:
        return None


class CitationChips(QWidget):
    """A reply's citations as a row of numbered chips under its text; a click asks for the passage (``opened``)."""

    opened = Signal(object)  # the citation's dict

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Sources"))
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 2, 0, 0)
        row.setSpacing(6)
        self.caption = QLabel(self.tr("Sources:"))
        self.caption.setObjectName("caption")
        row.addWidget(self.caption)
        self._row = row
        row.addStretch(1)
        self.citations: tuple[dict[str, Any], ...] = ()
        self.chips: list[QToolButton] = []

    def set_citations(self, citations: Sequence[Mapping[str, Any]]) -> None:
        for chip in self.chips:
            chip.deleteLater()
        self.chips = []
        self.citations = tuple(dict(c) for c in citations)
        for citation in self.citations:
            chip = QToolButton()
            chip.setObjectName("citationChip")
            chip.setText(label(citation))
            chip.setAutoRaise(True)
            chip.setAccessibleName(self.tr("Source {number}: {where}").format(
                number=citation.get("number", "?"), where=label(citation).split("] ", 1)[-1]))
            excerpt = " ".join(str(citation.get("text", "")).split())
            chip.setToolTip(excerpt[:240] + ("…" if len(excerpt) > 240 else ""))
            chip.clicked.connect(self._on_chip_clicked)
            self._row.insertWidget(self._row.count() - 1, chip)
            chip.show()
            self.chips.append(chip)
        self.setVisible(bool(self.citations))

    def citation(self, number: int) -> dict[str, Any] | None:
        return next((c for c in self.citations if c.get("number") == number), None)

    @Slot()
    def _on_chip_clicked(self) -> None:
        index = self.chips.index(self.sender())  # type: ignore[arg-type]  # the sender is one of the chips
        self.opened.emit(self.citations[index])


class CitationPanel(QFrame):
    """The side panel that shows one cited passage: the file's name, where in it, the collection, the passage's text
    and "Open file" (the system's viewer for it); Close hides the panel."""

    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("citationPanel")
        self.setAccessibleName(self.tr("Cited passage"))
        self.setMinimumWidth(220)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 12, 12, 12)
        layout.setSpacing(6)
        header = QHBoxLayout()
        self.title = QLabel()
        self.title.setObjectName("sectionTitle")
        self.title.setWordWrap(True)
        self.title.setAccessibleName(self.tr("File"))
        self.close_button = QToolButton()
        self.close_button.setText("×")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip(self.tr("Close the passage"))
        self.close_button.setAccessibleName(self.tr("Close the passage"))
        self.close_button.clicked.connect(self.close_panel)
        header.addWidget(self.title, 1)
        header.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(header)
        self.where = QLabel()
        self.where.setObjectName("caption")
        self.where.setWordWrap(True)
        self.where.setAccessibleName(self.tr("Where in the file"))
        layout.addWidget(self.where)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setAccessibleName(self.tr("Passage"))
        self.text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        layout.addWidget(self.text, 1)
        self.path_label = QLabel()
        self.path_label.setObjectName("caption")
        self.path_label.setWordWrap(True)
        self.path_label.setAccessibleName(self.tr("File path"))
        layout.addWidget(self.path_label)
        self.open_button = QPushButton(self.tr("Open file"))
        self.open_button.setAccessibleName(self.tr("Open the cited file"))
        self.open_button.clicked.connect(self._on_open_clicked)
        layout.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.citation: dict[str, Any] | None = None
        self.hide()

    def show_citation(self, citation: Mapping[str, Any]) -> None:
        self.citation = dict(citation)
        name = file_name(citation)
        self.title.setText(f"[{citation.get('number', '?')}] {name}")
        parts = [p for p in (place(citation), self.tr("collection “{name}”").format(name=citation["collection"])
                             if citation.get("collection") else "") if p]
        self.where.setText(" · ".join(parts))
        self.text.setPlainText(str(citation.get("text", "")))
        path = str(citation.get("path") or "")
        exists = bool(path) and Path(path).is_file()
        # A path has no spaces to wrap at: it may wrap after each separator (the whole path is the tooltip).
        wrappable = path.replace("/", "/\u200b").replace("\\", "\\\u200b")
        self.path_label.setText(wrappable if exists else self.tr("{path} (no longer there)").format(path=wrappable))
        self.path_label.setToolTip(path)
        self.open_button.setEnabled(exists)
        self.open_button.setToolTip(self.tr("Open {name} in the system's viewer").format(name=name) if exists
                                    else self.tr("The file is no longer where it was indexed"))
        self.show()
        announce(self, self.tr("Source {number}: {where}").format(number=citation.get("number", "?"),
                                                                  where=" · ".join([name, *parts])))

    @Slot()
    def close_panel(self) -> None:
        self.hide()
        self.closed.emit()

    @Slot()
    def _on_open_clicked(self) -> None:
        if self.citation is not None and self.citation.get("path"):
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.citation["path"])))
