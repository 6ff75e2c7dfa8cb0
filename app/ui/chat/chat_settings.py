"""Per-chat settings: system prompt, sampling, thinking and "answer as JSON with this schema", with named presets to
start from or save to, and "Save as this model's defaults": the model's own preset (app/hub/presets.py), which every
chat with that model follows where it has no value of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout,
                               QHBoxLayout, QInputDialog, QLabel, QPlainTextEdit, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

from app.chats.messages import Conversation
from app.chats.store import ChatStore, ChatStoreError
from app.ui.common.formatting import capitalized
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import OVERFLOW_CHOICES, overflow_name
from backends import json_schema
from app.datatypes import (PROMPT_LOOKUP, SAMPLING_KNOBS, LoadSettings, SamplingSettings, SamplingSource,
                           choose_sampling)

NO_PRESET = "(choose a preset)"
# Thinking on / off / as the model's template has it (SamplingSettings.enable_thinking), and gpt-oss's effort
# (reasoning_effort): shown through ChatSettingsDialog.tr.
THINKING_CHOICES = ((QT_TRANSLATE_NOOP("ChatSettingsDialog", "Model default"), None),
                    (QT_TRANSLATE_NOOP("ChatSettingsDialog", "On"), True),
                    (QT_TRANSLATE_NOOP("ChatSettingsDialog", "Off"), False))
EFFORT_CHOICES = ((QT_TRANSLATE_NOOP("ChatSettingsDialog", "Model default"), ""),
                  (QT_TRANSLATE_NOOP("ChatSettingsDialog", "Low"), "low"),
                  (QT_TRANSLATE_NOOP("ChatSettingsDialog", "Medium"), "medium"),
                  (QT_TRANSLATE_NOOP("ChatSettingsDialog", "High"), "high"))


def _default_overflow() -> str:
    from app.settings import load

    return load().overflow


def schema_refusal(sampling: dict[str, Any]) -> str | None:
    """Why a chat's saved JSON schema cannot hold its replies, as the banner says it before anything is saved or
    sent (the server's check and sentence: backends/json_schema.refusal); None when it can or there is none."""
    schema = sampling.get("json_schema")
    problem = None if schema is None else json_schema.refusal(schema)
    return None if problem is None else f"{capitalized(problem)}."


def chat_template_of(model_path: str) -> str | None:
    """The chat template a local model carries (a GGUF's ``tokenizer.chat_template``, an MLX folder's
    ``chat_template.jinja`` or ``tokenizer_config.json``); None where it cannot be read here (a remote model, a file
    that is gone or is no model)."""
    from app.models.metadata import ModelMetadataError, parse_json_object, read_gguf_header

    path = Path(model_path)
    try:
        if path.is_file():
            template = read_gguf_header(path)[0].get("tokenizer.chat_template")
            return template if isinstance(template, str) else ""
        if (path / "chat_template.jinja").is_file():
            return (path / "chat_template.jinja").read_text(encoding="utf-8")
        if (path / "tokenizer_config.json").is_file():
            config = path / "tokenizer_config.json"
            template = parse_json_object(config.read_bytes(), config.name).get("chat_template")
            if isinstance(template, list):  # named templates: the default one is the chat's
                template = next((t.get("template") for t in template
                                 if isinstance(t, dict) and t.get("name") == "default"), None)
            return template if isinstance(template, str) else ""
    except (OSError, ValueError, ModelMetadataError):
        return None
    return None


class ChatSettingsDialog(QDialog):
    def __init__(self, store: ChatStore, conversation: Conversation, parent: QWidget | None = None, *,
                 load: LoadSettings | None = None,
                 tool_servers: list[tuple[str, str]] | None = None, tools_refusal: str = "") -> None:
        """``load``: the load settings the model bar holds for the chat's model (when it is the one loaded): "Save as
        this model's defaults" keeps them in the model's preset too. ``tool_servers``: the MCP servers the user
        added, each with its state in words (Settings → Tools), of which the chat chooses whose tools its model sees;
        ``tools_refusal``: why the chat's model cannot be given tools ("" when it can)."""
        super().__init__(parent)
        self.store = store
        self.conversation = conversation
        self.load = load
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
        from app.hub import presets
        from app.models.metadata import model_sampling

        # What the chat's model recommends, the user's preset for the model, and what each value would be without the
        # chat's own (the preset's, the model's, else QuantDesk's): a value is the user's when the chat keeps it or
        # it is changed here; only those are saved with the chat.
        self.recommended = model_sampling(conversation.model_path)
        self.preset = presets.for_model(conversation.model_path) if conversation.model_path else None
        self._show_preset_prompt()
        chosen = choose_sampling(conversation.sampling, self.recommended, self._preset_sampling())
        self.fallback = choose_sampling({}, self.recommended, self._preset_sampling())
        self.user_set = {knob for knob, source in chosen.sources.items() if source == "user"}
        sampling = chosen.settings
        self.temperature = self._double(self.tr("Temperature"), 0, 2, 0.05, sampling.temperature)
        self.top_p = self._double(self.tr("Top-p"), 0.01, 1, 0.01, sampling.top_p)
        self.min_p = self._double(self.tr("Min-p"), 0, 1, 0.01, sampling.min_p)
        self.repeat_penalty = self._double(self.tr("Repeat penalty"), 0.5, 2, 0.01, sampling.repeat_penalty)
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        self.top_k.setValue(sampling.top_k)
        self.top_k.setSpecialValueText(self.tr("off"))
        self.top_k.setAccessibleName(self.tr("Top-k"))
        self.knobs: dict[str, QSpinBox | QDoubleSpinBox] = {
            "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p,
            "repeat_penalty": self.repeat_penalty}
        self.sources: dict[str, QLabel] = {}
        for knob, label in (("temperature", self.tr("Temperature")), ("top_p", self.tr("Top-p")),
                            ("min_p", self.tr("Min-p")), ("repeat_penalty", self.tr("Repeat penalty")),
                            ("top_k", self.tr("Top-k"))):
            self._add_knob(form, knob, label)
        self.reset_sampling = QPushButton(self.tr("Use the model's values") if self.recommended.values()
                                          else self.tr("Use the default values"))
        self.reset_sampling.setToolTip(self.tr("Forget this chat's own sampling values: this model's preset and "
                                               "its recommended ones apply, and QuantDesk's defaults where neither "
                                               "has one"))
        self.reset_sampling.clicked.connect(self._on_reset_sampling)
        self.save_model_defaults = QPushButton(self.tr("Save as this model's defaults"))
        self.save_model_defaults.setToolTip(self.tr("Every chat with this model starts from these values (sampling, "
                                                    "system prompt, thinking, and the model bar's load settings) "
                                                    "where it has none of its own"))
        self.save_model_defaults.setEnabled(bool(conversation.model_path))
        self.save_model_defaults.clicked.connect(self._on_save_model_defaults)
        reset_row = QHBoxLayout()
        reset_row.addWidget(self.reset_sampling)
        reset_row.addWidget(self.save_model_defaults)
        reset_row.addStretch(1)
        form.addRow("", reset_row)
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
        self._add_thinking(form, conversation.model_path, sampling)
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
        self.overflow = QComboBox()
        self.overflow.setAccessibleName(self.tr("When the context is full"))
        self.overflow.setToolTip(self.tr("What happens once the conversation no longer fits the model's context: "
                                         "whatever is left out is marked in the conversation."))
        default = next(name for name, value in OVERFLOW_CHOICES if value == _default_overflow())
        self.overflow.addItem(self.tr("Settings' default ({choice})").format(choice=overflow_name(default)), "")
        for name, value in OVERFLOW_CHOICES:
            self.overflow.addItem(overflow_name(name), value)
        self.overflow.setCurrentIndex(max(self.overflow.findData(conversation.overflow or ""), 0))
        form.addRow(self.tr("When the context is full"), self.overflow)
        self._add_template(form, conversation.model_path)
        self._add_tools(form, tool_servers or [], tools_refusal)
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

    def _add_template(self, form: QFormLayout, model_path: str | None) -> None:
        """The chat template a local GGUF is served with: the one the rule chooses (said with where it comes from)
        or a bundled one, kept in the model's preset (a model property: every chat with it), taken at its next
        load (backends/chat_format/bundled.py)."""
        self.template_box: QComboBox | None = None
        if not model_path or not model_path.lower().endswith(".gguf") or not Path(model_path).is_file():
            return
        from app.models.metadata import read_gguf_header
        from backends.chat_format import bundled

        try:
            automatic = bundled.for_model(model_path, read_gguf_header(model_path)[0])
        except Exception:  # noqa: BLE001 - a header that cannot be read: the load will say why
            return
        self.template_box = box = QComboBox()
        box.setAccessibleName(self.tr("Chat template"))
        box.setToolTip(self.tr("How the conversation is written for the model. Kept for this model; takes effect "
                               "when it next loads."))
        box.addItem(self.tr("Automatic: {title} ({origin})").format(title=automatic.title, origin=automatic.origin),
                    "")
        for family in bundled.FAMILIES:
            box.addItem(self.tr("{title} (bundled)").format(title=family.title), family.name)
        chosen = str(self.preset.load.get("chat_template") or "") if self.preset is not None else ""
        if chosen and box.findData(chosen) < 0:  # a file named in the preset: shown as it is
            box.addItem(Path(chosen).name, chosen)
        box.setCurrentIndex(max(box.findData(chosen), 0))
        self._template_chosen = chosen
        form.addRow(self.tr("Chat template"), box)

    def save_template(self) -> None:
        """The chat template chosen, into the model's preset when it changed."""
        from app.hub import presets

        if self.template_box is None or not self.conversation.model_path:
            return
        chosen = str(self.template_box.currentData() or "")
        if chosen == self._template_chosen:
            return
        self.preset = presets.update(self.conversation.model_path, load_values={"chat_template": chosen} if chosen
                                     else None, unset=() if chosen else ("chat_template",))
        self._template_chosen = chosen

    def _add_tools(self, form: QFormLayout, servers: list[tuple[str, str]], refusal: str) -> None:
        """Which MCP servers' tools the model sees in this chat (every server unless the chat chose), and why it
        sees none where its template cannot call tools."""
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        chosen = self.conversation.tool_servers
        self.tool_boxes: dict[str, QCheckBox] = {}
        for name, state in servers:
            check = QCheckBox(self.tr("{name} ({state})").format(name=name, state=state))
            check.setAccessibleName(self.tr("Tools of {name}").format(name=name))
            check.setChecked(chosen is None or name in chosen)
            column.addWidget(check)
            self.tool_boxes[name] = check
        self.tools_note = QLabel(capitalized(refusal) + "." if refusal else "" if servers else self.tr(
            "No MCP servers yet: add them in Settings → Tools."))
        self.tools_note.setObjectName("caption")
        self.tools_note.setWordWrap(True)
        self.tools_note.setAccessibleName(self.tr("About tools in this chat"))
        self.tools_note.setVisible(bool(self.tools_note.text()))
        column.addWidget(self.tools_note)
        form.addRow(self.tr("Tools"), box)

    def tool_servers(self) -> list[str] | None:
        """The servers checked; None when every one is (new servers then count too), or when there are none."""
        if not self.tool_boxes or all(b.isChecked() for b in self.tool_boxes.values()):
            return None
        return [name for name, b in self.tool_boxes.items() if b.isChecked()]

    def _add_thinking(self, form: QFormLayout, model_path: str | None, sampling: SamplingSettings) -> None:
        """Thinking on / off / the model's default, gpt-oss's effort (only where the chat's model reads it), and a
        budget that closes the thinking after so many tokens."""
        self.thinking = QComboBox()
        self.thinking.setAccessibleName(self.tr("Thinking"))
        self.thinking.setToolTip(self.tr("Whether a thinking model thinks before it answers; the model's default is "
                                         "what its chat template does when not told"))
        for text, value in THINKING_CHOICES:
            self.thinking.addItem(self.tr(text), value)
        form.addRow(self.tr("Thinking"), self.thinking)
        self.effort = QComboBox()
        self.effort.setAccessibleName(self.tr("Thinking effort"))
        for text, effort in EFFORT_CHOICES:
            self.effort.addItem(self.tr(text), effort)
        reason = self._effort_unused(model_path)
        self.effort.setEnabled(not reason)
        self.effort.setToolTip(reason or self.tr("How hard the model thinks before it answers (gpt-oss reads it)"))
        self.effort.setAccessibleDescription(reason)
        form.addRow(self.tr("Thinking effort"), self.effort)
        self.effort_note = QLabel(reason)  # why it is off, in words that stay on screen (a tooltip needs a mouse)
        self.effort_note.setObjectName("caption")
        self.effort_note.setWordWrap(True)
        self.effort_note.setVisible(bool(reason))
        form.addRow("", self.effort_note)
        self.budget = QSpinBox()
        self.budget.setRange(-1, 1_000_000)
        self.budget.setSingleStep(256)
        self.budget.setSpecialValueText(self.tr("no limit"))
        self.budget.setSuffix(self.tr(" tokens"))
        self.budget.setAccessibleName(self.tr("Thinking budget in tokens"))
        self.budget.setToolTip(self.tr("After this many tokens of thinking the model is made to stop thinking and "
                                       "answer; 0: no thinking at all"))
        form.addRow(self.tr("Thinking budget"), self.budget)
        self._show_thinking(sampling)

    def _effort_unused(self, model_path: str | None) -> str:
        """Why the effort would change nothing for the chat's model ("" where it may): only a chat template that
        reads ``reasoning_effort`` takes it. A remote model's server is sent it and decides."""
        from app.remote.connections import is_remote_ref

        if not model_path or is_remote_ref(model_path):
            return ""
        template = chat_template_of(model_path)
        if template is None or "reasoning_effort" in template:
            return ""
        return self.tr("{name} does not read a thinking effort: its chat template has no reasoning_effort "
                       "(gpt-oss's template has one)").format(name=Path(model_path).name)

    def _show_thinking(self, sampling: SamplingSettings) -> None:
        self.thinking.setCurrentIndex(max(self.thinking.findData(sampling.enable_thinking), 0))
        self.effort.setCurrentIndex(max(self.effort.findData(sampling.reasoning_effort), 0))
        self.budget.setValue(sampling.reasoning_budget)

    @staticmethod
    def _double(label: str, low: float, high: float, step: float, value: float) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(low, high)
        box.setSingleStep(step)
        box.setDecimals(2)
        box.setValue(value)
        box.setAccessibleName(label)
        return box

    def _add_knob(self, form: QFormLayout, knob: str, label: str) -> None:
        """A sampling value's row: its box and, beside it, where the value comes from."""
        row = QWidget()
        line = QHBoxLayout(row)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self.knobs[knob], 1)
        source = QLabel()
        source.setObjectName("caption")
        # As wide as the longest of the three words, so that the boxes line up whatever each one says.
        source.setMinimumWidth(max(source.fontMetrics().horizontalAdvance(text) for text in (
            self.tr("your setting"), self.tr("this model's preset"), self.tr("from the model"),
            self.tr("QuantDesk default"))))
        self.sources[knob] = source
        line.addWidget(source)
        form.addRow(label, row)
        self._show_source(knob)
        self.knobs[knob].valueChanged.connect(lambda _value, knob=knob: self._show_source(knob))

    def _is_users(self, knob: str) -> bool:
        """The chat keeps this value, or it differs from the model's / QuantDesk's (as its box rounds that)."""
        box = self.knobs[knob]
        # As the box shows it: a recommendation outside the box's range (a temperature of 3) is shown clamped, and
        # is still the model's until the user changes it.
        fallback = min(max(getattr(self.fallback.settings, knob), box.minimum()), box.maximum())
        if isinstance(box, QDoubleSpinBox):
            differs = abs(box.value() - fallback) > 0.5 * 10 ** -box.decimals() + 1e-9
        else:
            differs = box.value() != fallback
        return knob in self.user_set or differs

    def source_of(self, knob: str) -> SamplingSource:
        return "user" if self._is_users(knob) else self.fallback.sources[knob]

    def _show_source(self, knob: str) -> None:
        source = self.source_of(knob)
        label = self.sources[knob]
        label.setText({"user": self.tr("your setting"), "preset": self.tr("this model's preset"),
                       "model": self.tr("from the model"), "default": self.tr("QuantDesk default")}[source])
        label.setToolTip(self.tr("Recommended by the model's own file ({origin})").format(
            origin=self.recommended.origin) if source == "model" else "")
        self.knobs[knob].setAccessibleDescription(label.text())

    def _set_knobs(self, values: dict[str, Any]) -> None:
        """The sampling values given become the user's; the others go back to the model's / QuantDesk's."""
        self.user_set = {knob for knob in SAMPLING_KNOBS if values.get(knob) is not None}
        chosen = choose_sampling(values, self.recommended, self._preset_sampling()).settings
        for knob, box in self.knobs.items():
            box.setValue(getattr(chosen, knob))
            self._show_source(knob)

    @Slot()
    def _on_reset_sampling(self) -> None:
        self._set_knobs({})

    def _preset_sampling(self) -> dict[str, Any] | None:
        return self.preset.sampling if self.preset is not None else None

    def _show_preset_prompt(self) -> None:
        """The model's preset's system prompt, shown where the chat has none of its own (it is the one sent)."""
        prompt = self.preset.system_prompt if self.preset is not None else None
        self.system_prompt.setPlaceholderText(
            self.tr("This model's preset: {prompt}").format(prompt=prompt) if prompt else
            self.tr("How the model should behave, e.g. “Answer briefly, in British English.”"))

    def save_model_preset(self) -> None:
        """Keep the values shown as the chat's model's own preset (its sampling values, system prompt, thinking, reply
        length and, when given, the model bar's load settings): each chat with the model follows them where it
        has no value of its own. The chat's own sampling values become the preset's, so they show as such."""
        from app.hub import presets

        sampling: dict[str, Any] = {knob: box.value() for knob, box in self.knobs.items() if self._is_users(knob)}
        seed = self.seed.value()
        sampling.update({"max_tokens": self.max_tokens.value(), "seed": None if seed < 0 else seed,
                         "enable_thinking": self.thinking.currentData(), "reasoning_effort": self.effort.currentData(),
                         "reasoning_budget": self.budget.value()})
        load = None
        if self.load is not None:
            load = {"n_ctx": self.load.n_ctx, "gpu_layers": self.load.gpu_layers,
                    "kv_cache_type": self.load.kv_cache_type}
        prompt = self.system_prompt.toPlainText()
        assert self.conversation.model_path
        self.preset = presets.update(self.conversation.model_path, load_values=load, sampling=sampling,
                                     system_prompt=prompt or None)
        self.fallback = choose_sampling({}, self.recommended, self._preset_sampling())
        self.user_set = set()
        for knob in self.knobs:
            self._show_source(knob)
        self._show_preset_prompt()

    @Slot()
    def _on_save_model_defaults(self) -> None:
        self._saved(self.save_model_preset)

    def _fill_drafts(self, model_path: str | None, chosen: str) -> None:
        """Off, prompt lookup (GGUF), and the library's models that can draft for the chat's model (app/models/drafts:
        same vocabulary, a quarter of its size at most); a draft chosen before stays listed."""
        from app.hub.errors import LibraryError
        from app.hub.library import Library
        from app.models.drafts import draft_candidates

        self.draft.addItem(self.tr("Off"), "")
        if model_path is None or model_path.lower().endswith(".gguf"):
            self.draft.addItem(self.tr("Prompt lookup (copies from the conversation)"), PROMPT_LOOKUP)
        if model_path:
            try:
                library: list[tuple[str, str | Path]] = [(entry.name, entry.path)
                                                         for entry in Library().entries(refresh=False)]
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

    def _show_schema(self, schema: dict[str, Any] | None) -> None:
        self.json_answer.setChecked(schema is not None)
        self.json_schema.setEnabled(schema is not None)
        if schema is not None:
            self.json_schema.setPlainText(json.dumps(schema, indent=2, ensure_ascii=False))

    def schema(self) -> dict[str, Any] | None:
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
        problem = json_schema.refusal(schema)  # the server's check: refused here, not in the middle of a reply
        if problem:
            raise ValueError(problem)
        return schema

    def sampling(self) -> dict[str, Any]:
        """The settings as the store keeps them; ValueError when the schema typed is not one."""
        seed = self.seed.value()
        # Only the user's own values: the others follow the model (its recommendation may come with a new file).
        return {**{knob: box.value() for knob, box in self.knobs.items() if self._is_users(knob)},
                "max_tokens": self.max_tokens.value(), "seed": None if seed < 0 else seed,
                "json_schema": self.schema(), "draft": self.draft.currentData() or "",
                "enable_thinking": self.thinking.currentData(), "reasoning_effort": self.effort.currentData(),
                "reasoning_budget": self.budget.value()}

    def apply_preset(self, name: str) -> None:
        preset = next(p for p in self.store.presets() if p.name == name)
        self.system_prompt.setPlainText(preset.system_prompt)
        values = SamplingSettings.from_dict(preset.sampling)
        self._set_knobs(preset.sampling)
        self.max_tokens.setValue(values.max_tokens)
        self.seed.setValue(-1 if values.seed is None else values.seed)
        self._show_thinking(values)
        self._show_schema(values.json_schema)

    def save_preset(self, name: str) -> None:
        self.store.save_preset(name, system_prompt=self.system_prompt.toPlainText(), sampling=self.sampling())
        self._fill_presets()
        self.preset_box.setCurrentText(name.strip())

    def save(self) -> None:
        """Write the settings to the conversation (the next reply uses them)."""
        self.store.update_settings(self.conversation.id, system_prompt=self.system_prompt.toPlainText(),
                                   sampling=self.sampling(), overflow=self.overflow.currentData())
        if self.tool_boxes:
            self.store.set_tool_servers(self.conversation.id, self.tool_servers())
        self.save_template()

    def accept(self) -> None:
        if self._saved(self.save):
            super().accept()

    def _saved(self, write: Callable[[], object]) -> bool:
        try:
            write()
        except ChatStoreError as exc:
            self.error.setText(self.tr("Not saved: {message}.").format(message=exc.message)
                               + (f" {capitalized(exc.hint)}." if exc.hint else ""))
            self.error.show()
            return False
        except ValueError as exc:  # the schema typed is not one; a preset the presets file refused
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
