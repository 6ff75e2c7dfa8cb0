"""The Discover page: a curated starting list, Hub search (text, format, sort, paged), and for the chosen model
every quant with its fit on this machine, the memory it needs, predicted speed and size, the best pick
highlighted with its reason, and a Download button per quant. Offline it says so and offers "import a file"."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import (QCoreApplication, QEvent, QItemSelectionModel, QModelIndex, QObject,
                            QPersistentModelIndex, QSize, Qt, Signal, Slot)
from PySide6.QtGui import QBrush, QColor, QFont, QKeyEvent
from PySide6.QtWidgets import (QAbstractButton, QAbstractItemView, QComboBox, QFrame, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QListWidget, QListWidgetItem, QPushButton, QSplitter, QStyledItemDelegate,
                               QStyleOptionViewItem, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from shiboken6 import isValid

from app.hardware.profile import HardwareProfile
from app.ui.common.background import BackgroundCall, is_offline_error, sentence
from app.hub.discover import (DEFAULT_N_CTX, ModelChoices, QuantChoice, StarterModel, model_choices, starter_list,
                              starters_for)
from app.ui.common.formatting import capitalized, grouped, human_bytes, human_memory, number, tokens_per_second
from app.ui.common.icons import decorate
from app.ui.common.theme import SPACING
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import Flow, page_margins, page_title, section_title

if TYPE_CHECKING:
    from app.hub.search import ModelSummary

PAGE_SIZE = 20
REPO_ID = Qt.ItemDataRole.UserRole
# The words below are shown through DiscoverPage.tr.
FORMATS = ((QT_TRANSLATE_NOOP("DiscoverPage", "Any format"), None), ("GGUF", "gguf"), ("MLX", "mlx"), ("EXL2", "exl2"),
           ("EXL3", "exl3"))
SORTS = ((QT_TRANSLATE_NOOP("DiscoverPage", "Most downloaded"), "downloads"),
         (QT_TRANSLATE_NOOP("DiscoverPage", "Most liked"), "likes"),
         (QT_TRANSLATE_NOOP("DiscoverPage", "Recently updated"), "recent"))
COLUMNS = (QT_TRANSLATE_NOOP("DiscoverPage", "Quant"), QT_TRANSLATE_NOOP("DiscoverPage", "Format"),
           QT_TRANSLATE_NOOP("DiscoverPage", "Fit on this machine"), QT_TRANSLATE_NOOP("DiscoverPage", "Memory needed"),
           QT_TRANSLATE_NOOP("DiscoverPage", "Speed"), QT_TRANSLATE_NOOP("DiscoverPage", "Size"), "")
BEST_BACKGROUND = QColor(46, 160, 67, 48)  # a light green wash that reads on light and dark palettes
# A fit badge's tone (app.ui.common.theme's badge_good / badge_warn / badge_bad).
BADGE_TONES = {"Fits on GPU": "good", "Fits in unified memory": "good", "Likely fits": "good",
               "Fits on GPU + RAM": "warn", "Fits in RAM": "warn", "Too large": "bad", "Likely too large": "bad"}


class ModelCard(QFrame):
    """One model in the list: its name and fit badge, what it is (the starting list says why it is there), and its
    format, size, downloads and likes as chips. It shows what its list item says (the item keeps the text for
    screen readers and the keyboard) and lets the mouse through to the list."""

    def __init__(self, repo_id: str, about: str, chips: list[str], badge: str = "") -> None:
        super().__init__()
        self.setObjectName("card")
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(SPACING[2], SPACING[1], SPACING[2], SPACING[1])
        layout.setSpacing(SPACING[0])
        top = QHBoxLayout()
        self.title = QLabel(repo_id)
        self.title.setObjectName("cardTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        self.badge = QLabel()
        top.addWidget(self.title, 1)
        top.addWidget(self.badge, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(top)
        if about:
            text = QLabel(about)
            text.setTextFormat(Qt.TextFormat.PlainText)
            text.setWordWrap(True)
            layout.addWidget(text)
        self.chips = Flow(spacing=SPACING[0])  # onto a second line where the card is narrow
        for chip in chips:
            self.add_chip(chip)
        layout.addWidget(self.chips)
        self.set_badge(badge)

    def add_chip(self, text: str) -> None:
        chip = QLabel(text)
        chip.setObjectName("chip")
        chip.setTextFormat(Qt.TextFormat.PlainText)
        self.chips.add_widget(chip)

    def set_badge(self, text: str) -> None:
        self.badge.setText(text)
        self.badge.setObjectName(f"badge_{BADGE_TONES.get(text, 'warn')}")
        self.badge.setVisible(bool(text))
        self.badge.style().polish(self.badge)  # the new name picks its colours from the style sheet


class _CardsDraw(QStyledItemDelegate):
    """The list draws each item's selection and focus, not its text: the item's card is on top of it."""

    def initStyleOption(self, option: QStyleOptionViewItem,  # noqa: N802 (Qt's name)
                        index: QModelIndex | QPersistentModelIndex) -> None:
        super().initStyleOption(option, index)
        option.text = ""


class CardList(QListWidget):
    """A list of models drawn as ModelCards (Discover's results and starting list; the first run's models): each
    item keeps the text for screen readers and the keyboard, its card shows it, as tall as its text at the list's
    width."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setItemDelegate(_CardsDraw(self))
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setSpacing(SPACING[0])
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.viewport().installEventFilter(self)  # cards are as tall as their text at the list's width

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.viewport() and event.type() == QEvent.Type.Resize:
            self.fit_cards()
        return super().eventFilter(watched, event)

    def add_card(self, item: QListWidgetItem, card: ModelCard) -> None:
        self.setItemWidget(item, card)

    def card(self, row: int) -> ModelCard | None:
        return cast("ModelCard | None", self.itemWidget(self.item(row)))  # each item's widget is its card

    def fit_cards(self) -> None:
        width = self.viewport().width() - 2 * self.spacing()
        for row in range(self.count()):
            item = self.item(row)
            card = self.itemWidget(item)
            if card is not None:
                item.setSizeHint(QSize(width, card.heightForWidth(width)))


def starter_card(model: StarterModel, profile: HardwareProfile | None, likely: bool) -> tuple[QListWidgetItem,
                                                                                              ModelCard]:
    """A model of the starting list as a list item (its words, for screen readers and the keyboard) and its card;
    with a profile, whether it likely fits this machine."""
    fit = "" if profile is None else (QCoreApplication.translate("DiscoverPage", " · likely fits") if likely else
                                      QCoreApplication.translate("DiscoverPage", " · likely too large here"))
    vision = QCoreApplication.translate("DiscoverPage", " · reads images") if model.modality == "vision" else (
        QCoreApplication.translate("DiscoverPage", " · embeds text: search your documents by meaning")
        if model.modality == "embedding" else "")
    item = QListWidgetItem(QCoreApplication.translate("DiscoverPage", "{repo_id}\n{why}\n{format} · {params}B "
                                                      "parameters{vision} · for {tier} machines · about {size} at 4 "
                                                      "bits{fit}")
                           .format(repo_id=model.repo_id, why=model.why, format=model.format.upper(),
                                   params=number(model.params_b, None), vision=vision, tier=model.tier,
                                   size=human_bytes(model.approx_q4_bytes), fit=fit))
    item.setData(REPO_ID, model.repo_id)
    chips = [model.format.upper(), f"{model.params_b:g}B", f"~{human_bytes(model.approx_q4_bytes)}"] + (
        ["reads images"] if model.modality == "vision" else ["embedding model"] if model.modality == "embedding"
        else [])
    likely_badge = "" if profile is None else "Likely fits" if likely else "Likely too large"
    return item, ModelCard(model.repo_id, model.why, chips, likely_badge)


def _fit_and_measured(repo_id: str, profile: HardwareProfile) -> tuple[ModelChoices, dict[str, str]]:
    """Every quant of ``repo_id`` fitted to the machine, and for each the quant lab measured here (downloaded from this
    repo), what it found (app/lab/measured): off the GUI thread, as both read the network or the disk."""
    from app.lab import measured

    choices = model_choices(repo_id, profile)
    found = measured.find(choice.label for choice in choices.choices)
    return choices, {label: m.sentence() for label, m in found.items()}


def _search(query: str, fmt: str | None, sort: str, offset: int) -> list[ModelSummary]:
    from app.hub.search import search_models

    return search_models(query, fmt, sort, limit=PAGE_SIZE, offset=offset)


class DiscoverPage(QWidget):
    download_requested = Signal(object, str)  # DownloadRequest, a label for the Downloads row
    import_requested = Signal()
    answered = Signal()  # a search or a model's quants (or the error) is now on the page

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Discover"))
        self.profile: HardwareProfile | None = None
        self.choices: ModelChoices | None = None
        self.measured: dict[str, str] = {}  # a quant's label -> what the quant lab measured of it here
        self._pending_repo: str | None = None  # opened before the hardware was known
        self._focus_quants = False  # Enter on a model before its quants arrived: they take the focus when they do
        self._query: tuple[str, str | None, str] | None = None
        self._offset = 0
        self._searcher = BackgroundCall("hub-search")
        self._searcher.succeeded.connect(self._on_results)
        self._searcher.failed.connect(self._on_search_failed)
        self._fitter = BackgroundCall("quant-fit")
        self._fitter.succeeded.connect(self._on_choices)
        self._fitter.failed.connect(self._on_choices_failed)
        self._build()
        self.show_starters()

    # --- layout --------------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        page_margins(outer)
        outer.addWidget(page_title(self.tr("Discover")))
        row = QHBoxLayout()
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText(self.tr("Search the Hugging Face Hub, e.g. llama 3.2 instruct"))
        self.search_box.setAccessibleName(self.tr("Search the Hub"))
        self.search_box.returnPressed.connect(self.search)
        self.search_box.installEventFilter(self)  # Down goes on to the results
        self.format_box = QComboBox()
        self.format_box.setAccessibleName(self.tr("Format"))
        for text, value in FORMATS:
            self.format_box.addItem(self.tr(text), value)
        self.sort_box = QComboBox()
        self.sort_box.setAccessibleName(self.tr("Sort by"))
        for text, value in SORTS:
            self.sort_box.addItem(self.tr(text), value)
        self.search_button = QPushButton(self.tr("Search"))
        self.search_button.clicked.connect(self.search)
        decorate(self.search_button, "search")
        row.addWidget(self.search_box, 1)
        row.addWidget(self.format_box)
        row.addWidget(self.sort_box)
        row.addWidget(self.search_button)
        outer.addLayout(row)

        self.offline_label = QLabel()
        self.offline_label.setObjectName("offlineMessage")
        self.offline_label.setWordWrap(True)
        self.offline_label.setTextFormat(Qt.TextFormat.PlainText)
        self.import_button = QPushButton(self.tr("Import a model file…"))
        self.import_button.setAccessibleName(self.tr("Import a model file you already have"))
        self.import_button.clicked.connect(self.import_requested)
        offline_row = QHBoxLayout()
        offline_row.addWidget(self.offline_label, 1)
        offline_row.addWidget(self.import_button)
        outer.addLayout(offline_row)
        self._set_offline("")

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        self.list_title = QLabel()
        self.list_title.setWordWrap(True)
        self.results = CardList()
        self.results.setAccessibleName(self.tr("Models"))
        self.fit_badges: dict[str, tuple[str, str]] = {}  # repo id: the badge and best pick of models opened
        self.results.currentItemChanged.connect(self._on_result_selected)
        self.results.itemActivated.connect(self._on_result_activated)  # Enter (or a double click): to its quants
        self.more_button = QPushButton(self.tr("More results"))
        self.more_button.clicked.connect(self.more)
        self.starters_button = QPushButton(self.tr("Starting list"))
        self.starters_button.setAccessibleName(self.tr("Show the curated starting list"))
        self.starters_button.clicked.connect(self.show_starters)
        buttons = QHBoxLayout()
        buttons.addWidget(self.starters_button)
        buttons.addStretch(1)
        buttons.addWidget(self.more_button)
        left_layout.addWidget(self.list_title)
        left_layout.addWidget(self.results, 1)
        left_layout.addLayout(buttons)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(12, 0, 0, 0)
        self.model_title = section_title(self.tr("Pick a model"))
        self.summary_label = QLabel()
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label = QLabel(self.tr("Choose a model on the left to see every quant and whether it fits this "
                                           "machine."))
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.best_label = QLabel()
        self.best_label.setObjectName("bestPick")
        self.best_label.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setAccessibleName(self.tr("Quants of this model"))
        self.table.setHorizontalHeaderLabels([self.tr(column) if column else "" for column in COLUMNS])
        self.table.verticalHeader().hide()
        self.table.setCornerButtonEnabled(False)
        for corner in self.table.findChildren(QAbstractButton):  # Qt's select-all corner: named for screen readers
            corner.setAccessibleName(self.tr("Select all quants"))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setTabKeyNavigation(False)  # arrows pick a quant; Tab goes on to the Download buttons
        self.table.activated.connect(self._on_quant_activated)  # Enter (or a double click) downloads that quant
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        right_layout.addWidget(self.model_title)
        right_layout.addWidget(self.summary_label)
        right_layout.addWidget(self.status_label)
        right_layout.addWidget(self.best_label)
        right_layout.addWidget(self.table, 1)
        right_layout.addStretch(0)  # takes the room while the table is hidden, so the lines stay under the title
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([360, 800])
        outer.addWidget(splitter, 1)
        self.best_label.hide()
        self.table.hide()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if (watched is self.search_box and isinstance(event, QKeyEvent) and event.type() == QEvent.Type.KeyPress
                and event.key() == Qt.Key.Key_Down and self.results.count()):
            if self.results.currentRow() < 0:
                self.results.setCurrentRow(0)
            self.results.setFocus(Qt.FocusReason.TabFocusReason)
            return True
        return super().eventFilter(watched, event)

    def _set_offline(self, text: str) -> None:
        self.offline_label.setText(text)
        self.offline_label.setVisible(bool(text))
        self.import_button.setVisible(bool(text))

    # --- hardware ------------------------------------------------------------------------------

    def set_profile(self, profile: HardwareProfile) -> None:
        self.profile = profile
        if self._query is None:
            self.show_starters()  # re-ordered for this machine
        if self._pending_repo:
            self.open_model(self._pending_repo)

    # --- the list: starters and search results ------------------------------------------------

    @Slot()
    def show_starters(self) -> None:
        starters = starter_list()
        self._query = None
        self._searcher.latest = 0  # a search still running is no longer wanted
        self.list_title.setText(self.tr("<b>Good starting models</b><br><span style='font-size:small'>{about} (List "
                                        "from {updated}.)</span>").format(about=html.escape(starters.about),
                                                                          updated=starters.updated))
        self.results.blockSignals(True)
        self.results.clear()
        for model, likely in starters_for(self.profile, starters):
            item, card = starter_card(model, self.profile, likely)
            self.results.addItem(item)
            self._add_card(item, card)
        self._fit_cards()
        self.results.blockSignals(False)
        self.more_button.hide()
        self._check_offline()

    def _check_offline(self) -> bool:
        from app.hub.config import offline_error
        from app.settings import is_offline

        if is_offline():
            # names the switch that is on: Settings or a variable
            error = offline_error(self.tr("search the Hub or download"))
            self._set_offline(self.tr("{message} Import a model file you already have (a .gguf file or a model "
                                      "folder), or {split}.").format(message=error.message,
                                                                     split=error.hint.split(';')[0]))
            return True
        self._set_offline("")
        return False

    @Slot()
    def search(self) -> None:
        self._query = (self.search_box.text().strip(), self.format_box.currentData(), self.sort_box.currentData())
        self._offset = 0
        self.results.clear()
        text = self._query[0]
        self.list_title.setText(self.tr("<b>Searching for “{text}”…</b>").format(text=html.escape(text)) if text
                                else self.tr(
                "<b>Searching…</b>"))
        self.more_button.hide()
        if self._check_offline():
            self.list_title.setText(self.tr("<b>Search needs the Hub, and this computer is offline.</b>"))
            return
        self._searcher.start(_search, *self._query, 0)

    @Slot()
    def more(self) -> None:
        if self._query is None:
            return
        self.more_button.setEnabled(False)
        self._searcher.start(_search, *self._query, self._offset)

    @Slot(int, object)
    def _on_results(self, ticket: int, found: list[ModelSummary]) -> None:
        if ticket != self._searcher.latest or self._query is None:
            return
        self._offset += len(found)
        for summary in found:
            detail = " · ".join(part for part in (
                summary.format.upper(),
                self.tr("{count} downloads").format(count=grouped(summary.downloads))
                if summary.downloads is not None else "",
                self.tr("{count} likes").format(count=grouped(summary.likes)) if summary.likes is not None else "",
                self.tr("gated: needs a token") if summary.gated else "") if part)
            item = QListWidgetItem(self.tr("{repo_id}\n{detail}").format(repo_id=summary.repo_id, detail=detail))
            item.setData(REPO_ID, summary.repo_id)
            self.results.addItem(item)
            chips = [summary.format.upper()] + [part for part in detail.split(" · ")[1:]]
            self._add_card(item, ModelCard(summary.repo_id, "", chips))
        self._fit_cards()
        text = self._query[0]
        shown = self.results.count()
        self.list_title.setText("<b>" + self.tr("%n model(s)", "", shown)
                                + (self.tr(" for “{text}”").format(text=html.escape(text)) if text else "") + "</b>"
                                + ("" if shown else self.tr("<br>Nothing matched; try fewer words or another format.")))
        self.more_button.setEnabled(True)
        self.more_button.setVisible(len(found) == PAGE_SIZE)
        self.answered.emit()

    @Slot(int, object)
    def _on_search_failed(self, ticket: int, error: Exception) -> None:
        if ticket != self._searcher.latest:
            return
        self.more_button.setEnabled(True)
        self.list_title.setText(self.tr("<b>The search failed.</b>"))
        if is_offline_error(error):
            self._set_offline(sentence(error) + self.tr(" Without the Hub you can still import a model file you have."))
        else:
            self.list_title.setText(self.tr("<b>The search failed.</b><br>{error}")
                                    .format(error=html.escape(sentence(error))))
        self.answered.emit()

    # --- one model -----------------------------------------------------------------------------

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_result_selected(self, item: QListWidgetItem | None, previous: QListWidgetItem | None) -> None:
        self._focus_quants = False  # Enter was pressed on another model
        for listed, selected in ((previous, False), (item, True)):  # the card covers the item's own highlight
            card = self.results.itemWidget(listed) if listed is not None and isValid(listed) else None
            if card is not None:
                card.setProperty("selected", selected)
                card.style().polish(card)
        if item is not None:
            self.open_model(item.data(REPO_ID))

    @Slot(QListWidgetItem)
    def _on_result_activated(self, item: QListWidgetItem) -> None:
        if self.choices is not None and self.choices.repo_id == item.data(REPO_ID) and self.table.isVisible():
            self.focus_quants()
        else:
            self._focus_quants = True  # its quants are on their way (opened when it became current)

    def focus_quants(self) -> None:
        """The keyboard focus to the quants table, on the best pick (or the first row)."""
        self._focus_quants = False
        self.table.selectRow(self._best_row())
        self.table.setFocus(Qt.FocusReason.OtherFocusReason)

    def open_model(self, repo_id: str) -> None:
        """Show every quant of ``repo_id`` with its fit (worked out in a worker thread)."""
        self.choices = None
        self.model_title.setText(repo_id)
        self.summary_label.clear()
        self.best_label.hide()
        self.table.hide()
        self.table.setRowCount(0)
        if self._check_offline():
            self.status_label.setText(self.tr("Offline: the quants of this model cannot be listed."))
            return
        if self.profile is None:
            self._pending_repo = repo_id
            self.status_label.setText(self.tr("Waiting for hardware detection to finish, then every quant is checked "
                                              "against this machine…"))
            return
        self._pending_repo = None
        self.status_label.setText(self.tr("Reading every quant from the Hub and checking it against this machine…"))
        self._fitter.start(_fit_and_measured, repo_id, self.profile)

    @Slot(int, object)
    def _on_choices(self, ticket: int, answer: tuple[ModelChoices, dict[str, str]]) -> None:
        if ticket == self._fitter.latest:
            self.show_choices(*answer)
            self.answered.emit()

    @Slot(int, object)
    def _on_choices_failed(self, ticket: int, error: Exception) -> None:
        if ticket != self._fitter.latest:
            return
        self.status_label.setText(sentence(error))
        if is_offline_error(error):
            self._set_offline(self.tr("The Hub cannot be reached. You can still import a model file you already have."))
        self.answered.emit()

    def _add_card(self, item: QListWidgetItem, card: ModelCard) -> None:
        repo_id = item.data(REPO_ID)
        if repo_id in self.fit_badges:  # opened before: the recommender's badge, not the rough one
            badge, best = self.fit_badges[repo_id]
            card.set_badge(badge)
            if best:
                card.add_chip(best)
        self.results.add_card(item, card)

    def card(self, repo_id: str) -> ModelCard | None:
        """The card of ``repo_id`` in the list, if it is listed."""
        for row in range(self.results.count()):
            item = self.results.item(row)
            if item.data(REPO_ID) == repo_id:
                return cast("ModelCard | None", self.results.itemWidget(item))  # each item's widget is its card
        return None

    def _fit_cards(self) -> None:
        self.results.fit_cards()

    def show_choices(self, choices: ModelChoices, measured: dict[str, str] | None = None) -> None:
        """Show every quant with its fit; ``measured`` has, for each quant the quant lab measured on this machine,
        what it found, said in that quant's reason."""
        self.choices = choices
        self.measured = measured or {}
        best = choices.best
        pick = (self.tr("best: {quant} · {size}").format(quant=best.quant, size=human_bytes(best.download_bytes))
                if best is not None else "")
        if self.fit_badges.get(choices.repo_id) != (choices.fit_badge, pick):
            self.fit_badges[choices.repo_id] = (choices.fit_badge, pick)
            card = self.card(choices.repo_id)
            if card is not None:
                card.set_badge(choices.fit_badge)
                if pick:
                    card.add_chip(pick)
                self._fit_cards()
        self.model_title.setText(choices.repo_id)
        self.summary_label.setText(choices.summary)
        self.summary_label.setVisible(bool(choices.summary))
        if not choices.choices:
            self.status_label.setText(self.tr("{repo_id} holds no GGUF, MLX or EXL model files QuantDesk can run.")
                                      .format(repo_id=choices.repo_id))
            return
        self.status_label.setText(self.tr("%n quant(s), checked against this machine at {n_ctx} tokens of context. "
                                          "{reason}.", "", len(choices.choices))
                                  .format(n_ctx=grouped(DEFAULT_N_CTX), reason=capitalized(choices.format_reason)))
        best = choices.best
        if best is not None:
            self.best_label.setText(self.tr("<b>Best pick for this machine: {quant} ({format})</b> — {best_reason}")
                                    .format(quant=html.escape(best.quant), format=best.format.upper(),
                                            best_reason=html.escape(self._with_measured(choices.best_reason,
                                                                                        best))))
            self.best_label.show()
        else:
            self.best_label.setText(self.tr("<b>No quant of this model fits this machine.</b> Try a smaller model."))
            self.best_label.show()
        self.table.setRowCount(len(choices.choices))
        for row, choice in enumerate(choices.choices):
            self._fill_row(row, choice)
        # The highlight belongs to the best pick, not to the first row: no selection, but the keyboard starts there.
        self.table.clearSelection()
        self.table.selectionModel().setCurrentIndex(self.table.model().index(self._best_row(), 0),
                                                    QItemSelectionModel.SelectionFlag.NoUpdate)
        self.table.show()
        if self._focus_quants:
            self.focus_quants()

    def _with_measured(self, reason: str, choice: QuantChoice) -> str:
        """A quant's reason with what the quant lab measured of it here, where it did."""
        found = self.measured.get(choice.label)
        return self.tr("{reason}; {measured}").format(reason=reason, measured=found) if found else reason

    def _fill_row(self, row: int, choice: QuantChoice) -> None:
        speed = "~" + tokens_per_second(choice.decode_tok_s, 0) if choice.decode_tok_s else "—"
        memory = human_memory(choice.memory_bytes) if choice.memory_bytes else "—"
        quant = self.tr("{quant} · sees images").format(quant=choice.quant) if choice.projector else choice.quant
        if choice.label in self.measured:
            quant = self.tr("{quant} · measured here").format(quant=quant)
        cells = (quant, choice.format.upper(), choice.badge, memory, speed, human_bytes(choice.download_bytes))
        reason = self._with_measured(choice.reason, choice)
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setToolTip(reason + (self.tr(" Sees images: downloads with the vision projector {projector}.")
                                      .format(projector=choice.projector)
                                      if choice.projector else ""))
            if choice.best:
                item.setBackground(QBrush(BEST_BACKGROUND))
                font = QFont(item.font())
                font.setBold(True)
                item.setFont(font)
            self.table.setItem(row, column, item)
        button = decorate(QPushButton(self.tr("Download")), "download")
        button.setAccessibleName(self.tr("Download {quant}").format(quant=choice.quant))
        button.setToolTip(reason if choice.fits else self.tr("Does not fit this machine: {reason}")
                          .format(reason=reason))
        button.setProperty("row", row)
        button.clicked.connect(self._on_download_clicked)
        self.table.setCellWidget(row, len(COLUMNS) - 1, button)

    def _best_row(self) -> int:
        assert self.choices is not None  # a model's quants are shown
        return next((row for row, choice in enumerate(self.choices.choices) if choice.best), 0)

    def download_button(self, quant: str) -> QPushButton:
        assert self.choices is not None  # a model's quants are shown
        row = next(i for i, c in enumerate(self.choices.choices) if c.quant == quant)
        return cast(QPushButton, self.table.cellWidget(row, len(COLUMNS) - 1))  # the row's Download button

    @Slot(QModelIndex)
    def _on_quant_activated(self, index: QModelIndex) -> None:
        assert self.choices is not None  # a model's quants are shown
        self.download(self.choices.choices[index.row()])

    @Slot()
    def _on_download_clicked(self) -> None:
        assert self.choices is not None  # its quants' buttons are shown
        choice = self.choices.choices[self.sender().property("row")]
        self.download(choice)

    def download(self, choice: QuantChoice) -> None:
        label = f"{self.choices.repo_id} · {choice.quant}" if self.choices else choice.label
        self.download_requested.emit(choice.request, label)

