"""The tool loop, Qt-free, one for ``quantdesk chat --tools`` and the Chat: the engine's reply made tool calls
(``Done.tool_calls``, read in the model's own syntax by the chat-format layer); each call is approved (asked of the
user unless the tool is always allowed), run through the ToolBox, and answered with a ``tool`` message; the
conversation goes back to the model, up to a step limit.

``ToolStep`` is one step as a state machine: its calls in order, each answered (a tool the model was not given at
once, in the ToolBox's words), asked for (``must_ask``, ``decide``), run (``start``, ``run``, ``finish``) or stopped
(``stop``). The two faces drive the same machine: ``ToolLoop.step`` blocks on it for the terminal (the approval a
callback, the call on the caller's thread); the Chat's ``app.ui.chat.chat_tools.ChatTools`` advances it on signals (the
approval a card the user answers whenever they like, the call on a thread of its own). Both read the calls' answers
from it: ``StepResult`` for the next prompt, ``cards`` for the chat store.

The caller owns the engine and the conversation: it appends ``StepResult.assistant`` and ``StepResult.messages``
to the history and asks the engine again while ``ToolLoop.can_continue()``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.chats.messages import ToolCard
from app.datatypes import Done, Message, ToolCall
from app.mcp.approvals import ALWAYS_ALLOW, DENY, Approvals, Decision
from app.mcp.client import ToolBox, ToolOutcome, ToolSpec

DEFAULT_MAX_STEPS = 8  # replies with tool calls in one turn before the loop stops asking the model again
DENIED = "the user denied this call"
STOPPED = "The tool call was stopped by the user before it finished."

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
    cards: tuple[ToolCard, ...] = ()  # the calls as the chat store keeps them (ToolStep.cards)

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


def calls_tools(done: Done) -> bool:
    """Whether a reply starts a tool step: it made calls and was not stopped (both faces' rule)."""
    return bool(done.tool_calls) and done.stats.stop_reason != "cancelled"


@dataclass
class ToolStep:
    """One reply's tool calls being answered, in order: the state machine both faces drive (see the module's words).

    ``specs`` are the tools the model was given, by the function name it calls them by; a call to any other is
    answered at once, in the ToolBox's words, and nobody is asked. ``runs`` holds each answered call's run, by call
    id; ``running`` the call id running now (its ``started`` time)."""

    box: ToolBox
    calls: tuple[ToolCall, ...]
    specs: dict[str, ToolSpec]
    approvals: Approvals | None = None
    allow_all: bool = False
    timeout_s: float | None = None
    runs: dict[str, ToolRun] = field(default_factory=dict)
    running: str = ""
    started: float = 0.0
    _decisions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        servers = sorted({spec.server for spec in self.specs.values()})
        for call in self.calls:
            if call.name not in self.specs:  # the ToolBox's words for it (no server is asked: nothing to wait for)
                self.runs[call.id] = ToolRun(call, "", self.box.call_function(call.name, call.arguments,
                                                                              servers=servers), 0.0)

    def spec(self, call: ToolCall) -> ToolSpec | None:
        return self.specs.get(call.name)

    def call(self, call_id: str) -> ToolCall:
        return next(c for c in self.calls if c.id == call_id)

    def pending(self) -> ToolCall | None:
        """The first call without its answer; None once every call has one (the step is over)."""
        return next((c for c in self.calls if c.id not in self.runs), None)

    def must_ask(self, call: ToolCall) -> bool:
        """Whether the user is asked before the call runs (not when its tool is always allowed, nor with
        ``allow_all``)."""
        spec = self.specs[call.name]
        return not self.allow_all and not (self.approvals is not None and
                                           self.approvals.is_always(spec.server, spec.name))

    def decide(self, call_id: str, decision: str) -> bool:
        """The user's answer ("once", "always": remembered for the tool, "deny": answered as denied, never run);
        returns whether the call runs."""
        call = self.call(call_id)
        spec = self.specs[call.name]
        if decision == DENY:
            outcome = ToolOutcome(text=DENIED, is_error=True, kind="denied",
                                  sentence=f"{spec.server}/{spec.name}: denied")
            self.runs[call_id] = ToolRun(call, DENY, outcome, 0.0, spec)
            return False
        if decision == ALWAYS_ALLOW and self.approvals is not None:
            self.approvals.allow_always(spec.server, spec.name)
        self._decisions[call_id] = decision
        return True

    def start(self, call_id: str) -> ToolCall:
        """The call starts (its time counts from here, not from the question)."""
        self._decisions.setdefault(call_id, "allowed")
        self.running, self.started = call_id, time.monotonic()
        return self.call(call_id)

    def run(self, call_id: str, cancel: threading.Event | None = None) -> ToolOutcome:
        """The started call through the ToolBox; on any thread (the ToolBox is), never raises."""
        spec = self.specs[self.call(call_id).name]
        return self.box.call(spec.server, spec.name, self.call(call_id).arguments, timeout_s=self.timeout_s,
                             cancel=cancel)

    def finish(self, call_id: str, outcome: ToolOutcome) -> ToolRun:
        call = self.call(call_id)
        seconds = time.monotonic() - self.started if self.running == call_id else 0.0
        run = self.runs[call_id] = ToolRun(call, self._decisions.get(call_id, ""), outcome, seconds, self.spec(call))
        if self.running == call_id:
            self.running = ""
        return run

    def not_run(self, call_id: str) -> ToolRun:
        """A call the user's Stop came before: answered as not run."""
        call = self.call(call_id)
        outcome = ToolOutcome.failure("cancelled", f"{call.name} was not run: the user stopped the reply",
                                      "the user stopped this call")
        run = self.runs[call_id] = ToolRun(call, "", outcome, 0.0, self.spec(call))
        return run

    def stop(self) -> ToolRun | None:
        """Stop during a call: it is answered as stopped now (the caller cancels it); the calls not run yet stay
        unanswered. Returns the stopped call's run, None when none was running."""
        if not self.running:
            return None
        return self.finish(self.running, ToolOutcome.failure("cancelled", STOPPED))

    def result(self, done: Done, limit_reached: bool = False) -> StepResult:
        return StepResult(assistant_message(done), tuple(self.runs[c.id] for c in self.calls if c.id in self.runs),
                          limit_reached=limit_reached, cards=tuple(self.cards))

    @property
    def cards(self) -> list[ToolCard]:
        """The calls as the chat store keeps them with the reply (``ToolCard``), answered or not."""
        return [self._card(call) for call in self.calls]

    def _card(self, call: ToolCall) -> ToolCard:
        run, spec = self.runs.get(call.id), self.spec(call)
        if spec is None:
            outcome = run.outcome if run is not None else ToolOutcome("")
            return ToolCard(call.id, call.name, call.arguments, result=outcome.text, is_error=outcome.is_error,
                            decision="allowed", seconds=0.0)
        card = ToolCard(call.id, spec.name, call.arguments, server=spec.server, function=call.name,
                        decision="allowed" if self.running == call.id else "")
        if run is None:
            return card
        if run.decision == DENY:
            return replace(card, decision="denied", result=DENIED, is_error=True)
        return replace(card, decision="allowed", result=run.outcome.text, is_error=run.outcome.is_error,
                       cut=run.outcome.cut, seconds=round(run.seconds, 3))


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

    def begin(self, calls: tuple[ToolCall, ...]) -> ToolStep:
        """A step of the turn: its machine over every tool of the loop's servers."""
        self.steps += 1
        specs = {spec.function_name: spec for spec in self.box.tools(self.servers)}
        return ToolStep(self.box, calls, specs, self.approvals, self.allow_all, self.timeout_s)

    def step(self, done: Done, *, cancel: threading.Event | None = None,
             on_start: Callable[[ToolCall, ToolSpec | None], None] | None = None,
             on_finish: Callable[[ToolRun], None] | None = None) -> StepResult:
        """Run the calls of ``done`` in order, blocking: the approval asked through ``approve``. After Stop
        (``cancel``) the calls not yet run are answered as stopped, so every call the model made has its answer."""
        machine = self.begin(done.tool_calls)
        for call in done.tool_calls:
            if on_start is not None:
                on_start(call, machine.spec(call))
            if call.id not in machine.runs:
                self._answer(machine, call, cancel)
            if on_finish is not None:
                on_finish(machine.runs[call.id])
        return machine.result(done, limit_reached=not self.can_continue())

    def _answer(self, machine: ToolStep, call: ToolCall, cancel: threading.Event | None) -> None:
        if cancel is not None and cancel.is_set():
            machine.not_run(call.id)
            return
        if machine.must_ask(call):
            spec = machine.specs[call.name]
            decision = self.approve(spec, call, call_arguments(call)) if self.approve is not None else DENY
            if not machine.decide(call.id, decision):
                return
        machine.start(call.id)
        machine.finish(call.id, machine.run(call.id, cancel))


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
