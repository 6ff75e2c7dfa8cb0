"""Walks a laid-out widget tree and names what a person would see as broken: a widget cut off by its parent's edge,
two widgets drawn over each other, a label or button too narrow (or short) for its text.

The rules, so that what the layout means to do is not flagged:
- Only widgets shown on screen count (``isVisibleTo`` the window: a stacked widget's other pages, a hidden row).
- What scrolls is not cut off: the children of a scroll area's viewport (a list's item widgets, a QScrollArea's
  content, a table's cell widgets) may lie outside it; their own insides are checked like any other widget's.
- Qt's compound widgets (a spin box's line edit, a combo box's parts, a tab bar's scroll buttons, a header's
  sections) are Qt's to lay out: they are measured as one widget, their insides not walked.
- The focus ring (app/ui/common/focus_ring.py) lies over the focused widget on purpose.
- Text: a label without word wrap, and a button, is cut when narrower than its text (``minimumSizeHint``, which
  is the whole text for these); a word-wrapped label when shorter than ``heightForWidth`` at its width; a spin box
  or combo box when narrower than its ``minimumSizeHint``. A label that elides on purpose says so with the
  ``elides`` property (app.ui.common.widgets.ElidedLabel) and is left out; so is one with the Ignored size policy,
  which Qt's layouts use for "take what is left, clip the rest", so that is flagged as a widget the layout
  could not fit only when it is narrower than half its text.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect
from PySide6.QtWidgets import (QAbstractButton, QAbstractScrollArea, QAbstractSpinBox, QComboBox, QFocusFrame,
                               QHeaderView, QLabel, QProgressBar, QScrollBar, QSizePolicy, QSplitterHandle,
                               QTabBar, QWidget)

SLACK = 1  # a pixel of rounding at an edge is not a cut
OPAQUE = (QAbstractSpinBox, QComboBox, QTabBar, QHeaderView, QScrollBar, QProgressBar)


@dataclass(frozen=True)
class Problem:
    kind: str  # "clipped", "overlap", "text cut", "window"
    where: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}"


def describe(widget: QWidget) -> str:
    name = widget.objectName() or widget.accessibleName()
    text = widget.text() if isinstance(widget, (QLabel, QAbstractButton)) else ""
    text = " ".join(text.split())
    label = type(widget).__name__ + (f"#{name}" if name else "") + (f" {text[:40]!r}" if text else "")
    parent = widget.parentWidget()
    chain = []
    while parent is not None and len(chain) < 3:
        chain.append(type(parent).__name__ + (f"#{parent.objectName()}" if parent.objectName() else ""))
        parent = parent.parentWidget()
    return f"{label} in {' < '.join(chain)}"


def _shown(widget: QWidget) -> bool:
    return widget.isVisibleTo(widget.window()) and widget.width() > 0 and widget.height() > 0


def _scrolls(widget: QWidget) -> bool:
    """Whether ``widget``'s children scroll inside it (a scroll area's viewport)."""
    parent = widget.parentWidget()
    return isinstance(parent, QAbstractScrollArea) and parent.viewport() is widget


def _ignored(widget: QWidget) -> bool:
    return widget.sizePolicy().horizontalPolicy() == QSizePolicy.Policy.Ignored


def text_cut(widget: QWidget) -> str | None:
    """Why ``widget``'s text does not fit it, or None."""
    if widget.property("elides"):
        return None
    if isinstance(widget, QLabel):
        if not widget.text() or widget.pixmap() is not None and not widget.pixmap().isNull():
            return None
        if widget.wordWrap():
            need = widget.heightForWidth(widget.width())
            return f"{widget.height()} px high, its text needs {need}" if need > widget.height() + SLACK else None
        need = widget.minimumSizeHint().width()
        if _ignored(widget):
            need //= 2
        return f"{widget.width()} px wide, its text needs {need}" if need > widget.width() + SLACK else None
    if isinstance(widget, (QAbstractButton, QAbstractSpinBox, QComboBox)):
        if isinstance(widget, QAbstractButton) and not widget.text():
            return None
        need = widget.minimumSizeHint()
        if need.width() > widget.width() + SLACK:
            return f"{widget.width()} px wide, its text needs {need.width()}"
        if need.height() > widget.height() + SLACK and not isinstance(widget, QAbstractButton):
            return f"{widget.height()} px high, it needs {need.height()}"
    return None


def _overlaps(children: list[QWidget]) -> list[tuple[QWidget, QWidget]]:
    found = []
    for i, a in enumerate(children):
        for b in children[i + 1:]:
            both = a.geometry().intersected(b.geometry())
            if both.width() > SLACK and both.height() > SLACK:
                found.append((a, b))
    return found


def problems(root: QWidget) -> list[Problem]:
    """What is cut off, drawn over, or too small for its text anywhere under ``root`` (root included)."""
    found: list[Problem] = []

    def walk(widget: QWidget) -> None:
        if (reason := text_cut(widget)) is not None:
            found.append(Problem("text cut", f"{describe(widget)}: {reason}"))
        if isinstance(widget, OPAQUE):
            return
        children = [c for c in widget.findChildren(QWidget, options=_direct()) if _shown(c) and c.isWidgetType()
                    and not c.isWindow() and not isinstance(c, (QFocusFrame, QSplitterHandle))]
        if not _scrolls(widget):
            inside = QRect(widget.rect()).adjusted(-SLACK, -SLACK, SLACK, SLACK)
            for child in children:
                if not inside.contains(child.geometry()):
                    g = child.geometry()
                    found.append(Problem("clipped", f"{describe(child)} at {g.x()},{g.y()} {g.width()}×{g.height()} "
                                                    f"outside its parent's {widget.width()}×{widget.height()}"))
            for a, b in _overlaps(children):
                found.append(Problem("overlap", f"{describe(a)} and {describe(b)}"))
        for child in children:
            walk(child)

    if _shown(root):
        walk(root)
    return found


def _direct():
    from PySide6.QtCore import Qt

    return Qt.FindChildOption.FindDirectChildrenOnly
