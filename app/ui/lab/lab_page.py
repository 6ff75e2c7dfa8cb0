"""The Quant lab page: compare quants and formats of one model on this machine — speed, memory and
quality side by side (app/lab does the measuring; this page picks, runs, shows, exports and keeps). Its parts: the
variant picker (app/ui/lab/lab_variants.py), the results table (lab_table.py), the charts (lab_chart.py) and the past
results (lab_history.py).

The bench blocks for minutes and starts engine hosts, so it runs as a background job (app.ui.common.background); its
progress and its result come back as queued signals to this page's slots. Cancel sets the job's event, which the
bench checks between steps: it never waits on the busy worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QLocale, Qt, Signal, Slot
from PySide6.QtGui import QPalette, QShowEvent
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QCheckBox, QComboBox, QFileDialog, QFormLayout,
                               QGroupBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMessageBox, QProgressBar,
                               QSpinBox, QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from app.lab.results import KV_TYPES, BenchResult, BenchSettings
from app.lab.uploaders import Candidate
from app.lab.store import ResultStore
from app.remote.connections import is_remote_ref
from app.ui.common.background import BackgroundCall, Job, sentence
from app.ui.common.formatting import human_bytes, number, percent
from app.ui.common.icons import decorate
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, button, page_margins, page_title, scrolling_content
from app.ui.lab.lab_chart import LabCharts, common_prefix, estimate_text
from app.ui.lab.lab_history import LabHistory
from app.ui.lab.lab_table import FIRST_FIGURE as FIRST_FIGURE  # re-exported: where the figures begin
from app.ui.lab.lab_table import HEADERS as HEADERS  # re-exported: the table's columns
from app.ui.lab.lab_table import ResultsTable
from app.ui.lab.lab_variants import HUB_PREFIX, VariantPicker

if TYPE_CHECKING:
    from app.lab.runner import LabProgress

AUTO_REFERENCE = QT_TRANSLATE_NOOP("LabPage", "Highest precision (automatic)")
# The Text choice: (what it shows, what --corpus calls it); the file and folder entries ask for a path.
TEXTS: tuple[tuple[str, str], ...] = (
    (QT_TRANSLATE_NOOP("LabPage", "Prose (bundled)"), "prose"),
    (QT_TRANSLATE_NOOP("LabPage", "Code (bundled: QuantDesk's source)"), "code"),
    (QT_TRANSLATE_NOOP("LabPage", "Conversations (bundled: tool calls, thinking)"), "conversations"),
    (QT_TRANSLATE_NOOP("LabPage", "German (bundled)"), "german"),
    (QT_TRANSLATE_NOOP("LabPage", "Your chats"), "chats"),
)
TEXT_FILE, TEXT_FOLDER = "file…", "folder…"

def _run_bench(job: Job, models: list[str], settings: BenchSettings, reference: str | None,
               reference_file: str | None, store: ResultStore, corpus_text: str | None = None,
               hub: Sequence[Candidate] = (), keep: bool = False) -> BenchResult:
    """The bench on a background thread: the Hub's files fetched into the lab's cache first (``reference`` may name
    one: "hub:" and its origin), each step reported, stopped between steps (and between a scoring pass's windows)
    when cancelled; what was fetched for it removed after, unless ``keep``."""
    from app.lab import uploaders
    from app.lab.runner import LabProgress, run_bench

    def fetching(message: str, fraction: float | None) -> None:
        job.report(LabProgress("download", 0, 0, "", message, fraction))

    fetched = uploaders.fetch(hub, on_progress=fetching, cancel=job.cancelled) if hub else []
    try:
        by_origin = {HUB_PREFIX + f.origin: f.path for f in fetched}
        result = run_bench([*models, *(f.path for f in fetched)], settings,
                           reference=by_origin.get(reference, reference) if reference else None,
                           reference_file=reference_file, corpus_text=corpus_text,
                           labels={f.path: f.label for f in fetched}, origins={f.path: f.origin for f in fetched},
                           on_progress=job.report, cancel=job.cancelled)
    finally:
        uploaders.clean_up(fetched, keep)
    store.save(result)
    return result


def _spin(low: int, high: int, value: int, name: str, tip: str) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setValue(value)
    spin.setAccessibleName(name)
    spin.setToolTip(tip)
    spin.setGroupSeparatorShown(True)
    return spin


class LabPage(QWidget):
    """Pick variants and settings, run, read the table and charts, export, reopen past results."""

    bench_finished = Signal(object)  # BenchResult
    bench_stopped = Signal(str)  # "cancelled" or the failure's sentence
    history_changed = Signal()
    go_to = Signal(str)  # a page's name: the empty state's button

    def __init__(self, store: ResultStore | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Quant lab"))
        self.store = store or ResultStore()
        self.result: BenchResult | None = None
        self._bench_ticket: int | None = None  # the bench running now
        self._stopping = False  # cancel was asked: its late progress is not shown
        self._bench = BackgroundCall("quant-lab")
        self._bench.progressed.connect(self._on_progress)
        self._bench.succeeded.connect(self._on_finished)
        self._bench.failed.connect(self._on_failed)
        self._listed_once = False

        root = QVBoxLayout(scrolling_content(self))
        page_margins(root)
        root.setSpacing(10)
        heading = page_title(self.tr("Quant lab"))
        intro = QLabel(self.tr("Compare quants and formats of one model on this machine: load time, prompt and "
                               "generation speed, time to first token and peak memory, and quality against the "
                               "highest-precision variant as llama.cpp's llama-perplexity measures it (mean KL "
                               "divergence, its percentiles, same top p, Δp and the perplexity ratio, each ± its "
                               "standard error). Each run uses a fresh engine host."))
        intro.setWordWrap(True)
        intro.setObjectName("caption")
        root.addWidget(heading)
        root.addWidget(intro)
        self.empty_state = EmptyState(self.tr("Nothing to compare yet"),
                                      self.tr("The lab compares quants of one model: download two or more from "
                                              "Discover, or add model files and folders you have below."),
                                      self.tr("Find a model"), "Discover")
        self.empty_state.button.clicked.connect(lambda: self.go_to.emit("Discover"))
        self.empty_state.hide()
        root.addWidget(self.empty_state)

        top = QHBoxLayout()
        top.setSpacing(12)
        self.picker = VariantPicker()
        self.picker.changed.connect(self._sync_reference_choices)
        self.picker.added.connect(self.empty_state.hide)
        self.picker.listed.connect(self._on_library_listed)
        self.picker.list_failed.connect(self._on_library_failed)
        self.picker.uploaders_requested.connect(self._on_uploaders_clicked)
        self.variants = self.picker.list  # the page's name for it
        top.addWidget(self.picker, 6)
        top.addWidget(self._settings_box(), 4)
        self.past = LabHistory()
        self.past.open_requested.connect(self.open_saved)
        self.past.delete_confirmed.connect(self.delete_saved)
        self.past.changed.connect(self.history_changed)
        # the page's names for the list's parts
        self.history, self.open_button = self.past.list, self.past.open_button
        self.delete_button = self.past.delete_button
        top.addWidget(self.past, 3)
        root.addLayout(top)

        run_row = QHBoxLayout()
        self.run_button = button(self.tr("Run bench"), self.tr("Run the bench"), self.run)
        self.run_button.setDefault(True)
        self.cancel_button = button(self.tr("Cancel"), self.tr("Cancel the bench"), self.cancel)
        self.cancel_button.setEnabled(False)
        decorate(self.run_button, "run")
        decorate(self.cancel_button, "stop")
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Bench progress"))
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p%")
        self.status = QLabel(self.tr("Tick two or more variants of one model, then run."))
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.status.setAccessibleName(self.tr("Bench status"))
        run_row.addWidget(self.run_button)
        run_row.addWidget(self.cancel_button)
        run_row.addWidget(self.progress, 1)
        root.addLayout(run_row)
        root.addWidget(self.status)

        self.tabs = QTabWidget()
        self.tabs.setAccessibleName(self.tr("Results"))
        self.table = ResultsTable()
        table_tab = QWidget()
        table_layout = QVBoxLayout(table_tab)
        table_layout.setContentsMargins(0, 6, 0, 0)
        table_layout.addWidget(self.table, 1)
        self.notes = QLabel("")
        self.notes.setObjectName("caption")
        self.notes.setTextFormat(Qt.TextFormat.PlainText)
        self.notes.setWordWrap(True)
        table_layout.addWidget(self.notes)
        self.charts = LabCharts()
        self.statistics = QTableWidget(0, 0)
        self.statistics.setAccessibleName(self.tr("Statistics against the reference"))
        self.statistics.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.statistics.setAlternatingRowColors(True)
        self.statistics.setWordWrap(False)
        self.statistics.setCornerButtonEnabled(False)
        for corner in self.statistics.findChildren(QAbstractButton):  # Qt's select-all corner button
            corner.setAccessibleName(self.tr("Select all rows"))
        self.statistics.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.tabs.addTab(table_tab, self.tr("Table"))
        self.tabs.addTab(self.statistics, self.tr("Statistics"))
        self.tabs.addTab(self.charts, self.tr("Charts"))
        exports = QWidget()
        export_row = QHBoxLayout(exports)
        export_row.setContentsMargins(0, 0, 0, 2)
        self.export_buttons = [
            button(self.tr("Export CSV…"), self.tr("Export the result as CSV"), self._on_export_csv_clicked),
            button(self.tr("Export JSON…"), self.tr("Export the result as JSON"), self._on_export_json_clicked),
            button(self.tr("Save charts as PNG…"), self.tr("Save the charts as a PNG image"),
                   self._on_export_png_clicked),
            button(self.tr("Quant card…"), self.tr("Save a quant card: Markdown and JSON, for a model repo or a bug "
                                                   "report"), self._on_export_card_clicked),
        ]
        for export_button in self.export_buttons:
            export_button.setEnabled(False)
            export_row.addWidget(export_button)
        self.tabs.setCornerWidget(exports)
        root.addWidget(self.tabs, 1)
        self.refresh_history()

    # --- the three boxes ------------------------------------------------------------------------

    def _settings_box(self) -> QGroupBox:
        box = QGroupBox(self.tr("Settings"))
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        defaults = BenchSettings()
        self.reference = QComboBox()
        self.reference.setAccessibleName(self.tr("Reference variant"))
        self.reference.setToolTip(self.tr("Quality is measured against this variant"))
        self.reference.addItem(self.tr(AUTO_REFERENCE), None)
        self.prompt_tokens = _spin(16, 32768, defaults.prompt_tokens, self.tr("Prompt tokens"),
                                   self.tr("Length of the measured prompt, in the variant's tokens"))
        self.gen_tokens = _spin(1, 8192, defaults.gen_tokens, self.tr("Generated tokens"),
                                self.tr("Tokens generated per run"))
        self.reps = _spin(1, 100, defaults.reps, self.tr("Repetitions"),
                          self.tr("Measured runs per variant; the table shows their median"))
        self.ctx = _spin(16, 131072, defaults.ctx, self.tr("Quality window"),
                         self.tr("Tokens per window of the quality pass; the second half of each is scored "
                                 "(llama-perplexity's -c)"))
        self.ctx.setSingleStep(128)
        self.chunks = _spin(0, 100000, defaults.chunks, self.tr("Windows"),
                            self.tr("At most this many windows of the text (llama-perplexity's --chunks); 0: all"))
        self.chunks.setSpecialValueText(self.tr("all"))
        self.text = QComboBox()
        self.text.setAccessibleName(self.tr("Text to score"))
        self.text.setToolTip(self.tr("What the quality pass scores: a bundled set, your chats (rendered with the "
                                     "reference's chat template), or a text file or folder of yours"))
        for shown, name in TEXTS:
            self.text.addItem(self.tr(shown), name)
        self.text.addItem(self.tr("Text file…"), TEXT_FILE)
        self.text.addItem(self.tr("Folder of texts…"), TEXT_FOLDER)
        self.text.activated.connect(self._on_text_chosen)
        # as narrow as the other fields: its longest entry would widen the settings past the page
        self.text.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.text.setMinimumContentsLength(12)
        self._text_index = 0  # what was chosen before a file dialog: kept when the dialog is cancelled
        kv_row = QHBoxLayout()
        self.kv_types: dict[str, QCheckBox] = {}
        for kv in KV_TYPES:
            tick = QCheckBox(kv)
            tick.setAccessibleName(self.tr("Sweep the KV cache: {kv}").format(kv=kv))
            tick.setToolTip(self.tr("Measure every GGUF variant once per ticked KV-cache type (none ticked: no "
                                    "sweep)"))
            self.kv_types[kv] = tick
            kv_row.addWidget(tick)
        kv_row.addStretch(1)
        self.contexts = QLineEdit()
        self.contexts.setAccessibleName(self.tr("Sweep the context lengths"))
        self.contexts.setPlaceholderText(self.tr("e.g. 512, 2048, 8192"))
        self.contexts.setToolTip(self.tr("Measure every variant once per context length: its quality in windows of "
                                         "that length, its speed with a prompt that fills it (empty: no sweep)"))
        self.speed = QCheckBox(self.tr("Measure speed"))
        self.speed.setChecked(defaults.speed)
        self.speed.setAccessibleName(self.tr("Measure speed"))
        self.quality = QCheckBox(self.tr("Measure quality (KL divergence, perplexity)"))
        self.quality.setChecked(defaults.quality)
        self.quality.setAccessibleName(self.tr("Measure quality"))
        self.reference_file = ""
        self.keep_downloads = False  # the Hub's files stay in the lab's cache after the bench
        self.reference_file_button = button(self.tr("Reference file…"),
                                            self.tr("Compare against a KL reference file instead of a reference model"),
                                            self._on_reference_file_clicked)
        self.reference_file_button.setToolTip(self.tr("A reference this lab saved, or llama-perplexity's "
                                                      "--kl-divergence-base file: no reference model needs to load"))
        form.addRow(self.tr("Reference"), self.reference)
        form.addRow("", self.reference_file_button)
        form.addRow(self.tr("Prompt tokens"), self.prompt_tokens)
        form.addRow(self.tr("Generated tokens"), self.gen_tokens)
        form.addRow(self.tr("Repetitions"), self.reps)
        form.addRow(self.tr("Quality window"), self.ctx)
        form.addRow(self.tr("Windows"), self.chunks)
        form.addRow(self.tr("Text"), self.text)
        form.addRow(self.tr("KV caches"), kv_row)
        form.addRow(self.tr("Contexts"), self.contexts)
        form.addRow(self.speed)
        form.addRow(self.quality)
        return box

    # --- variants -------------------------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        """A theme switch: the table again, so its muted cells take the new palette's colour."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and getattr(self, "result", None) is not None:
            self.show_result(self.result)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self._listed_once:
            self._listed_once = True
            self.refresh_library()

    @Slot()
    def refresh_library(self) -> None:
        self.picker.refresh_library()

    @Slot(int)
    def _on_library_listed(self, n_entries: int) -> None:
        self.empty_state.setVisible(not n_entries and self.variants.count() == 0)
        if not n_entries and self.variants.count() == 0:
            self.status.setText(self.tr("No models in the library yet: add model files or folders by hand, or "
                                        "download some from Discover."))

    @Slot(object)
    def _on_library_failed(self, error: Exception) -> None:
        self.status.setText(self.tr("The library could not be read: {error}").format(error=sentence(error)))

    def add_paths(self, paths: list[str | Path]) -> None:
        """Add model files or folders (or remote:CONNECTION/MODEL references) by hand; they come ticked."""
        self.picker.add_paths(paths)

    def checked_paths(self) -> list[str]:
        return self.picker.checked_paths()

    def checked_hub(self) -> list[Candidate]:
        return self.picker.checked_hub()

    def add_hub_files(self, candidates: Sequence[Candidate], reference: Candidate | None = None,
                      keep: bool = False) -> None:
        """Add Hub files to compare (ticked), fetched into the lab's cache when the bench runs and removed after it
        unless ``keep``; ``reference``, also fetched, becomes the reference."""
        self.picker.add_hub_files(([reference] if reference is not None else []) + list(candidates))
        self.keep_downloads = keep
        if reference is not None:
            self.reference.setCurrentIndex(self.reference.findData(HUB_PREFIX + reference.label))

    @Slot()
    def _on_uploaders_clicked(self) -> None:
        from app.ui.lab.lab_uploaders import UploadersDialog

        chosen = self.reference.currentData()
        local = chosen if chosen and not str(chosen).startswith(HUB_PREFIX) else None
        self.uploaders_dialog = UploadersDialog(local, self)
        self.uploaders_dialog.accepted.connect(self._on_uploaders_chosen)
        self.uploaders_dialog.open()  # window-modal, not a nested event loop

    @Slot()
    def _on_uploaders_chosen(self) -> None:
        dialog = self.uploaders_dialog
        self.add_hub_files(dialog.chosen(), dialog.reference_candidate(), dialog.keep.isChecked())

    @Slot()
    def _sync_reference_choices(self) -> None:
        chosen = self.reference.currentData()
        self.reference.blockSignals(True)
        self.reference.clear()
        self.reference.addItem(self.tr(AUTO_REFERENCE), None)
        for path in self.checked_paths():
            if not is_remote_ref(path):  # a remote model cannot be the reference (no distributions)
                self.reference.addItem(Path(path).name, path)
        for candidate in self.checked_hub():
            self.reference.addItem(candidate.name, HUB_PREFIX + candidate.label)
        index = self.reference.findData(chosen) if chosen else 0
        self.reference.setCurrentIndex(max(index, 0))
        self.reference.blockSignals(False)

    def set_reference(self, path: str | Path | None) -> None:
        index = self.reference.findData(str(Path(path).resolve())) if path else 0
        if index < 0:
            raise ValueError(self.tr("{path} is not a ticked variant").format(path=path))
        self.reference.setCurrentIndex(index)

    # --- running --------------------------------------------------------------------------------

    def settings(self) -> BenchSettings:
        """The bench's settings as the controls hold them; ValueError with a sentence for what they cannot be."""
        return BenchSettings(prompt_tokens=self.prompt_tokens.value(), gen_tokens=self.gen_tokens.value(),
                             reps=self.reps.value(), ctx=self.ctx.value() // 2 * 2, chunks=self.chunks.value(),
                             quality=self.quality.isChecked(), speed=self.speed.isChecked(),
                             kv_types=tuple(kv for kv, box in self.kv_types.items() if box.isChecked()),
                             contexts=self._context_lengths())

    def _context_lengths(self) -> tuple[int, ...]:
        lengths = []
        for word in self.contexts.text().replace(",", " ").split():
            value, ok = QLocale().toInt(word)  # "2.048" in German is two thousand and forty-eight
            if not ok:
                raise ValueError(self.tr("context lengths are whole numbers separated by commas, such as "
                                         "“512, 2048, 8192”, not “{text}”").format(text=self.contexts.text()))
            lengths.append(value)
        return tuple(lengths)

    def corpus_text(self) -> str | None:
        """The Text choice as --corpus names it; None for the default (the bundled prose)."""
        chosen = self.text.currentData()
        return None if chosen == "prose" else chosen

    def set_text(self, spec: str) -> None:
        """Score this text: a bundled set's or "chats" (as --corpus names them), or a file or folder's path."""
        index = self.text.findData(spec)
        if index < 0:
            self.text.insertItem(self.text.count() - 2, Path(spec).name, spec)
            self.text.setItemData(self.text.count() - 3, spec, Qt.ItemDataRole.ToolTipRole)
            index = self.text.count() - 3
        self.text.setCurrentIndex(index)
        self._text_index = index

    @Slot(int)
    def _on_text_chosen(self, index: int) -> None:
        chosen = self.text.itemData(index)
        if chosen == TEXT_FILE:
            path, _ = QFileDialog.getOpenFileName(self, self.tr("Score a text file"), "",
                                                  self.tr("Text files (*.txt *.md);;All files (*)"))
        elif chosen == TEXT_FOLDER:
            path = QFileDialog.getExistingDirectory(self, self.tr("Score every text file in a folder"))
        else:
            self._text_index = index
            return
        if path:
            self.set_text(path)
        else:
            self.text.setCurrentIndex(self._text_index)

    def set_reference_file(self, path: str | Path | None) -> None:
        """Compare against this KL reference file (None: against a reference model again)."""
        self.reference_file = str(path) if path else ""
        self.reference.setEnabled(not self.reference_file)
        self.reference_file_button.setText(self.tr("Reference file: {name}").format(name=Path(path).name) if path
                                           else self.tr("Reference file…"))

    @Slot()
    def _on_reference_file_clicked(self) -> None:
        if self.reference_file:  # a second click goes back to a reference model
            self.set_reference_file(None)
            return
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Choose a KL reference file"), "", self.tr(
                "KL references (*.qdref *.kld *.bin);;All files (*)"))
        if path:
            self.set_reference_file(path)

    @property
    def running(self) -> bool:
        return self._bench_ticket is not None

    @Slot()
    def run(self) -> None:
        if self.running:
            return
        models, hub = self.checked_paths(), self.checked_hub()
        if not models and not hub:
            self.status.setText(self.tr("Tick at least one variant to measure (two or more to compare them)."))
            return
        try:
            settings = self.settings()
            settings.validate()
        except ValueError as exc:  # the controls stay as they are, to be corrected
            self.status.setText(self.tr("Cannot run: {problem}.").format(problem=str(exc).rstrip(".")))
            return
        self._stopping = False
        self._set_running(True)
        self.progress.setRange(0, 0)  # busy until the first step reports how many there are
        self.status.setText(self.tr("Starting: %n variant(s), each in a fresh engine host…", "",
                                    len(models) + len(hub)))
        reference = None if self.reference_file else self.reference.currentData()
        self._bench_ticket = self._bench.start_job(_run_bench, models, settings, reference,
                                                   self.reference_file or None, self.store, self.corpus_text(), hub,
                                                   self.keep_downloads)

    @Slot()
    def cancel(self) -> None:
        if self.running and self._bench.cancel(self._bench_ticket):
            self._stopping = True
            self.cancel_button.setEnabled(False)
            self.status.setText(self.tr("Stopping after the current step…"))

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        for widget in (self.variants, self.prompt_tokens, self.gen_tokens, self.reps, self.ctx, self.chunks,
                       self.text, self.contexts, *self.kv_types.values(), self.speed, self.quality,
                       self.reference_file_button):
            widget.setEnabled(not running)
        self.reference.setEnabled(not running and not self.reference_file)

    def _finish_run(self) -> None:
        self._bench_ticket = None
        self._set_running(False)

    @Slot(int, object)
    def _on_progress(self, ticket: int, p: LabProgress) -> None:
        if ticket != self._bench_ticket or self._stopping:
            return
        if p.phase == "download":  # the Hub's files, before the first step
            self.progress.setRange(0, 0 if p.fraction is None else 100)
            self.progress.setValue(int((p.fraction or 0.0) * 100))
            self.status.setText(self.tr("Fetching — {message}").format(message=p.message))
            return
        self.progress.setRange(0, p.total * 100)  # hundredths of a step: a scoring pass moves window by window
        self.progress.setValue(int((p.step - 1 + (p.fraction or 0.0)) * 100))
        phase = self.tr("Speed") if p.phase == "speed" else self.tr("Quality")
        self.status.setText(self.tr("{phase} — {message}").format(phase=phase, message=p.message))

    @Slot(int, object)
    def _on_finished(self, ticket: int, result: BenchResult) -> None:
        self._finish_run()
        self.progress.setValue(self.progress.maximum())
        failed = [v.label for v in result.variants if v.error]
        self.status.setText(self.tr("Finished and saved ({id}).").format(id=result.id) + (
            self.tr(" Could not measure: {variants} — hover over its row for why.").format(variants=", ".join(failed))
                                                                                          if failed else ""))
        self.show_result(result)
        self.refresh_history()
        self.bench_finished.emit(result)

    @Slot(int, object)
    def _on_failed(self, ticket: int, error: Exception) -> None:
        from app.lab.runner import LabCancelled

        if isinstance(error, LabCancelled):
            self._on_cancelled()
            return
        message = sentence(error)
        self._finish_run()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status.setText(self.tr("The bench failed: {message}").format(message=message))
        self.bench_stopped.emit(message)

    def _on_cancelled(self) -> None:
        self._finish_run()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.status.setText(self.tr("Cancelled: nothing was saved."))
        self.bench_stopped.emit("cancelled")

    def shutdown(self) -> None:
        """Stop a running bench (at its next step); the engine hosts it started close with it."""
        if self.running:
            self._bench.cancel(self._bench_ticket)

    # --- results --------------------------------------------------------------------------------

    def show_result(self, result: BenchResult | None) -> None:
        self.result = result
        self.table.show_result(None)
        for export_button in self.export_buttons:
            export_button.setEnabled(result is not None)
        self.charts.set_result(result)
        self._show_statistics(result)
        if result is None:
            self.notes.setText("")
            return
        prefix = common_prefix([v.label for v in result.variants])  # said once, in the notes
        self.table.show_result(result, prefix, self.palette().color(QPalette.ColorRole.PlaceholderText))
        s = result.settings
        lines = [self.tr("Variants of {model}…").format(model=prefix)] if prefix else []
        lines += [self.tr("Result {id}: medians of %n run(s) per variant (hover over a figure for its range); "
                         "prompt ≈{prompt_tokens} tokens, {gen_tokens} generated; quality against {reference}", "",
                         s.reps)
                 .format(id=result.id, prompt_tokens=s.prompt_tokens, gen_tokens=s.gen_tokens,
                         reference=result.reference) + ("." if s.quality else self.tr(" — quality pass skipped."))]
        if s.quality and result.reference_file:
            info = result.reference_file
            lines.append(self.tr("Quality as llama-perplexity measures it: {chunks} windows of {ctx} tokens, "
                                 "{positions} positions scored, ± one standard error; the reference keeps "
                                 "{tokens} tokens per position on average ({left_out} of the probability left out).")
                         .format(chunks=info["chunks"], ctx=info["n_ctx"], positions=info["positions"],
                                 tokens=number(info["mean_tokens"], 0), left_out=percent(info["mean_left_out"], 2)))
        lines += self._ranking_lines(result)
        reasons = dict.fromkeys(f"{v.label}: {why}" for v in result.variants for why in v.unavailable.values()
                                if s.quality)
        lines += [self.tr("{label}: not measured — {error}").format(label=v.label,
                                                                    error=v.error) for v in result.variants if v.error]
        lines += list(reasons) + [f"{v.label}: {note}" for v in result.variants for note in v.notes]
        self.notes.setText("\n".join(lines))

    def _ranking_lines(self, result: BenchResult) -> list[str]:
        """The compared variants from the lowest mean KLD up, where two or more were compared and none is a sweep's
        row (a sweep reads better on its chart): "not significantly different" where ± one error overlaps."""
        from app.lab import report

        ranked = report.ranking(result)
        if len(ranked) < 2 or any(v.sweep_of for v in result.variants):
            return []
        lines = [self.tr("Ranked by mean KLD (± one standard error; KLD×GB: the loss times the file's size, lower is "
                         "better):")]
        for n, r in enumerate(ranked, start=1):
            line = self.tr("{rank}. {label}: mean KLD {kld}, {size}, KLD×GB {kld_gb}").format(
                rank=n, label=r.label, kld=estimate_text("kld_mean", r.kld.value, r.kld.se or 0.0),
                size=human_bytes(r.size_bytes), kld_gb=estimate_text("kld_mean", r.kld_gb.value, r.kld_gb.se or 0.0))
            if r.tied_with_previous:
                line += self.tr(" — not significantly different from {label}").format(label=ranked[n - 2].label)
            lines.append(line)
        return lines

    def _show_statistics(self, result: BenchResult | None) -> None:
        """Every statistic llama-perplexity prints, one row each, a column per compared variant (its labels are the
        tool's, so a reader can set the two side by side)."""
        from app.lab import report

        compared = [v for v in result.variants if v.quality is not None and not v.is_reference] if result else []
        rows = [report.statistics(v.quality) for v in compared if v.quality is not None]  # (all of them)
        self.statistics.clear()
        self.statistics.setColumnCount(len(compared))
        self.statistics.setRowCount(len(rows[0]) if rows else 0)
        prefix = common_prefix([v.label for v in result.variants]) if result else ""
        self.statistics.setHorizontalHeaderLabels([v.label[len(prefix):] for v in compared])
        if rows:
            self.statistics.setVerticalHeaderLabels([label for _section, label, _text in rows[0]])
        for column, lines in enumerate(rows):
            for row, (section, label, text) in enumerate(lines):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(f"{section}: {label}")
                self.statistics.setItem(row, column, item)

    # --- export ---------------------------------------------------------------------------------

    def export(self, path: str | Path, kind: str) -> Path:
        """Write the shown result as "csv", "json", "png" (the charts) or "md" (the quant card, with its .json beside
        it); returns the path written."""
        from app.lab import export

        if self.result is None:
            raise ValueError(self.tr("there is no result to export"))
        path = Path(path)
        if kind == "csv":
            path.write_text(export.to_csv(self.result), encoding="utf-8")
        elif kind == "json":
            path.write_text(export.to_json(self.result) + "\n", encoding="utf-8")
        elif kind == "png":
            if not self.charts.save_png(str(path)):
                raise OSError(self.tr("the image could not be written to {path}").format(path=path))
        elif kind == "md":
            from app.lab.card import write_card

            path = write_card(self.result, path)[0]
        else:
            raise ValueError(self.tr("unknown export kind {kind!r}").format(kind=kind))
        return path

    def _export_with_dialog(self, kind: str, pattern: str) -> None:
        if self.result is None:
            return
        suggested = f"quant-lab-{self.result.id}.{kind}"
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export as {kind}").format(kind=kind.upper()), suggested,
                                              pattern)
        if not path:
            return
        try:
            self.status.setText(self.tr("Saved {path}.").format(path=self.export(path, kind)))
        except OSError as exc:
            self.status.setText(self.tr("Could not save: {error}").format(error=sentence(exc)))

    @Slot()
    def _on_export_csv_clicked(self) -> None:
        self._export_with_dialog("csv", self.tr("CSV (*.csv)"))

    @Slot()
    def _on_export_json_clicked(self) -> None:
        self._export_with_dialog("json", self.tr("JSON (*.json)"))

    @Slot()
    def _on_export_png_clicked(self) -> None:
        self._export_with_dialog("png", self.tr("PNG image (*.png)"))

    @Slot()
    def _on_export_card_clicked(self) -> None:
        self._export_with_dialog("md", self.tr("Quant card (*.md)"))

    # --- history --------------------------------------------------------------------------------

    @Slot()
    def refresh_history(self) -> None:
        self.past.show_saved(self.store.history())

    def saved_ids(self) -> list[str]:
        return self.past.saved_ids()

    @property
    def confirm(self) -> QMessageBox | None:
        """The open confirmation of a delete (LabHistory's)."""
        return self.past.confirm

    def open_saved(self, result_id: str) -> None:
        try:
            result = self.store.load(result_id)
        except Exception as exc:  # a damaged or foreign file: the page says so and keeps what it shows
            self.status.setText(self.tr("That result cannot be opened: {error}").format(error=sentence(exc)))
            return
        self.show_result(result)
        self.status.setText(self.tr("Showing the saved result {result_id}.").format(result_id=result_id))

    def delete_saved(self, result_id: str) -> None:
        try:
            self.store.delete(result_id)
        except Exception as exc:  # a file that cannot go (permissions, gone meanwhile): said, nothing else changes
            self.status.setText(self.tr("That result could not be deleted: {error}").format(error=sentence(exc)))
            return
        if self.result is not None and self.result.id == result_id:
            self.show_result(None)
        self.status.setText(self.tr("Deleted the saved result {result_id}.").format(result_id=result_id))
        self.refresh_history()
