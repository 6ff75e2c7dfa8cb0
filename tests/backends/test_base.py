from __future__ import annotations

import threading

import pytest

from app.datatypes import Done, LoadSettings, SamplingSettings, Token
from backends.base import Availability, Backend, GenerationError, ReasoningText, StopStringFilter, TrailingText


def test_stop_filter_holds_back_a_possible_stop_and_cuts_at_a_match():
    stops = StopStringFilter(["</answer>"])
    assert stops.feed("Hello </") == "Hello "
    assert stops.feed("ans") == ""
    assert stops.feed("wer> trailing") == ""
    assert stops.matched


def test_stop_filter_releases_held_text_that_turned_out_harmless():
    stops = StopStringFilter(["STOP"])
    assert stops.feed("ST") == ""
    assert stops.feed("ew") == "STew"
    assert stops.feed("S") == ""
    assert stops.flush() == "S"
    assert not stops.matched


def test_stop_filter_without_stops_passes_everything():
    assert StopStringFilter([]).feed("abc") == "abc"


@pytest.mark.parametrize("bad", [dict(temperature=-1), dict(top_p=0), dict(top_k=-1), dict(min_p=2),
                                 dict(repeat_penalty=0), dict(max_tokens=0), dict(max_tokens=10**9),
                                 dict(seed=-1), dict(stop=("",))])
def test_sampling_validation_refuses_values_no_engine_should_see(bad):
    with pytest.raises(ValueError):
        SamplingSettings(**bad).validate()


def test_load_validation():
    LoadSettings().validate()
    for bad in (dict(n_ctx=1), dict(gpu_layers=-2), dict(threads=0)):
        with pytest.raises(ValueError):
            LoadSettings(**bad).validate()


class ScriptedBackend(Backend):
    """A backend whose 'engine' is a list of token texts: for the shared loop's own logic, one event per
    token (the chunking by time has its own tests below)."""

    name = "scripted"
    formats = ("test",)
    COALESCE_S = 0.0

    def __init__(self, pieces, cancel_after=None):
        self.pieces = pieces
        self.cancel_after = cancel_after
        self.cancelled = threading.Event()
        self.closed = False

    @classmethod
    def probe(cls):
        return Availability.ok()

    def load(self, model_path, settings, on_progress=None):
        raise NotImplementedError

    def _stream(self, messages, sampling):
        self.reply.prompt_tokens = 3
        self.mark_prefill_start()
        try:
            for i, piece in enumerate(self.pieces):
                if i == self.cancel_after:
                    self.cancelled.set()
                if isinstance(piece, Exception):
                    raise piece
                yield piece
        finally:
            self.closed = True


def _run(backend, sampling):
    events = list(backend.generate("r", [], sampling, backend.cancelled))
    return events[:-1], events[-1]


def test_loop_stops_at_max_tokens_and_closes_the_engine_stream():
    backend = ScriptedBackend(["a", "b", "c", "d"])
    tokens, done = _run(backend, SamplingSettings(max_tokens=2))
    assert [t.text for t in tokens] == ["a", "b"] and done.text == "ab"
    assert done.stats.stop_reason == "length" and done.stats.generated_tokens == 2 and backend.closed


def test_loop_reports_cancel_and_eos():
    _, done = _run(ScriptedBackend(["a", "b", "c", "d"], cancel_after=1), SamplingSettings())
    assert done.stats.stop_reason == "cancelled" and done.text == "ab"
    _, done = _run(ScriptedBackend(["a", "b"]), SamplingSettings())
    assert done.stats.stop_reason == "eos" and done.stats.generated_tokens == 2


def test_trailing_text_is_released_but_not_counted_and_held_text_is_flushed():
    tokens, done = _run(ScriptedBackend(["x", "ST", TrailingText("!")]), SamplingSettings(stop=("STOP",)))
    assert done.text == "xST!"
    assert [t.count for t in tokens] == [1, 1, 0]  # '!' released the held 'ST' with it
    assert done.stats.generated_tokens == 2
    assert isinstance(done, Done) and all(isinstance(t, Token) for t in tokens)


def test_thinking_is_metered_once_and_each_token_carries_its_figures_so_far():
    """An engine's own thinking (a remote server's reasoning_content) counted by the loop's meter: the figures each
    event carries grow to the Done's, which are the same meter's."""
    pieces = [ReasoningText("Hm"), ReasoningText(", the sky"), " Blue", TrailingText(".")]
    tokens, done = _run(ScriptedBackend(pieces), SamplingSettings())
    assert [(t.text, t.reasoning, t.count) for t in tokens] == [("", "Hm", 1), ("", ", the sky", 1), (" Blue", "", 1),
                                                                (".", "", 0)]
    assert (done.text, done.reasoning) == (" Blue.", "Hm, the sky")
    assert [t.reasoning_tokens for t in tokens] == [1, 2, 2, 2] == [1, 2, 2, done.stats.reasoning_tokens]
    assert [t.first_answer_ms > 0 for t in tokens] == [False, False, True, True]
    assert tokens[0].reasoning_ms == 0 and tokens[-1].reasoning_ms == done.stats.reasoning_ms
    assert tokens[-1].first_answer_ms == done.stats.first_answer_ms == tokens[2].t_ms
    assert done.stats.generated_tokens == 3 and tokens[0].prompt_tokens == 3 and tokens[1].prompt_tokens == 0


class ChunkingBackend(ScriptedBackend):
    """The same, with a chunking window no test outlasts: what the client gets from a fast engine."""

    COALESCE_S = 3600.0


def test_a_fast_engines_tokens_arrive_in_chunks_the_first_at_once_with_exact_counts_and_times():
    pieces = [f"t{i} " for i in range(50)]
    tokens, done = _run(ChunkingBackend(pieces), SamplingSettings())
    assert [(t.text, t.count) for t in tokens] == [("t0 ", 1), ("".join(pieces[1:]), 49)]
    assert done.text == "".join(pieces) and done.stats.generated_tokens == 50 and done.stats.stop_reason == "eos"
    # Each chunk is stamped with its last token's time: the first is the time to first token, the last
    # closes the decode phase, so a rate computed from the chunks is the engine's own.
    assert tokens[0].t_ms == pytest.approx(done.stats.ttft_ms)
    assert tokens[-1].t_ms - tokens[0].t_ms == pytest.approx(done.stats.decode_ms)


def test_text_held_in_a_chunk_reaches_the_caller_before_the_engines_error():
    backend = ChunkingBackend(["a", "b", "c", GenerationError("decode", "llama_decode returned -3")])
    events = []
    with pytest.raises(GenerationError, match="llama_decode"):
        for event in backend.generate("r", "hi", SamplingSettings(), threading.Event()):
            events.append(event)
    assert [(t.text, t.count) for t in events] == [("a", 1), ("bc", 2)] and backend.closed


def test_chunks_end_at_the_limit_a_stop_string_or_a_cancel_with_nothing_lost():
    tokens, done = _run(ChunkingBackend(["a", "b", "c", "d"]), SamplingSettings(max_tokens=3))
    assert [(t.text, t.count) for t in tokens] == [("a", 1), ("bc", 2)] and done.stats.stop_reason == "length"
    tokens, done = _run(ChunkingBackend(["a", "b", "STO", "P", "e"]), SamplingSettings(stop=("STOP",)))
    assert [(t.text, t.count) for t in tokens] == [("a", 1), ("b", 3)] and done.text == "ab"
    assert done.stats.stop_reason == "stop"
    tokens, done = _run(ChunkingBackend(["a", "b", "c", "d"], cancel_after=2), SamplingSettings())
    assert [(t.text, t.count) for t in tokens] == [("a", 1), ("bc", 2)] and done.stats.stop_reason == "cancelled"
    tokens, done = _run(ChunkingBackend(["x", "ST", TrailingText("!")]), SamplingSettings(stop=("STOP",)))
    assert [(t.text, t.count) for t in tokens] == [("x", 1), ("ST!", 1)] and done.text == "xST!"


def test_peak_memory_on_windows_reads_the_peak_working_set_without_resource(monkeypatch):
    """Windows has no ``resource``; psutil's Windows build reports the peak working set (a recorded pmem)."""
    import sys
    from collections import namedtuple

    from backends import base

    pmem = namedtuple("pmem", "rss vms num_page_faults peak_wset wset peak_paged_pool paged_pool "
                              "peak_nonpaged_pool nonpaged_pool pagefile peak_pagefile private")
    recorded = pmem(rss=1_228_800_000, vms=1_404_239_872, num_page_faults=417_332, peak_wset=1_540_096_000,
                    wset=1_228_800_000, peak_paged_pool=612_520, paged_pool=598_312, peak_nonpaged_pool=48_624,
                    nonpaged_pool=41_288, pagefile=1_404_239_872, peak_pagefile=1_611_939_840,
                    private=1_404_239_872)

    class Process:
        def memory_info(self):
            return recorded

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setitem(sys.modules, "psutil", type(sys)("psutil"))
    monkeypatch.setattr(sys.modules["psutil"], "Process", Process, raising=False)
    monkeypatch.setitem(sys.modules, "resource", None)  # any import of it now raises
    assert base.peak_rss_bytes() == 1_540_096_000


def test_peak_memory_on_this_machine_is_in_bytes():
    import psutil

    from backends.base import peak_rss_bytes

    resident = psutil.Process().memory_info().rss
    # bytes, not KiB (a factor of 1024 off); the kernel updates the high-water mark lazily, so not ">= resident"
    assert resident / 2 < peak_rss_bytes() < resident * 4


def test_sampling_settings_from_a_saved_dict_ignores_unknown_keys_and_takes_any_stop_sequence():
    saved = {"temperature": 0.2, "stop": ["</s>", "###"], "mirostat": 2, "max_tokens": 64}
    assert SamplingSettings.from_dict(saved) == SamplingSettings(temperature=0.2, stop=("</s>", "###"), max_tokens=64)
    assert SamplingSettings.from_dict({}) == SamplingSettings()
