"""Per-chat settings: system prompt, sampling and "answer as JSON with this schema", with named presets to start
from or save to."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout,
                               QHBoxLayout, QInputDialog, QLabel, QPlainTextEdit, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

from app.chats.store import ChatStore, ChatStoreError, Conversation
from app.ui.formatting import capitalized
from backends.base import PROMPT_LOOKUP, SamplingSettings

NO_PRESET = "(choose a preset)"


class ChatSettingsDialog(QDialog):
    def __init__(self, store: ChatStore, conversation: Conversation, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.conversation = conversation
        self.setWindowTitle(self.tr("Settings for “{title}”").format(title=conversation.title))
        self.setAccessibleName(self.tr("Chat settings"))
        layout = QVBoxLayout(self)
        preset_row = QHBoxLayout()
        self.preset_box = QComboBox()
        self.preset_box.setAccessibleName(self.tr("Preset"))
        self.preset_box.activated.connect(self._on_preset_chosen)
        self.save_preset_button = QPushButton(self.tr("Save as preset…"))
        self.save_preset_button.clicked.connect(self._on_save_preset_clicked)
        preset_row.addWidget(self.preset_box, 1)
        preset_row.addWidget(self.save_preset_button)
        layout.addLayout(preset_row)
        form = QFormLayout()
        self.system_prompt = QPlainTextEdit(conversation.system_prompt)
        self.system_prompt.setPlaceholderText(self.tr("How the model should behave, e.g. “Answer briefly, in British "
                                                      "English.”"))
        self.system_prompt.setAccessibleName(self.tr("System prompt"))
        form.addRow(self.tr("System prompt"), self.system_prompt)
        sampling = SamplingSettings.from_dict(conversation.sampling)
        self.temperature = self._double(form, self.tr("Temperature"), 0, 2, 0.05, sampling.temperature)
        self.top_p = self._double(form, self.tr("Top-p"), 0.01, 1, 0.01, sampling.top_p)
        self.min_p = self._double(form, self.tr("Min-p"), 0, 1, 0.01, sampling.min_p)
        self.repeat_penalty = self._double(form, self.tr("Repeat penalty"), 0.5, 2, 0.01, sampling.repeat_penalty)
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_k.setValue(sampling.top_k)
        self.top_k.setSpecialValueText(self.tr("off"))
        self.top_k.setAccessibleName(self.tr("Top-k"))
        form.addRow(self.tr("Top-k"), self.top_k)
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 1_000_000)
        self.max_tokens.setValue(sampling.max_tokens)
        self.max_tokens.setAccessibleName(self.tr("Maximum reply length in tokens"))
        form.addRow(self.tr("Max reply tokens"), self.max_tokens)
        self.seed = QSpinBox()
        self.seed.setRange(-1, 2**31 - 1)
        self.seed.setValue(-1 if sampling.seed is None else sampling.seed)
        self.seed.setSpecialValueText(self.tr("random"))
        self.seed.setAccessibleName(self.tr("Seed"))
        form.addRow(self.tr("Seed"), self.seed)
        # Structured output: the engine's grammar holds every reply of this chat to the schema.
        self.json_answer = QCheckBox(self.tr("Answer as JSON with this schema"))
        self.json_answer.setAccessibleName(self.tr("Answer as JSON with a schema"))
        self.json_schema = QPlainTextEdit()
        self.json_schema.setAccessibleName(self.tr("JSON schema of the answers"))
        self.json_schema.setPlaceholderText('{"type": "object", "properties": {"answer": {"type": "string"}}, '
                                            '"required": ["answer"]}')
        self.json_schema.setMaximumHeight(110)
        self.json_answer.toggled.connect(self.json_schema.setEnabled)
        self._show_schema(sampling.json_schema)
        form.addRow(self.json_answer)
        form.addRow(self.json_schema)
        # Speculative decoding: a load setting, kept with the chat and used whenever a model it fits loads for it.
        self.draft = QComboBox()
        self.draft.setAccessibleName(self.tr("Draft for speculative decoding"))
        self.draft.setToolTip(self.tr("A draft guesses tokens the model checks several at a time: replies come faster "
                                      "where the guesses are right, and stay the model's own. Takes effect when the "
                                      "model next loads."))
        self._fill_drafts(conversation.model_path, conversation.sampling.get("draft") or "")
        form.addRow(self.tr("Draft"), self.draft)
        layout.addLayout(form)
        self.error = QLabel()  # a write the store refused (a full disk): the dialog stays open, nothing typed is lost
        self.error.setObjectName("no")
        self.error.setWordWrap(True)
        self.error.setAccessibleName(self.tr("Why the settings were not saved"))
        self.error.hide()
        layout.addWidget(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self._fill_presets()

    @staticmethod
    def _double(form: QFormLayout, label: str, low: float, high: float, step: float, value: float) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(low, high)
        box.setSingleStep(step)
        box.setDecimals(2)
        box.setValue(value)
        box.setAccessibleName(label)
        form.addRow(label, box)
        return box

    def _fill_drafts(self, model_path: str | None, chosen: str) -> None:
        """Off, prompt lookup (GGUF), and the library's models that can draft for the chat's model (app/models/drafts:
        same vocabulary, a quarter of its size at most); a draft chosen before stays listed."""
        from app.hub.library import Library, LibraryError
        from app.models.drafts import draft_candidates

        self.draft.addItem(self.tr("Off"), "")
        if model_path is None or model_path.lower().endswith(".gguf"):
            self.draft.addItem(self.tr("Prompt lookup (copies from the conversation)"), PROMPT_LOOKUP)
        if model_path:
            try:
                library = [(entry.name, entry.path) for entry in Library().entries(refresh=False)]
            except (LibraryError, OSError):
                library = []
            for _, name, path in draft_candidates(model_path, library):
                self.draft.addItem(self.tr("{name} (draft model)").format(name=name), str(path))
        if chosen and self.draft.findData(chosen) < 0:
            self.draft.addItem(self.tr("{name} (draft model)").format(name=Path(chosen).name), chosen)
        self.draft.setCurrentIndex(max(self.draft.findData(chosen), 0))

    def _fill_presets(self) -> None:
        self.preset_box.clear()
        self.preset_box.addItem(NO_PRESET)
        for preset in self.store.presets():
            self.preset_box.addItem(preset.name)

    def _show_schema(self, schema: dict | None) -> None:
        self.json_answer.setChecked(schema is not None)
        self.json_schema.setEnabled(schema is not None)
        if schema is not None:
            self.json_schema.setPlainText(json.dumps(schema, indent=2, ensure_ascii=False))

    def schema(self) -> dict | None:
        """The schema typed, when "answer as JSON" is on; ValueError with the sentence when it is no schema."""
        if not self.json_answer.isChecked():
            return None
        text = self.json_schema.toPlainText().strip() or '{"type": "object"}'  # empty: any JSON object
        try:
            schema = json.loads(text)
        except ValueError as exc:
            raise ValueError(self.tr("the JSON schema is not valid JSON ({exc})").format(exc=exc)) from None
        if not isinstance(schema, dict):
            raise ValueError(self.tr("the JSON schema must be an object, such as {\"type\": \"object\"}"))
        return schema

    def sampling(self) -> dict:
        """The settings as the store keeps them; ValueError when the schema typed is not one."""
        seed = self.seed.value()
        return {"temperature": self.temperature.value(), "top_p": self.top_p.value(), "top_k": self.top_k.value(),
                "min_p": self.min_p.value(), "repeat_penalty": self.repeat_penalty.value(),
                "max_tokens": self.max_tokens.value(), "seed": None if seed < 0 else seed,
                "json_schema": self.schema(), "draft": self.draft.currentData() or ""}

    def apply_preset(self, name: str) -> None:
        preset = next(p for p in self.store.presets() if p.name == name)
        self.system_prompt.setPlainText(preset.system_prompt)
        values = SamplingSettings.from_dict(preset.sampling)
        self.temperature.setValue(values.temperature)
        self.top_p.setValue(values.top_p)
        self.top_k.setValue(values.top_k)
        self.min_p.setValue(values.min_p)
        self.repeat_penalty.setValue(values.repeat_penalty)
        self.max_tokens.setValue(values.max_tokens)
        self.seed.setValue(-1 if values.seed is None else values.seed)
        self._show_schema(values.json_schema)

    def save_preset(self, name: str) -> None:
        self.store.save_preset(name, system_prompt=self.system_prompt.toPlainText(), sampling=self.sampling())
        self._fill_presets()
        self.preset_box.setCurrentText(name.strip())

    def save(self) -> None:
        """Write the settings to the conversation (the next reply uses them)."""
        self.store.update_settings(self.conversation.id, system_prompt=self.system_prompt.toPlainText(),
                                   sampling=self.sampling())

    def accept(self) -> None:
        if self._saved(self.save):
            super().accept()

    def _saved(self, write) -> bool:
        try:
            write()
        except ChatStoreError as exc:
            self.error.setText(self.tr("Not saved: {message}.").format(message=exc.message)
                               + (f" {capitalized(exc.hint)}." if exc.hint else ""))
            self.error.show()
            return False
        except ValueError as exc:  # the schema typed is not one
            self.error.setText(self.tr("Not saved: {exc}.").format(exc=exc))
            self.error.show()
            return False
        self.error.hide()
        return True

    @Slot(int)
    def _on_preset_chosen(self, index: int) -> None:
        if index > 0:
            self.apply_preset(self.preset_box.itemText(index))

    @Slot()
    def _on_save_preset_clicked(self) -> None:
        name, ok = QInputDialog.getText(self, self.tr("Save preset"), self.tr("Preset name:"))
        if ok and name.strip():
            self._saved(lambda: self.save_preset(name))
