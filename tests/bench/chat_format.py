"""Benchmark: what reading a reply through its chat format costs each token (issue 25's goal: at most 0.02 ms).

The engine reads every reply of a conversation as it is generated: thinking, answer and tool calls apart
(backends/chat_format, in ``Backend.generate``). Two measures, each with the reading on and off (the same backend
whose prepared request has no parser) in alternating rounds, medians of the per-round differences:

1. **the generation loop alone**, over a recorded reply of ``--tokens`` tokens (the tiny model's tokenizer) —
   thinking, a sentence of answer and a tool call — replayed as fast as the loop takes it, so the difference is the
   loop's reading and nothing else; at the engine's own event window (10 ms) and at one event per token (what
   ``quantdesk serve --stream-every-ms 0`` asks for: a read of the whole reply so far for every token, the worst
   case). One row per syntax, each with its family's real template: Qwen3.5's XML calls; Kimi K2 Thinking's
   sections, its thinking closed without being opened (the reader holds such a reply back until its ``</think>``,
   looking ahead for it at every read: the wider reader's dearest case); DeepSeek V4's DSML, read by its wider
   reader (spaced markup, schema-typed values);
2. **the real engine**: the tiny model with the same template on llama.cpp, a reply of ``--tokens`` tokens that
   thinks (the generation prompt opens the block) until a budget closes it and then answers; the decode ms per
   token the user is shown, reading on and off.

    python -m tests.bench.chat_format [--runs 9] [--tokens 512] [--threads 2] [--no-engine]

Needs llama-cpp-python's source archive for the template (tests/fixtures/llama_cpp_sources.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import threading
import time
from collections.abc import Iterator

from app.datatypes import Done, LoadSettings, Message, Prompt, SamplingSettings
from backends.base import Backend
from backends.chat_format import formats
from backends.llama_cpp import LlamaCppBackend
from tests.fixtures.llama_cpp_sources import find_sdist, read_sources
from tests.fixtures.models import THINKING_TEMPLATE, TINY, build_model_set, build_templated_model, build_tokenizer

ASK = [Message("user", "What is the weather in Paris for the next three days?")]
TOOLS = ({"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}},)
THOUGHT = "The user wants the forecast for Paris, three days ahead, so I should call the weather tool. "
CALL = ("\n</think>\n\nLet me check the forecast.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
        "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
KIMI_CALL = ("</think>Let me check the forecast. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
             '<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|><|tool_calls_section_end|>')
DSML_CALL = ('</think>Let me check the forecast.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
             '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
             '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


@dataclasses.dataclass(frozen=True)
class Row:
    """One syntax: its family's real template (llama.cpp's file name), its tool format, the reply's end."""

    label: str
    template: str
    tool_format: str
    call: str


ROWS = (
    Row("Qwen3.5, XML calls", THINKING_TEMPLATE, "qwen3_coder", CALL),
    Row("Kimi K2 Thinking, thinking closed without being opened", "Kimi-K2-Thinking.jinja", "kimi_k2", KIMI_CALL),
    Row("DeepSeek V4, DSML calls", "deepseek-ai-DeepSeek-V4.jinja", "deepseek_v3_2", DSML_CALL),
)


def token_texts(text: str) -> list[str]:
    """``text`` as the tiny model's tokens write it, each token's text (a character split over byte tokens comes
    with the first of them, the others adding nothing, as an engine holds a character back until it is whole)."""
    pieces, at = [], 0
    for _start, end in build_tokenizer(TINY).encode(text).offsets:
        pieces.append(text[at:max(at, end)])
        at = max(at, end)
    pieces[-1:] = [pieces[-1] + text[at:]] if pieces else [text]
    return pieces


def recorded_reply(n_tokens: int, call: str = CALL) -> list[str]:
    """A reply of ``n_tokens`` tiny-model tokens, as token texts: thinking, then the answer and the call."""
    tail = token_texts(call)
    thought = token_texts(THOUGHT * (n_tokens // 10))
    return thought[:max(n_tokens - len(tail), 0)] + tail


class Replay(Backend):
    """The generation loop over a recorded reply: its ``_stream`` hands out the reply's token texts."""

    name = "replay"
    formats = ()

    def __init__(self, pieces: list[str], template: formats.Template, read: bool, tool_format: str = "qwen3_coder"
                 ) -> None:
        self.pieces, self.chat_template, self.tool_format, self.read = pieces, template, tool_format, read

    @classmethod
    def probe(cls):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def load(self, model_path, settings, on_progress=None):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def prepare(self, messages: Prompt, sampling: SamplingSettings) -> formats.Prepared | None:
        prepared = super().prepare(messages, sampling)
        # not read: neither the grammar's parser nor a family's wider reader
        return (prepared if self.read or prepared is None
                else dataclasses.replace(prepared, parser=None, reader=None))

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        self.mark_prefill_start()
        yield from self.pieces


class Unread(LlamaCppBackend):
    """llama.cpp with the reply not read: the prompt as always, no parser."""

    def prepare(self, messages: Prompt, sampling: SamplingSettings) -> formats.Prepared | None:
        prepared = super().prepare(messages, sampling)
        return dataclasses.replace(prepared, parser=None, reader=None) if prepared is not None else None


def loop_ms(backend: Backend, sampling: SamplingSettings, every_s: float | None) -> tuple[float, Done]:
    t0 = time.perf_counter()
    done = None
    for event in backend.generate("b", ASK, sampling, threading.Event(), every_s):
        done = event
    assert isinstance(done, Done)
    return (time.perf_counter() - t0) * 1000, done


def measure_loop(template: formats.Template, args, row: Row = ROWS[0]) -> None:
    pieces = recorded_reply(args.tokens, row.call)
    sampling = SamplingSettings(max_tokens=len(pieces) + 1, tools=TOOLS)
    read = Replay(pieces, template, True, row.tool_format)
    unread = Replay(pieces, template, False, row.tool_format)
    _, done = loop_ms(read, sampling, None)
    assert done.tool_calls and done.tool_calls[0].name == "get_weather" and done.reasoning, done
    assert json.loads(done.tool_calls[0].arguments) == {"city": "Paris", "days": 3}, done.tool_calls
    print(f"1. {row.label} ({row.template}): the generation loop over a recorded reply of {len(pieces)} tokens "
          f"(read: {done.stats.reasoning_tokens} thinking tokens, answer {done.text!r}, call {done.tool_calls[0]})")
    for every_s, window in ((None, "the engine's 10 ms event window"), (0.0, "an event per token")):
        deltas, on, off = [], [], []
        for round_ in range(args.runs):
            pair = [(read, on), (unread, off)] if round_ % 2 else [(unread, off), (read, on)]
            ms = {}
            for backend, into in pair:
                ms[id(into)], _ = loop_ms(backend, sampling, every_s)
                into.append(ms[id(into)])
            deltas.append((ms[id(on)] - ms[id(off)]) / len(pieces))
        print(f"   {window}: reading on {statistics.median(on):.2f} ms, off {statistics.median(off):.2f} ms per "
              f"reply; +{statistics.median(deltas):.4f} ms a token (median of {args.runs} paired rounds; goal "
              f"<= 0.02)")


def measure_engine(template_source: str, args) -> None:
    gguf = build_templated_model(build_model_set(TINY), "thinking", template_source)
    settings = LoadSettings(n_ctx=args.tokens + 256, threads=args.threads, gpu_layers=0)
    backends = {"on": LlamaCppBackend(), "off": Unread()}
    for backend in backends.values():
        backend.load(str(gguf), settings)
    sampling = SamplingSettings(temperature=0.0, max_tokens=args.tokens, reasoning_budget=args.tokens * 3 // 4)
    per_token: dict[str, list[float]] = {"on": [], "off": []}
    deltas = []
    try:
        for round_ in range(args.runs):
            order = ["on", "off"] if round_ % 2 else ["off", "on"]
            this = {}
            for name in order:
                _, done = loop_ms(backends[name], sampling, None)
                stats = done.stats
                this[name] = stats.decode_ms / max(stats.decode_tokens, 1)
                per_token[name].append(this[name])
                if name == "on":
                    thought = stats.reasoning_tokens
            deltas.append(this["on"] - this["off"])
    finally:
        for backend in backends.values():
            backend.unload()
    print(f"2. llama.cpp, the tiny model, {args.tokens} tokens ({thought} of them thinking), decode ms per token: "
          f"reading on {statistics.median(per_token['on']):.4f}, off {statistics.median(per_token['off']):.4f}; "
          f"+{statistics.median(deltas):.4f} ms a token (median of {args.runs} paired rounds; goal <= 0.02)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-engine", action="store_true", help="the generation loop's rows only")
    args = parser.parse_args()
    sdist = find_sdist()
    if sdist is None:
        raise SystemExit("llama-cpp-python's source archive is needed for the template: see "
                         "tests/fixtures/llama_cpp_sources.py")
    templates = read_sources(sdist).templates
    for row in ROWS:
        measure_loop(formats.Template.of(templates[row.template]), args, row)
    if not args.no_engine:
        measure_engine(templates[THINKING_TEMPLATE], args)


if __name__ == "__main__":
    main()
