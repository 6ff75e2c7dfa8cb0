"""The Settings page: models folder, Hugging Face token, offline mode, update checks, default context length, theme,
the connections to remote engines (app/ui/settings/remote_connections.py), the MCP servers whose tools the Chat's models
may call (app/ui/settings/tools_settings.py), and the per-model presets' import and export in llama-server's INI format
(app/hub/preset_ini.py).

Every change is saved at once (app.settings writes atomically). The token goes where huggingface_hub's
login keeps it (app.hub.config), never into our settings file, and is only ever shown masked."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLayout, QLineEdit, QPushButton, QScrollArea, QSpinBox, QVBoxLayout, QWidget)

from app import settings as app_settings
from app.hub import config
from app.ui.common.translations import LANGUAGE_NAMES, LANGUAGE_VAR, chosen_language
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import OVERFLOW_CHOICES, overflow_name, page_margins, page_scroll, page_title
from app.ui.settings.remote_connections import ConnectionsPanel

if TYPE_CHECKING:
    from app.ui.chat.chat_tools import ChatTools
    from app.ui.settings.tools_settings import ToolsPanel

THEME_NAMES = (("system", QT_TRANSLATE_NOOP("SettingsPage", "Follow the system")),
               ("light", QT_TRANSLATE_NOOP("SettingsPage", "Light")),
               ("dark", QT_TRANSLATE_NOOP("SettingsPage", "Dark")))
# Each language in its own words, so a user who cannot read the current one still finds theirs.
LANGUAGE_CHOICES = (("system", QT_TRANSLATE_NOOP("SettingsPage", "Follow the system")),
                    *((code, name) for code, name in LANGUAGE_NAMES.items()))


def masked(token: str) -> str:
    """hf_abcdefghijklmnop -> hf_••••••••mnop: enough to tell two tokens apart, too little to use."""
    token = token.strip()
    if len(token) <= 8:
        return "•" * 8
    return token[:3] + "•" * 8 + token[-4:]


class SettingsPage(QScrollArea):
    models_dir_changed = Signal(str)
    default_context_changed = Signal(int)
    theme_changed = Signal(str)
    update_checks_changed = Signal(bool)
    pool_limits_changed = Signal(object)  # app.settings.Settings: its loaded-models limits changed
    # Each setting's note under it, made by _with_note under these names.
    models_dir_note: QLabel
    token_note: QLabel
    offline_note: QLabel
    updates_note: QLabel
    overflow_note: QLabel
    language_note: QLabel
    pool_note: QLabel
    states_note: QLabel
    presets_note: QLabel

    def __init__(self, parent: QWidget | None = None, *, tools: Callable[[], ChatTools] | None = None) -> None:
        """``tools``: the app's ChatTools (the Chat makes them), for the Tools (MCP) section; None: no section."""
        super().__init__(parent)
        page_scroll(self)
        self.setAccessibleName(self.tr("Settings"))
        self.current = app_settings.load()
        self.shown_language = chosen_language(self.current.language)  # what this run shows (read at start-up)
        page = QWidget()
        page.setMaximumWidth(900)  # long lines of settings are hard to follow on a wide window
        outer = QVBoxLayout(page)
        page_margins(outer)
        outer.addWidget(page_title(self.tr("Settings")))
        form = QFormLayout()
        form.setVerticalSpacing(16)
        form.setHorizontalSpacing(18)
        outer.addLayout(form)

        folder_row = QHBoxLayout()
        self.models_dir_label = QLabel()
        self.models_dir_label.setAccessibleName(self.tr("Models folder"))
        self.models_dir_label.setWordWrap(True)
        self.models_dir_button = QPushButton(self.tr("Change…"))
        self.models_dir_button.setAccessibleName(self.tr("Change the models folder"))
        self.models_dir_button.clicked.connect(self._on_choose_models_dir)
        self.models_dir_default = QPushButton(self.tr("Use default"))
        self.models_dir_default.setAccessibleName(self.tr("Use the default models folder"))
        self.models_dir_default.clicked.connect(self._on_default_models_dir)
        folder_row.addWidget(self.models_dir_label, 1)
        folder_row.addWidget(self.models_dir_button)
        folder_row.addWidget(self.models_dir_default)
        form.addRow(self.tr("Models folder"), self._with_note(folder_row, "models_dir_note"))

        token_row = QHBoxLayout()
        self.token_status = QLabel()
        self.token_status.setAccessibleName(self.tr("Hugging Face token status"))
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText(self.tr("hf_… (for gated and private models)"))
        self.token_edit.setAccessibleName(self.tr("Hugging Face token"))
        self.token_edit.returnPressed.connect(self._on_save_token)
        self.token_save = QPushButton(self.tr("Save token"))
        self.token_save.setAccessibleName(self.tr("Save the Hugging Face token"))
        self.token_save.clicked.connect(self._on_save_token)
        self.token_remove = QPushButton(self.tr("Remove"))
        self.token_remove.setAccessibleName(self.tr("Remove the stored Hugging Face token"))
        self.token_remove.clicked.connect(self._on_remove_token)
        token_row.addWidget(self.token_edit, 1)
        token_row.addWidget(self.token_save)
        token_row.addWidget(self.token_remove)
        token_box = QVBoxLayout()
        token_box.addWidget(self.token_status)
        token_box.addLayout(token_row)
        form.addRow(self.tr("Hugging Face token"), self._with_note(token_box, "token_note"))

        self.offline_box = QCheckBox(self.tr("Offline mode: never contact the Hugging Face Hub"))
        self.offline_box.setAccessibleName(self.tr("Offline mode"))
        self.offline_box.toggled.connect(self._on_offline_toggled)
        offline_layout = QVBoxLayout()
        offline_layout.addWidget(self.offline_box)
        form.addRow(self.tr("Network"), self._with_note(offline_layout, "offline_note"))

        self.updates_box = QCheckBox(self.tr("Check for model updates"))
        self.updates_box.setAccessibleName(self.tr("Check for model updates"))
        self.updates_box.toggled.connect(self._on_updates_toggled)
        updates_layout = QVBoxLayout()
        updates_layout.addWidget(self.updates_box)
        form.addRow(self.tr("Updates"), self._with_note(updates_layout, "updates_note"))

        self.context_box = QSpinBox()
        self.context_box.setRange(app_settings.MIN_CONTEXT, app_settings.MAX_CONTEXT)
        self.context_box.setSingleStep(1024)
        self.context_box.setSuffix(self.tr(" tokens"))
        self.context_box.setAccessibleName(self.tr("Default context length"))
        self.context_box.setToolTip(self.tr("Models load with this context, or the largest that fits this machine"))
        self.context_box.editingFinished.connect(self._on_context_changed)
        self.context_box.setMaximumWidth(220)
        form.addRow(self.tr("Default context"), self.context_box)

        # What a chat (and the local server) does once a conversation no longer fits the context; a chat may choose
        # its own in its settings, a server request in its body (app/engine/overflow.py).
        self.overflow_box = QComboBox()
        self.server_overflow_box = QComboBox()
        for box, key in ((self.overflow_box, "overflow"), (self.server_overflow_box, "server_overflow")):
            for name, value in OVERFLOW_CHOICES:
                box.addItem(overflow_name(name), value)
            box.setMaximumWidth(max(360, box.sizeHint().width()))  # its longest choice, in any language
            box.currentIndexChanged.connect(lambda _i, b=box, k=key: self._on_overflow_changed(k, b))
        self.overflow_box.setAccessibleName(self.tr("When a chat's context is full"))
        self.server_overflow_box.setAccessibleName(self.tr("When a server request does not fit the context"))
        overflow_layout = QVBoxLayout()
        overflow_layout.addWidget(self.overflow_box)
        overflow_layout.addWidget(QLabel(self.tr("Local server, unless the request says:")))
        overflow_layout.addWidget(self.server_overflow_box)
        form.addRow(self.tr("Context full"), self._with_note(overflow_layout, "overflow_note"))

        self.theme_box = QComboBox()
        self.theme_box.addItems([self.tr(name) for _, name in THEME_NAMES])
        self.theme_box.setAccessibleName(self.tr("Theme"))
        self.theme_box.currentIndexChanged.connect(self._on_theme_changed)
        self.theme_box.setMaximumWidth(220)
        form.addRow(self.tr("Theme"), self.theme_box)

        self.language_box = QComboBox()
        self.language_box.addItems([self.tr(LANGUAGE_CHOICES[0][1])] + [name for _, name in LANGUAGE_CHOICES[1:]])
        self.language_box.setAccessibleName(self.tr("Language"))
        self.language_box.currentIndexChanged.connect(self._on_language_changed)
        self.language_box.setMaximumWidth(220)
        language_layout = QVBoxLayout()
        language_layout.addWidget(self.language_box)
        form.addRow(self.tr("Language"), self._with_note(language_layout, "language_note"))

        form.addRow(self.tr("Loaded models"), self._with_note(self._build_pool_row(), "pool_note"))
        form.addRow(self.tr("Saved chat states"), self._with_note(self._build_states_row(), "states_note"))

        self.remote_panel = ConnectionsPanel()
        form.addRow(self.tr("Remote engines"), self.remote_panel)

        self.tools_panel: ToolsPanel | None = None
        if tools is not None:
            from app.ui.settings.tools_settings import ToolsPanel

            self.tools_panel = ToolsPanel(tools)
            form.addRow(self.tr("Tools (MCP)"), self.tools_panel)

        form.addRow(self.tr("Model presets"), self._with_note(self._build_presets_row(), "presets_note"))

        self.status = QLabel(self.current.problem)
        self.status.setWordWrap(True)
        self.status.setAccessibleName(self.tr("Settings status"))
        outer.addWidget(self.status)
        outer.addStretch(1)
        self.setWidget(page)
        self.show_settings()
        self.show_presets()

    def _build_pool_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.budget_box = QDoubleSpinBox()
        self.budget_box.setRange(0, 4096)
        self.budget_box.setDecimals(1)
        self.budget_box.setSingleStep(1)
        self.budget_box.setSuffix(self.tr(" GiB"))
        self.budget_box.setSpecialValueText(self.tr("Budget: what is free"))
        self.budget_box.setAccessibleName(self.tr("Memory budget"))
        self.budget_box.setToolTip(self.tr("Memory the loaded models may take together, by their estimates; "
                                           "lowest: what the fit check finds free when the first model loads"))
        self.budget_box.editingFinished.connect(self._on_pool_changed)
        self.max_loaded_box = QSpinBox()
        self.max_loaded_box.setRange(1, app_settings.MAX_LOADED_LIMIT)
        self.max_loaded_box.setPrefix(self.tr("At most "))
        self.max_loaded_box.setSuffix(self.tr(" loaded"))
        self.max_loaded_box.setAccessibleName(self.tr("Max loaded models"))
        self.max_loaded_box.editingFinished.connect(self._on_pool_changed)
        self.idle_box = QComboBox()
        for minutes in app_settings.IDLE_UNLOAD_CHOICES:
            self.idle_box.addItem(self.tr("Idle unload: off") if not minutes else
                                  self.tr("Idle unload after {n} min").format(n=minutes), minutes)
        self.idle_box.setAccessibleName(self.tr("Idle unload"))
        self.idle_box.setToolTip(self.tr("A model with no message for this long unloads, freeing its memory"))
        self.idle_box.activated.connect(self._on_pool_changed)
        for widget in (self.budget_box, self.max_loaded_box, self.idle_box):
            row.addWidget(widget)
        row.addStretch(1)
        return row

    def _build_presets_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.presets_import = QPushButton(self.tr("Import llama-server presets…"))
        self.presets_import.setToolTip(self.tr("Read a llama-server preset file (--models-preset FILE.ini): each "
                                               "section that names a model of the library becomes its preset"))
        self.presets_import.clicked.connect(self._on_import_presets)
        self.presets_export = QPushButton(self.tr("Export…"))
        self.presets_export.setToolTip(self.tr("Write every model's preset as a llama-server preset file"))
        self.presets_export.clicked.connect(self._on_export_presets)
        row.addWidget(self.presets_import)
        row.addWidget(self.presets_export)
        row.addStretch(1)
        return row

    def show_presets(self, said: list[str] | None = None) -> None:
        """How many models have a preset, and what the last import or export did (each key skipped, by name)."""
        from app.hub import presets

        saved = presets.load()
        count = len(saved.models)
        lines = [saved.problem] if saved.problem else [
            self.tr("No model has a preset yet: “Save as this model's defaults” in a chat's options makes one.")
            if not count else self.tr("{n} model(s) have a preset: applied whenever they load.").format(n=count)]
        self.presets_note.setText("\n".join(lines + (said or [])))
        self.presets_export.setEnabled(bool(count) and not saved.problem)

    def import_presets(self, path: str) -> None:
        from app.hub import preset_ini, presets

        try:
            report = preset_ini.import_file(Path(path))
        except (preset_ini.PresetFileError, presets.PresetError) as exc:
            self.show_presets([self.tr("Nothing imported: {why}").format(why=exc)])
            return
        self.show_presets([self.tr("Imported {n} preset(s) from {file}.").format(
            n=len(report.imported), file=Path(path).name), *report.lines()])

    def export_presets(self, path: str) -> None:
        from app.files import write_text_atomic
        from app.hub import preset_ini, presets

        saved = presets.load()
        text, left_out = preset_ini.export_text(list(saved.models.values()), presets.library_entries())
        try:
            write_text_atomic(Path(path), text)
        except OSError as exc:
            self.show_presets([self.tr("Not exported: {why}").format(why=exc.strerror or exc)])
            return
        self.show_presets([self.tr("Exported {n} preset(s) to {file}.").format(n=len(saved.models),
                                                                               file=Path(path).name),
                           *(self.tr("Left out: {what}").format(what=what) for what in left_out)])

    @Slot()
    def _on_import_presets(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Import llama-server presets"), "",
                                              self.tr("Preset files (*.ini);;All files (*)"))
        if path:
            self.import_presets(path)

    @Slot()
    def _on_export_presets(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, self.tr("Export model presets"), "models.ini",
                                              self.tr("Preset files (*.ini)"))
        if path:
            self.export_presets(path)

    def _build_states_row(self) -> QHBoxLayout:
        """The disk the chats' saved model states may take (app/engine/states.py), and what they take now."""
        row = QHBoxLayout()
        self.states_box = QSpinBox()
        self.states_box.setRange(0, app_settings.SAVED_STATES_MAX_MB)
        self.states_box.setSingleStep(512)
        self.states_box.setSuffix(self.tr(" MiB"))
        self.states_box.setSpecialValueText(self.tr("Off"))
        self.states_box.setAccessibleName(self.tr("Disk for saved chat states"))
        self.states_box.setToolTip(self.tr("After each reply the model's state is saved, so a chat reopened later "
                                           "answers without reading its whole history again; the least recently "
                                           "used states go first when they take more than this"))
        self.states_box.editingFinished.connect(self._on_states_limit_changed)
        self.states_box.setMaximumWidth(220)
        self.states_clear = QPushButton(self.tr("Delete saved states"))
        self.states_clear.setAccessibleName(self.tr("Delete the saved chat states"))
        self.states_clear.clicked.connect(self._on_clear_states)
        row.addWidget(self.states_box)
        row.addWidget(self.states_clear)
        row.addStretch(1)
        return row

    def _show_states(self) -> None:
        from app.engine import states
        from app.ui.common.formatting import human_bytes

        cache = states.default_cache()
        count, size = cache.count(), cache.total_bytes()
        self.states_clear.setEnabled(count > 0)
        if self.current.saved_states_mb <= 0:
            taken = self.tr("Off: chats are read again from the start after a restart or a switch.")
        else:
            taken = self.tr("Long chats resume without reading their history again.")
        self.states_note.setText(self.tr("{taken} Now {count} saved, {size}, in {folder}.").format(
            taken=taken, count=count, size=human_bytes(size), folder=cache.folder))

    def _with_note(self, layout: QLayout, name: str) -> QWidget:
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        column.addLayout(layout)
        note = QLabel()
        note.setObjectName("caption")
        note.setWordWrap(True)
        column.addWidget(note)
        setattr(self, name, note)
        return box

    def show_settings(self) -> None:
        s = self.current
        env_dir = os.environ.get("QUANTDESK_MODELS_DIR")
        self.models_dir_label.setText(str(app_settings.models_dir()))
        self.models_dir_button.setEnabled(not env_dir)
        self.models_dir_default.setEnabled(not env_dir and s.models_dir is not None)
        self.models_dir_note.setText(
            self.tr("Set by QUANTDESK_MODELS_DIR in the environment, which wins over this setting.") if env_dir else
            self.tr("New downloads and imports go here. Models already in another folder stay there."))
        self._show_token()
        forced = app_settings.offline_forced_by_environment()
        self.offline_box.blockSignals(True)
        self.offline_box.setChecked(s.offline or forced)
        self.offline_box.setEnabled(not forced)
        self.offline_box.blockSignals(False)
        self.offline_note.setText(
            self.tr("HF_HUB_OFFLINE is set in the environment, so offline mode stays on.") if forced else
            self.tr("Search and downloads are off; the library and chat work as usual."))
        self.updates_box.blockSignals(True)
        self.updates_box.setChecked(s.check_updates)
        self.updates_box.blockSignals(False)
        self.updates_note.setText(
            self.tr("Once a day at most, and when you ask: the Hub is sent the name and branch of each repo you "
                    "downloaded from (and a changed GGUF's header is read). Never in offline mode.")
            if s.check_updates else self.tr("Off: neither the app nor the quantdesk command asks the Hub about "
                                            "updates."))
        self.context_box.setValue(s.default_n_ctx)
        for box, value in ((self.overflow_box, s.overflow), (self.server_overflow_box, s.server_overflow)):
            box.blockSignals(True)
            box.setCurrentIndex(max(box.findData(value), 0))
            box.blockSignals(False)
        self.overflow_note.setText(self.tr(
            "New chats follow this (each chat may choose its own in its settings). Whatever is left out is marked "
            "in the conversation; “compact” has the model write a note on it, which it keeps."))
        self.budget_box.setValue(s.memory_budget_gib or 0)
        self.max_loaded_box.setValue(s.max_loaded_models)
        self.idle_box.setCurrentIndex(max(self.idle_box.findData(s.idle_unload_minutes), 0))
        self.pool_note.setText(self.tr(
            "Chats with different models keep each model loaded, one engine each, within this budget; when one "
            "more does not fit, the least recently used idle model unloads first, and the Chat says so."))
        self.states_box.setValue(s.saved_states_mb)
        self._show_states()
        self.theme_box.blockSignals(True)
        self.theme_box.setCurrentIndex([key for key, _ in THEME_NAMES].index(s.theme))
        self.theme_box.blockSignals(False)
        self.language_box.blockSignals(True)
        self.language_box.setCurrentIndex([key for key, _ in LANGUAGE_CHOICES].index(s.language))
        self.language_box.blockSignals(False)
        self._show_language_note()

    def _show_token(self) -> None:
        from_env = next((v for v in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN") if (os.environ.get(v) or "").strip()), None)
        token = config.token()
        stored = config.token_path().is_file()
        if token:
            self.token_status.setText(self.tr("In use: {masked}")
                                      .format(masked=masked(token)) + (self.tr(" (from {from_env})")
                                                                       .format(from_env=from_env) if from_env else ""))
        else:
            self.token_status.setText(self.tr("No token: public models only."))
        self.token_remove.setEnabled(stored)
        self.token_note.setText(
            self.tr("{variable} in the environment wins over a stored token.").format(variable=from_env) if from_env
            else self.tr("Stored where huggingface_hub's login keeps it ({path}), readable by you only.").format(
                path=config.token_path()))

    def _save(self, **changes: Any) -> bool:
        try:
            self.current = app_settings.update(**changes)
        except OSError as exc:
            self.status.setText(self.tr("Could not save the settings: {reason} ({path}).")
                                .format(reason=exc.strerror or exc, path=exc.filename or ""))
            return False
        self.status.setText(self.tr("Saved."))
        return True

    # --- models folder -----------------------------------------------------------------------------

    @Slot()
    def _on_choose_models_dir(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, self.tr("Models folder"), str(app_settings.models_dir()))
        if folder:
            self.set_models_dir(folder)

    @Slot()
    def _on_default_models_dir(self) -> None:
        self.set_models_dir(None)

    def set_models_dir(self, folder: str | None) -> bool:
        if folder is not None:
            target = Path(folder).expanduser()
            try:
                target.mkdir(parents=True, exist_ok=True)
                probe = target / ".quantdesk-write-test"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as exc:
                self.status.setText(self.tr("{target} cannot hold models: {reason}. The models folder is unchanged.")
                                    .format(target=target, reason=exc.strerror or exc))
                return False
            folder = str(target.resolve())
        if not self._save(models_dir=folder):
            return False
        self.show_settings()
        self.models_dir_changed.emit(str(app_settings.models_dir()))
        return True

    # --- token -------------------------------------------------------------------------------------

    @Slot()
    def _on_save_token(self) -> None:
        token = self.token_edit.text().strip()
        if not token:
            self.status.setText(self.tr("Paste a token first (from huggingface.co/settings/tokens)."))
            return
        if any(c.isspace() for c in token) or not token.isascii():
            self.status.setText(self.tr("That does not look like a Hugging Face token: it has spaces or unusual "
                                        "characters. Nothing was saved."))
            return
        try:
            config.save_token(token)
        except OSError as exc:
            self.status.setText(self.tr("Could not store the token: {reason}. Your typing is kept.")
                                .format(reason=exc.strerror or exc))
            return
        self.token_edit.clear()
        self._show_token()
        self.status.setText(self.tr("Token saved."))

    @Slot()
    def _on_remove_token(self) -> None:
        config.forget_token()
        self._show_token()
        self.status.setText(self.tr("Token removed."))

    # --- offline, defaults, theme ------------------------------------------------------------------

    @Slot(bool)
    def _on_offline_toggled(self, on: bool) -> None:
        if self._save(offline=on):
            app_settings.apply_offline(on)
        self.show_settings()

    @Slot(bool)
    def _on_updates_toggled(self, on: bool) -> None:
        if self._save(check_updates=on):
            self.update_checks_changed.emit(on)
        self.show_settings()

    @Slot()
    def _on_context_changed(self) -> None:
        value = self.context_box.value()
        if value != self.current.default_n_ctx and self._save(default_n_ctx=value):
            self.default_context_changed.emit(value)

    def _show_language_note(self) -> None:
        forced = os.environ.get(LANGUAGE_VAR)
        showing = chosen_language(self.current.language) if not forced else None
        if forced:
            note = self.tr("{variable}={value} in the environment wins over this setting.").format(
                variable=LANGUAGE_VAR, value=forced)
        elif showing != self.shown_language:
            note = self.tr("Takes effect when QuantDesk starts again.")
        else:
            note = self.tr("Menus, buttons and messages of the app; models answer in the language you write in.")
        self.language_note.setText(note)

    @Slot(int)
    def _on_language_changed(self, index: int) -> None:
        # Read at start-up only: the pages build their texts once, and retranslating every label, tooltip and
        # composed sentence live would need each page to rebuild them (a retranslate pass per widget).
        if self._save(language=LANGUAGE_CHOICES[index][0]):
            self._show_language_note()

    @Slot()
    def _on_pool_changed(self) -> None:
        budget = self.budget_box.value() or None
        minutes = self.idle_box.currentData()
        changes = dict(memory_budget_gib=budget, max_loaded_models=self.max_loaded_box.value(),
                       idle_unload_minutes=minutes)
        if any(getattr(self.current, k) != v for k, v in changes.items()) and self._save(**changes):
            self.pool_limits_changed.emit(self.current)

    def _on_overflow_changed(self, key: str, box: QComboBox) -> None:
        if getattr(self.current, key) != box.currentData():
            self._save(**{key: box.currentData()})

    @Slot()
    def _on_states_limit_changed(self) -> None:
        value = self.states_box.value()
        if value != self.current.saved_states_mb and self._save(saved_states_mb=value):
            from app.engine import states

            states.default_cache().evict()  # a lower limit holds at once
            self._show_states()

    @Slot()
    def _on_clear_states(self) -> None:
        from app.engine import states

        states.default_cache().clear()
        self._show_states()

    @Slot(int)
    def _on_theme_changed(self, index: int) -> None:
        theme = THEME_NAMES[index][0]
        if self._save(theme=theme):
            self.theme_changed.emit(theme)
