"""The Quant lab's results table: a row per variant (its name, quant and size, then each figure: a speed figure's
median with its range in the tooltip, a quality figure ± its standard error, "n/a" with the reason where there is
none), the backend last; a variant that could not be measured says why across its figures.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QLocale, QSize, Qt
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QAbstractButton, QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.lab.results import BenchResult, VariantResult
from app.ui.common.formatting import human_bytes, human_memory, human_ms, number, percent
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.lab.lab_chart import PERCENT_METRICS, estimate_text

# (header, metric, tooltip of the column); the words are translated in the LabPage context, where they were
# written first (HEADERS too)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    (QT_TRANSLATE_NOOP("LabPage", "Mean KLD"), "kld_mean",
     QT_TRANSLATE_NOOP("LabPage", "Mean KL divergence of next-token distributions from the reference (nats/token) ± "
                                  "one standard error; 0 is identical")),
    (QT_TRANSLATE_NOOP("LabPage", "KLD 99%"), "kld_p99",
     QT_TRANSLATE_NOOP("LabPage", "The 99th percentile of the KL divergence: how bad the worst tokens get")),
    (QT_TRANSLATE_NOOP("LabPage", "Same top p"), "same_top_p",
     QT_TRANSLATE_NOOP("LabPage", "How often the variant's most likely next token is the reference's, ± one "
                                  "standard error")),
    (QT_TRANSLATE_NOOP("LabPage", "PPL ratio"), "ppl_ratio",
     QT_TRANSLATE_NOOP("LabPage", "PPL(Q)/PPL(base) ± one standard error: 1 is the reference's")),
    (QT_TRANSLATE_NOOP("LabPage", "Perplexity"), "perplexity",
     QT_TRANSLATE_NOOP("LabPage", "PPL(Q) on the bundled text, the second half of each window scored, ± one standard "
                                  "error; lower is better")),
    (QT_TRANSLATE_NOOP("LabPage", "Gen tok/s"), "decode_tps",
     QT_TRANSLATE_NOOP("LabPage", "Generation speed, after the first token")),
    (QT_TRANSLATE_NOOP("LabPage", "Prompt tok/s"), "prompt_tps",
     QT_TRANSLATE_NOOP("LabPage", "Prompt processing speed")),
    (QT_TRANSLATE_NOOP("LabPage", "TTFT"), "ttft_ms",
     QT_TRANSLATE_NOOP("LabPage", "Time to the first generated token")),
    (QT_TRANSLATE_NOOP("LabPage", "Load"), "load_ms",
     QT_TRANSLATE_NOOP("LabPage", "Time to load the model in a fresh engine host")),
    (QT_TRANSLATE_NOOP("LabPage", "Peak memory"), "peak_memory_bytes",
     QT_TRANSLATE_NOOP("LabPage", "The engine process's peak RAM during the run")),
)  # every other statistic (Δp, the KLD's other percentiles, the perplexities' correlation): the Statistics tab
FIRST_FIGURE = 3  # the columns before the figures: variant, quant, size; the backend comes last
HEADERS = (QT_TRANSLATE_NOOP("LabPage", "Variant"), QT_TRANSLATE_NOOP("LabPage", "Quant"),
           QT_TRANSLATE_NOOP("LabPage", "Size"), *(c[0] for c in COLUMNS), QT_TRANSLATE_NOOP("LabPage", "Backend"))


def figure_text(metric: str, value: float) -> str:
    if metric in ("load_ms", "ttft_ms"):
        return human_ms(value)
    if metric in ("prompt_tps", "decode_tps"):
        return number(value, 1) if value < 100 else number(value, 0)
    if metric == "peak_memory_bytes":
        return human_memory(value)
    if metric == "perplexity":
        return number(value, 2)
    if metric == "ppl_ratio":
        return number(value, 4)
    if metric.startswith("kld_"):
        return "0" if value == 0 else QLocale().toString(float(value), "g", 3)
    if metric in PERCENT_METRICS:
        return percent(value, 2)
    return f"{value:g}"


def cell(v: VariantResult, metric: str) -> tuple[str, str]:
    """(text, tooltip) of one figure: a speed figure's median, with its range and run count in the tooltip; a
    quality figure with ± its standard error; an unavailable figure is "n/a" with the reason as its tooltip."""
    if v.error:
        return "failed", v.error
    value = v.figure(metric)
    if value is None:
        return "n/a", v.unavailable.get(metric, "n/a: not measured")
    spread = v.speed.get(metric)
    if spread is not None:
        runs = QCoreApplication.translate("lab_page", "1 run") if spread.n == 1 else QCoreApplication.translate(
            "lab_page", "{count} runs").format(count=spread.n)
        return figure_text(metric, value), (QCoreApplication.translate("lab_page",
                "median {median}, min–max {low} – {high} over {runs}")
                .format(median=figure_text(metric, spread.median), low=figure_text(metric, spread.low),
                        high=figure_text(metric, spread.high), runs=runs))
    estimate = v.estimate(metric)
    text = figure_text(metric, value)
    if estimate is not None and estimate.se and metric != "perplexity":  # PPL's error: in the ratio's
        text = estimate_text(metric, value, estimate.se)  # (the reference's 100 % same top: error 0, not shown)
    q = v.quality
    if q is None:
        return text, "\n".join(v.notes)
    if metric == "kld_mean":
        tip = QCoreApplication.translate("lab_page",
                "over {positions} positions; median {median:.3g}, 99th percentile {p99:.3g}, 99.9th {p999:.3g}, max "
                "{max:.3g}").format(positions=q.positions, median=q.kld_percentiles["median"],
                                    p99=q.kld_percentiles["99"], p999=q.kld_percentiles["99.9"],
                                    max=q.kld_percentiles["max"])
        if len(q.kld_by_position) > 1:  # a window long enough to tell early positions from late ones
            tip += "\n" + QCoreApplication.translate("lab_page", "by position in the window: {buckets}").format(
                buckets=", ".join(f"{bucket} {estimate_text(metric, e.value, e.se or 0.0)}"
                                  for bucket, e in q.kld_by_position.items()))
        return text, tip
    if metric == "perplexity":
        return text, QCoreApplication.translate("lab_page", "{value} over {positions} positions of the scored text")\
            .format(value=estimate_text(metric, value, q.ppl.se) if q.ppl.se else text, positions=q.positions)
    return text, QCoreApplication.translate("lab_page", "over {positions} positions of the scored text").format(
        positions=q.positions)


class ResultsTable(QTableWidget):
    def __init__(self) -> None:
        super().__init__(0, len(HEADERS))
        self.setAccessibleName(self.tr("Results table"))
        self.setHorizontalHeaderLabels([QCoreApplication.translate("LabPage", header) for header in HEADERS])
        for index, (_header, _metric, tip) in enumerate(COLUMNS, start=FIRST_FIGURE):
            header = self.horizontalHeaderItem(index)
            assert header is not None  # setHorizontalHeaderLabels made one per column
            header.setToolTip(QCoreApplication.translate("LabPage", tip))
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().setVisible(False)
        self.setCornerButtonEnabled(False)
        self.setWordWrap(False)  # a long sentence ends in "…"; its tooltip and the notes hold it whole
        for corner in self.findChildren(QAbstractButton):  # Qt's select-all corner button
            corner.setAccessibleName(self.tr("Select all rows"))
        self.setAlternatingRowColors(True)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.horizontalHeader().setStretchLastSection(True)

    def show_result(self, result: BenchResult | None, prefix: str = "", muted: QColor | None = None) -> None:
        """The result's variants, each named without ``prefix`` (the model's name, which the notes say once); a figure
        that is not there in ``muted`` (the page's placeholder colour: on a theme switch the page's palette is the
        new one before the table's is)."""
        self.clearSpans()
        self.setRowCount(0)
        if result is None:
            return
        muted = muted or self.palette().color(QPalette.ColorRole.PlaceholderText)
        self.setRowCount(len(result.variants))
        for row, v in enumerate(result.variants):
            name = QTableWidgetItem(v.label[len(prefix):] + (self.tr("  (reference)") if v.is_reference else ""))
            name.setToolTip(v.path + (f"\n{v.error}" if v.error else ""))
            if v.is_reference:
                font = QFont(name.font())
                font.setBold(True)
                name.setFont(font)
            bpw = f" · {number(v.bits_per_weight, None)} bpw" if v.bits_per_weight else ""
            fixed = [name, QTableWidgetItem(v.quant), QTableWidgetItem(human_bytes(v.size_bytes))]
            fixed[1].setToolTip(f"{v.format}{bpw}")
            for column, item in enumerate(fixed):
                self.setItem(row, column, item)
            self.setItem(row, len(HEADERS) - 1, QTableWidgetItem(v.backend or "—"))
            if v.error:  # one sentence across the figures instead of a row of "failed"
                item = QTableWidgetItem(self.tr("not measured: {error}").format(error=v.error))
                item.setToolTip(v.error)
                item.setForeground(QColor(muted))
                item.setData(Qt.ItemDataRole.SizeHintRole, QSize(40, 24))  # the span's width, not the column's
                self.setItem(row, FIRST_FIGURE, item)
                self.setSpan(row, FIRST_FIGURE, 1, len(COLUMNS))
                continue
            for column, (_header, metric, _tip) in enumerate(COLUMNS, start=FIRST_FIGURE):
                text, tip = cell(v, metric)
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if text in ("n/a", "failed"):
                    item.setForeground(QColor(muted))
                    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.setItem(row, column, item)
