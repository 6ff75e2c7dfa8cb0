"""``quantdesk chat --tools SERVER[,SERVER]``: the tool loop (app/mcp/loop.py) in the terminal. Each call is shown
with its arguments in full and asked for (y: once, a: always this tool, n: deny; ``--allow-tools`` skips asking);
its result is printed folded to a few lines; Ctrl-C during a call stops it (the MCP request is cancelled) and the
turn. Each reply of the turn reads what the chat's overflow policy leaves of the history (app/engine/turn.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from app.datatypes import Done, Message, SamplingSettings, ToolCall
from app.errors import EngineError, QuantDeskError
from app.mcp.approvals import ALLOW_ONCE, ALWAYS_ALLOW, DENY, Approvals, Decision
from app.mcp.client import ToolBox, ToolSpec
from app.mcp.loop import StepResult, ToolLoop, ToolRun, fold, servers_of, tool_support_refusal

ANSWERS: dict[str, Decision] = {"y": ALLOW_ONCE, "yes": ALLOW_ONCE, "a": ALWAYS_ALLOW, "always": ALWAYS_ALLOW,
                                "n": DENY, "no": DENY}


class TerminalTools:
    """The MCP servers of one ``quantdesk chat`` run and its tool loop."""

    def __init__(self, box: ToolBox, servers: list[str], args: argparse.Namespace) -> None:
        self.box, self.args = box, args
        self.quiet = bool(args.json)
        self.cancel = threading.Event()
        self.loop = ToolLoop(box, servers, approve=self._ask, approvals=Approvals(),
                             max_steps=max(1, args.max_tool_steps), allow_all=args.allow_tools)
        self.runs: list[ToolRun] = []
        self.forced: SamplingSettings | None = None  # the first reply's sampling when a call is required

    @classmethod
    def start(cls, args: argparse.Namespace) -> TerminalTools:
        """Connect to the servers --tools names; a sentence (and nothing left running) where one cannot be used."""
        from app.commands.mcp import _ask_to_confirm
        from app.mcp.config import McpServers

        names = servers_of(args.tools)
        store = McpServers()
        configs = [store.get(name) for name in names]
        for config in configs:
            if config.disabled:
                raise QuantDeskError(f"the MCP server {config.name} is disabled",
                                     f"enable it with: quantdesk mcp enable {config.name}")
            if config.needs_confirmation:
                if not _ask_to_confirm(config, required=True):
                    raise QuantDeskError(f"{config.name} was not started")
                store.confirm(config.name)
        box = ToolBox(headers_for=store.request_headers)
        try:
            for config in configs:
                status = box.connect(store.get(config.name))
                if status.state != "ready":
                    raise QuantDeskError(status.sentence, f"check it with: quantdesk mcp test {config.name}")
        except BaseException:
            box.close()
            raise
        tools = cls(box, names, args)
        if not args.json:
            specs = box.tools(names)
            print(f"tools: {len(specs)} from {', '.join(names)}", file=sys.stderr)
        return tools

    def close(self) -> None:
        self.box.close()

    def prepare(self, loaded: Any, sampling: SamplingSettings) -> SamplingSettings:
        """The sampling with the servers' tools; a model whose template has no tool support is refused in words."""
        if refusal := tool_support_refusal(loaded.details):
            raise EngineError(refusal, "chat without --tools", kind="template")
        tools = self.loop.tools()
        choice = self.args.tool_choice
        if choice in ("auto", "none"):
            return dataclasses.replace(sampling, tools=tools, tool_choice=choice)
        base = dataclasses.replace(sampling, tools=tools, tool_choice="auto")
        if choice == "required":
            self.forced = dataclasses.replace(base, tool_choice="required")
        else:  # a tool's name: the only tool of the first reply, and required (as the server's named tool_choice)
            named = tuple(t for t in tools if t["function"]["name"] == choice)
            if not named:
                known = ", ".join(t["function"]["name"] for t in tools)
                raise QuantDeskError(f"--tool-choice {choice!r} names no tool of {self.args.tools}",
                                     f"the tools are: {known}")
            self.forced = dataclasses.replace(base, tools=named, tool_choice="required")
        return base

    def turn(self, reply: Callable[[SamplingSettings], Done], history: list[Message], sampling: SamplingSettings
             ) -> Done:
        """One user turn: the reply (``reply``: the chat's own, app.commands.engine._turn's, which sends what the
        conversation's overflow policy leaves of ``history``, with the documents' passages), and while it calls
        tools, the calls and the next reply, up to the step limit (then the model answers without tools). The
        history gets each reply with calls and the calls' answers."""
        self.loop.reset()
        done = reply(self.forced or sampling)
        while done.tool_calls and done.stats.stop_reason != "cancelled":
            result = self._step(done)
            history.append(result.assistant)
            history.extend(result.messages)
            if result.cancelled:
                if not self.quiet:
                    print("(the tool call was stopped; the turn ends here)", file=sys.stderr)
                return done
            # at the step limit the model answers in words: no tools in its prompt
            following = dataclasses.replace(sampling, tools=(), tool_choice="auto") if result.limit_reached \
                else sampling
            if result.limit_reached and not self.quiet:
                print(f"(the step limit of {self.loop.max_steps} is reached: the model answers without tools)",
                      file=sys.stderr)
            done = reply(following)
        return done

    def _step(self, done: Done) -> StepResult:
        """The step, with Ctrl-C setting the cancel event (so the running call is cancelled, not abandoned)."""
        self.cancel.clear()
        previous = signal.signal(signal.SIGINT, lambda *_: self.cancel.set())
        try:
            result = self.loop.step(done, cancel=self.cancel, on_start=self._on_start, on_finish=self._on_finish)
        finally:
            signal.signal(signal.SIGINT, previous)
        self.runs.extend(result.runs)
        return result

    def _on_start(self, call: ToolCall, spec: ToolSpec | None) -> None:
        if self.quiet:
            return
        where = f"{spec.server}/{spec.name}" if spec else call.name
        print(f"\n→ {where} {_shown_arguments(call)}", flush=True)

    def _ask(self, spec: ToolSpec, call: ToolCall, arguments: dict[str, Any]) -> Decision:
        if self.cancel.is_set():
            return DENY
        # the question on stderr, so that --json's stdout stays one JSON object
        print(f"  allow {spec.server}/{spec.name}? [y] once, [a] always this tool, [n] deny: ", end="",
              file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
        if not answer:
            print("(no answer: denied)", file=sys.stderr)
            return DENY
        decision = ANSWERS.get(answer.strip().lower(), DENY)
        if self.cancel.is_set():
            return DENY
        return decision

    def _on_finish(self, run: ToolRun) -> None:
        if self.quiet:
            return
        outcome = run.outcome
        if outcome.kind == "denied":
            print("← denied: the model is told", flush=True)
            return
        if outcome.is_error:
            print(f"← {outcome.sentence or outcome.text}", flush=True)
            return
        head = f"← {run.seconds:.1f} s" + (f" · {outcome.sentence}" if outcome.sentence else "")
        body = "\n".join(f"  {line}" for line in fold(outcome.text).splitlines())
        print(f"{head}\n{body}", flush=True)

    def described(self) -> list[dict[str, Any]]:
        """The turn's calls for --json."""
        return [{"server": r.server, "tool": r.tool, "function": r.call.name, "id": r.call.id,
                 "arguments": r.call.arguments, "decision": r.decision, "kind": r.outcome.kind,
                 "is_error": r.outcome.is_error, "text": r.outcome.text, "sentence": r.outcome.sentence,
                 "cut": r.outcome.cut, "structured": r.outcome.structured, "seconds": round(r.seconds, 3)}
                for r in self.runs]


def _shown_arguments(call: ToolCall) -> str:
    """The arguments in full (the user approves what runs), compact; JSON the model got wrong as it wrote it."""
    try:
        text = json.dumps(json.loads(call.arguments or "{}"), ensure_ascii=False)
    except ValueError:
        text = call.arguments
    return text if len(text) <= 4000 else text[:4000] + f"… ({len(text):,} characters)"
