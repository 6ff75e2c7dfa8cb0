"""The first run (no chats and no models yet), a page of the window's own: this machine in a few lines and the models
that suit it, as Discover's cards → (Discover: download) → (Downloads: chat with it). Offline it offers "import a
file you already have" instead. Skippable; once done or skipped it is remembered in the window settings (config
folder) and not offered again."""

from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication, QObject, QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout, QWidget

from app.chats.store import ChatStore
from app.hardware.profile import HardwareProfile
from app.ui.common.background import BackgroundCall, sentence
from app.hub.discover import starter_list, starters_for
from app.ui.common.formatting import human_bytes, human_memory
from app.ui.common.widgets import page_margins, page_title

DONE_KEY = "first_run/done"
REPO_ID = Qt.ItemDataRole.UserRole


def should_offer(settings: QSettings, store: ChatStore) -> bool:
    if settings.value(DONE_KEY, False, type=bool):
        return False
    if store.conversations():
        return False
    from app.hub.library import Library

    try:
        return not Library().entries(refresh=False)
    except Exception:  # noqa: BLE001 - an unreadable library is the Library page's to report, not a first run
        return False


def mark_done(settings: QSettings) -> None:
    settings.setValue(DONE_KEY, True)
    settings.sync()


def hardware_summary(profile: HardwareProfile) -> str:
    """A few plain lines (HTML) about what matters for running models here."""
    from app.models.recommend import is_apple, main_gpu

    cpu = profile.cpu.model or QCoreApplication.translate("first_run", "Unknown CPU")
    lines = [QCoreApplication.translate("first_run", "<b>{cpu}</b>, {threads} threads")
             .format(cpu=html.escape(cpu), threads=profile.cpu.logical_cores or "?")]
    if profile.ram_total_bytes:
        lines.append(QCoreApplication.translate("first_run", "{ram} of RAM")
                     .format(ram=human_memory(profile.ram_total_bytes))
                     + (QCoreApplication.translate("first_run", " ({free} free now)")
                        .format(free=human_memory(profile.ram_available_bytes))
                        if profile.ram_available_bytes else ""))
    gpu = main_gpu(profile)
    if gpu is not None:
        memory = human_memory(gpu.vram_total_bytes) if gpu.vram_total_bytes else QCoreApplication.translate(
            "first_run", "unknown memory")
        if gpu.unified:
            memory = QCoreApplication.translate("first_run", "unified memory")
        lines.append(QCoreApplication.translate("first_run", "GPU: {name} ({memory})")
                     .format(name=html.escape(gpu.name), memory=memory))
    else:
        lines.append(QCoreApplication.translate("first_run", "No GPU QuantDesk can use: models run on the CPU from "
                                                             "RAM (small models do that well)."))
    ready = [b.name for b in profile.backends if b.available]
    lines.append(QCoreApplication.translate("first_run", "Engines ready: ") + (", ".join(ready) if ready else (
        QCoreApplication.translate("first_run", "none yet (see the Hardware page)"))))
    if profile.disk_free_bytes is not None:
        lines.append(QCoreApplication.translate("first_run", "{free} free for models")
                     .format(free=human_bytes(profile.disk_free_bytes)))
    if is_apple(profile):
        lines.append(QCoreApplication.translate("first_run", "Apple Silicon: MLX models run natively; GGUF works too."))
    return "<br>".join(lines)


class ImportFlow(QObject):
    """Import a model file or folder into the library (off the GUI thread); ``imported`` gives its path."""

    imported = Signal(str)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._call = BackgroundCall("model-import")
        self._call.succeeded.connect(self._on_done)
        self._call.failed.connect(self._on_failed)

    def ask(self, parent: QWidget | None = None) -> None:
        path, _ = QFileDialog.getOpenFileName(parent, self.tr("Import a model"), "", self.tr(
                "GGUF models (*.gguf);;All files (*)"))
        if path:
            self.start(path)

    def start(self, path: str) -> None:
        self._call.start(_import, path)

    @Slot(int, object)
    def _on_done(self, ticket: int, model_path: str) -> None:
        self.imported.emit(model_path)

    @Slot(int, object)
    def _on_failed(self, ticket: int, error: Exception) -> None:
        self.failed.emit(sentence(error))


def _import(path: str) -> str:
    from app.hub.library import Library
    from app.models.metadata import read_model

    read_model(path)  # a corrupt or foreign file is refused with a sentence before anything is copied
    entries = Library().import_path(path)
    if not entries:
        from app.hub.errors import LibraryError

        raise LibraryError(QCoreApplication.translate("first_run", "No model was found in {path}.").format(path=path),
                           QCoreApplication.translate("first_run", "choose a .gguf file or a model folder"))
    return entries[0].path


class FirstRunPage(QWidget):
    """The welcome, a page of the window's own (not an overlay on another page): this machine in a few lines, then
    the models of the starting list that suit it, as Discover shows them (its cards). Choosing one opens its quants
    on Discover; offline it offers importing a file instead. Skipping, choosing or importing is remembered."""

    model_chosen = Signal(str)  # a repo id: open it on the Discover page
    import_chosen = Signal()
    skipped = Signal()

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        from app.ui.library.discover_page import CardList

        super().__init__(parent)
        self.settings = settings
        self.profile: HardwareProfile | None = None
        self.setAccessibleName(self.tr("Welcome"))
        layout = page_margins(QVBoxLayout(self))
        layout.addWidget(page_title(self.tr("Welcome to QuantDesk")))
        self.hardware_label = QLabel(self.tr("Detecting this machine…"))
        self.hardware_label.setWordWrap(True)
        self.hardware_label.setAccessibleName(self.tr("This machine"))
        layout.addWidget(self.hardware_label)
        self.models_title = QLabel()
        self.models_title.setWordWrap(True)
        layout.addWidget(self.models_title)
        self.models = CardList()
        self.models.setAccessibleName(self.tr("Recommended models"))
        self.models.itemActivated.connect(self._on_choose_clicked)  # Enter, or a double click
        layout.addWidget(self.models, 1)
        self.offline_spacer = QWidget()  # offline: the buttons stay at the bottom without the list
        self.offline_spacer.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        layout.addWidget(self.offline_spacer)

        buttons = QHBoxLayout()
        self.skip_button = QPushButton(self.tr("Skip"))
        self.skip_button.setAccessibleName(self.tr("Skip the welcome"))
        self.skip_button.clicked.connect(self.skip)
        self.choose_button = QPushButton(self.tr("See its quants"))
        self.choose_button.setAccessibleName(self.tr("Open the chosen model to download it"))
        self.choose_button.clicked.connect(self._on_choose_clicked)
        self.import_button = QPushButton(self.tr("Import a file…"))
        self.import_button.setAccessibleName(self.tr("Import a model file you already have"))
        self.import_button.clicked.connect(self._on_import_clicked)
        buttons.addWidget(self.skip_button)
        buttons.addStretch(1)
        buttons.addWidget(self.import_button)
        buttons.addWidget(self.choose_button)
        layout.addLayout(buttons)
        self._fill_models()

    @property
    def offline(self) -> bool:
        from app.settings import is_offline

        return is_offline()

    def set_profile(self, profile: HardwareProfile) -> None:
        self.profile = profile
        self.hardware_label.setText(hardware_summary(profile))
        self._fill_models()

    def _fill_models(self) -> None:
        from app.ui.library.discover_page import starter_card

        self.models.clear()
        offline = self.offline
        self.models.setVisible(not offline)
        self.offline_spacer.setVisible(offline)
        self.choose_button.setVisible(not offline)
        if offline:
            self.models_title.setText(
                self.tr("<h2>You are offline</h2>HF_HUB_OFFLINE is set, so nothing can be downloaded. Import a model "
                        "file you already have (a .gguf file, e.g. from a USB stick); it opens in the Chat page."))
            return
        self.models_title.setText(
            self.tr("<h2>Models for this machine</h2>A hand-picked starting list (not a ranking), ordered for this "
                    "machine. Pick one: the next screen shows every quant with whether it fits, and the best one."))
        for model, likely in starters_for(self.profile, starter_list()):
            if self.profile is not None and not likely:
                continue
            item, card = starter_card(model, self.profile, likely)
            self.models.addItem(item)
            self.models.add_card(item, card)
        self.models.fit_cards()
        if self.models.count():
            self.models.setCurrentRow(0)

    def chosen(self) -> str | None:
        """The repo id of the model picked in the list."""
        item = self.models.currentItem()
        return str(item.data(REPO_ID)) if item is not None else None

    @Slot()
    def skip(self) -> None:
        mark_done(self.settings)
        self.skipped.emit()

    @Slot()
    def _on_choose_clicked(self) -> None:
        repo_id = self.chosen()
        if repo_id is None:
            return
        mark_done(self.settings)
        self.model_chosen.emit(repo_id)

    @Slot()
    def _on_import_clicked(self) -> None:
        mark_done(self.settings)
        self.import_chosen.emit()
