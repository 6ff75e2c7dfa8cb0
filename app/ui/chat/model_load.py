"""The Chat page's model loads: a model sized up by the estimator for this machine (in a worker), then loaded through
the EngineBridge with the settings the model bar shows; a load the fit check or the pool's budget holds back waits for
“Load anyway”; the pool's loads and unloads shown in the model bar.

``ModelLoadController`` keeps what is loaded and what was asked for, and drives the model bar; what it has to say goes
to the page's banner (``notice``), which also offers “Load anyway” for ``blocked`` (the page's render of the banner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.hardware.profile import HardwareProfile
from app.ui.chat.engine_bridge import EngineBridge
from app.ui.chat.model_bar import ModelBar, Prefill, prefill_for, spill_warning
from app.ui.common.background import BackgroundCall, sentence
from app.datatypes import Loaded, LoadSettings


class ModelLoadController(QObject):
    notice = Signal(str, bool)  # (text, whether Reload belongs beside it): said in the page's banner
    notice_cleared = Signal()
    load_anyway_offered = Signal()  # after a notice: the banner offers “Load anyway” for ``blocked``
    changed = Signal()  # what is loaded, or whether a load can be asked again, changed: the page's controls follow

    def __init__(self, bar: ModelBar, bridge: EngineBridge, chat_draft: Callable[[], str],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.bar = bar
        self.bridge = bridge
        self._chat_draft = chat_draft  # the open chat's draft model (its settings), "" for none
        self.loaded: Loaded | None = None
        self.request: tuple[str, LoadSettings] | None = None  # the latest load asked for (Reload asks it again)
        self.profile: HardwareProfile | None = None  # from the window's probe; detected by the estimator if None
        self.default_n_ctx = LoadSettings().n_ctx
        self.prefill: Prefill | None = None
        self.blocked: Prefill | None = None  # a load the fit check held back; the banner offers “Load anyway”
        self._forced_warning = ""  # the risk, said once the model loaded anyway is loaded
        self._budget_refusal: Any = None  # app.engine.pool.BudgetRefused the banner's “Load anyway” answers
        self._estimator = BackgroundCall("load-estimate")
        self._estimator.succeeded.connect(self._on_estimated)
        self._estimator.failed.connect(self._on_estimate_failed)
        bar.load_clicked.connect(self._on_load_clicked)
        bar.remote_clicked.connect(self._on_remote_clicked)
        bar.reload_clicked.connect(self.reload_with_settings)
        bar.runtime_chosen.connect(self._on_runtime_chosen)
        bar.eject_requested.connect(bridge.eject)

    def bridge_slots(self) -> list[tuple[Any, Any]]:
        """The bridge's signals this controller hears, each with its slot (the page connects and disconnects)."""
        bridge = self.bridge
        return [(bridge.loaded, self._on_loaded), (bridge.load_progress, self._on_load_progress),
                (bridge.refused, self._on_refused), (bridge.model_unloaded, self._on_model_unloaded),
                (bridge.models_changed, self.show_pool)]

    def _say(self, text: str, *, reload: bool = False) -> None:
        self.notice.emit(text, reload)

    @Slot()
    def _on_load_clicked(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(self.bar, self.tr("Load a model"), "",
                                              self.tr("GGUF models (*.gguf);;All files (*)"))
        if path:
            self.open_model(path)

    @Slot()
    def _on_remote_clicked(self) -> None:
        from app.ui.settings.remote_connections import RemoteModelDialog

        dialog = RemoteModelDialog(self.bar)
        if dialog.exec() and dialog.chosen_ref:
            self.open_model(dialog.chosen_ref)

    def set_default_context(self, n_ctx: int) -> None:
        self.default_n_ctx = n_ctx
        if self.loaded is None and self.request is None:
            self.bar.context_box.setValue(n_ctx)

    def open_model(self, path: str) -> None:
        """Fill in the load settings from the estimator for this machine (in a worker), then load: a model the fit
        check says does not fit waits for “Load anyway” (the same override as ``quantdesk chat --force``)."""
        self.notice_cleared.emit()
        self.bar.show_loading(self.tr("Sizing up {name}…").format(name=Path(path).name))
        self.bar.load_button.setEnabled(False)
        self._estimator.start(prefill_for, path, self.profile, self.default_n_ctx, self.bar.parallel_box.value())

    @Slot(int, object)
    def _on_estimated(self, ticket: int, prefill: Prefill) -> None:
        if ticket != self._estimator.latest:
            return
        if self.profile is None:
            self.profile = prefill.profile
        self.prefill = prefill
        self.bar.show_estimate(prefill)
        if not prefill.fits:
            from app.models.budget import fit_refusal

            self.bar.hide_progress()
            self.bar.show_settings(prefill.settings)
            self.show_loaded_model()
            self.changed.emit()
            self._say(fit_refusal(Path(prefill.path).name, prefill.reason, self.tr("“Load anyway”"))
                      + self.tr(" Or pick a smaller quant, or a shorter context."))
            self.blocked = prefill  # after the notice: a new one forgets any load it held back
            self.load_anyway_offered.emit()
            return
        self.load_model(prefill.path, prefill.settings)

    def load_anyway(self) -> None:
        """Load what the fit check or the budget held back, with the settings the bar shows: the prefill's, or
        what the user made of them."""
        from app.models.budget import fit_warning

        prefill, refusal = self.blocked, self._budget_refusal
        if prefill is not None:
            self.load_model(prefill.path, self.bar.settings(), force=True)
            self._forced_warning = (refusal.check.warning() if refusal is not None else
                                    fit_warning(Path(prefill.path).name, prefill.reason))

    @Slot(int, object)
    def _on_estimate_failed(self, ticket: int, error: Exception) -> None:
        if ticket == self._estimator.latest:
            self.bar.hide_progress()
            self.show_loaded_model()
            self.changed.emit()
            self._say(sentence(error))

    def follow(self, model_path: str) -> None:
        """With several models loaded (a ModelPool): the open chat answers from its own model. Loaded, it is
        switched to at once; not loaded, it is sized up and loaded beside the others (the budget decides what
        unloads). Only while a model is loaded at all (opening the app loads nothing); the page calls it only while
        no reply streams."""
        pool = self.bridge.pool
        if pool is None or not model_path or self.bridge.busy:
            return
        if self.loaded is not None and self.loaded.model_path == model_path:
            return
        pooled = pool.get(model_path)
        if pooled is not None:
            self.load_model(model_path, pooled.settings)
        elif self.loaded is not None and (Path(model_path).exists() or model_path.startswith("remote:")):
            self.open_model(model_path)

    def load_model(self, path: str, settings: LoadSettings, *, force: bool = False) -> None:
        draft = self._chat_draft()
        if not settings.draft and draft:
            from app.models.drafts import usable_draft  # the chat's draft (its settings), where it fits this model

            settings = dataclasses.replace(settings, draft=usable_draft(path, draft))
        self._forced_warning = ""
        self._budget_refusal = None
        self.request = (path, settings)
        if self.prefill is not None and self.prefill.path != path:
            self.prefill = None
            self.bar.show_estimate(None)
        self.bar.show_settings(settings)
        self.notice_cleared.emit()
        self.bar.show_loading(self.tr("Loading {name}…").format(name=Path(path).name))
        estimate = self.prefill.estimated_bytes if self.prefill is not None else None
        self.bridge.load(path, settings, estimate_bytes=estimate, force=force)

    def reload(self) -> None:
        if self.request:
            self.load_model(*self.request)

    @Slot()
    def reload_with_settings(self) -> None:
        if self.request:
            self.load_model(self.request[0], self.bar.settings())

    @Slot(str)
    def _on_runtime_chosen(self, name: str) -> None:
        """Pin the runtime for this model (app/runtimes/pins.py), then size it up and load it again."""
        from app.runtimes import pins

        if self.request:
            pins.pin(name, self.request[0])
            self.open_model(self.request[0])

    @Slot(float)
    def _on_load_progress(self, fraction: float) -> None:
        self.bar.set_progress(fraction)

    @Slot(object)
    def _on_loaded(self, info: Loaded) -> None:
        self.loaded = info
        self.show_loaded_model()
        # A remote model's memory is on its server: this machine's engine process only relays it.
        self.bar.watch_process(None if info.backend == "remote" else self.bridge.engine_pid)
        requested = self.request[1].gpu_layers if self.request else 0
        warning = " ".join(w for w in (info.notice, self._forced_warning, spill_warning(info, self.prefill, requested))
                           if w)  # info.notice: the crash guard's sentence (app/engine/guard.py)
        self._forced_warning = ""
        if warning:
            self._say(warning)
        self.changed.emit()

    def engine_gone(self) -> None:
        """The engine crashed: nothing is loaded any more (Reload starts it again)."""
        self.bar.hide_progress()
        self.bar.watch_process(None)
        self.loaded = None
        self.bar.model_label.setText(self.tr("No model loaded — the engine stopped"))

    def show_loaded_model(self) -> None:
        self.bar.show_loaded(self.loaded, self.prefill)
        self.show_pool()

    @Slot()
    def show_pool(self) -> None:
        pool = self.bridge.pool
        if pool is not None:
            active = self.loaded.model_path if self.loaded is not None else None
            self.bar.show_pool([(m.path, m.estimate_bytes or sum(m.loaded.memory_bytes.values()),
                                 m.path == active) for m in pool.models()])

    @Slot(object)
    def _on_refused(self, refusal: Any) -> None:
        """The memory budget has no room beside the models answering now: say so, and offer “Load anyway”."""
        self.bar.hide_progress()
        self.show_loaded_model()
        request = self.request
        self._say(str(refusal))
        if request is not None and refusal.forceable:  # after the notice: a new one forgets the load
            self.blocked = (self.prefill if self.prefill is not None and self.prefill.path == request[0]
                            else Prefill(request[0], request[1]))
            self._budget_refusal = refusal
            self.load_anyway_offered.emit()
        self.changed.emit()

    @Slot(str, str)
    def _on_model_unloaded(self, path: str, why: str) -> None:
        """A model of the pool unloaded (room for another, idle, ejected): the bar and the banner say which and
        why; the chat's own model gone, Reload brings it back."""
        ours = self.loaded is not None and self.loaded.model_path == path
        if ours:
            self.loaded = None
            self.bar.watch_process(None)
        self.show_loaded_model()
        if ours and not self.bridge.busy:
            self._say(self.tr("{why} Reload loads it again.").format(why=why), reload=True)
        else:
            self._say(why)
        self.changed.emit()
