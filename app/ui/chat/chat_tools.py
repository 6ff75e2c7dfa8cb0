"""The Chat's tools: the MCP servers the user added (``mcp.json``, app/mcp), connected off the GUI thread, the tools
each chat's model sees, and the tool step of a reply: the model's calls shown as cards, each approved (unless the
user always allows that tool), run on a worker of its own, its result saved with the reply; then the page goes on
with the generation.

The step is ``app.mcp.loop.ToolStep``, the state machine ``quantdesk chat --tools`` drives too (its order, step
limit, approvals, words and cards); here the approval is a card the user answers whenever they like, so the step
advances on signals instead of blocking a thread on a callback. ``ChatTools`` knows nothing of bubbles or the engine:
the page hands it a reply's calls (``begin_step``) and hears ``cards_changed`` (save them, show them),
``approval_needed`` (ask in the card) and ``step_done`` (continue). The ToolBox (app/mcp/client) is Qt-free and
synchronous; every call into it that may wait on a server runs on a ``BackgroundCall`` thread, never on the GUI
thread and never on the engine bridge's worker (that one is the engine's). Stop sets the running call's cancel flag:
the ToolBox ends it (its request cancelled, a stuck stdio server stopped) within a fraction of a second, and the page
ends the reply at once without waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot

from app.datatypes import ToolCall
from app.mcp.client import ToolOutcome
from app.mcp.loop import ToolStep
from app.ui.common.background import BackgroundCall, Job, sentence

if TYPE_CHECKING:
    from app.mcp.client import ServerStatus, ToolBox, ToolSpec
    from app.mcp.config import McpServers


def _tr(text: str) -> str:
    return QCoreApplication.translate("chat_tools", text)


@dataclass(kw_only=True)
class ChatToolStep(ToolStep):
    """The step of one reply of the Chat: its conversation and message, which step of the reply, and the worker
    running its call."""

    conversation_id: int
    message_id: int
    step: int = 0
    ticket: int = 0  # the BackgroundCall job running the call


class ChatTools(QObject):
    servers_changed = Signal()  # a server connected, failed or was removed: Settings → Tools and the chat settings
    cards_changed = Signal(object)  # ToolStep: save its cards, show them
    approval_needed = Signal(object, str, str)  # ToolStep, call id, the tool's description (its server's words)
    step_done = Signal(object)  # ToolStep: every call answered; the page goes on with the generation
    problem = Signal(str)  # a sentence for the chat (a server that failed during a call, …)

    def __init__(self, servers: McpServers | None = None, toolbox: ToolBox | None = None,
                 approvals: Any = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        from app.mcp.approvals import Approvals
        from app.mcp.client import ToolBox
        from app.mcp.config import McpServers

        self.servers = servers or McpServers()
        self.approvals = approvals if approvals is not None else Approvals()
        self.toolbox = toolbox or ToolBox(headers_for=self.servers.request_headers)
        from app.mcp.loop import DEFAULT_MAX_STEPS

        self.max_steps = DEFAULT_MAX_STEPS  # tool steps in one reply at most, as `quantdesk chat --tools`
        self.statuses: dict[str, ServerStatus] = {}  # by server name, as the last connect left them
        self.connecting: set[str] = set()
        self.step: ChatToolStep | None = None
        self._connects = BackgroundCall("mcp-connect")
        self._connects.succeeded.connect(self._on_connected)
        self._connects.failed.connect(self._on_connect_failed)
        self._calls = BackgroundCall("mcp-call")
        self._calls.succeeded.connect(self._on_call_done)
        self._calls.failed.connect(self._on_call_failed)

    # --- servers -----------------------------------------------------------------------------------------------

    def configs(self) -> list[Any]:
        """The servers in mcp.json ([] with the sentence in ``problem`` when the file cannot be read)."""
        from app.mcp.config import McpConfigError

        try:
            return self.servers.all()
        except McpConfigError as exc:
            self.problem.emit(str(exc))
            return []

    def connect_all(self) -> None:
        """Connect every server that is on, confirmed and not connected yet, each on a thread of its own."""
        for config in self.configs():
            state = self.statuses.get(config.name)
            if config.disabled or config.needs_confirmation or config.name in self.connecting \
                    or state is not None and state.state == "ready":
                continue
            self.connect_server(config)

    def connect_server(self, config: Any) -> None:
        """(Re)connect one server. A stdio command not confirmed is never started."""
        if config.needs_confirmation:
            return
        self.connecting.add(config.name)
        self._connects.start(self._connect, config)
        self.servers_changed.emit()

    def _connect(self, config: Any) -> ServerStatus:  # on a BackgroundCall thread
        return self.toolbox.connect(config)

    @Slot(int, object)
    def _on_connected(self, _ticket: int, status: ServerStatus) -> None:
        self.connecting.discard(status.name)
        self.statuses[status.name] = status
        self.servers_changed.emit()

    @Slot(int, object)
    def _on_connect_failed(self, _ticket: int, error: BaseException) -> None:
        self.connecting.clear()
        self.problem.emit(sentence(error))
        self.servers_changed.emit()

    def disconnect_server(self, name: str) -> None:
        """A removed or switched-off server: its connection closed (its process stopped) off the GUI thread."""
        self.statuses.pop(name, None)
        BackgroundCall("mcp-close").start(self.toolbox.close, name)
        self.servers_changed.emit()

    def status(self, name: str) -> ServerStatus | None:
        live = self.toolbox.status(name) if name in self.statuses else None
        if live is not None and live.state != "off":
            self.statuses[name] = live  # a server that died since it connected
        return self.statuses.get(name)

    @property
    def ready(self) -> bool:
        """No connection is being made."""
        return not self.connecting

    # --- what a chat's model sees --------------------------------------------------------------------------

    def specs(self, chosen: tuple[str, ...] | None) -> list[ToolSpec]:
        """The tools of the connected servers a chat chose (None: every server)."""
        names = [c.name for c in self.configs() if not c.disabled and (chosen is None or c.name in chosen)]
        return self.toolbox.tools(names) if names else []

    # --- one tool step -------------------------------------------------------------------------------------

    def begin_step(self, conversation_id: int, message_id: int, calls: tuple[ToolCall, ...], step: int,
                   specs: list[ToolSpec]) -> ChatToolStep:
        """The model called tools: a card per call (a call to a tool it was not given is answered at once, as an
        error the model reads), then each call asks for approval or runs."""
        self.step = ChatToolStep(self.toolbox, calls, {spec.function_name: spec for spec in specs}, self.approvals,
                                 conversation_id=conversation_id, message_id=message_id, step=step)
        self.cards_changed.emit(self.step)
        self._next()
        return self.step

    def _next(self) -> None:
        step = self.step
        if step is None:
            return
        call = step.pending()
        if call is None:
            self.step = None
            self.step_done.emit(step)
        elif step.must_ask(call):
            self.approval_needed.emit(step, call.id, step.specs[call.name].description)
        else:
            self._run(call.id)

    def answer(self, call_id: str, answer: str) -> None:
        """The user's answer to a call's approval: "once", "always" (remembered for the tool) or "deny"."""
        step = self.step
        if step is None or step.running or call_id in step.runs or call_id not in {c.id for c in step.calls}:
            return
        if step.decide(call_id, answer):
            self._run(call_id)
            return
        self.cards_changed.emit(step)  # denied: the model is told, as `quantdesk chat --tools` tells it
        self._next()

    def _run(self, call_id: str) -> None:
        step = self.step
        assert step is not None
        step.start(call_id)
        self.cards_changed.emit(step)
        step.ticket = self._calls.start_job(self._call, step, call_id)

    @staticmethod
    def _call(job: Job, step: ChatToolStep, call_id: str) -> ToolOutcome:  # on a BackgroundCall thread
        return step.run(call_id, cancel=job.cancelled)

    @Slot(int, object)
    def _on_call_done(self, ticket: int, outcome: ToolOutcome) -> None:
        step = self.step
        if step is None or ticket != step.ticket:
            return  # a call the user stopped: the reply is over
        run = step.finish(step.running, outcome)
        self.cards_changed.emit(step)
        if outcome.sentence and outcome.kind not in ("tool_error", "ok"):
            # the server's trouble, said to the user; the model got it as the call's result and goes on
            self.problem.emit(_tr("{tool}: {sentence}").format(tool=f"{run.server}/{run.tool}",
                                                                sentence=outcome.sentence))
        self._next()

    @Slot(int, object)
    def _on_call_failed(self, ticket: int, error: BaseException) -> None:
        step = self.step
        if step is None or ticket != step.ticket:
            return
        step.finish(step.running, ToolOutcome.failure("failed", sentence(error)))
        self.cards_changed.emit(step)
        self.problem.emit(sentence(error))
        self._next()

    def stop(self) -> ChatToolStep | None:
        """Stop: the running call is cancelled (the ToolBox ends its request within a fraction of a second), the
        calls not run yet stay unanswered (the model is told next turn that they were not run). Returns the step
        as it ended, or None when none was under way."""
        step, self.step = self.step, None
        if step is None:
            return None
        if step.running:
            self._calls.cancel(step.ticket)
            step.stop()
        self.cards_changed.emit(step)
        return step

    def shutdown(self) -> None:
        """The window closes: the running call is cancelled and every server process stopped (again: nothing)."""
        self.stop()
        self.toolbox.close()
        self.statuses.clear()
