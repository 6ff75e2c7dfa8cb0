"""Small reusable widgets: a sparkline, a labelled memory bar, a text view as tall as its text."""

from __future__ import annotations

import html
from collections import deque

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import (QFrame, QLabel, QProgressBar, QSizePolicy, QTextBrowser, QVBoxLayout,
                               QWidget)

from app.ui.formatting import human_memory


class Sparkline(QWidget):
    """The last ``capacity`` samples as a line, scaled to their own maximum."""

    def __init__(self, capacity: int = 60, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.samples: deque[float] = deque(maxlen=capacity)
        self.setMinimumSize(80, 22)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(110, 24)

    def add(self, value: float) -> None:
        self.samples.append(value)
        self.update()

    def clear(self) -> None:
        self.samples.clear()
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if len(self.samples) < 2:
            return
        top = 1.2 * max(self.samples) or 1.0  # headroom: a steady rate is a line, not a full box
        w, h = self.width() - 2, self.height() - 3
        step = w / (self.samples.maxlen - 1)
        x0 = w - step * (len(self.samples) - 1)
        points = [QPointF(1 + x0 + i * step, 1 + h - h * v / top) for i, v in enumerate(self.samples)]
        colour = self.palette().color(QPalette.ColorRole.Highlight)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        # A filled area reads as "speed" even when the rate is steady and the line runs flat.
        fill = QColor(colour)
        fill.setAlpha(60)
        area = QPolygonF([QPointF(points[0].x(), 1 + h), *points, QPointF(points[-1].x(), 1 + h)])
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(fill)
        painter.drawPolygon(area)
        painter.setPen(QPen(colour, 1.6))
        painter.drawPolyline(QPolygonF(points))
        painter.end()


class MemoryBar(QWidget):
    """"<title> — used of total" above a bar, and a grey note under it. Without a known total there
    is nothing to draw, so the bar is left out rather than shown empty. Texts are plain, not HTML."""

    def __init__(self, title: str, used: int | None, total: int | None, note: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        if total:
            figures = f"{human_memory(used)} in use of {human_memory(total)}" if used is not None else (
                human_memory(total))
        else:
            figures = "size unknown"
        self.label = QLabel(f"<b>{html.escape(title)}</b> — {figures}")
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setWordWrap(True)
        layout.addWidget(self.label)
        self.bar: QProgressBar | None = None
        if total:
            self.bar = QProgressBar()
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(1000 * used / total) if used is not None else 0)
            self.bar.setTextVisible(False)
            self.bar.setFixedHeight(10)
            self.bar.setAccessibleName(f"{title} memory")
            self.bar.setAccessibleDescription(figures)
            layout.addWidget(self.bar)
        if note:
            self.note = QLabel(note)
            self.note.setObjectName("caption")
            self.note.setTextFormat(Qt.TextFormat.PlainText)
            self.note.setWordWrap(True)
            layout.addWidget(self.note)


class AutoHeightBrowser(QTextBrowser):
    """A read-only rich text view that grows to fit its document instead of scrolling."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._on_document_size_changed)
        self._on_document_size_changed()

    def _on_document_size_changed(self, *_: object) -> None:
        height = int(self.document().size().height()) + 2 * self.frameWidth() + 2
        if height != self.height():
            self.setFixedHeight(max(height, 20))
