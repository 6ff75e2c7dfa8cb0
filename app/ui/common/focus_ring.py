"""A focus ring that can be seen: a 2-pixel ring in the highlight colour on the edge of whichever widget of the
main window has the keyboard focus.

Fusion (our style on Linux without a platform theme, offscreen, and for the dark theme) marks the focus with a
one-pixel tint, or a dotted rectangle on an item, that is hard to find on a full page; a keyboard user must see
where the next key goes. QFocusFrame follows a widget's moves, resizes, hiding and deletion; placed above the
widget and on its edge (not around it, where a parent's edge would clip it: the sidebar, lists and tables touch
theirs), it is drawn here as a rounded ring and moved with the focus."""

from __future__ import annotations

from PySide6.QtCore import QObject, QRectF, Qt, Slot
from PySide6.QtGui import QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QApplication, QFocusFrame, QProxyStyle, QStyle, QStyleHintReturn, QStyleOption, QWidget
from shiboken6 import delete, isValid

RING_WIDTH = 2


class _OnTheEdge(QProxyStyle):
    """How QFocusFrame places itself: above the widget (in its window, or the scroll area's viewport it sits in),
    with no margin and no mask: the frame covers the widget exactly and paints only the ring."""

    def styleHint(self, hint: QStyle.StyleHint, option: QStyleOption | None = None,  # noqa: N802 (Qt's name)
                  widget: QWidget | None = None, data: QStyleHintReturn | None = None) -> int:
        if hint == QStyle.StyleHint.SH_FocusFrame_AboveWidget:
            return 1
        if hint == QStyle.StyleHint.SH_FocusFrame_Mask:
            return 0
        return super().styleHint(hint, option, widget, data)

    def pixelMetric(self, metric: QStyle.PixelMetric, option: QStyleOption | None = None,  # noqa: N802 (Qt's name)
                    widget: QWidget | None = None) -> int:
        if metric in (QStyle.PixelMetric.PM_FocusFrameHMargin, QStyle.PixelMetric.PM_FocusFrameVMargin):
            return 0
        return super().pixelMetric(metric, option, widget)


class FocusRing(QFocusFrame):
    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._placement = _OnTheEdge()  # a widget does not own the style it is given: keep it alive here
        self.setStyle(self._placement)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        if self.widget() is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(self.palette().color(QPalette.ColorRole.Highlight), RING_WIDTH))
        inset = RING_WIDTH / 2
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(inset, inset, -inset, -inset), 4, 4)


class FocusRingFollower(QObject):
    """Keeps one FocusRing on the focused widget inside ``window`` or one of its dialogs (a window whose parent
    chain leads to it: chat settings, remote connections, a message box).

    The ring lives in the window or in a scroll area's viewport; when that viewport is deleted the ring goes with
    it, and the next focus change makes a new one. ``stop`` (the window closing) lets go of the application's
    focus changes and takes the ring away."""

    def __init__(self, window: QWidget) -> None:
        # The window is reached through parent(): a reference here would make a cycle that only the garbage
        # collector breaks, at exit after QApplication has gone (and Qt warns or aborts).
        super().__init__(window)
        self.ring: FocusRing | None = None
        self._following = True
        _application().focusChanged.connect(self._on_focus_changed)

    @Slot()
    def stop(self) -> None:
        if not self._following:
            return
        self._following = False
        _application().focusChanged.disconnect(self._on_focus_changed)
        if self.ring is not None and isValid(self.ring):
            self.ring.setWidget(None)  # type: ignore[arg-type]  # Qt takes nullptr (no widget); the stub says QWidget
            delete(self.ring)
        self.ring = None

    @Slot(QWidget, QWidget)
    def _on_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        window = self.parent()
        assert isinstance(window, QWidget)  # __init__'s window
        # A widget that takes no focus holds it only as Qt's last resort (a page with no control yet, given the
        # focus by the page switch): no ring round a whole page.
        shown = (new is not None and new.focusPolicy() != Qt.FocusPolicy.NoFocus
                 and _belongs_to(new.window(), window))
        if self.ring is None or not isValid(self.ring):
            if not shown:
                return
            self.ring = FocusRing(window)  # QFocusFrame moves itself into the focused widget's window
        self.ring.setWidget(new if shown else None)  # type: ignore[arg-type]  # None (Qt's nullptr): no widget


def _application() -> QApplication:
    app = QApplication.instance()
    assert isinstance(app, QApplication)  # widgets exist, so a QApplication does
    return app


def _belongs_to(top: QWidget | None, window: QWidget) -> bool:
    """``top`` is ``window`` or a dialog opened over it (parented to it, directly or through another dialog)."""
    while top is not None:
        if top is window:
            return True
        parent = top.parentWidget()
        top = parent.window() if parent is not None else None
    return False
