"""The Chat page's model bar: the model, its load settings prefilled from the fit estimator for this
machine, a load progress bar, what loaded against the estimate, and the engine's live memory.

``prefill_for`` is Qt-free and runs in a worker (it reads the model's header and runs the estimator);
``ModelBar`` only shows what it is given.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (QComboBox, QFrame, QHBoxLayout, QLabel, QMenu, QProgressBar, QPushButton,
                               QSizePolicy, QSpinBox, QVBoxLayout, QWidget)

from app.hardware.profile import HardwareProfile
from app.runtimes import report
from app.ui.common.formatting import compact_count, grouped, human_memory, human_ms, layer_count, number, percent
from app.ui.common.icons import decorate
from app.ui.common.widgets import Flow
from app.datatypes import DEFAULT_PARALLEL, MAX_PARALLEL, ContextUse, LoadSettings, Loaded

if TYPE_CHECKING:
    from app.models.planner import PlanNote

KV_TYPES = ("f16", "q8_0", "q4_0")
FLASH = (("auto", None), ("on", True), ("off", False))
MEMORY_SAMPLE_MS = 1000


@dataclass
class Prefill:
    """Load settings for one model on one machine, and the estimate behind them."""

    path: str
    settings: LoadSettings
    estimated_bytes: int | None = None
    expected_gpu_blocks: int | None = None  # transformer blocks the estimate puts on the GPU
    verdict: str = ""
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    profile: HardwareProfile | None = None
    moe: bool = False  # a mixture-of-experts GGUF: its experts can stay in RAM
    runtime: str = ""  # the llama.cpp runtime planned for: "Vulkan · RTX 4070 (8.0 GiB)"
    runtimes: list[str] = field(default_factory=list)  # names the user may pin
    pinned: str | None = None  # this model's pin (or the global one), None: automatic
    estimated_buffers: dict[str, int] = field(default_factory=dict)  # "Vulkan0" / "CPU" -> llama.cpp buffers
    fits: bool = True  # False: the fit check says it does not fit this machine; it loads only when the user says so

    def summary(self) -> str:
        if self.estimated_bytes is None:
            if self.reason:
                return QCoreApplication.translate("model_bar", "No estimate: {reason}").format(reason=self.reason)
            return QCoreApplication.translate("model_bar", "No estimate")
        return QCoreApplication.translate("model_bar", "Estimated {memory} · {verdict}").format(
            memory=human_memory(self.estimated_bytes), verdict=self.verdict)


def _detect() -> HardwareProfile:
    from app import machine

    return machine.profile()


def prefill_for(path: str, profile: HardwareProfile | None, want_ctx: int, parallel: int = DEFAULT_PARALLEL) -> Prefill:
    """The load settings for ``path`` on ``profile`` (detected when None) at the wanted context, for ``parallel``
    replies decoded together (the fit check counts their sequences' cache), as the one load
    planner (app/models/planner.py) plans them for every face: the model's preset first, its projector, the pinned
    runtime, the most GPU layers that fit, a q8_0 KV cache or a shorter context where the wanted one does not fit.
    A model the estimator cannot read still loads, with defaults."""
    from app.hub import presets
    from app.models.planner import plan_load
    from app.remote.connections import is_remote_ref

    preset = presets.for_model(path)
    if is_remote_ref(path):
        settings = LoadSettings(n_ctx=want_ctx)  # its server decides what it answers at once
        return Prefill(path, preset.apply_load(settings) if preset is not None else settings,
                       reason=QCoreApplication.translate("model_bar", "it runs on its server"), profile=profile)
    profile = profile or _detect()
    plan = plan_load(path, profile, LoadSettings(n_ctx=want_ctx, parallel=parallel), preset=preset)
    fit = plan.fit
    base = Prefill(path, plan.settings, profile=profile, notes=[note_words(n) for n in plan.notes],
                   runtimes=[r.name for r in profile.runtimes or [] if not r.problem],
                   pinned=plan.pin[0] if plan.pin else None)
    if fit is None:  # the header cannot be read: the engine's load says why
        return dataclasses.replace(base, reason=plan.problem)
    est = fit.estimate
    if est is None:  # "unknown": nothing to hold the load back with
        return dataclasses.replace(base, verdict=fit.verdict, reason=fit.reason, runtime=fit.runtime)
    return dataclasses.replace(
        base, estimated_bytes=plan.estimated_bytes, expected_gpu_blocks=plan.expected_gpu_blocks, verdict=fit.verdict,
        reason=fit.reason, moe=plan.moe, fits=plan.fits, runtime=fit.runtime,
        estimated_buffers=report.estimated_buffers(est.devices) if plan.format == "gguf" else {})


def note_words(note: PlanNote) -> str:
    """A load plan's note in the model bar's words (translated)."""
    from app.models import planner

    if isinstance(note, planner.PresetApplied):
        return QCoreApplication.translate("model_bar", "this model's preset: {values}").format(
            values=planner.values_words(note.values))
    if isinstance(note, planner.KvQuantized):
        return QCoreApplication.translate("model_bar", "a q8_0 KV cache keeps the context at {n_ctx} tokens").format(
            n_ctx=note.n_ctx)
    if isinstance(note, planner.ContextLowered):
        return QCoreApplication.translate("model_bar",
                                          "context lowered from {n_ctx} to {max_ctx} tokens, the most that fits"
                                          ).format(n_ctx=note.wanted, max_ctx=note.n_ctx)
    if isinstance(note, planner.ParallelLowered):
        return QCoreApplication.translate("model_bar", "{parallel} chats at once instead of {wanted}: each has a KV "
                                                       "cache of its own, and {wanted} do not fit").format(
            parallel=note.parallel, wanted=note.wanted)
    if isinstance(note, planner.PresetSetAside):
        return QCoreApplication.translate("model_bar", "this model's preset ({values}) does not fit this machine "
                                                       "({reason}); it loads with the fit check's settings").format(
            values=planner.values_words(note.values), reason=note.reason)
    return note.words()  # the estimator's own sentences are English wherever they are shown


def spill_warning(info: Loaded, prefill: Prefill | None, requested_gpu_layers: int) -> str:
    """A sentence when fewer layers landed on the GPU than the estimate (or the request) expected."""
    if not info.n_layers:
        return ""
    expected = prefill.expected_gpu_blocks if prefill is not None else None
    if expected is None and requested_gpu_layers != 0 and info.gpu_offload_supported:
        expected = info.n_layers if requested_gpu_layers < 0 else min(requested_gpu_layers - 1, info.n_layers)
    if not expected or info.gpu_layers >= expected:
        return ""
    if not info.gpu_offload_supported:
        engine = info.runtime or info.backend
        return (QCoreApplication.translate("model_bar", "The estimate put {expected} of {n_layers} layers on the "
                                                        "GPU, but the {engine} runtime has no GPU support, so every "
                                                        "layer runs on the CPU, which is much slower. Build a GPU "
                                                        "runtime on the Hardware page (or: quantdesk runtime build "
                                                        "vulkan).").format(expected=expected, n_layers=info.n_layers,
                                                                           engine=engine))
    return (QCoreApplication.translate("model_bar", "Only {gpu_layers} of {n_layers} layers fit on the GPU "
                                                    "({expected} were expected); the rest run on the CPU, which is "
                                                    "slower. Free GPU memory, or pick a smaller quant or a shorter "
                                                    "context.").format(gpu_layers=info.gpu_layers,
                                                                       n_layers=info.n_layers, expected=expected))


class ExpertsInRamBox(QSpinBox):
    """LoadSettings.cpu_moe as words: none (0), the first N layers, all (-1)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setRange(-1, 999)
        self.setPrefix(self.tr("Experts in RAM: "))

    def textFromValue(self, value: int) -> str:  # noqa: N802 - Qt's name
        # English on purpose: _parse reads these words back as the user types them
        return {-1: "all", 0: "none", 1: "1 layer"}.get(value, f"{value} layers")

    def valueFromText(self, text: str) -> int:  # noqa: N802 - Qt's name
        value = self._parse(text)
        return 0 if value is None else value

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        state = QValidator.State.Acceptable if self._parse(text) is not None else QValidator.State.Intermediate
        return state, text, pos

    def _parse(self, text: str) -> int | None:
        words = text.removeprefix(self.prefix()).strip().lower()
        if words in ("all", "none"):
            return -1 if words == "all" else 0
        digits = "".join(ch for ch in words if ch.isdigit())
        return int(digits) if digits and int(digits) <= self.maximum() else None


class ContextMeter(QWidget):
    """How much of the loaded model's context the open chat holds after its latest reply (app.datatypes.ContextUse:
    the prompt the engine read and the reply): a thin bar and "1.2k / 4.1k tokens", in the warning tone with a
    sentence once the next reply may not fit. Hidden until a reply says how much is used."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Context used"))
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(6)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)  # the label beside it says the figures
        self.bar.setFixedSize(72, 8)
        self.bar.setAccessibleName(self.tr("Context used"))
        self.label = QLabel()
        self.label.setObjectName("caption")
        self.label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)  # the warning pill stays slim
        row.addWidget(self.bar)
        row.addWidget(self.label)
        self.use: ContextUse | None = None
        self.model: tuple[str, int] | None = None  # the model path and context the figures are of
        self.near_full = False
        self.hide()

    def show_use(self, use: ContextUse, max_tokens: int, model_path: str, overflow: str = "stop") -> None:
        """``overflow``: the chat's overflow policy, which the warning says (app/engine/overflow.py)."""
        self.use, self.model, self.near_full = use, (model_path, use.n_ctx), use.near_full(max_tokens)
        self.bar.setValue(round(1000 * use.share))
        text = self.tr("{used} / {total} tokens").format(used=compact_count(use.used), total=compact_count(use.n_ctx))
        tip = self.tr("The chat holds {used} of the model's {total} context tokens ({share}): system prompt, history, "
                      "images, thinking and tools' results. {left} tokens are left for the next message and reply."
                      ).format(used=grouped(use.used), total=grouped(use.n_ctx), share=percent(use.share),
                               left=grouped(use.left))
        if use.documents:  # the passages of the chat's documents that the latest question was given
            text = self.tr("{figures} · documents {share}").format(figures=text, share=percent(use.documents_share))
            tip += " " + self.tr("Of these, {documents} tokens ({share}) are passages of the chat's documents, found "
                                 "for the latest question.").format(documents=grouped(use.documents),
                                                                     share=percent(use.documents_share))
        if self.near_full:
            text = self.tr("{figures} · nearly full").format(figures=text)
            if overflow == "stop":
                tip += " " + self.tr("The next reply may not fit: when the context is full the model cannot answer. "
                                     "Start a new chat, or load the model with a larger context.")
            else:
                tip += " " + self.tr("When the context is full, this chat's overflow policy leaves its oldest turns "
                                     "out (and marks them where it happens); the model goes on answering.")
        self.label.setText(text)
        self.label.setObjectName("badge_warn" if self.near_full else "caption")
        self.label.style().polish(self.label)  # the new name picks its colours from the style sheet
        for widget in (self, self.bar, self.label):
            widget.setToolTip(tip)
        self.setAccessibleDescription(tip)
        self.bar.setAccessibleDescription(tip)
        self.show()

    def clear(self) -> None:
        self.use, self.model, self.near_full = None, None, False
        self.hide()


class ModelBar(QFrame):
    """Shows the model and its settings; the Chat page drives the loading."""

    load_clicked = Signal()
    remote_clicked = Signal()
    reload_clicked = Signal()
    runtime_chosen = Signal(str)  # a runtime name or "auto", picked by the user for this model
    eject_requested = Signal(str)  # the path of a loaded model to unload (the "N loaded" menu)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._mmproj = ""  # the vision projector of the model being shown (LoadSettings.mmproj)
        self._chat_template = ""  # the chat template chosen for it (LoadSettings.chat_template), "" for the rule's
        self.setObjectName("modelBar")
        # A narrow window clips the last controls rather than forcing the whole window wider (as the stats strip).
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(0)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 8, 12, 8)
        outer.setSpacing(6)
        top = QHBoxLayout()
        self.model_label = QLabel(self.tr("No model loaded"))
        self.model_label.setAccessibleName(self.tr("Loaded model"))
        self.model_label.setWordWrap(True)
        self.model_label.setTextFormat(Qt.TextFormat.RichText)
        self.load_progress = QProgressBar()
        self.load_progress.setRange(0, 100)
        self.load_progress.setFixedWidth(140)
        self.load_progress.setAccessibleName(self.tr("Loading"))
        self.load_progress.hide()
        self.load_button = QPushButton(self.tr("Load model…"))
        self.load_button.setAccessibleName(self.tr("Load a model"))
        self.load_button.setToolTip(self.tr("A GGUF file or model folder (its settings are filled in for this "
                                            "machine), or a model on a remote server"))
        load_menu = QMenu(self.load_button)
        self.load_file_action = load_menu.addAction(self.tr("Model file…"), self.load_clicked.emit)
        self.load_remote_action = load_menu.addAction(self.tr("Remote model…"), self.remote_clicked.emit)
        self.load_button.setMenu(load_menu)
        self.reload_button = QPushButton(self.tr("Reload"))
        self.reload_button.setAccessibleName(self.tr("Reload the model with these settings"))
        self.reload_button.setToolTip(self.tr("Load the same model again with the settings below"))
        self.reload_button.setEnabled(False)
        self.reload_button.clicked.connect(self.reload_clicked)
        decorate(self.load_button, "load")
        decorate(self.reload_button, "regenerate")
        self.experts_box = ExpertsInRamBox()
        self.experts_box.setAccessibleName(self.tr("MoE experts in RAM"))
        self.experts_box.setToolTip(self.tr("Mixture-of-experts models: keep the experts of the first N layers in "
                                            "system RAM and the rest of every layer on the GPU (llama.cpp "
                                            "--n-cpu-moe); only the experts a token uses are read from RAM"))
        # Beside Reload, where the word-wrapped model label gives way in a narrow window rather than the box.
        self.experts_box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.experts_box.hide()  # shown for a MoE model
        top.addWidget(self.model_label, 1)
        top.addWidget(self.load_progress)
        top.addWidget(self.experts_box)
        self.loaded_button = QPushButton()
        self.loaded_button.setAccessibleName(self.tr("Loaded models"))
        self.loaded_button.setToolTip(self.tr("The models in memory, each in its engine: eject one to free its "
                                              "memory"))
        self.loaded_button.setMenu(QMenu(self.loaded_button))
        self.loaded_button.hide()  # shown once a model is loaded in the app's model pool
        top.addWidget(self.reload_button)
        top.addWidget(self.loaded_button)
        top.addWidget(self.load_button)
        outer.addLayout(top)

        self.context_box = QSpinBox()
        self.context_box.setRange(256, 1_048_576)
        self.context_box.setSingleStep(1024)
        self.context_box.setValue(LoadSettings().n_ctx)
        self.context_box.setPrefix(self.tr("Context "))
        self.context_box.setAccessibleName(self.tr("Context length"))
        self.gpu_layers_box = QSpinBox()
        self.gpu_layers_box.setRange(-1, 999)
        self.gpu_layers_box.setValue(-1)
        self.gpu_layers_box.setSpecialValueText(self.tr("GPU layers: all"))
        self.gpu_layers_box.setPrefix(self.tr("GPU layers "))
        self.gpu_layers_box.setAccessibleName(self.tr("GPU layers"))
        self.gpu_layers_box.setToolTip(self.tr("Layers to offload to the GPU (llama.cpp -ngl); 0 runs on the CPU only"))
        self.kv_box = QComboBox()
        self.kv_box.addItems([self.tr("KV {type}").format(type=t) for t in KV_TYPES])
        self.kv_box.setAccessibleName(self.tr("KV cache type"))
        self.kv_box.setToolTip(self.tr("A quantized cache (q8_0, q4_0) takes less memory and needs flash attention"))
        self.flash_box = QComboBox()
        self.flash_box.addItems([self.tr("Flash attn {name}").format(name=name) for name, _ in FLASH])
        self.flash_box.setToolTip(self.tr("Flash attention: auto lets the engine decide"))
        self.flash_box.setAccessibleName(self.tr("Flash attention"))
        self.parallel_box = QSpinBox()
        self.parallel_box.setRange(1, MAX_PARALLEL)
        self.parallel_box.setValue(DEFAULT_PARALLEL)
        self.parallel_box.setPrefix(self.tr("Decode together "))
        self.parallel_box.setAccessibleName(self.tr("Decode together"))
        self.parallel_box.setToolTip(self.tr("Chats this model answers at once, each up to the whole context; more "
                                             "wait for one to finish. llama.cpp: one KV cache they share, which does "
                                             "not grow with the number; MLX: a cache each, counted by the fit check. "
                                             "One at a time with a draft model or a vision projector, and on "
                                             "ExLlama"))
        self.runtime_box = QComboBox()
        self.runtime_box.setAccessibleName(self.tr("Runtime"))
        self.runtime_box.setToolTip(self.tr("The llama.cpp runtime for this model: auto picks the best for this "
                                            "machine; another choice is pinned for this model and reloads it"))
        self.runtime_box.addItem(self.tr("Runtime auto"), "auto")
        # Its runtimes come with the model: as wide as the longest of them, not of the first shown.
        self.runtime_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.runtime_box.activated.connect(self._on_runtime_activated)
        self.estimate_label = QLabel("")
        self.estimate_label.setObjectName("caption")
        self.estimate_label.setAccessibleName(self.tr("Estimate"))
        self.memory_label = QLabel("")
        self.memory_label.setObjectName("caption")
        self.memory_label.setAccessibleName(self.tr("Engine memory"))
        self.memory_label.setToolTip(self.tr("Memory the engine process holds now (resident set), sampled every "
                                             "second"))
        self.estimate_label.setWordWrap(True)  # under the controls, on as many lines as the width needs
        self.estimate_label.hide()  # until there is an estimate
        self.memory_label.setMinimumWidth(150)  # its figure changes every second: the row does not jump
        self.memory_label.hide()  # until an engine runs
        self.context_meter = ContextMeter()
        # A narrow window wraps the controls onto a second line rather than cutting them (issue 40).
        self.controls = Flow(spacing=8)
        for widget in (self.context_box, self.context_meter, self.gpu_layers_box, self.kv_box, self.flash_box,
                       self.parallel_box, self.runtime_box, self.memory_label):
            self.controls.add_widget(widget)
        outer.addWidget(self.controls)
        outer.addWidget(self.estimate_label)

        self._pid: int | None = None
        self._process: Any = None  # psutil.Process of _pid, made at the first sample
        self.memory_timer = QTimer(self)
        self.memory_timer.setInterval(MEMORY_SAMPLE_MS)
        self.memory_timer.timeout.connect(self._on_sample_memory)

    # --- settings ----------------------------------------------------------------------------------

    def settings(self) -> LoadSettings:
        return LoadSettings(n_ctx=self.context_box.value(), gpu_layers=self.gpu_layers_box.value(),
                            kv_cache_type=KV_TYPES[self.kv_box.currentIndex()],
                            flash_attention=FLASH[self.flash_box.currentIndex()][1],
                            cpu_moe=self.experts_box.value() if not self.experts_box.isHidden() else 0,
                            mmproj=self._mmproj, chat_template=self._chat_template,
                            parallel=self.parallel_box.value())

    def show_settings(self, settings: LoadSettings) -> None:
        self._mmproj = settings.mmproj  # no widget of its own: the projector found beside the model stays with it
        self._chat_template = settings.chat_template  # the chat settings' or the preset's choice, likewise
        self.context_box.setValue(settings.n_ctx)
        self.gpu_layers_box.setValue(settings.gpu_layers)
        self.experts_box.setValue(settings.cpu_moe)
        self.parallel_box.setValue(settings.parallel)
        if settings.cpu_moe:
            self.experts_box.show()
        self.kv_box.setCurrentIndex(KV_TYPES.index(settings.kv_cache_type) if settings.kv_cache_type in KV_TYPES
                                    else 0)
        self.flash_box.setCurrentIndex(next(i for i, (_, v) in enumerate(FLASH) if v == settings.flash_attention))

    def show_estimate(self, prefill: Prefill | None) -> None:
        self.experts_box.setVisible(prefill is not None and prefill.moe)
        if prefill is None:
            self.estimate_label.clear()
            self.estimate_label.setToolTip("")
            self.estimate_label.hide()
            return
        text = prefill.summary() + (f" · {prefill.runtime}" if prefill.runtime else "")
        self.estimate_label.setText(text)
        self.estimate_label.show()
        self.estimate_label.setToolTip("\n".join([prefill.reason, *prefill.notes]).strip())
        self.show_runtimes(prefill.runtimes, prefill.pinned)

    def show_runtimes(self, names: list[str], pinned: str | None) -> None:
        """The runtimes to pick from, with this model's pin (or auto) selected."""
        self.runtime_box.clear()
        self.runtime_box.addItem(self.tr("Runtime auto"), "auto")
        for name in names:
            self.runtime_box.addItem(self.tr("Runtime {name}").format(name=name), name)
        if pinned and pinned not in names:
            self.runtime_box.addItem(self.tr("Runtime {pinned} (missing)").format(pinned=pinned), pinned)
        self.runtime_box.setCurrentIndex(max(self.runtime_box.findData(pinned or "auto"), 0))

    @Slot(int)
    def _on_runtime_activated(self, index: int) -> None:
        self.runtime_chosen.emit(self.runtime_box.itemData(index))

    # --- loading -----------------------------------------------------------------------------------

    def show_loading(self, text: str) -> None:
        self.model_label.setText(html.escape(text))
        self.load_progress.setValue(0)
        self.load_progress.show()

    def set_progress(self, fraction: float) -> None:
        self.load_progress.setValue(round(100 * min(max(fraction, 0.0), 1.0)))

    def show_loaded(self, info: Loaded | None, prefill: Prefill | None) -> None:
        self.load_progress.hide()
        if info is None or (info.model_path, info.n_ctx) != self.context_meter.model:
            self.context_meter.clear()  # its figures were of another model or context
        remote = info is not None and info.backend == "remote"
        for box in (self.context_box, self.gpu_layers_box, self.kv_box, self.flash_box, self.parallel_box):
            box.setEnabled(not remote)  # the server loaded the model with its own settings
        if info is None:
            self.model_label.setText(self.tr("No model loaded"))
            return
        if remote:
            from app.remote.connections import display_name

            d = info.details
            self.model_label.setText(
                self.tr("<b>{name}</b><br><span style='font-size:small'>remote · {kind} server at {endpoint} · "
                        "context {n_ctx} · {latency} ms away</span>")
                .format(name=html.escape(display_name(info.model_path)), kind=html.escape(str(d.get("server_kind"))),
                        endpoint=html.escape(str(d.get("endpoint"))), n_ctx=info.n_ctx,
                        latency=number(d.get("latency_ms", 0))))
            self.model_label.setToolTip("")
            return
        estimate = prefill if prefill is not None and prefill.path == info.model_path else None  # made for this model
        if info.devices:  # llama.cpp: runtime, device and layers as llama.cpp reported them
            where = report.placement(info)
            devices = report.device_lines(info, estimate.estimated_buffers if estimate is not None else None)
        else:
            where = info.backend + " · " + (self.tr("{gpu_layers}/{n_layers} layers on GPU")
                                            .format(gpu_layers=info.gpu_layers, n_layers=info.n_layers)
                                            if info.gpu_offload_supported else self.tr("CPU only"))
            devices = []
        together = int(info.details.get("parallel", 1))
        if together > 1:
            where += self.tr(" · %n chats at once", "", together)
        if info.details.get("experts_in_ram"):
            where += self.tr(" · experts of {layers} in RAM").format(
                layers=layer_count(info.details["experts_in_ram"]))
        if info.details.get("vision"):
            where += self.tr(" · sees images")
            devices = [self.tr("Vision projector {projector}: {image_tokens} context tokens an image")
                       .format(projector=info.details['vision']['projector'],
                               image_tokens=info.details['vision']['image_tokens']), *devices]
        if draft := info.details.get("draft"):  # speculative decoding (the chat's settings)
            lookup = not draft["model_bytes"]  # prompt lookup: no model of its own
            where += self.tr(" · prompt lookup") if lookup else self.tr(" · draft {name}").format(
                name=Path(draft["model"]).name)
            what = (self.tr("Prompt lookup") if lookup else self.tr("Draft {model}: {size}").format(
                model=draft["model"], size=human_memory(draft["model_bytes"])))
            devices = [*devices, self.tr("{what}, {n} tokens a check").format(what=what, n=draft["draft_tokens"])]
        if info.devices:  # what llama.cpp allocated, against the same buffers estimated for this runtime
            memory = self.tr("{memory} in buffers").format(memory=human_memory(sum(d.total_bytes
                                                                                   for d in info.devices)))
            if estimate is not None and estimate.estimated_buffers:
                memory += self.tr(" (estimated {memory})").format(
                    memory=human_memory(sum(estimate.estimated_buffers.values())))
        else:
            memory = human_memory(sum(info.memory_bytes.values()))
            if estimate is not None and estimate.estimated_bytes is not None:
                memory += self.tr(" (estimated {memory})").format(memory=human_memory(estimate.estimated_bytes))
        template = self.template_line(info.details)
        self.model_label.setText(
            self.tr("<b>{name}</b><br><span style='font-size:small'>{where} · context {n_ctx} · {memory} · loaded in "
                    "{load_ms}</span>").format(name=html.escape(Path(info.model_path).name), where=html.escape(where),
                                               n_ctx=info.n_ctx, memory=html.escape(memory),
                                               load_ms=human_ms(info.load_ms))
            # a template that is not the file's own is said where it shows: the replies depend on it
            + (f"<br><span style='font-size:small'>{html.escape(template)}</span>"
               if template and info.details.get("chat_template") != "model" else ""))
        tips = ([self.tr("Runtime {runtime}: {runtime_reason}").format(runtime=info.runtime,
                                                                       runtime_reason=info.runtime_reason)]
                if info.runtime else []) + ([template] if template else []) + devices
        if note := info.details.get("parallel_note"):  # fewer sequences than asked, and why (backends/llama_cpp)
            tips.append(self.tr("Decode together: {note}").format(note=note))
        self.model_label.setToolTip("\n".join(tips))

    def template_line(self, details: dict[str, Any]) -> str:
        """Which chat template the model is served with and where it came from, and its tool format ("" where the
        engine does not say: a remote model, MLX)."""
        if not details.get("chat_template_origin"):
            return ""
        line = self.tr("Chat template: {title} ({origin})").format(title=details.get("chat_template_title", ""),
                                                                   origin=details["chat_template_origin"])
        if details.get("tool_format") == "generic":
            line += self.tr(" · tools in the generic JSON format (the template shows none)")
        return line

    def show_pool(self, models: list[tuple[str, int, bool]]) -> None:
        """The "N loaded" menu: each loaded model (path, memory, whether this chat's) with an Eject of its own."""
        menu = self.loaded_button.menu()
        menu.clear()
        self.loaded_button.setVisible(bool(models))
        self.loaded_button.setText(self.tr("{n} loaded").format(n=len(models)))
        for path, memory, active in models:
            name = Path(path).name
            line = self.tr("{name} · {memory}").format(name=name, memory=human_memory(memory))
            heading = menu.addAction(line + (self.tr(" · this chat") if active else ""))
            heading.setEnabled(False)
            eject = menu.addAction(self.tr("Eject {name}").format(name=name))
            eject.setData(path)
            eject.triggered.connect(lambda _checked=False, p=path: self.eject_requested.emit(p))
            menu.addSeparator()

    def hide_progress(self) -> None:
        self.load_progress.hide()

    # --- live memory -------------------------------------------------------------------------------

    def watch_process(self, pid: int | None) -> None:
        """Sample the engine's resident memory about once a second while it runs (psutil: one /proc read)."""
        self._pid, self._process = pid, None
        if pid is None:
            self.memory_timer.stop()
            self.memory_label.clear()
            self.memory_label.hide()  # no empty place in the row
            return
        self._on_sample_memory()
        self.memory_timer.start()

    @Slot()
    def _on_sample_memory(self) -> None:
        import psutil

        try:
            if self._process is None:
                self._process = psutil.Process(self._pid)
            rss = self._process.memory_info().rss
        except (psutil.Error, ValueError, TypeError):
            self.memory_timer.stop()
            self.memory_label.clear()
            self.memory_label.hide()  # no empty place in the row
            return
        self.memory_label.setText(self.tr("Engine process: {rss}").format(rss=human_memory(rss)))
        self.memory_label.show()
