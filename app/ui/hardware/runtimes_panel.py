"""The Hardware page's llama.cpp runtimes: what each sees, which one loads use and why, and Use / Remove /
Build, the GUI twins of ``quantdesk runtime use | rm | build`` (app/runtimes). The work runs on worker
threads; ``changed`` asks the window to detect the hardware again when a runtime came or went."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QCoreApplication, Qt, Signal, Slot
from PySide6.QtWidgets import (QGridLayout, QGroupBox, QHBoxLayout, QLabel, QLayout, QProgressBar, QPushButton,
                               QVBoxLayout, QWidget)

from app.hardware.profile import HardwareProfile, RuntimeInfo
from app.runtimes.choose import PREFERENCE, Choice, backend_words
from app.ui.common.background import BackgroundCall, Job, sentence
from app.ui.common.formatting import human_memory, number
from app.ui.common.translations import QT_TRANSLATE_NOOP

if TYPE_CHECKING:
    from app.datatypes import Device
    from app.runtimes.build import Plan, Progress
    from app.runtimes.catalog import Runtime

# Shown through translate("runtimes_panel", ...).
ORIGINS = {"environment": QT_TRANSLATE_NOOP("runtimes_panel", "the app's own"),
           "bundled": QT_TRANSLATE_NOOP("runtimes_panel", "bundled"),
           "user": QT_TRANSLATE_NOOP("runtimes_panel", "built here")}
KINDS = {"gpu": QT_TRANSLATE_NOOP("runtimes_panel", "discrete GPU"),
         "igpu": QT_TRANSLATE_NOOP("runtimes_panel", "integrated GPU"), "cpu": "CPU",
         "accel": QT_TRANSLATE_NOOP("runtimes_panel", "accelerator")}


def buildable(profile: HardwareProfile) -> list[str]:
    """Runtimes worth offering to build on this machine: the ones its GPUs can use, Vulkan everywhere
    but macOS, Metal on macOS; never one that is installed."""
    installed = {r.backend for r in profile.runtimes or [] if not (r.problem or r.error)}
    wanted = ["metal"] if profile.os == "darwin" else ["vulkan"]
    for gpu in profile.gpus:
        wanted += [b for b in PREFERENCE.get(gpu.vendor, ()) if b not in wanted]
    return [b for b in wanted if b not in installed]


def device_text(d: Device) -> str:
    kind = QCoreApplication.translate("runtimes_panel", "software Vulkan device, a CPU (tests only)") if d.software \
        else QCoreApplication.translate("runtimes_panel", KINDS.get(d.type, d.type))
    memory = QCoreApplication.translate("runtimes_panel", ", {free} of {total} free").format(
        free=human_memory(d.memory_free), total=human_memory(d.memory_total)) if d.memory_total else ""
    return f"{d.name}: {d.description or d.name} ({kind}{memory})"


def _build(job: Job, backend: str) -> Runtime:
    """One runtime build, on the BackgroundCall's thread: its plan and progress reported as ("plan", Plan) and
    ("progress", Progress), the Runtime returned."""
    from app.runtimes import build

    return build.build(backend, on_progress=lambda progress: job.report(("progress", progress)),
                       on_plan=lambda plan: job.report(("plan", plan)))


class RuntimesPanel(QGroupBox):
    changed = Signal()  # a runtime was built, removed or pinned

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(QCoreApplication.translate("RuntimesPanel", "llama.cpp runtimes"), parent)
        self.setAccessibleName(self.tr("llama.cpp runtimes"))
        self._layout = QVBoxLayout(self)
        self._layout.setSpacing(8)
        self._actions = BackgroundCall("runtime-action")
        self._actions.succeeded.connect(self._on_action_done)
        self._actions.failed.connect(self._on_action_failed)
        self._builds = BackgroundCall("runtime-build")  # one at a time: the Build buttons wait for it
        self._builds.progressed.connect(self._on_build_reported)
        self._builds.succeeded.connect(self._on_build_finished)
        self._builds.failed.connect(self._on_build_finished)
        self._job: int | None = None  # the running build's ticket
        self.rows: dict[str, QLabel] = {}
        self.buttons: dict[str, QPushButton] = {}
        self.choice_label = QLabel()
        self.status_label = QLabel()
        self.progress = QProgressBar()

    def set_profile(self, profile: HardwareProfile) -> None:
        from app.models.recommend import runtime_choice
        from app.runtimes import pins

        _clear(self._layout)
        self.rows, self.buttons = {}, {}
        if profile.runtimes is None:
            self._layout.addWidget(_plain(self.tr("The runtimes were not probed for this profile.")))
            return
        pinned = pins.load().default
        choice = runtime_choice(profile, (pinned, self.tr("for every model")) if pinned else None)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setColumnStretch(1, 1)
        for row, runtime in enumerate(profile.runtimes):
            self._add_runtime_row(grid, row, runtime, choice is not None and choice.name == runtime.name, pinned)
        self._layout.addLayout(grid)
        self._add_choice(choice, pinned)
        self._add_build_buttons(profile)
        self._add_status()

    def _add_runtime_row(self, grid: QGridLayout, row: int, runtime: RuntimeInfo, in_use: bool,
                         pinned: str | None) -> None:
        """One runtime: whether loads use it, what it is and sees, its Use (and Remove, for one built here)."""
        mark = QLabel("●" if in_use else "○")
        mark.setAccessibleName(self.tr("in use") if in_use else self.tr("not in use"))
        mark.setObjectName("ok" if in_use else "caption")
        grid.addWidget(mark, row, 0, Qt.AlignmentFlag.AlignTop)
        text = _runtime_text(runtime, in_use)
        label = QLabel(text)
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setAccessibleName(self.tr("runtime {name}").format(name=runtime.name))
        grid.addWidget(label, row, 1)
        self.rows[runtime.name] = label
        buttons = QHBoxLayout()
        # The runtime chosen automatically is in use already: its button pins it ("Always use"), so a
        # plain "Use" on it read as if it were not.
        use = QPushButton(self.tr("Pinned") if pinned == runtime.name
                          else self.tr("Always use") if in_use else self.tr("Use"))
        use.setEnabled(pinned != runtime.name and not (runtime.problem or runtime.error))
        use.setToolTip(self.tr("Load every model with the {name} runtime, whatever the automatic choice "
                               "(quantdesk runtime use {name})").format(name=runtime.name))
        use.setAccessibleName(self.tr("Use {name}").format(name=runtime.name))
        use.clicked.connect(lambda _=False, n=runtime.name: self._start(_pin, n))
        buttons.addWidget(use)
        self.buttons[f"use {runtime.name}"] = use
        if runtime.origin == "user":
            remove = QPushButton(self.tr("Remove"))
            remove.setAccessibleName(self.tr("Remove {name}").format(name=runtime.name))
            remove.setToolTip(self.tr("Delete this runtime's folder (quantdesk runtime rm {name})")
                              .format(name=runtime.name))
            remove.clicked.connect(lambda _=False, n=runtime.name: self._start(_remove, n))
            buttons.addWidget(remove)
            self.buttons[f"remove {runtime.name}"] = remove
        grid.addLayout(buttons, row, 2, Qt.AlignmentFlag.AlignTop)

    def _add_choice(self, choice: Choice | None, pinned: str | None) -> None:
        """Which runtime loads use and why; "Choose automatically" while one is pinned."""
        words = self.tr("Loads use <b>{name}</b>: {reason}.").format(
            name=html.escape(choice.name or self.tr("nothing")), reason=html.escape(choice.reason)) \
            if choice is not None else ""
        self.choice_label = QLabel(words)
        self.choice_label.setWordWrap(True)
        self.choice_label.setAccessibleName(self.tr("Runtime choice"))
        footer = QHBoxLayout()
        footer.addWidget(self.choice_label, 1)
        if pinned:
            auto = QPushButton(self.tr("Choose automatically"))
            auto.setAccessibleName(self.tr("Choose the runtime automatically"))
            auto.clicked.connect(lambda: self._start(_pin, "auto"))
            footer.addWidget(auto)
            self.buttons["auto"] = auto
        self._layout.addLayout(footer)

    def _add_build_buttons(self, profile: HardwareProfile) -> None:
        """A Build button for each runtime worth building here (waiting while a build runs)."""
        build_row = QHBoxLayout()
        offers = buildable(profile)
        if offers:
            build_row.addWidget(QLabel(self.tr("Build:")))
        for backend in offers:
            button = QPushButton(self.tr("{backend_words} runtime").format(backend_words=backend_words(backend)))
            button.setAccessibleName(self.tr("Build the {backend} runtime").format(backend=backend))
            button.setToolTip(self.tr("Compile llama.cpp for {backend_words} on this machine (quantdesk runtime "
                                      "build {backend}); the log is kept").format(backend_words=backend_words(backend),
                                                                                  backend=backend))
            button.clicked.connect(lambda _=False, b=backend: self.start_build(b))
            button.setEnabled(self._job is None)
            build_row.addWidget(button)
            self.buttons[f"build {backend}"] = button
        build_row.addStretch(1)
        self._layout.addLayout(build_row)

    def _add_status(self) -> None:
        """The build's progress and the last action's words (kept while a build runs on)."""
        self.progress = QProgressBar()
        self.progress.setAccessibleName(self.tr("Runtime build progress"))
        self.progress.setVisible(self._job is not None)
        self.status_label = QLabel(self.status_label.text() if self._job is not None else "")
        self.status_label.setWordWrap(True)
        self.status_label.setAccessibleName(self.tr("Runtime status"))
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._layout.addWidget(self.progress)
        self._layout.addWidget(self.status_label)

    # --- actions ------------------------------------------------------------------------------------

    def _start(self, fn: Callable[[str], str], name: str) -> None:
        for button in self.buttons.values():
            button.setEnabled(False)
        self._actions.start(fn, name)

    @Slot(int, object)
    def _on_action_done(self, _ticket: int, message: str) -> None:
        self.status_label.setText(message)
        self.changed.emit()

    @Slot(int, object)
    def _on_action_failed(self, _ticket: int, error: Exception) -> None:
        self.status_label.setText(sentence(error))
        self.changed.emit()

    def start_build(self, backend: str) -> None:
        if self._job is not None:
            return
        for key, button in self.buttons.items():
            if key.startswith("build"):
                button.setEnabled(False)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.status_label.setText(self.tr("Checking what the {backend_words} build needs…")
                                  .format(backend_words=backend_words(backend)))
        self._job = self._builds.start_job(_build, backend)

    @Slot(int, object)
    def _on_build_reported(self, _ticket: int, report: tuple[str, Plan | Progress]) -> None:
        kind, value = report
        if kind == "plan":
            self._on_build_planned(cast("Plan", value))
        else:
            self._on_build_progress(cast("Progress", value))

    def _on_build_planned(self, plan: Plan) -> None:
        if not plan.missing:
            self.status_label.setText(self.tr("Building the {backend_words} runtime: {estimate_text}.")
                                      .format(backend_words=backend_words(plan.backend),
                                              estimate_text=plan.estimate_text()))

    def _on_build_progress(self, progress: Progress) -> None:
        if progress.total:
            self.progress.setRange(0, progress.total)
            self.progress.setValue(progress.step)
            left = self.tr(", about {minutes} min left").format(minutes=number(progress.remaining_s / 60)) \
                if progress.remaining_s is not None else ""
            self.status_label.setText(self.tr("Compiling: step {step} of {total}{left}.").format(step=progress.step,
                                                                                                 total=progress.total,
                                                                                                 left=left))
        else:
            self.progress.setRange(0, 0)
            self.status_label.setText(f"{progress.phase.capitalize()}…")

    @Slot(int, object)
    def _on_build_finished(self, _ticket: int, result: Runtime | Exception) -> None:
        self._job = None
        self.progress.hide()
        if isinstance(result, Exception):
            self.status_label.setText(sentence(result))
        else:
            self.status_label.setText(self.tr("Built the {name} runtime; loads can use it now. Log: {log}")
                                      .format(name=result.name, log=result.log))
        self.changed.emit()


def _pin(name: str) -> str:
    from app.runtimes import pins

    pins.pin(name)
    if name == "auto":
        return QCoreApplication.translate("runtimes_panel", "Runtimes are chosen automatically again.")
    return QCoreApplication.translate("runtimes_panel", "Every model now loads with {name}.").format(name=name)


def _remove(name: str) -> str:
    from app.runtimes import build

    build.remove(name)
    return QCoreApplication.translate("runtimes_panel", "Removed the {name} runtime.").format(name=name)


def _runtime_text(runtime: RuntimeInfo, in_use: bool) -> str:
    origin = QCoreApplication.translate("runtimes_panel", ORIGINS.get(runtime.origin, runtime.origin))
    head = (QCoreApplication.translate("runtimes_panel", "<b>{name}</b> · {backend} · llama-cpp-python {version} · "
                                                         "{origin} · {size} on disk")
            .format(name=html.escape(runtime.name), backend=backend_words(runtime.backend),
                    version=html.escape(runtime.version or "?"), origin=origin, size=human_memory(runtime.size_bytes))
            + (QCoreApplication.translate("runtimes_panel", " · <b>in use</b>") if in_use else ""))
    if runtime.problem or runtime.error:
        return head + QCoreApplication.translate("runtimes_panel", "<br>cannot start: {problem}").format(
            problem=html.escape(runtime.problem or runtime.error))
    seen = [html.escape(device_text(d)) for d in runtime.devices]
    seen = seen or [QCoreApplication.translate("runtimes_panel", "no device")]
    return head + "<br><span style='font-size:small'>" + "<br>".join(seen) + "</span>"


def _plain(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label


def _clear(layout: QLayout) -> None:
    while layout.count():
        item = layout.takeAt(0)
        if item is None:
            break
        if (widget := item.widget()) is not None:
            widget.deleteLater()
        elif (inner := item.layout()) is not None:
            _clear(inner)
