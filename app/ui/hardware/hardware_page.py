"""The Hardware page: what was detected, memory per device, CPU flags, which backends run here and
why the others do not, and the mismatch hints."""

from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication, Qt, Slot
from PySide6.QtWidgets import (QGridLayout, QGroupBox, QLabel, QPushButton, QScrollArea, QVBoxLayout,
                               QWidget)

from app.hardware.profile import GpuInfo, HardwareProfile
from app.ui.common.formatting import human_bytes, human_memory, number
from app.ui.common.widgets import MemoryBar, page_margins, page_scroll, page_title
from app.ui.hardware.runtimes_panel import RuntimesPanel

# Flags that change which llama.cpp kernels run; shown first and in bold.
KEY_FLAGS = ("avx", "avx2", "avx512f", "fma", "f16c", "avx_vnni", "amx_int8", "neon", "dotprod", "sve", "i8mm")


def _used(total: int | None, free: int | None) -> int | None:
    return total - free if total is not None and free is not None else None


def _gpu_note(gpu: GpuInfo) -> str:
    parts = [gpu.vendor.upper() if gpu.vendor != "apple" else "Apple"]
    if gpu.unified:
        parts.append(QCoreApplication.translate("hardware_page", "unified memory"))
    if gpu.working_set_limit_bytes:
        parts.append(QCoreApplication.translate("hardware_page", "GPU may use up to {memory}")
                     .format(memory=human_memory(gpu.working_set_limit_bytes)))
    if gpu.compute_capability:
        parts.append(QCoreApplication.translate("hardware_page", "compute {compute_capability}")
                     .format(compute_capability=gpu.compute_capability))
    if gpu.driver:
        parts.append(QCoreApplication.translate("hardware_page", "driver {driver}").format(driver=gpu.driver))
    if gpu.bandwidth_gbps:
        parts.append(f"{number(gpu.bandwidth_gbps)} GB/s")
    return " · ".join(parts)


def _plain(text: str) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    return label


class HardwarePage(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        page_scroll(self)
        self.setAccessibleName(self.tr("Hardware"))
        self.profile: HardwareProfile | None = None
        self.runtimes_panel = RuntimesPanel()  # one for the page's life: a build in progress outlives a refresh
        self.show_message(self.tr("Detecting this machine…"))

    def show_message(self, text: str) -> None:
        self.runtimes_panel.setParent(None)  # setWidget deletes the old page and everything still in it
        page = QWidget()
        layout = QVBoxLayout(page)
        page_margins(layout)
        layout.addWidget(page_title(self.tr("Hardware")))
        self.status_label = QLabel(text)
        self.status_label.setWordWrap(True)
        layout.addWidget(self.status_label)
        layout.addStretch(1)
        self.setWidget(page)

    def _learned_box(self) -> QGroupBox:
        """What the crash guard learned on this machine (app/engine/guard.py): the configurations loads go straight
        to after a native crash of llama.cpp, and Forget."""
        from app.engine import guard

        box = QGroupBox(self.tr("Learned after engine crashes"))
        box_layout = QVBoxLayout(box)
        learned = guard.learned()
        self.learned_label = _plain("\n".join(f"• {entry.words()}" for entry in learned) if learned else self.tr(
            "Nothing: every model loads with llama.cpp's defaults. When the engine crashes in llama.cpp's own code, "
            "QuantDesk loads that model again in a safer configuration and remembers it here."))
        self.learned_label.setAccessibleName(self.tr("Learned after engine crashes"))
        box_layout.addWidget(self.learned_label)
        self.forget_button = QPushButton(self.tr("Forget"))
        self.forget_button.setToolTip(self.tr("The next loads try llama.cpp's defaults again"))
        self.forget_button.setEnabled(bool(learned))
        self.forget_button.clicked.connect(self._on_forget)
        box_layout.addWidget(self.forget_button, 0, Qt.AlignmentFlag.AlignLeft)
        return box

    @Slot()
    def _on_forget(self) -> None:
        from app.engine import guard

        guard.forget()
        if self.profile is not None:
            self.set_profile(self.profile)

    def set_profile(self, profile: HardwareProfile) -> None:
        self.profile = profile
        self.runtimes_panel.setParent(None)  # setWidget deletes the old page and everything still in it
        page = QWidget()
        layout = QVBoxLayout(page)
        page_margins(layout)
        layout.setSpacing(16)
        layout.addWidget(page_title(self.tr("Hardware")))
        layout.addWidget(self._summary(profile))
        layout.addWidget(self._memory_box(profile))
        layout.addWidget(self._flags_box(profile))
        layout.addWidget(self._engines_box(profile))
        self.runtimes_panel.set_profile(profile)
        layout.addWidget(self.runtimes_panel)
        layout.addWidget(self._learned_box())
        self._add_notes(layout, profile)
        layout.addStretch(1)
        self.setWidget(page)

    def _summary(self, profile: HardwareProfile) -> QLabel:
        """The CPU, its cores and threads, the OS and architecture."""
        cpu = profile.cpu
        cores = self.tr("{cores} cores / {threads} threads").format(cores=cpu.physical_cores or "?",
                                                                   threads=cpu.logical_cores or "?")
        summary = QLabel(f"<b>{html.escape(cpu.model or self.tr('Unknown CPU'))}</b> — {cores} · "
                         f"{html.escape(profile.os)} {html.escape(profile.arch)}")
        summary.setWordWrap(True)
        summary.setAccessibleName(self.tr("Summary"))
        return summary

    def _memory_box(self, profile: HardwareProfile) -> QGroupBox:
        """A bar for the system RAM and for each GPU's memory, and the models' disk's free space."""
        memory = QGroupBox(self.tr("Memory"))
        mem_layout = QVBoxLayout(memory)
        mem_layout.setSpacing(12)
        self.memory_bars = [MemoryBar(self.tr("System RAM"), _used(profile.ram_total_bytes,
                                                                   profile.ram_available_bytes),
                                      profile.ram_total_bytes,
                                      self.tr("{memory} available").format(
                                          memory=human_memory(profile.ram_available_bytes))
                                      if profile.ram_available_bytes is not None else "")]
        for gpu in profile.gpus:
            self.memory_bars.append(MemoryBar(gpu.name, _used(gpu.vram_total_bytes, gpu.vram_free_bytes),
                                              gpu.vram_total_bytes, _gpu_note(gpu)))
        for bar in self.memory_bars:
            mem_layout.addWidget(bar)
        if not profile.gpus:
            mem_layout.addWidget(_plain(self.tr(
                "No supported GPU was found: models run on the CPU, from system RAM.")))
        if profile.disk_free_bytes is not None:
            where = self.tr(" on {disk_path}").format(disk_path=profile.disk_path) if profile.disk_path else ""
            self.disk_label = _plain(self.tr("Disk for models: {free} free{where}")
                                     .format(free=human_bytes(profile.disk_free_bytes), where=where))
            mem_layout.addWidget(self.disk_label)
        return memory

    def _flags_box(self, profile: HardwareProfile) -> QGroupBox:
        """The CPU's feature flags (the ones llama.cpp's speed depends on first, in bold) and the measured
        memory bandwidth."""
        cpu = profile.cpu
        flags = QGroupBox(self.tr("CPU features"))
        flags_layout = QVBoxLayout(flags)
        ordered = [f for f in KEY_FLAGS if f in cpu.flags] + sorted(f for f in cpu.flags if f not in KEY_FLAGS)
        text = " ".join(f"<b>{html.escape(f)}</b>" if f in KEY_FLAGS else html.escape(f) for f in ordered)
        self.flags_label = QLabel(text or self.tr("No CPU feature flags were found."))
        self.flags_label.setWordWrap(True)
        self.flags_label.setAccessibleName(self.tr("CPU features"))
        self.flags_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        flags_layout.addWidget(self.flags_label)
        if profile.ram_bandwidth_gbps:
            flags_layout.addWidget(QLabel(self.tr("Measured memory bandwidth: {bandwidth} GB/s")
                                          .format(bandwidth=number(profile.ram_bandwidth_gbps, 1))))
        return flags

    def _engines_box(self, profile: HardwareProfile) -> QGroupBox:
        """Each inference engine: available or not, and why."""
        backends = QGroupBox(self.tr("Inference engines"))
        grid = QGridLayout(backends)
        grid.setHorizontalSpacing(16)
        grid.setColumnStretch(2, 1)
        self.backend_rows: dict[str, QLabel] = {}
        for row, support in enumerate(profile.backends):
            mark = QLabel("✔" if support.available else "✘")
            mark.setAccessibleName(self.tr("available") if support.available else self.tr("unavailable"))
            mark.setObjectName("ok" if support.available else "no")
            why = support.reason if not support.available else "ready"
            if support.hint:
                why += f" — {support.hint}"
            reason = _plain(why)
            reason.setAccessibleName(f"{support.name}: {why}")
            grid.addWidget(mark, row, 0)
            grid.addWidget(QLabel(f"<b>{html.escape(support.name)}</b>"), row, 1)
            grid.addWidget(reason, row, 2)
            self.backend_rows[support.name] = reason
        return backends

    def _add_notes(self, layout: QVBoxLayout, profile: HardwareProfile) -> None:
        """The profile's hints, and what the probes did not find (small and grey)."""
        if profile.hints:
            notes = QGroupBox(self.tr("Worth knowing"))
            notes_layout = QVBoxLayout(notes)
            for hint in profile.hints:
                notes_layout.addWidget(_plain(f"• {hint}"))
            layout.addWidget(notes)
        if profile.absent:
            # Mostly "no such GPU here": evidence for a bug report, not news, so it stays small and grey.
            details = _plain(self.tr("Probe details: ") + "; ".join(f"{part}: {why}" for part, why in
                                                                    profile.absent.items()))
            details.setObjectName("caption")
            layout.addWidget(details)
