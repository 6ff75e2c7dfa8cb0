"""The tool loop's step, Qt-free, shared by ``quantdesk chat --tools`` and the Chat: the engine's reply made tool
calls (``Done.tool_calls``, read in the model's own syntax by the chat-format layer); each call is approved (the
approval callback asks the user unless the tool is always allowed), run through the ToolBox, and answered with a
``tool`` message; the conversation goes back to the model, up to a step limit.

The caller owns the engine and the conversation: it appends ``StepResult.assistant`` and ``StepResult.messages``
to the history and asks the engine again while ``ToolLoop.can_continue()``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.datatypes import Done, Message, ToolCall
from app.mcp.approvals import ALWAYS_ALLOW, DENY, Approvals, Decision
from app.mcp.client import ToolBox, ToolOutcome, ToolSpec

DEFAULT_MAX_STEPS = 8  # replies with tool calls in one turn before the loop stops asking the model again
DENIED = "the user denied this call"

# Asked once per call that is not always allowed: the tool, the call, its arguments as an object ({} where the
# model's JSON could not be read); answers "once", "always" or "deny".
Approve = Callable[[ToolSpec, ToolCall, dict[str, Any]], Decision]


@dataclass(frozen=True)
class ToolRun:
    """One call of a step: what the model asked, what was decided ("once", "always", "deny"; "allowed" when the
    tool was always allowed already; "" when no approval was asked: no such tool, or the step limit), what came
    of it, and how long it took."""

    call: ToolCall
    decision: str
    outcome: ToolOutcome
    seconds: float
    spec: ToolSpec | None = None

    @property
    def server(self) -> str:
        return self.spec.server if self.spec else ""

    @property
    def tool(self) -> str:
        return self.spec.name if self.spec else self.call.name

    def message(self) -> Message:
        """The ``tool`` message that answers the call, for the model."""
        return Message("tool", self.outcome.text, tool_call_id=self.call.id, name=self.call.name)


@dataclass(frozen=True)
class StepResult:
    assistant: Message  # the reply that made the calls, as the next prompt carries it
    runs: tuple[ToolRun, ...]
    limit_reached: bool = False  # the step limit: the model is not asked again

    @property
    def messages(self) -> list[Message]:
        return [run.message() for run in self.runs]

    @property
    def cancelled(self) -> bool:
        return any(run.outcome.kind == "cancelled" for run in self.runs)


def call_arguments(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as an object; {} where the model's JSON is not an object."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def assistant_message(done: Done) -> Message:
    """The reply that made the calls, as chat templates read it back: its calls with arguments as objects."""
    calls = tuple({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": call_arguments(c)}}
                  for c in done.tool_calls)
    return Message("assistant", done.text, tool_calls=calls, reasoning=done.reasoning)


@dataclass
class ToolLoop:
    """One turn's tool loop over ``box``'s tools of ``servers``. ``approve`` asks the user (None: every call not
    always allowed is denied); ``allow_all`` skips the asking (``--allow-tools``)."""

    box: ToolBox
    servers: Sequence[str]
    approve: Approve | None = None
    approvals: Approvals | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    allow_all: bool = False
    timeout_s: float | None = None  # a call's limit; None: each server's own
    steps: int = field(default=0, init=False)

    def tools(self) -> tuple[dict[str, Any], ...]:
        """The ``tools`` the engine's SamplingSettings take: every tool of the loop's servers."""
        return tuple(spec.as_openai_function() for spec in self.box.tools(self.servers))

    def can_continue(self) -> bool:
        return self.steps < self.max_steps

    def reset(self) -> None:
        """A new user turn: the step count starts again."""
        self.steps = 0

    def step(self, done: Done, *, cancel: threading.Event | None = None,
             on_start: Callable[[ToolCall, ToolSpec | None], None] | None = None,
             on_finish: Callable[[ToolRun], None] | None = None) -> StepResult:
        """Run the calls of ``done`` in order. After Stop (``cancel``) the calls not yet run are answered as
        stopped, so every call the model made has its answer."""
        self.steps += 1
        runs = []
        for call in done.tool_calls:
            if on_start is not None:
                on_start(call, self.box.find(call.name, self.servers))
            run = self._run(call, cancel)
            runs.append(run)
            if on_finish is not None:
                on_finish(run)
        return StepResult(assistant_message(done), tuple(runs), limit_reached=not self.can_continue())

    def _run(self, call: ToolCall, cancel: threading.Event | None) -> ToolRun:
        started = time.monotonic()
        spec = self.box.find(call.name, self.servers)
        if cancel is not None and cancel.is_set():
            outcome = ToolOutcome.failure("cancelled", f"{call.name} was not run: the user stopped the reply",
                                          "the user stopped this call")
            return ToolRun(call, "", outcome, 0.0, spec)
        if spec is None:  # the model named a tool that is not there: it is told, nobody is asked
            return ToolRun(call, "", self.box.call_function(call.name, call.arguments, servers=self.servers),
                           time.monotonic() - started, None)
        decision = self._decide(spec, call)
        if decision == DENY:
            outcome = ToolOutcome(text=DENIED, is_error=True, kind="denied",
                                  sentence=f"{spec.server}/{spec.name}: denied")
            return ToolRun(call, decision, outcome, time.monotonic() - started, spec)
        started = time.monotonic()  # the time the user took to decide is not the tool's
        outcome = self.box.call(spec.server, spec.name, call.arguments, timeout_s=self.timeout_s, cancel=cancel)
        return ToolRun(call, decision, outcome, time.monotonic() - started, spec)

    def _decide(self, spec: ToolSpec, call: ToolCall) -> str:
        if self.allow_all:
            return "allowed"
        if self.approvals is not None and self.approvals.is_always(spec.server, spec.name):
            return "allowed"
        if self.approve is None:
            return DENY
        decision = self.approve(spec, call, call_arguments(call))
        if decision == ALWAYS_ALLOW and self.approvals is not None:
            self.approvals.allow_always(spec.server, spec.name)
        return decision


def tool_support_refusal(loaded_details: dict[str, Any]) -> str:
    """"" when the loaded model's chat template takes tools (Loaded.details' ``tool_format``, set by the
    chat-format layer), else the sentence a user reads."""
    if loaded_details.get("tool_format"):
        return ""
    return ("this model's chat template has no tool support, so it cannot be given tools: chat without tools, or "
            "load a model whose template declares them (Qwen 2.5 and later, Llama 3.1 and later, Mistral, …)")


def fold(text: str, lines: int = 4, width: int = 160) -> str:
    """A result folded to a few lines for a terminal or a card's closed state."""
    rows = text.strip().splitlines() or [""]
    shown = [r if len(r) <= width else r[:width] + "…" for r in rows[:lines]]
    if len(rows) > lines:
        shown.append(f"… ({len(rows) - lines} more lines)")
    return "\n".join(shown)


def servers_of(names: Iterable[str] | str) -> list[str]:
    """``--tools a,b`` as a list of server names."""
    items = names.split(",") if isinstance(names, str) else list(names)
    return [n.strip() for n in items if n.strip()]
