"""The quant lab's charts, drawn with QPainter: quality loss against generation speed (a labelled
scatter with min–max bars across and ± one standard error up and down), the mean KL divergence per variant
(bars with ± one standard error and the 99th percentile), peak memory per variant (bars with min–max whiskers),
and a sweep's mean KL divergence across its context lengths or KV-cache types (a line per swept variant, ± one
standard error).

What to plot is worked out from a BenchResult by Qt-free functions (``speed_quality_points``, ``kld_rows``,
``memory_rows``, ``sweep_lines``) so the choices — which quality figure, which variants are left out and why — are
easy to test and are the same ones the page's captions name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QPointF, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QGridLayout, QSizePolicy, QWidget

from app.lab.results import KV_TYPES, BenchResult, VariantResult
from app.ui.common.formatting import human_memory, number, percent, tokens_per_second
from app.ui.common.translations import QT_TRANSLATE_NOOP

REFERENCE_COLOUR = "#2e9d57"
# A sweep's lines, told apart by hue: each reads on the light and the dark palette's base.
SERIES_COLOURS = ("#3b82f6", "#e4572e", "#a855f7", "#f59e0b", "#14b8a6", "#db2777", "#65a30d", "#64748b")
PERCENT_METRICS = ("same_top_p", "rms_dp")


def estimate_text(metric: str, value: float, error: float) -> str:
    """A figure ± its standard error, both to the error's second significant digit ("0.000747 ± 0.000028",
    "99.74 ± 0.12%")."""
    scale = 100.0 if metric in PERCENT_METRICS else 1.0
    decimals = min(max(0, 1 - math.floor(math.log10(error * scale))), 8) if error > 0 else 4
    if metric in PERCENT_METRICS:
        return QCoreApplication.translate("lab_page", "{value} ± {error}").format(
            value=number(value * scale, decimals), error=percent(error, decimals))
    return QCoreApplication.translate("lab_page", "{value} ± {error}").format(
        value=number(value, decimals), error=number(error, decimals))


@dataclass(frozen=True)
class Point:
    label: str
    x: float  # generation tok/s, median
    x_low: float
    x_high: float
    y: float  # quality loss (mean KLD nats/token, or perplexity above the reference's)
    is_reference: bool
    y_error: float = 0.0  # one standard error of y


@dataclass(frozen=True)
class QualityAxis:
    metric: str  # "kld_mean" | "delta_perplexity" | ""
    title: str


@dataclass(frozen=True)
class KldRow:
    label: str
    mean: float
    error: float  # one standard error
    p99: float
    is_reference: bool


@dataclass(frozen=True)
class MemoryRow:
    label: str
    median: int
    low: int
    high: int
    size_bytes: int
    is_reference: bool


def quality_axis(result: BenchResult) -> QualityAxis:
    """Mean KL divergence where any variant has it (it measures the loss directly); else perplexity above the
    reference's; else nothing to plot."""
    if any(v.estimate("kld_mean") is not None for v in result.variants):
        return QualityAxis("kld_mean", QCoreApplication.translate("lab_chart", "mean KLD from the reference "
                                                                               "(nats/token)"))
    reference = result.variants[0] if result.variants else None
    if reference is not None and reference.perplexity is not None and any(
            v.perplexity is not None for v in result.variants[1:]):
        return QualityAxis("delta_perplexity", QCoreApplication.translate("lab_chart",
                "perplexity above the reference's"))
    return QualityAxis("", "")


def _loss(v: VariantResult, axis: QualityAxis, reference: VariantResult) -> tuple[float, float] | None:
    """The loss and its standard error."""
    if axis.metric == "kld_mean":
        estimate = v.estimate("kld_mean")
        return None if estimate is None else (estimate.value, estimate.se or 0.0)
    if axis.metric == "delta_perplexity" and v.perplexity is not None and reference.perplexity is not None:
        return v.perplexity - reference.perplexity, 0.0
    return None


def speed_quality_points(result: BenchResult) -> tuple[QualityAxis, list[Point], list[str]]:
    """The axis, the points, and for every variant left out a sentence saying why."""
    axis = quality_axis(result)
    points: list[Point] = []
    missing: list[str] = []
    if not result.variants:
        return axis, points, missing
    reference = result.variants[0]
    for v in result.variants:
        speed = v.speed.get("decode_tps")
        loss = _loss(v, axis, reference) if axis.metric else None
        if v.error:
            missing.append(QCoreApplication.translate("lab_chart", "{label}: failed — {error}")
                           .format(label=v.label, error=v.error))
        elif speed is None:
            missing.append(f"{v.label}: {v.unavailable.get('decode_tps', 'no generation speed')}")
        elif loss is None:
            why = v.unavailable.get("kld_mean" if axis.metric == "kld_mean"
                                    else "perplexity") or QCoreApplication.translate("lab_chart",
                    "no quality figure")
            missing.append(f"{v.label}: {why}")
        else:
            points.append(Point(v.label, speed.median, speed.low, speed.high, loss[0], v.is_reference, loss[1]))
    return axis, points, missing


def kld_rows(result: BenchResult) -> tuple[list[KldRow], list[str]]:
    """Mean KLD ± one standard error and the 99th percentile per compared variant (the reference is 0 by
    definition: left out), and for every variant left out a sentence saying why."""
    rows: list[KldRow] = []
    missing: list[str] = []
    for v in result.variants:
        if v.is_reference:
            continue
        q = v.quality
        if q is None:
            missing.append(f"{v.label}: " + (v.error or v.unavailable.get("kld_mean") or QCoreApplication.translate(
                "lab_chart", "no KL divergence")))
        else:
            rows.append(KldRow(v.label, q.kld.value, q.kld.se or 0.0, q.kld_percentiles["99"], v.is_reference))
    return rows, missing


def memory_rows(result: BenchResult) -> tuple[list[MemoryRow], list[str]]:
    rows: list[MemoryRow] = []
    missing: list[str] = []
    for v in result.variants:
        spread = v.speed.get("peak_memory_bytes")
        if spread is None:
            missing.append(f"{v.label}: " + (QCoreApplication.translate("lab_chart", "failed — {error}")
                                             .format(error=v.error) if v.error
                                             else QCoreApplication.translate("lab_chart",
                    "no memory figure")))
        else:
            rows.append(MemoryRow(v.label, int(spread.median), int(spread.low), int(spread.high), v.size_bytes,
                                  v.is_reference))
    return rows, missing


@dataclass(frozen=True)
class SweepLine:
    name: str  # the swept variant, with its KV-cache type where the x axis is the context length
    points: tuple[tuple[int, float, float], ...]  # (index on the x axis, mean KLD, one standard error)


@dataclass(frozen=True)
class Sweep:
    axis: str  # "ctx": the x axis is the context length; "kv": the KV-cache type
    ticks: tuple[str, ...]  # the x axis' values, in order
    lines: tuple[SweepLine, ...]


def sweep_lines(result: BenchResult) -> tuple[Sweep | None, list[str]]:
    """A sweep's rows as lines of mean KLD: across the context lengths when it swept them (a line per variant and
    KV-cache type), else across the KV-cache types (a line per variant); None when the result is no sweep. For every
    swept row left out, a sentence saying why."""
    rows = [v for v in result.variants if v.sweep_of]
    contexts = sorted({v.ctx for v in rows if v.ctx})
    caches = [kv for kv in KV_TYPES if any(v.kv_cache_type == kv for v in rows)]
    if len(contexts) > 1:
        axis, ticks = "ctx", [str(c) for c in contexts]
    elif len(caches) > 1:
        axis, ticks = "kv", caches
    else:
        return None, []
    lines: dict[str, list[tuple[int, float, float]]] = {}
    missing = []
    for v in rows:
        name = v.sweep_of + (f" · KV {v.kv_cache_type}" if axis == "ctx" and v.kv_cache_type else "")
        x = str(v.ctx) if axis == "ctx" else v.kv_cache_type
        if x not in ticks:
            continue
        if v.quality is None:
            missing.append(f"{v.label}: " + (v.error or v.unavailable.get("kld_mean") or QCoreApplication.translate(
                "lab_chart", "no KL divergence")))
            continue
        lines.setdefault(name, []).append((ticks.index(x), v.quality.kld.value, v.quality.kld.se or 0.0))
    return Sweep(axis, tuple(ticks), tuple(SweepLine(n, tuple(sorted(p))) for n, p in lines.items())), missing


def common_prefix(labels: list[str]) -> str:
    """The shared start of the variant names, cut after a separator ("Llama-3.2-3B-Instruct-" of
    "…-Q4_K_M" and "…-Q8_0"), so a chart can name each variant by what differs; "" when nothing is shared
    or a name would be left empty."""
    if len(labels) < 2:
        return ""
    first, last = min(labels), max(labels)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    prefix = first[:n]
    cut = max(prefix.rfind(c) for c in "-_. /")
    prefix = prefix[:cut + 1] if cut >= 0 else ""
    return prefix if all(len(label) > len(prefix) for label in labels) else ""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5 or 5 times a power of ten apart)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_text(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 1:
        return f"{value:.3g}"
    if magnitude >= 0.001:
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{value:.1e}"


class _Chart(QWidget):
    """Common painting: a title, an empty-state sentence, a caption listing what is left out."""

    title = ""  # these texts are shown through translate("lab_chart", ...)
    empty_text = QT_TRANSLATE_NOOP("lab_chart", "Run a bench, or open a past result, to see this chart.")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: BenchResult | None = None
        self.missing: list[str] = []
        self.prefix = ""
        self.setMinimumSize(360, 260)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(QPalette.ColorRole.Base)

    def sizeHint(self) -> QSize:
        return QSize(540, 380)

    def set_result(self, result: BenchResult | None) -> None:
        self.result = result
        self._names()
        self._prepare()
        self.update()

    def _prepare(self) -> None: ...

    def _names(self) -> None:
        labels = [v.label for v in self.result.variants] if self.result is not None else []
        self.prefix = common_prefix(labels)

    def short(self, label: str) -> str:
        return label[len(self.prefix):] if self.prefix and label.startswith(self.prefix) else label

    # colours from the palette, so the chart follows light and dark
    def _colour(self, role: QPalette.ColorRole, alpha: int = 255) -> QColor:
        colour = QColor(self.palette().color(role))
        colour.setAlpha(alpha)
        return colour

    def _begin(self) -> tuple[QPainter, QRectF]:
        """Paint the title and the footnotes; return the painter and the rectangle left for the plot."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        text = self._colour(QPalette.ColorRole.Text)
        title_font = QFont(self.font())
        title_font.setBold(True)
        painter.setFont(title_font)
        painter.setPen(text)
        line = QFontMetricsF(title_font).height()
        title = QCoreApplication.translate("lab_chart", self.title) + (
            f" — {self.prefix.rstrip('-_. /')}" if self.prefix else "")
        painter.drawText(QRectF(12, 8, self.width() - 24, line), Qt.AlignmentFlag.AlignLeft,
                         QFontMetricsF(title_font).elidedText(title, Qt.TextElideMode.ElideRight, self.width() - 24))
        painter.setFont(self.font())
        fm = QFontMetricsF(self.font())
        # translate(), not self.tr(): a base class's tr() looks in the subclass's context on older PySide6
        notes = [QCoreApplication.translate("lab_chart", "Not shown: {reason}").format(reason=m) for m in self.missing]
        bottom = self.height() - 6.0
        painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
        for note in reversed(notes[-3:]):
            elided = fm.elidedText(note, Qt.TextElideMode.ElideRight, self.width() - 24)
            bottom -= fm.height()
            painter.drawText(QRectF(12, bottom, self.width() - 24, fm.height()), Qt.AlignmentFlag.AlignLeft, elided)
        painter.setPen(text)
        return painter, QRectF(12, 14 + line, self.width() - 24, bottom - (14 + line) - 4)

    def _value_axis(self, painter: QPainter, area: QRectF, plot: QRectF, ticks: list[float],
                    py: Callable[[float], float], title: str) -> None:
        """The value axis up the left: a grid line and its figure per tick, and its title turned upright."""
        fm = QFontMetricsF(self.font())
        grid = QPen(self._colour(QPalette.ColorRole.Mid, 110), 1)
        for tick in ticks:
            painter.setPen(grid)
            painter.drawLine(QPointF(plot.left(), py(tick)), QPointF(plot.right(), py(tick)))
            painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
            painter.drawText(QRectF(area.left(), py(tick) - fm.height() / 2, plot.left() - area.left() - 6,
                                    fm.height()), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             tick_text(tick))
        painter.save()
        painter.translate(area.left(), plot.center().y())
        painter.rotate(-90)
        painter.drawText(QRectF(-plot.height() / 2, 0, plot.height(), fm.height()), Qt.AlignmentFlag.AlignHCenter,
                         fm.elidedText(title, Qt.TextElideMode.ElideRight, plot.height()))
        painter.restore()

    def _empty(self, painter: QPainter, area: QRectF, sentence: str) -> None:
        painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
        painter.drawText(area, Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, sentence)
        painter.end()


class SpeedQualityChart(_Chart):
    """Quality loss (y) against generation tok/s (x): up-left is worse and slower, down-right is the goal."""

    title = QT_TRANSLATE_NOOP("lab_chart", "Quality loss against speed (best: low and right)")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axis = QualityAxis("", "")
        self.points: list[Point] = []
        self.setAccessibleName(self.tr("Chart: quality loss against generation speed"))

    def _prepare(self) -> None:
        if self.result is None:
            self.axis, self.points, self.missing = QualityAxis("", ""), [], []
        else:
            self.axis, self.points, self.missing = speed_quality_points(self.result)
        self.setAccessibleDescription("; ".join(self.tr("{label}: {speed}, loss {loss}")
                                                .format(label=p.label, speed=tokens_per_second(p.x),
                                                        loss=tick_text(p.y))
                                                for p in self.points))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter, area = self._begin()
        if self.result is None:
            return self._empty(painter, area, QCoreApplication.translate("lab_chart", self.empty_text))
        if not self.axis.metric:
            return self._empty(painter, area, self.tr("No quality figures in this result (the quality pass was "
                                                      "skipped or could not run), so there is nothing to plot."))
        if not self.points:
            return self._empty(painter, area, self.tr("No variant has both a generation speed and a quality figure."))
        fm = QFontMetricsF(self.font())
        x_ticks = nice_ticks(0.0, max(p.x_high for p in self.points) * 1.08)
        top_loss = max(p.y + p.y_error for p in self.points)
        y_ticks = nice_ticks(min(0.0, min(p.y - p.y_error for p in self.points)),
                             top_loss * 1.15 if top_loss > 0 else 1.0)
        y_labels = [tick_text(t) for t in y_ticks]
        left = area.left() + fm.height() + 6 + max(fm.horizontalAdvance(t) for t in y_labels) + 6
        plot = QRectF(left, area.top() + 6, area.right() - left - 8, area.height() - 2 * fm.height() - 14)

        def px(x: float) -> float:
            return plot.left() + plot.width() * (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0])

        def py(y: float) -> float:
            return plot.bottom() - plot.height() * (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0])

        self._value_axis(painter, area, plot, y_ticks, py, self.axis.title)
        grid = QPen(self._colour(QPalette.ColorRole.Mid, 110), 1)
        axis_text = self._colour(QPalette.ColorRole.PlaceholderText)
        for tick in x_ticks:
            painter.setPen(grid)
            painter.drawLine(QPointF(px(tick), plot.top()), QPointF(px(tick), plot.bottom()))
            painter.setPen(axis_text)
            painter.drawText(QRectF(px(tick) - 40, plot.bottom() + 3, 80, fm.height()),
                             Qt.AlignmentFlag.AlignHCenter, tick_text(tick))
        painter.drawText(QRectF(plot.left(), plot.bottom() + fm.height() + 6, plot.width(), fm.height()),
                         Qt.AlignmentFlag.AlignHCenter,
                         fm.elidedText(self.tr("generation tok/s (median; bars: fastest and slowest run; up and "
                                               "down: ± one standard error)"), Qt.TextElideMode.ElideRight,
                                       plot.width()))
        accent = self._colour(QPalette.ColorRole.Highlight)
        reference = QColor(REFERENCE_COLOUR)
        text = self._colour(QPalette.ColorRole.Text)
        # Points first, so labels can steer clear of every marker, not only of the ones drawn before.
        placed: list[QRectF] = [QRectF(px(p.x) - 6, py(p.y) - 6, 12, 12) for p in self.points]
        placed += [QRectF(px(p.x_low), py(p.y) - 4, px(p.x_high) - px(p.x_low), 8) for p in self.points]
        placed += [QRectF(px(p.x) - 4, py(p.y + p.y_error), 8, py(p.y - p.y_error) - py(p.y + p.y_error))
                   for p in self.points if p.y_error > 0]
        for p in sorted(self.points, key=lambda p: p.x):
            colour = reference if p.is_reference else accent
            centre = QPointF(px(p.x), py(p.y))
            painter.setPen(QPen(colour, 1.5))
            if p.x_high > p.x_low:
                painter.drawLine(QPointF(px(p.x_low), centre.y()), QPointF(px(p.x_high), centre.y()))
                for end in (p.x_low, p.x_high):
                    painter.drawLine(QPointF(px(end), centre.y() - 4), QPointF(px(end), centre.y() + 4))
            if p.y_error > 0:
                painter.drawLine(QPointF(centre.x(), py(p.y - p.y_error)), QPointF(centre.x(), py(p.y + p.y_error)))
                for end in (p.y - p.y_error, p.y + p.y_error):
                    painter.drawLine(QPointF(centre.x() - 4, py(end)), QPointF(centre.x() + 4, py(end)))
            painter.setBrush(colour)
            painter.drawEllipse(centre, 5.5, 5.5)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            label = self.short(p.label) + (self.tr(" (reference)") if p.is_reference else "")
            box = self._place(QSizeF(fm.horizontalAdvance(label), fm.height()), centre, plot, placed)
            placed.append(box)
            painter.setPen(text)
            painter.drawText(box, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
        painter.end()


    @staticmethod
    def _place(size: QSizeF, centre: QPointF, plot: QRectF, taken: list[QRectF]) -> QRectF:
        """A spot for a point's label: right, left, above, below, then further out; the first that
        stays in the plot and overlaps nothing already there (else the first in the plot)."""
        w, h = size.width(), size.height()
        x, y = centre.x(), centre.y()
        spots = []
        for reach in (0.0, 1.0, 2.0):
            lift = reach * (h + 2)
            spots += [QPointF(x + 9, y - h / 2 - lift), QPointF(x - 9 - w, y - h / 2 - lift),
                      QPointF(x - w / 2, y - 9 - h - lift), QPointF(x - w / 2, y + 9 + lift),
                      QPointF(x + 9, y - h / 2 + lift), QPointF(x - 9 - w, y - h / 2 + lift)]
        inside = [QRectF(spot, size) for spot in spots if plot.contains(QRectF(spot, size))]
        for box in inside:
            if not any(box.intersects(other) for other in taken):
                return box
        return inside[0] if inside else QRectF(QPointF(centre.x() + 9, centre.y() - h / 2), size)


@dataclass(frozen=True)
class Bar:
    name: str  # as the chart shows it
    value: float
    low: float  # the whisker's ends
    high: float
    text: str  # the figure, written after the whisker
    is_reference: bool


class _BarChart(_Chart):
    """One horizontal bar per row with a whisker and its figure in words beside it."""

    def bars(self) -> list[Bar]:
        return []

    def empty_sentence(self) -> str:
        return ""

    def caption(self) -> str:
        return ""

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter, area = self._begin()
        if self.result is None:
            return self._empty(painter, area, QCoreApplication.translate("lab_chart", self.empty_text))
        bars = self.bars()
        if not bars:
            return self._empty(painter, area, self.empty_sentence())
        fm = QFontMetricsF(self.font())
        label_width = min(max(fm.horizontalAdvance(b.name) for b in bars) + 10, area.width() * 0.35)
        value_width = min(max(fm.horizontalAdvance(b.text) for b in bars) + 10, area.width() * 0.45)
        top = max(b.high for b in bars) or 1.0
        bar_left = area.left() + label_width
        bar_span = max(area.right() - value_width - bar_left, 20)
        row_h = min((area.height() - fm.height() - 8) / len(bars), 46.0)
        bar_h = min(row_h * 0.55, 22.0)
        accent = self._colour(QPalette.ColorRole.Highlight)
        text = self._colour(QPalette.ColorRole.Text)
        for i, bar in enumerate(bars):
            centre = area.top() + 4 + row_h * (i + 0.5)
            painter.setPen(text)
            painter.drawText(QRectF(area.left(), centre - fm.height() / 2, label_width - 8, fm.height()),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(bar.name, Qt.TextElideMode.ElideMiddle, label_width - 8))
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(REFERENCE_COLOUR) if bar.is_reference else accent)
            painter.drawRoundedRect(QRectF(bar_left, centre - bar_h / 2, max(bar_span * bar.value / top, 2), bar_h),
                                    3, 3)
            x0, x1 = bar_left + bar_span * max(bar.low, 0) / top, bar_left + bar_span * bar.high / top
            painter.setPen(QPen(text, 1.2))
            if bar.high > bar.low:
                painter.drawLine(QPointF(x0, centre), QPointF(x1, centre))
                for x in (x0, x1):
                    painter.drawLine(QPointF(x, centre - bar_h / 3), QPointF(x, centre + bar_h / 3))
            room = area.right() - x1 - 6  # a short bar leaves its words more room
            painter.drawText(QRectF(x1 + 6, centre - fm.height() / 2, room, fm.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(bar.text, Qt.TextElideMode.ElideRight, room))
        painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
        painter.drawText(QRectF(area.left(), area.bottom() - fm.height(), area.width(), fm.height()),
                         Qt.AlignmentFlag.AlignHCenter,
                         fm.elidedText(self.caption(), Qt.TextElideMode.ElideRight, area.width()))
        painter.end()


class MemoryChart(_BarChart):
    """Peak memory of the engine process per variant: the median as a bar, the range as a whisker."""

    title = QT_TRANSLATE_NOOP("lab_chart", "Peak memory per variant")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[MemoryRow] = []
        self.setAccessibleName(self.tr("Chart: peak memory per variant"))

    def _prepare(self) -> None:
        self.rows, self.missing = memory_rows(self.result) if self.result is not None else ([], [])
        self.setAccessibleDescription("; ".join(f"{r.label}: {human_memory(r.median)}" for r in self.rows))

    def bars(self) -> list[Bar]:
        return [Bar(self.short(r.label) + (self.tr(" (ref)") if r.is_reference else ""), r.median, r.low, r.high,
                    human_memory(r.median), r.is_reference) for r in self.rows]

    def empty_sentence(self) -> str:
        return self.tr("No variant has a memory figure.")

    def caption(self) -> str:
        return self.tr("engine RAM peak: median of the runs, whisker min–max")


class KldChart(_BarChart):
    """Mean KL divergence from the reference per variant: a bar with ± one standard error as a whisker, the 99th
    percentile in words beside it. Where the whiskers of two variants overlap, their difference is noise."""

    title = QT_TRANSLATE_NOOP("lab_chart", "Mean KL divergence from the reference")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[KldRow] = []
        self.setAccessibleName(self.tr("Chart: mean KL divergence per variant"))

    def _prepare(self) -> None:
        self.rows, self.missing = kld_rows(self.result) if self.result is not None else ([], [])
        self.setAccessibleDescription("; ".join(f"{r.label}: {estimate_text('kld_mean', r.mean, r.error)}"
                                                for r in self.rows))

    def bars(self) -> list[Bar]:
        return [Bar(self.short(r.label), r.mean, r.mean - r.error, r.mean + r.error,
                    self.tr("{estimate} (99%: {p99})").format(estimate=estimate_text("kld_mean", r.mean, r.error),
                                                              p99=tick_text(r.p99)), False) for r in self.rows]

    def empty_sentence(self) -> str:
        return self.tr("No variant has a KL divergence from the reference.")

    def caption(self) -> str:
        return self.tr("nats/token; whisker: ± one standard error (overlapping whiskers: not told apart)")


class SweepChart(_Chart):
    """A sweep's mean KL divergence across its context lengths (or KV-cache types): a line per swept variant, each
    point with ± one standard error; where a line rises, that setting costs quality."""

    title = QT_TRANSLATE_NOOP("lab_chart", "The sweep: mean KL divergence from the reference")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.sweep: Sweep | None = None
        self.setAccessibleName(self.tr("Chart: the sweep's mean KL divergence"))

    def _names(self) -> None:
        """The lines' names, not the variants': _prepare says them once it has the lines."""

    def _prepare(self) -> None:
        self.sweep, self.missing = sweep_lines(self.result) if self.result is not None else (None, [])
        lines = self.sweep.lines if self.sweep else ()
        ticks = self.sweep.ticks if self.sweep else ()
        self.prefix = common_prefix([line.name for line in lines])
        self.setAccessibleDescription("; ".join(
            f"{line.name}: " + ", ".join(f"{ticks[x]} {estimate_text('kld_mean', y, e)}" for x, y, e in line.points)
            for line in lines))

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter, area = self._begin()
        if self.result is None:
            return self._empty(painter, area, QCoreApplication.translate("lab_chart", self.empty_text))
        if self.sweep is None or not self.sweep.lines:
            return self._empty(painter, area, self.tr("This result is no sweep with KL divergences: tick two or more "
                                                      "KV-cache types or context lengths and run it again."))
        fm = QFontMetricsF(self.font())
        lines, ticks = self.sweep.lines, self.sweep.ticks
        top = max(y + e for line in lines for _, y, e in line.points)
        y_ticks = nice_ticks(0.0, top * 1.15 if top > 0 else 1.0)
        y_labels = [tick_text(t) for t in y_ticks]
        legend_width = min(max(fm.horizontalAdvance(self.short(line.name)) for line in lines) + 34,
                           area.width() * 0.35)
        left = area.left() + fm.height() + 6 + max(fm.horizontalAdvance(t) for t in y_labels) + 6
        plot = QRectF(left, area.top() + 6, area.right() - left - legend_width - 12,
                      area.height() - 2 * fm.height() - 14)

        def px(index: int) -> float:  # the categories evenly spread, half a step in from each side
            return plot.left() + plot.width() * (index + 0.5) / len(ticks)

        def py(y: float) -> float:
            return plot.bottom() - plot.height() * (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0])

        self._value_axis(painter, area, plot, y_ticks, py, self.tr("mean KLD (nats/token), ± one standard error"))
        painter.setPen(self._colour(QPalette.ColorRole.PlaceholderText))
        step = plot.width() / len(ticks)
        for index, tick in enumerate(ticks):
            painter.drawText(QRectF(px(index) - step / 2, plot.bottom() + 3, step, fm.height()),
                             Qt.AlignmentFlag.AlignHCenter, fm.elidedText(tick, Qt.TextElideMode.ElideRight, step))
        x_title = (self.tr("context length (tokens): quality windows of that length, speed with a prompt that fills "
                           "it") if self.sweep.axis == "ctx" else self.tr("KV-cache type"))
        painter.drawText(QRectF(plot.left(), plot.bottom() + fm.height() + 6, plot.width(), fm.height()),
                         Qt.AlignmentFlag.AlignHCenter, fm.elidedText(x_title, Qt.TextElideMode.ElideRight,
                                                                      plot.width()))
        text = self._colour(QPalette.ColorRole.Text)
        for n, line in enumerate(lines):
            colour = QColor(SERIES_COLOURS[n % len(SERIES_COLOURS)])
            painter.setPen(QPen(colour, 2))
            centres = [QPointF(px(x), py(y)) for x, y, _ in line.points]
            for a, b in zip(centres, centres[1:], strict=False):
                painter.drawLine(a, b)
            painter.setPen(QPen(colour, 1.2))
            for (_x, y, e), centre in zip(line.points, centres, strict=True):
                if e > 0:
                    painter.drawLine(QPointF(centre.x(), py(y - e)), QPointF(centre.x(), py(y + e)))
                    for end in (y - e, y + e):
                        painter.drawLine(QPointF(centre.x() - 4, py(end)), QPointF(centre.x() + 4, py(end)))
                painter.setBrush(colour)
                painter.drawEllipse(centre, 4.0, 4.0)
                painter.setBrush(Qt.BrushStyle.NoBrush)
            key_y = plot.top() + n * (fm.height() + 4)
            key_x = plot.right() + 12
            painter.setPen(QPen(colour, 2))
            painter.drawLine(QPointF(key_x, key_y + fm.height() / 2), QPointF(key_x + 18, key_y + fm.height() / 2))
            painter.setPen(text)
            painter.drawText(QRectF(key_x + 24, key_y, legend_width - 24, fm.height()),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(self.short(line.name), Qt.TextElideMode.ElideMiddle, legend_width - 24))
        painter.end()


class LabCharts(QWidget):
    """The charts in a grid (speed against quality across the top); ``save_png`` grabs them as the user sees
    them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.speed_quality = SpeedQualityChart()
        self.kld = KldChart()
        self.memory = MemoryChart()
        self.sweep = SweepChart()
        self.sweep.hide()  # shown for a sweep's result only
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        layout.addWidget(self.speed_quality, 0, 0, 1, 2)
        layout.addWidget(self.kld, 1, 0)
        layout.addWidget(self.memory, 1, 1)
        layout.addWidget(self.sweep, 2, 0, 1, 2)

    def set_result(self, result: BenchResult | None) -> None:
        for chart in (self.speed_quality, self.kld, self.memory, self.sweep):
            chart.set_result(result)
        self.sweep.setVisible(self.sweep.sweep is not None)

    def save_png(self, path: str) -> bool:
        if not self.isVisible() and (self.width() < 400 or self.height() < 200):
            self.resize(1100, 760)  # never shown yet (its tab is closed): give it the size it would have
            layout = self.layout()
            assert layout is not None  # __init__ gives it its grid
            layout.activate()
        return self.grab().save(path, "PNG")
