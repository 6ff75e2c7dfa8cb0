"""The Qt bridge over the engine client: results arrive as GUI-thread signals, tokens coalesced."""

from __future__ import annotations

import threading

import pytest

from app.errors import EngineCrashed, EngineError
from app.ui.chat.engine_bridge import EngineBridge, TokenBuffer, TokenChunk
from app.datatypes import Done, LoadSettings, Loaded, Message, SamplingSettings, Token
from tests.ui.engine_double import EngineDouble, SuccessiveEngines


@pytest.fixture
def make_bridge(qtbot):
    bridges = []

    def make(double: EngineDouble) -> EngineBridge:
        bridge = EngineBridge(double)
        bridges.append(bridge)
        return bridge

    yield make
    for bridge in bridges:
        bridge.shutdown()


class Recorder:
    """Records what the bridge delivers, and on which thread."""

    def __init__(self, bridge: EngineBridge) -> None:
        self.chunks: list[tuple[str, int]] = []
        self.received: list[TokenChunk] = []
        self.threads: set[int] = set()
        bridge.tokens.connect(self.on_tokens)

    def on_tokens(self, chunk: TokenChunk) -> None:
        self.threads.add(threading.get_ident())
        self.chunks.append((chunk.text, chunk.count))
        self.received.append(chunk)

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.chunks)

    @property
    def reasoning(self) -> str:
        return "".join(c.reasoning for c in self.received)


def test_load_then_generate_delivers_every_token_on_the_gui_thread(qtbot, make_bridge):
    double = EngineDouble(["a", "b", "c", "d"])
    bridge = make_bridge(double)
    rec = Recorder(bridge)
    with qtbot.waitSignal(bridge.loaded, timeout=10_000) as loaded:
        bridge.load("/models/tiny.gguf", LoadSettings(n_ctx=512))
    assert isinstance(loaded.args[0], Loaded) and loaded.args[0].n_ctx == 512
    assert double.started and double.loads[0][0] == "/models/tiny.gguf"
    with qtbot.waitSignal(bridge.done, timeout=10_000) as done:
        bridge.generate([Message("user", "hi")], SamplingSettings())
    assert isinstance(done.args[0], Done)
    assert rec.text == "abcd" == done.args[0].text
    assert rec.chunks[-1][1] == 4
    assert rec.threads == {threading.get_ident()}
    assert not bridge.busy
    assert double.requests == [[Message("user", "hi")]]


def test_tokens_show_before_the_reply_ends_and_stop_cancels(qtbot, make_bridge):
    double = EngineDouble(["one ", "two ", "three ", "four"], hold_after=2)
    bridge = make_bridge(double)
    rec = Recorder(bridge)
    bridge.generate([Message("user", "count")], SamplingSettings())
    qtbot.waitUntil(lambda: rec.text == "one two ", timeout=10_000)
    assert bridge.busy
    with qtbot.waitSignal(bridge.done, timeout=10_000) as done:
        bridge.stop()  # straight from the GUI thread, while the worker is blocked in generate
    assert done.args[0].stats.stop_reason == "cancelled"
    assert rec.text == "one two "


def test_a_crash_is_reported_and_the_next_request_starts_a_new_engine(qtbot, make_bridge):
    engines = [EngineDouble(["x", "y", "z"], crash_after=2), EngineDouble(["ok"])]
    bridge = EngineBridge(SuccessiveEngines(*engines))
    try:
        rec = Recorder(bridge)
        with qtbot.waitSignal(bridge.crashed, timeout=10_000) as crashed:
            bridge.generate([Message("user", "go")], SamplingSettings())
        assert isinstance(crashed.args[0], EngineCrashed)
        assert rec.text == "xy"  # what streamed before the crash is delivered before the crash signal
        assert engines[0].closed and not bridge.busy
        with qtbot.waitSignal(bridge.done, timeout=10_000):
            bridge.generate([Message("user", "again")], SamplingSettings())
        assert engines[1].started  # the same client, on a fresh engine
    finally:
        bridge.shutdown()


def test_a_failed_load_is_an_error_not_a_crash(qtbot, make_bridge):
    bridge = make_bridge(EngineDouble(fail_load="not a GGUF file"))
    with qtbot.assertNotEmitted(bridge.crashed), qtbot.waitSignal(bridge.failed, timeout=10_000) as failed:
        bridge.load("/tmp/x.txt", LoadSettings())
    assert isinstance(failed.args[0], EngineError) and "not a GGUF" in str(failed.args[0])


def test_many_fast_tokens_arrive_in_few_updates(qtbot, make_bridge):
    double = EngineDouble([f"t{i} " for i in range(20_000)])
    bridge = make_bridge(double)
    rec = Recorder(bridge)
    with qtbot.waitSignal(bridge.done, timeout=60_000):
        bridge.generate([Message("user", "go")], SamplingSettings(max_tokens=20_000))
    assert rec.text == "".join(f"t{i} " for i in range(20_000))
    assert rec.chunks[-1][1] == 20_000
    assert len(rec.chunks) < 2_000  # coalesced: far fewer GUI updates than tokens


def test_token_buffer_notifies_once_until_drained():
    buf = TokenBuffer()
    assert buf.push(Token("r", "a", 5.0, first_answer_ms=5.0)) is True
    assert buf.push(Token("r", "b", 9.0, first_answer_ms=5.0)) is False
    assert buf.push(Token("r", "!", 9.5, count=0, first_answer_ms=5.0)) is False  # released stop-string tail: no token
    assert buf.drain() == TokenChunk("ab!", "", 2, 5.0, 9.5, first_answer_ms=5.0)
    assert buf.push(Token("r", "c", 12.0, first_answer_ms=5.0)) is True
    assert buf.drain() == TokenChunk("c", "", 3, 5.0, 12.0, first_answer_ms=5.0)


def test_token_buffer_keeps_the_thinking_apart_with_the_engines_figures():
    """The thinking's figures are the engine's (each token carries them so far), not counted again from the chunks:
    an event that holds the end of the thinking and the start of the answer has both kinds of tokens, which only the
    engine, reading them one by one, can tell apart."""
    buf = TokenBuffer()
    buf.push(Token("r", "", 4.0, reasoning="Let me", reasoning_tokens=1))
    buf.push(Token("r", "", 6.0, count=3, reasoning=" see.", reasoning_tokens=4, reasoning_ms=2.0))
    assert buf.drain() == TokenChunk("", "Let me see.", 4, 4.0, 6.0, reasoning_tokens=4, reasoning_ms=2.0)
    buf.push(Token("r", "", 7.0, reasoning_tokens=5, reasoning_ms=3.0))  # the closing tag: still thinking, not shown
    # the end of the one, the start of the other: of its two tokens, the engine counted one as thinking
    buf.push(Token("r", "It is", 9.0, count=2, reasoning=" Done.", reasoning_tokens=6, reasoning_ms=4.0,
                   first_answer_ms=9.0))
    buf.push(Token("r", " blue.", 11.0, reasoning_tokens=6, reasoning_ms=4.0, first_answer_ms=9.0))
    assert buf.drain() == TokenChunk("It is blue.", " Done.", 8, 4.0, 11.0, reasoning_tokens=6, reasoning_ms=4.0,
                                     first_answer_ms=9.0)
    buf.reset()
    buf.push(Token("r", "Hi", 3.0, first_answer_ms=3.0))
    assert buf.drain() == TokenChunk("Hi", "", 1, 3.0, 3.0, first_answer_ms=3.0)  # a new reply: none of the last's


def test_thinking_reaches_the_gui_apart_from_the_answer(qtbot, make_bridge):
    double = EngineDouble(["The", " sky", "."], reasoning=["Rayleigh", " scattering", "…"])
    bridge = make_bridge(double)
    rec = Recorder(bridge)
    with qtbot.waitSignal(bridge.done, timeout=10_000) as done:
        bridge.generate([Message("user", "why blue?")], SamplingSettings())
    assert rec.reasoning == "Rayleigh scattering…" == done.args[0].reasoning
    assert rec.text == "The sky." == done.args[0].text
    last = rec.received[-1]
    assert (last.count, last.reasoning_tokens) == (6, 3) and last.first_answer_ms == done.args[0].stats.first_answer_ms


def test_shutting_down_during_a_reply_still_closes_the_engine(qtbot, make_bridge):
    """The window closed while a reply streams: the worker is still in the reply when the thread is told to quit,
    and the close queued behind it must not be lost with the thread's loop (an engine host outliving the app)."""
    double = EngineDouble(["a", "b", "c"], hold_after=1)
    bridge = make_bridge(double)
    with qtbot.waitSignal(bridge.loaded, timeout=5000):
        bridge.load("model.gguf", LoadSettings())
    bridge.generate([Message("user", "hi")], SamplingSettings())
    assert double.holding.wait(5)  # the worker is inside the reply
    bridge.shutdown()
    assert double.closed
