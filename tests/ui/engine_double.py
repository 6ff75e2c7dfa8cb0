"""Stand-ins for app.engine.client.EngineClient (EngineClientLike) with the same calls and events, for
tests that must steer the engine exactly (hold a reply mid-way, crash on cue). They run in-process on the
bridge's worker thread; the real client runs a child process (see tests/ui/chat/test_chat_real_engine.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from app.errors import EngineCrashed, EngineError
from app.datatypes import Done, GenerationStats, LoadSettings, Loaded, Message, SamplingSettings, Token


class EngineDouble:
    def __init__(self, reply: Sequence[str] = ("Hello", ",", " world", "!"), *, hold_after: int | None = None,
                 crash_after: int | None = None, fail_load: str = "", reasoning: Sequence[str] = ()) -> None:
        self.reply = list(reply)
        self.reasoning = list(reasoning)  # a thinking model's thinking, one token each, before the reply
        self.hold_after = hold_after  # tokens to send (thinking included) before waiting for `release`
        self.crash_after = crash_after  # tokens to send before the "process" dies
        self.fail_load = fail_load
        self.release = threading.Event()
        self.holding = threading.Event()  # set while generation waits at the hold point
        self._cancelled = threading.Event()
        self.started = self.closed = self.crashed = False
        self.loaded: Loaded | None = None
        self.pid: int | None = None  # no process to watch
        self.loads: list[tuple[str, LoadSettings]] = []
        self.load_steps: tuple[float, ...] = (0.0, 0.5, 1.0)  # progress reported while loading
        self.requests: list[list[Message]] = []
        self.samplings: list[SamplingSettings] = []  # what each generation was asked with

    @property
    def alive(self) -> bool:
        return self.started and not (self.closed or self.crashed)

    revivable = False  # the crash guard is EngineClient's: these crashes stand

    def start(self) -> EngineDouble:
        self.started = True
        return self

    def load(self, model_path: str, settings: LoadSettings, *, backend=None, on_progress=None) -> Loaded:
        self.started = True  # as EngineClient.load starts its host
        if self.fail_load:
            raise EngineError(self.fail_load, kind="load")
        self.loads.append((model_path, settings))
        for fraction in self.load_steps:
            if on_progress:
                on_progress(fraction)
        vision = {"vision": {"projector": Path(settings.mmproj).name, "image_tokens": 16}} if settings.mmproj else {}
        self.loaded = Loaded("double", model_path, settings.n_ctx, 4, 0, False, {"cpu": 123 * 2**20}, 12.5,
                             details=vision)  # as llama.cpp reports a projector it loaded
        return self.loaded

    def generate(self, messages: Sequence[Message], sampling: SamplingSettings, request_id: str = "r1",
                 on_wait=None, events_every_s: float | None = None) -> Iterator[Token | Done]:
        self.requests.append(list(messages))
        self.samplings.append(sampling)
        self._cancelled.clear()
        sent: list[str] = []
        thought: list[str] = []
        reason = "eos"
        pieces = [("", p) for p in self.reasoning] + [(p, "") for p in self.reply]
        for i, (piece, thinking) in enumerate(pieces):
            if self.crash_after is not None and i == self.crash_after:
                self.crashed = True
                self.loaded = None
                raise EngineCrashed("The engine stopped unexpectedly (killed by signal 9).",
                                    returncode=-9, stderr_tail=("Killed",), phase="generate")
            if self.hold_after is not None and i == self.hold_after:
                self.holding.set()
                self.release.wait(timeout=120)
            if self._cancelled.is_set():
                reason = "cancelled"
                break
            (thought if thinking else sent).append(piece or thinking)
            # the thinking's figures so far, as the engine's meter gives them with each token
            yield Token(request_id, piece, 10.0 + 5 * i, reasoning=thinking, reasoning_tokens=len(thought),
                        reasoning_ms=5.0 * max(len(thought) - 1, 0),
                        first_answer_ms=10.0 + 5 * len(thought) if sent else 0.0)
        n = len(sent) + len(thought)
        yield Done(request_id, "".join(sent), GenerationStats(
            prompt_tokens=7, prompt_ms=3.5, ttft_ms=10.0, generated_tokens=n, decode_ms=5.0 * max(n - 1, 0),
            stop_reason=reason, peak_memory_bytes=200 * 2**20, reasoning_tokens=len(thought),
            reasoning_ms=5.0 * max(len(thought) - 1, 0), first_answer_ms=10.0 + 5 * len(thought) if sent else 0.0),
            reasoning="".join(thought))

    def cancel(self, request_id: str | None = None) -> None:
        self._cancelled.set()
        self.release.set()

    def close(self) -> None:
        self.closed = True


class SuccessiveEngines:
    """One client over a series of engine doubles, as EngineClient is one client over a series of host
    processes: ``start()`` while none is alive (at first, after a crash) moves on to the next double."""

    def __init__(self, *engines: EngineDouble) -> None:
        self._engines = list(engines)
        self.current: EngineDouble | None = None

    @property
    def alive(self) -> bool:
        return self.current is not None and self.current.alive

    revivable = False

    @property
    def pid(self) -> int | None:
        return None

    @property
    def loaded(self) -> Loaded | None:
        return self.current.loaded if self.current is not None else None

    def start(self) -> SuccessiveEngines:
        if not self.alive:
            if self.current is not None:
                self.current.close()
            self.current = self._engines.pop(0).start()
        return self

    def load(self, model_path: str, settings: LoadSettings, *, backend=None, on_progress=None) -> Loaded:
        return self.start().current.load(model_path, settings, on_progress=on_progress)

    def generate(self, messages, sampling, request_id: str = "r1", on_wait=None,
                 events_every_s=None) -> Iterator[Token | Done]:
        return self.start().current.generate(messages, sampling, request_id, on_wait, events_every_s)

    def cancel(self, request_id: str | None = None) -> None:
        if self.current is not None:
            self.current.cancel(request_id)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
