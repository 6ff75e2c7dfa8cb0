"""The Local server page: a switch that serves one local model over the OpenAI API (app/server), with
its address, port, API key, the LAN switch, allowed web origins and a live count of active requests; with
"Load library models on demand", requests naming another library model load it into the app's one model pool
(app/engine/pool.py) beside the Chat's, within the memory budget, and idle ones unload: the page's budget and idle
time are that pool's limits while the server runs (app/server/router.py), Settings → Loaded models' again after.

The server serves the model loaded in Chat, through the Chat's own engine client (the EngineBridge's
``client``): the model is in memory once, chat and API requests take turns first come first served in the
engine host's queue, and loading another model in Chat changes what the server serves. Starting and
stopping the listener take a moment, so they run on a worker thread and report back as queued signals; the
switch never waits.
"""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, QRectF, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (QCheckBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QSpinBox, QVBoxLayout, QWidget)

from app.ui.common.background import BackgroundCall, sentence
from app.ui.common.formatting import capitalized, grouped
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import EmptyState, button, page_margins, page_title, scrolling_content
from app.datatypes import DEFAULT_PARALLEL, MAX_PARALLEL, LoadSettings

if TYPE_CHECKING:
    from PySide6.QtCore import QPoint

    from app.engine.client import EngineClientLike
    from app.server.router import ModelRouter
    from app.server.thread import ServerThread
    from app.ui.chat.engine_bridge import EngineBridge

PAGE_WIDTH = 820  # the form does not stretch across a wide window
LAN_HOST = "0.0.0.0"
LOCAL_HOST = "127.0.0.1"
# Shown through ServerPage.tr.
SHARED_ENGINE_NOTE = QT_TRANSLATE_NOOP("ServerPage", "It serves the model loaded in Chat, from the same engine: the "
                                                     "model is in memory once, and chat and API requests take turns.")
NO_MODEL = QT_TRANSLATE_NOOP("ServerPage",
                             "Load a model in Chat first: the server serves the model the Chat has loaded")
ON_DEMAND_NOTE = QT_TRANSLATE_NOOP("ServerPage", "With “Load library models on demand”, a request naming another model "
                                                 "of your library loads it in an engine of its own, within the memory "
                                                 "budget; models idle for a while unload (the Chat's current one "
                                                 "never).")


class ToggleSwitch(QCheckBox):
    """A checkbox drawn as an on/off switch (it keeps the checkbox's keyboard and accessibility behaviour)."""

    def sizeHint(self) -> QSize:
        return QSize(52, 28)

    def hitButton(self, pos: QPoint) -> bool:  # noqa: N802 (Qt's name)
        return self.rect().contains(pos)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt's name)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        track = QRectF(1, 3, 48, 24)
        on = self.isChecked()
        palette = self.palette()
        colour = QColor(palette.color(QPalette.ColorRole.Highlight) if on else palette.color(QPalette.ColorRole.Mid))
        if not self.isEnabled():
            colour.setAlpha(110)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colour)
        painter.drawRoundedRect(track, 12, 12)
        painter.setBrush(QColor("#ffffff"))
        painter.drawEllipse(QRectF(track.right() - 22 if on else track.left() + 2, track.top() + 2, 20, 20))
        if self.hasFocus():
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(track.adjusted(-1, -1, 1, 1), 13, 13)
        painter.end()


@dataclass(frozen=True)
class ServeRequest:
    host: str
    port: int
    api_key: str | None
    allow_lan: bool
    allowed_origins: tuple[str, ...]
    serve_remotes: bool = False
    load_on_demand: bool = False
    memory_budget_gib: float | None = None  # None: the pool's (Settings → Loaded models; automatic there by default)
    idle_ttl_s: float = 600.0
    force: bool = False
    parallel: int = DEFAULT_PARALLEL  # requests a model the server loads decodes together


@dataclass
class Running:
    """A started server; the page owns it until stopped. The engine is the Chat's and stays."""

    server: ServerThread
    port: int
    pool: ModelRouter | None = None  # the models it holds beside the Chat's
    record: Path | None = None  # app.server.running's record of where it listens (quantdesk launch finds it there)


def _start_server(engine: EngineClientLike, request: ServeRequest) -> Running:
    """Off the GUI thread: build the app over the Chat's engine and start serving it."""
    from app.server.app import create_app
    from app.server.router import ServeSettings
    from app.server.thread import ServerThread
    from app.settings import context_length, load

    budget = None if request.memory_budget_gib is None else int(request.memory_budget_gib * (1 << 30))
    pool = ServeSettings(load_on_demand=request.load_on_demand, memory_budget_bytes=budget,
                        idle_ttl_s=request.idle_ttl_s, force=request.force,
                        load=LoadSettings(n_ctx=context_length(None), parallel=request.parallel))
    app = create_app(engine, api_key=request.api_key, allowed_hosts=[request.host],
                     allowed_origins=request.allowed_origins, serve_remotes=request.serve_remotes, pool=pool,
                     overflow=load().server_overflow)
    from app.server.running import announce

    server = ServerThread(app, request.host, request.port).start()
    record = announce(server.url, api_key_required=bool(request.api_key), source="app")
    return Running(server, int(server.url.rsplit(":", 1)[1]), app.state.openai.pool, record)


def _stop_server(running: Running) -> None:
    from app.server.running import withdraw

    withdraw(running.record)
    running.server.stop()  # open responses get a moment; the engine is the Chat's and stays


def lan_address() -> str | None:
    """This machine's address on its local network (no packet is sent: a UDP connect only picks a route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            address = probe.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def parse_origins(text: str) -> tuple[str, ...]:
    """Web origins separated by commas or spaces; each must be http(s)://host[:port] with no path."""
    origins = []
    for raw in text.replace(",", " ").split():
        origin = raw.rstrip("/")
        scheme, sep, rest = origin.partition("://")
        if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
            raise ValueError(QCoreApplication.translate("server_page",
                    "“{raw}” is not a web origin: write it as http://host:port (for example http://localhost:3000), "
                    "without a path").format(raw=raw))
        origins.append(origin)
    return tuple(origins)


class ServerPage(QWidget):
    state_changed = Signal(str)  # "off" | "starting" | "on" | "stopping"
    failed = Signal(str)
    go_to = Signal(str)  # a page's name: the empty state's button

    def __init__(self, bridge: EngineBridge, parent: QWidget | None = None) -> None:
        """``bridge``: the Chat's EngineBridge; the server serves through its engine client."""
        super().__init__(parent)
        self.setAccessibleName(self.tr("Local server"))
        self.state = "off"
        self.running: Running | None = None
        self.engine = bridge.client
        self._stop_when_started = False
        self._starter = BackgroundCall("server-start")  # every failure reaches the page as a sentence
        self._starter.succeeded.connect(self._on_started)
        self._starter.failed.connect(self._on_failed)
        self._stopper = BackgroundCall("server-stop")
        self._stopper.succeeded.connect(self._on_stopped)
        for signal in (bridge.loaded, bridge.crashed, bridge.failed):
            signal.connect(self._on_engine_changed)
        self._poll = QTimer(self)
        self._poll.setInterval(250)
        self._poll.timeout.connect(self._on_poll)
        if (app := QCoreApplication.instance()) is not None:
            app.aboutToQuit.connect(self.shutdown)

        root = QVBoxLayout(scrolling_content(self))
        page_margins(root)
        root.setSpacing(14)
        root.addWidget(page_title(self.tr("Local server")))
        intro = QLabel(self.tr("Serve a local model over an OpenAI-compatible API (/v1/models, /v1/chat/completions, "
                               "/v1/completions), so other apps and scripts on this computer can use "
                               "it.<br>{SHARED_ENGINE_NOTE} {ON_DEMAND_NOTE}")
                               .format(SHARED_ENGINE_NOTE=self.tr(SHARED_ENGINE_NOTE),
                                       ON_DEMAND_NOTE=self.tr(ON_DEMAND_NOTE)))
        intro.setWordWrap(True)
        intro.setMaximumWidth(PAGE_WIDTH)
        root.addWidget(intro)
        self.empty_state = EmptyState(self.tr("No model to serve"),
                                      self.tr("The server serves the model the Chat has loaded: load one there "
                                              "first, then switch the server on."),
                                      self.tr("Open Chat"), "Chat")
        self.empty_state.setMaximumWidth(PAGE_WIDTH)
        self.empty_state.button.clicked.connect(lambda: self.go_to.emit("Chat"))
        root.addWidget(self.empty_state)

        switch_row = QHBoxLayout()
        switch_row.setSpacing(12)
        self.switch = ToggleSwitch()
        self.switch.setAccessibleName(self.tr("Serve the model"))
        self.switch.setToolTip(self.tr("Start or stop the server"))
        self.switch.toggled.connect(self._on_switch_toggled)
        self.state_label = QLabel(self.tr("<b>Off</b>"))
        self.state_label.setAccessibleName(self.tr("Server state"))
        switch_row.addWidget(self.switch)
        switch_row.addWidget(self.state_label)
        switch_row.addStretch(1)
        root.addLayout(switch_row)

        address_box = QGroupBox(self.tr("Address"))
        address_layout = QFormLayout(address_box)
        row = QHBoxLayout()
        self.address = QLineEdit()
        self.address.setReadOnly(True)
        self.address.setPlaceholderText(self.tr("shown here while the server is on"))
        self.address.setAccessibleName(self.tr("Server address"))
        self.address.setMinimumWidth(320)
        self.copy_button = button(self.tr("Copy"), self.tr("Copy the server address"), self._on_copy_clicked)
        self.copy_button.setEnabled(False)
        row.addWidget(self.address, 1)
        row.addWidget(self.copy_button)
        address_layout.addRow(self.tr("Base URL"), row)
        self.lan_line = QLabel("")
        self.lan_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.lan_line.setAccessibleName(self.tr("Address on the network"))
        self.lan_line.setVisible(False)
        address_layout.addRow("", self.lan_line)
        self.model = QLabel()  # live, not a setting: whatever the Chat has loaded
        self.model.setAccessibleName(self.tr("Model served"))
        self.model.setWordWrap(True)
        address_layout.addRow(self.tr("Model"), self.model)
        self.also_loaded = QLabel("")  # the models loaded on demand, while the server is on
        self.also_loaded.setAccessibleName(self.tr("Also loaded"))
        self.also_loaded.setWordWrap(True)
        address_layout.addRow(self.tr("Also loaded"), self.also_loaded)
        self.active = QLabel("0")
        self.active.setAccessibleName(self.tr("Active requests"))
        address_layout.addRow(self.tr("Active requests"), self.active)
        self.sequences = QLabel("")  # said on start: how many requests the served model decodes together
        self.sequences.setWordWrap(True)
        self.sequences.setAccessibleName(self.tr("Requests decoded together"))
        address_layout.addRow(self.tr("Decoded together"), self.sequences)
        self.busy = QLabel("")  # live while on: the served model's sequences, its queue and its prompt cache
        self.busy.setWordWrap(True)
        self.busy.setAccessibleName(self.tr("Sequences busy, requests waiting and cache hits"))
        address_layout.addRow(self.tr("Sequences"), self.busy)
        address_box.setMaximumWidth(PAGE_WIDTH)
        root.addWidget(address_box)

        box = QGroupBox(self.tr("Settings (applied when the server starts)"))
        form = QFormLayout(box)
        self.port = QSpinBox()
        self.port.setRange(0, 65535)
        self.port.setValue(8080)
        self.port.setSpecialValueText(self.tr("any free port"))
        self.port.setAccessibleName(self.tr("Port"))
        self.port.setFixedWidth(max(160, self.port.sizeHint().width()))  # its words, in any language
        form.addRow(self.tr("Port"), self.port)
        key_row = QHBoxLayout()
        self.api_key = QLineEdit()
        self.api_key.setAccessibleName(self.tr("API key"))
        self.api_key.setPlaceholderText(self.tr("none: any program on this computer may call it"))
        key_row.addWidget(self.api_key, 1)
        key_row.addWidget(button(self.tr("Generate"), self.tr("Generate an API key"), self.generate_key))
        form.addRow(self.tr("API key"), key_row)
        self.allow_lan = QCheckBox(self.tr("Allow other devices on my network (needs an API key of 16+ characters)"))
        self.allow_lan.setAccessibleName(self.tr("Allow other devices on my network"))
        form.addRow("", self.allow_lan)
        self.serve_remotes = QCheckBox(self.tr("Also serve the models of my remote connections (their keys stay here)"))
        self.serve_remotes.setAccessibleName(self.tr("Also serve the models of my remote connections"))
        self.serve_remotes.setToolTip(self.tr("Requests naming remote:CONNECTION/MODEL go to that server; /v1/models "
                                              "lists them beside the model loaded in Chat. Connections are set in "
                                              "Settings."))
        form.addRow("", self.serve_remotes)
        self.load_on_demand = QCheckBox(self.tr("Load library models on demand (each in its own engine, within the "
                                                "memory budget)"))
        self.load_on_demand.setAccessibleName(self.tr("Load library models on demand"))
        self.load_on_demand.setToolTip(self.tr("A request naming a model of your library that is not loaded loads "
                                               "it; off, such a request is refused and only the Chat's model is "
                                               "served"))
        form.addRow("", self.load_on_demand)
        self.memory_budget = QDoubleSpinBox()
        self.memory_budget.setAccessibleName(self.tr("Memory budget"))
        self.memory_budget.setRange(0, 4096)
        self.memory_budget.setDecimals(1)
        self.memory_budget.setSuffix(self.tr(" GiB"))
        self.memory_budget.setSpecialValueText(self.tr("as in Settings → Loaded models"))
        self.memory_budget.setToolTip(self.tr("Memory the loaded models may take together while the server runs, "
                                              "the Chat's included"))
        self.memory_budget.setFixedWidth(max(300, self.memory_budget.sizeHint().width()))  # its words, in any language
        form.addRow(self.tr("Memory budget"), self.memory_budget)
        self.idle_minutes = QSpinBox()
        self.idle_minutes.setAccessibleName(self.tr("Unload idle models after"))
        self.idle_minutes.setRange(1, 24 * 60)
        self.idle_minutes.setValue(10)
        self.idle_minutes.setSuffix(self.tr(" min without a request"))
        self.idle_minutes.setFixedWidth(max(300, self.idle_minutes.sizeHint().width()))  # its words, in any language
        form.addRow(self.tr("Unload idle models after"), self.idle_minutes)
        self.parallel = QSpinBox()
        self.parallel.setRange(1, MAX_PARALLEL)
        self.parallel.setValue(DEFAULT_PARALLEL)
        self.parallel.setSuffix(self.tr(" requests at once"))
        self.parallel.setAccessibleName(self.tr("Requests decoded together"))
        self.parallel.setToolTip(self.tr("A llama.cpp or MLX model the server loads decodes this many requests "
                                         "together, each may use the whole context (llama.cpp's KV cache does not "
                                         "grow with the number; MLX gives each a cache of its own, and fewer load "
                                         "where they do not fit); more wait in order (quantdesk serve --parallel). "
                                         "The Chat's model keeps the sequences it was loaded with"))
        self.parallel.setFixedWidth(max(220, self.parallel.sizeHint().width()))  # its words, in any language
        form.addRow(self.tr("Decode together"), self.parallel)
        self.force = QCheckBox(self.tr("Load anyway, past the memory budget"))
        self.force.setAccessibleName(self.tr("Load anyway, past the memory budget"))
        self.force.setToolTip(self.tr("Idle models still unload first. Past the budget the system may swap and slow "
                                      "to a crawl, or run out of memory, which ends that model's engine (the same as "
                                      "quantdesk serve --force)"))
        form.addRow("", self.force)
        self.load_on_demand.toggled.connect(self._on_load_on_demand_toggled)
        self._on_load_on_demand_toggled(False)
        self.origins = QLineEdit()
        self.origins.setAccessibleName(self.tr("Allowed web origins"))
        self.origins.setPlaceholderText(self.tr("e.g. http://localhost:3000 — web pages allowed to call the API"))
        form.addRow(self.tr("Allowed origins"), self.origins)
        self.settings_box = box
        box.setMaximumWidth(PAGE_WIDTH)
        root.addWidget(box)

        self.message = QLabel("")
        self.message.setObjectName("no")
        self.message.setTextFormat(Qt.TextFormat.PlainText)
        self.message.setWordWrap(True)
        self.message.setAccessibleName(self.tr("Server message"))
        self.message.setMaximumWidth(PAGE_WIDTH)
        root.addWidget(self.message)
        root.addStretch(1)
        self._on_engine_changed()

    # --- the model: the Chat's ----------------------------------------------------------------------

    def served(self) -> str:
        """What the engine serves now, in words (empty when no model is loaded)."""
        loaded = self.engine.loaded if self.engine.alive else None
        if loaded is None:
            return ""
        from app.server.router import model_id  # here, not above: the page shows before the server is imported

        return self.tr("{model} with {backend} (context {n_ctx} tokens)").format(
            model=model_id(loaded.model_path), backend=loaded.backend, n_ctx=grouped(loaded.n_ctx))

    def parallel_words(self) -> str:
        """How many requests the served model answers at once, said on start (the Chat's model keeps the sequences it
        was loaded with; models the server loads take the field's)."""
        loaded = self.engine.loaded if self.engine.alive else None
        together = int(loaded.details.get("parallel", 1)) if loaded is not None else 1
        asked = self.parallel.value()
        if together > 1:
            said = self.tr("{n} requests decode together; more wait in order").format(n=together)
        else:
            said = self.tr("one request at a time, the rest wait in order ({why})").format(
                why=(loaded.details.get("parallel_note") if loaded is not None else None)
                or self.tr("the model was loaded in Chat with one sequence"))
        if asked != together and self.load_on_demand.isChecked():
            said += self.tr("; models the server loads decode {n} together").format(n=asked)
        return said

    def busy_words(self, figures: dict[str, Any]) -> str:
        """The served model's sequences now (app/server/router.sequence_figures, as ``quantdesk ps`` says them): how
        many are busy, how many requests wait, and how often its cache served a prompt."""
        said = self.tr("{busy} of {parallel} busy, {queued} waiting").format(
            busy=figures["busy_sequences"], parallel=figures["parallel"], queued=figures["queued"])
        cache = figures["cache"]
        if cache["requests"]:
            said += self.tr("; the cache served {hits} of the last {requests} requests ({cached} of {prompt} prompt "
                            "tokens)").format(hits=cache["hits"], requests=cache["requests"],
                                              cached=grouped(cache["cached_tokens"]),
                                              prompt=grouped(cache["prompt_tokens"]))
        return said

    @Slot()
    @Slot(object)
    def _on_engine_changed(self, _event: object = None) -> None:
        served = self.served()
        self.empty_state.setVisible(not served and self.state == "off")
        self.model.setText(self.tr("{served}, loaded in Chat").format(served=served) if served
                           else f"{self.tr(NO_MODEL)}.")
        if self.state == "on":
            self._set_state("on", self.tr("On — serving {served}").format(served=served) if served else
                            self.tr("On — no model is loaded in Chat: requests are answered 503 until one is"))

    @Slot()
    def generate_key(self) -> None:
        self.api_key.setText(secrets.token_urlsafe(24))

    # --- the switch -----------------------------------------------------------------------------

    def request(self) -> ServeRequest:
        """The settings as a request to start, or ValueError / the guard's UnsafeBind with a sentence."""
        from app.server.guard import check_bind

        if not self.served():
            raise ValueError(self.tr(NO_MODEL))
        allow_lan = self.allow_lan.isChecked()
        host = LAN_HOST if allow_lan else LOCAL_HOST
        key = self.api_key.text().strip() or None
        check_bind(host, allow_lan=allow_lan, api_key=key)
        return ServeRequest(host, self.port.value(), key, allow_lan, parse_origins(self.origins.text()),
                            self.serve_remotes.isChecked(), self.load_on_demand.isChecked(),
                            self.memory_budget.value() or None, self.idle_minutes.value() * 60.0,
                            self.force.isChecked(), self.parallel.value())

    @Slot(bool)
    def _on_load_on_demand_toggled(self, on: bool) -> None:
        # The server loads into the app's one model pool; these set its limits while the server runs.
        for widget in (self.memory_budget, self.idle_minutes, self.parallel, self.force):
            widget.setEnabled(on)

    def start(self) -> None:
        self.switch.setChecked(True)

    def stop(self) -> None:
        self.switch.setChecked(False)

    @Slot(bool)
    def _on_switch_toggled(self, on: bool) -> None:
        if on and self.state == "off":
            self._begin_start()
        elif not on and self.state == "on":
            self._begin_stop()
        elif on and self.state == "starting":
            self._stop_when_started = False
            self._set_state("starting", self.tr("Starting…"))
        elif not on and self.state == "starting":
            self._stop_when_started = True
            self._set_state("starting", self.tr("Starting… it will stop as soon as it has started."))

    def _begin_start(self) -> None:
        from app.server.guard import UnsafeBind

        try:
            request = self.request()
        except UnsafeBind as exc:
            self._refuse(self.tr("{message}. Set an API key of at least 16 characters (Generate makes one), or "
                                 "untick “Allow other devices on my network”.")
                                 .format(message=capitalized(exc.message)))
            return
        except ValueError as exc:
            self._refuse(f"{exc}.")
            return
        self._stop_when_started = False
        self.message.setText("")
        self._set_state("starting", self.tr("Starting…"))
        self._starter.start(_start_server, self.engine, request)

    def _refuse(self, text: str) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(False)
        self.switch.blockSignals(False)
        self.message.setText(text)
        self.failed.emit(text)

    def _begin_stop(self) -> None:
        running, self.running = self.running, None
        self._poll.stop()
        self._set_state("stopping", self.tr("Stopping: finishing open requests…"))
        self._stopper.start(_stop_server, running)

    def _set_state(self, state: str, text: str) -> None:
        self.state = state
        self.empty_state.setVisible(state == "off" and not self.served())
        self.state_label.setText(f"<b>{text}</b>" if state == "on" else text)
        self.settings_box.setEnabled(state == "off")
        self.switch.setEnabled(state != "stopping")
        if state != "on":
            self.also_loaded.clear()
            self.address.clear()
            self.copy_button.setEnabled(False)
            self.lan_line.setVisible(False)
            self.active.setText("0")
            self.sequences.clear()
            self.busy.clear()
        self.state_changed.emit(state)

    @Slot(int, object)
    def _on_started(self, ticket: int, running: Running) -> None:
        self.running = running
        url = f"http://{LOCAL_HOST}:{running.port}/v1"
        self._set_state("on", self.tr("On"))
        self._on_engine_changed()
        self.sequences.setText(self.parallel_words())
        self.address.setText(url)
        self.copy_button.setEnabled(True)
        if self.allow_lan.isChecked():
            lan = lan_address()
            self.lan_line.setText(self.tr("Other devices: http://{lan}:{port}/v1 (with the API key)")
                                  .format(lan=lan, port=running.port) if lan else
                                  self.tr("Other devices: this computer's network address could not be found."))
            self.lan_line.setVisible(True)
        self._poll.start()
        if self._stop_when_started or not self.switch.isChecked():
            self.switch.setChecked(False)
            if self.state == "on":
                self._begin_stop()

    @Slot(int, object)
    def _on_failed(self, ticket: int, error: Exception) -> None:
        self._set_state("off", self.tr("Off"))
        self._refuse(self.tr("The server could not start: {error}").format(error=sentence(error)))

    @Slot(int, object)
    def _on_stopped(self, ticket: int, _nothing: None) -> None:
        self._set_state("off", self.tr("Off"))
        if self.switch.isChecked():  # switched on again while it was stopping
            self._begin_start()

    @Slot()
    def _on_poll(self) -> None:
        if self.running is not None:
            self.active.setText(str(self.running.server.active_requests))
            pool = self.running.pool
            if pool is None:
                return
            self.busy.setText(self.busy_words(pool.primary_figures()))
            also = [e.served for e in pool.loaded_engines()]
            self.also_loaded.setText(", ".join(also) or (self.tr("none yet") if pool.settings.load_on_demand else ""))
            if pool.warnings:  # a model loaded past the budget: the risk, in words
                self.message.setText(pool.warnings[-1])

    @Slot()
    def _on_copy_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.address.text())
        self.copy_button.setText(self.tr("Copied"))
        QTimer.singleShot(1500, self._on_copy_feedback_over)

    @Slot()
    def _on_copy_feedback_over(self) -> None:
        self.copy_button.setText(self.tr("Copy"))

    @property
    def url(self) -> str:
        return self.address.text()

    @property
    def engine_pid(self) -> int | None:
        return self.engine.pid if self.running is not None else None

    def shutdown(self) -> None:
        """On quit: stop the server now (blocking, briefly; the window is going)."""
        running, self.running = self.running, None
        self._poll.stop()
        if running is not None:
            running.server.stop()
