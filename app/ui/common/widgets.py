"""Small reusable widgets: a sparkline, a labelled memory bar, a text view as tall as its text, an
undo bar, an empty state, a row that wraps its widgets onto more lines (Flow); and the helpers pages share
to build themselves (a scrolling page, a page title in the
type scale, a named button, an announcement for screen readers)."""

from __future__ import annotations

import html
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import (QCoreApplication, QEvent, QObject, QPoint, QPointF, QRect, QSize, Qt,
                            QTimer, Signal, Slot)
from PySide6.QtGui import (QAccessible, QAccessibleAnnouncementEvent, QColor, QPainter, QPalette, QPen, QPolygonF,
                           QPaintEvent, QResizeEvent)
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QListWidget, QProgressBar, QPushButton, QScrollArea,
                               QSizePolicy, QTextBrowser, QVBoxLayout, QWidget)

from app.ui.common.formatting import human_memory
from app.ui.common.theme import PAGE_MARGINS, SPACING
from app.ui.common.translations import QT_TRANSLATE_NOOP

# What the chat does once the conversation no longer fits the context (app/engine/overflow.py); "" follows the
# default in Settings. Shown through overflow_name, in the chat's settings and on the Settings page.
OVERFLOW_CHOICES = ((QT_TRANSLATE_NOOP("OverflowChoice", "Stop: refuse the message"), "stop"),
                    (QT_TRANSLATE_NOOP("OverflowChoice", "Drop the oldest turns"), "drop-oldest"),
                    (QT_TRANSLATE_NOOP("OverflowChoice", "Truncate the middle (keep the first exchange)"),
                     "truncate-middle"),
                    (QT_TRANSLATE_NOOP("OverflowChoice", "Compact: the model summarises the oldest turns"),
                     "compact"))


def overflow_name(name: str) -> str:
    """One of OVERFLOW_CHOICES' names in the user's language."""
    return QCoreApplication.translate("OverflowChoice", name)


def page_title(text: str) -> QLabel:
    """A page's title, in the type scale's title size (app.ui.common.theme's style sheet)."""
    label = QLabel(text)
    label.setObjectName("pageTitle")
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def section_title(text: str) -> QLabel:
    """A section's heading inside a page, in the type scale's section size."""
    label = QLabel(text)
    label.setObjectName("sectionTitle")
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label


class EmptyState(QFrame):
    """What a page with nothing to show says: what goes here, what to do next, and a button that does it."""

    def __init__(self, title: str, text: str, action: str, icon_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from app.ui.common.icons import decorate

        self.setObjectName("emptyState")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACING[4], SPACING[4] * 2, SPACING[4], SPACING[4])
        layout.setSpacing(SPACING[1])
        self.title = QLabel(title)
        self.title.setObjectName("emptyTitle")
        self.text = QLabel(text)
        self.text.setObjectName("emptyText")
        self.text.setWordWrap(True)
        for label in (self.title, self.text):
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            layout.addWidget(label)
        self.button = decorate(QPushButton(action), icon_name)
        self.button.setObjectName("primary")
        self.button.setAccessibleName(action)
        layout.addSpacing(SPACING[1])
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(1)


def page_margins(layout: QVBoxLayout) -> QVBoxLayout:
    """The same margins around every page's content."""
    layout.setContentsMargins(*PAGE_MARGINS)
    return layout


def page_scroll(scroll: QScrollArea) -> QScrollArea:
    """A scroll area that holds (part of) a page: sized to its content, frameless, and not a focus stop. The focus
    goes to the first control inside instead (a scroll area scrolls to whatever has the focus), so Ctrl+1…9 and a
    page switch land on a field, not on a ring around the whole page."""
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QFrame.Shape.NoFrame)
    scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    return scroll


def scrolling_content(page: QWidget) -> QWidget:
    """The widget to lay the page out in: inside a scroll area, so a small window can still show the
    page (and the main window keeps the small minimum size it has without it)."""
    outer = QVBoxLayout(page)
    outer.setContentsMargins(0, 0, 0, 0)
    scroll = page_scroll(QScrollArea())
    content = QWidget()
    scroll.setWidget(content)
    outer.addWidget(scroll)
    return content


def button(text: str, accessible: str, slot: Callable[..., object]) -> QPushButton:
    """A push button with its accessible name, its click connected to ``slot`` (a bound slot)."""
    pushed = QPushButton(text)
    pushed.setAccessibleName(accessible)
    pushed.clicked.connect(slot)
    return pushed


def elide_middle(view: QListWidget) -> None:
    """Long model names end in "…" (the tooltip has them whole) instead of a horizontal scroll bar."""
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)


ANNOUNCEMENT_CHARS = 2000  # a screen reader reads an announcement whole: a long reply is announced by its start


def announce(source: QWidget, text: str) -> None:
    """Have screen readers say ``text`` (politely: after what they are saying), on behalf of ``source``: for
    what changes without the focus moving there, as a reply that finishes streaming."""
    if len(text) > ANNOUNCEMENT_CHARS:
        text = text[: ANNOUNCEMENT_CHARS - 1].rstrip() + "…"
    QAccessible.updateAccessibility(QAccessibleAnnouncementEvent(source, text))


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

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        if len(self.samples) < 2:
            return
        top = 1.2 * max(self.samples) or 1.0  # headroom: a steady rate is a line, not a full box
        w, h = self.width() - 2, self.height() - 3
        assert self.samples.maxlen is not None  # __init__ gives it its capacity
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
            figures = self.tr("{used} in use of {total}").format(
                used=human_memory(used), total=human_memory(total)) if used is not None else (
                human_memory(total))
        else:
            figures = self.tr("size unknown")
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
            self.bar.setAccessibleName(self.tr("{title} memory").format(title=title))
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


class UndoBar(QFrame):
    """"<what was done> — Undo" for a while after a destructive action (Gmail, LM Studio): the action
    happens at once and can be taken back until the bar goes. The owner keeps what undoing needs."""

    undo_requested = Signal()
    expired = Signal()

    def __init__(self, seconds: float = 10, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("undoBar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # it quotes user text (chat titles)
        self.label.setWordWrap(True)
        self.label.setAccessibleName(self.tr("Undo notice"))
        self.undo_button = QPushButton(self.tr("Undo"))
        self.undo_button.setAccessibleName(self.tr("Undo"))
        self.undo_button.setMinimumWidth(56)
        self.undo_button.clicked.connect(self._on_undo_clicked)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.undo_button)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(int(seconds * 1000))
        self.timer.timeout.connect(self._on_timeout)
        self.hide()

    def offer(self, text: str) -> None:
        """Show ``text`` with the Undo button, for the bar's time from now (a newer offer replaces it)."""
        self.label.setText(text)
        self.undo_button.setToolTip(self.tr("{text} — undo").format(text=text))
        self.show()
        self.timer.start()

    def dismiss(self) -> None:
        self.timer.stop()
        self.hide()

    @Slot()
    def _on_undo_clicked(self) -> None:
        self.dismiss()
        self.undo_requested.emit()

    @Slot()
    def _on_timeout(self) -> None:
        self.hide()
        self.expired.emit()



class Flow(QWidget):
    """Widgets in a row that wraps onto the next line when the width runs out (as words do), each at its size hint:
    a row of controls or chips that fits a narrow window without cutting any of them. Its height follows its width
    (``heightForWidth``), so the layout around it gives it the lines it needs. (A widget that places its children,
    not a QLayout subclass: PySide cannot keep a Python layout's items, which Qt owns.)"""

    def __init__(self, spacing: int = 6, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._spacing = spacing
        self._widgets: list[QWidget] = []
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    def add_widget(self, widget: QWidget) -> None:
        widget.setParent(self)
        widget.installEventFilter(self)  # shown or hidden: the lines change
        self._widgets.append(widget)
        self._changed()

    def widgets(self) -> list[QWidget]:
        return list(self._widgets)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if event.type() in (QEvent.Type.ShowToParent, QEvent.Type.HideToParent):
            self._changed()
        return False

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:  # a child's size hint changed (its text, its items)
            self._changed()
        return super().event(event)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt's name)
        self._place(event.size().width(), move=True)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt's name)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt's name)
        return self._place(width, move=False)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's name): all on one line
        hints = [self._hint(w) for w in self._shown()]
        return QSize(sum(h.width() for h in hints) + self._spacing * max(len(hints) - 1, 0),
                     max((h.height() for h in hints), default=0))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name): the widest widget alone on its line
        size = QSize(0, 0)
        for widget in self._shown():
            size = size.expandedTo(self._hint(widget))
        return size

    def _shown(self) -> list[QWidget]:
        return [w for w in self._widgets if not w.isHidden()]

    @staticmethod
    def _hint(widget: QWidget) -> QSize:
        return widget.sizeHint().expandedTo(widget.minimumSize())

    def _changed(self) -> None:
        self.updateGeometry()
        self._place(self.width(), move=True)

    def _place(self, width: int, move: bool) -> int:
        """Lay the shown widgets out in ``width`` (when ``move``), each centred on its line's height; the height they
        take."""
        lines: list[list[tuple[QWidget, QSize]]] = [[]]
        x = 0
        for widget in self._shown():
            hint = self._hint(widget)
            if lines[-1] and x + hint.width() > width:
                lines.append([])
                x = 0
            lines[-1].append((widget, hint))
            x += hint.width() + self._spacing
        y = 0
        for line in lines:
            height = max((hint.height() for _, hint in line), default=0)
            x = 0
            for widget, hint in line:
                if move:
                    widget.setGeometry(QRect(QPoint(x, y + (height - hint.height()) // 2),
                                             QSize(min(hint.width(), width), hint.height())))
                x += hint.width() + self._spacing
            y += height + self._spacing
        return max(y - self._spacing, 0)
