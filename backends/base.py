"""The inference backend interface: one small contract every engine implements.

Qt-free and free of inference imports: the engine host imports it for the loop, the registry for the
contract. The types a load and a generation speak in (settings, messages, events) are the ground floor's,
``app/datatypes.py``, which the GUI and the server import without this module. A backend module imports its engine
library lazily, inside ``load``, so ``probe`` can say "not installed" instead of breaking an import.

A backend supplies three things: ``probe`` (can it run here, and if not why), ``load`` and a raw
token stream (``_stream``). The shared ``generate`` loop around that stream does what must be the same
for every engine: stop strings, max tokens, cancel between tokens, and the timing of every phase,
measured here, in the process that produces the tokens.

The loop is built in layers, each with one job, as mlx-lm's generate_step → stream_generate → generate: the
engine's stream; the ``Meter`` (token counts, times, the thinking's figures: the one place they are measured); the
``StopStringFilter`` (stop strings across token boundaries); the ``Coalescer`` (tokens handed out in chunks);
``ReplyEvents`` (the reply read through the chat format: thinking, answer, tool calls). What one reply keeps (its
prepared request, what the engine learns while it runs, how it ended) is one ``Reply``, ``Backend.reply``.
"""

from __future__ import annotations

import abc
import os
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, cast

from app.datatypes import (Done, Embedded, GenerationStats, Loaded, LoadSettings, Message, Prompt, Reranked,
                           SamplingSettings, Scored, StateRestored, StateSaved, StopReason, Token, TokenLogprob,
                           ToolCall, ToolCallDelta)

if TYPE_CHECKING:
    from backends.chat_format.formats import Prepared, ReasoningFormat, Request, Template, ToolChoice
    from backends.chat_format.reply import ReplyReader, ThinkingTracker
    from backends.chat_format.stream import Delta


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on this machine; when it cannot, ``reason`` says why in words."""

    available: bool
    reason: str = ""
    hint: str = ""

    @classmethod
    def ok(cls) -> Availability:
        return cls(True)

    @classmethod
    def no(cls, reason: str, hint: str = "") -> Availability:
        return cls(False, reason, hint)


class GenerationError(Exception):
    """Raised by a backend for a request it cannot serve; becomes an ErrorEvent, the engine lives on."""

    def __init__(self, kind: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint


class TrailingText(str):
    """Text a backend releases at the end of a stream without a new token (a detokenizer's remainder)."""


class ReasoningText(str):
    """A token's text that an engine itself marked as thinking (a remote server's ``reasoning_content``)."""


class StopStringFilter:
    """Holds back text that might be the start of a stop string; cuts the text at a full match.

    Only the tail is ever scanned: the text held back (shorter than the longest stop string) and the
    new piece, never the reply so far."""

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self.active = bool(self._stops)  # without stop strings the loop need not call feed() at all
        self._pending = ""
        self.matched = ""  # the stop string that cut the text, once one has

    def feed(self, text: str) -> str:
        """Return what can be released now."""
        if not self._stops:
            return text
        self._pending += text
        cut, stop = min(((i, s) for s in self._stops if (i := self._pending.find(s)) >= 0), default=(-1, ""))
        if cut >= 0:
            self.matched = stop
            released, self._pending = self._pending[:cut], ""
            return released
        hold = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(self._pending)), 0, -1):
                if self._pending.endswith(stop[:n]):
                    hold = max(hold, n)
                    break
        released = self._pending[: len(self._pending) - hold]
        self._pending = self._pending[len(released):]
        return released

    def flush(self) -> str:
        released, self._pending = self._pending, ""
        return released


@dataclass(eq=False)
class Reply:
    """One request's state, in one object: the request as the chat format prepared it (``prepared``: its prompt and
    its reply's parser; None for a raw prompt, or where the engine renders itself), what the engine's ``_stream``
    learns while it runs it, and how the reply ended. ``generate`` makes one for each reply (``Backend.reply``), as do
    the paths that render a prompt without a reply (a count, a state's restore)."""

    prepared: Prepared | None = None
    prompt_tokens: int = 0  # set by ``_stream`` before its first yield
    cached_tokens: int = 0  # of the prompt's tokens, those reused from the KV cache (the previous request's prefix)
    t_prefill: float | None = None  # the engine started on the prompt (``Backend.mark_prefill_start``)
    budget: ThinkingBudget | None = None  # the reply's thinking budget, checked once more as the engine starts
    # Speculative decoding's counts for the reply (GenerationStats' fields of the same names).
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_passes: int = 0
    # The tokens' log-probabilities, when asked (``Backend.reports_logprobs``): ``_stream`` appends the
    # ``TokenLogprob`` of each token it chose before yielding its text (an end-of-generation token's too, never read).
    logprobs: list[TokenLogprob] = dataclasses.field(default_factory=list)
    stop_reason: StopReason = "eos"
    stop_string: str = ""  # the stop string that ended it (stop_reason "stop")


# A piece of the reply once metered and through the stop filter (``Backend._steps``): when it came, the text released
# with it, the thinking an engine sent apart (ReasoningText), 1 for a token (0 for text without one), the
# log-probabilities that go with it, and whether the reply ends with it.
Step = tuple[float, str, str, int, tuple[TokenLogprob, ...], bool]


class Chunk(NamedTuple):
    """What the coalescer hands out at once: its time (of its last token, in ms since the request arrived), its text,
    the thinking an engine sent apart, how many tokens it stands for (``tokens``) and their log-probabilities."""

    t_ms: float
    text: str
    reasoning: str
    tokens: int
    logprobs: tuple[TokenLogprob, ...]


class Meter:
    """A reply's figures, measured here and nowhere else: its tokens, the first's and the latest's times, and its
    thinking (a ``ThinkingTracker`` reads it token by token; an engine's own ``ReasoningText`` is thinking too): how
    many tokens, from the first to the latest, and when the answer began. The Done's stats are made of them, and
    each Token event carries the thinking's so far (``thinking``), which the GUI shows as it comes."""

    __slots__ = ("t_start", "tracker", "generated", "reasoning_tokens", "t_first", "t_last", "t_reasoning_first",
                 "t_reasoning_last", "t_answer")

    def __init__(self, t_start: float, tracker: ThinkingTracker | None) -> None:
        self.t_start = t_start
        self.tracker = tracker
        self.generated = self.reasoning_tokens = 0
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.t_reasoning_first: float | None = None
        self.t_reasoning_last: float | None = None
        self.t_answer: float | None = None

    def feed(self, raw: str, now: float) -> int:
        """Count one piece of the engine's stream: 1 for a token, 0 for text that came without one (TrailingText)."""
        kind = type(raw)
        if kind is TrailingText:
            return 0
        self.generated += 1
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        if kind is ReasoningText or (self.tracker is not None and self.tracker.feed(raw)):
            self.reasoning_tokens += 1
            if self.t_reasoning_first is None:
                self.t_reasoning_first = now
            self.t_reasoning_last = now
        elif self.t_answer is None and raw.strip():
            self.t_answer = now
        return 1

    def thinking(self) -> tuple[int, float, float]:
        """The thinking so far: its tokens, from its first token to its latest (ms), and the answer's first token
        (ms since the request arrived; 0 while there is none)."""
        first, last = self.t_reasoning_first, self.t_reasoning_last
        return (self.reasoning_tokens, (last - first) * 1000 if first is not None and last is not None else 0.0,
                (self.t_answer - self.t_start) * 1000 if self.t_answer is not None else 0.0)

    def stats(self, reply: Reply, peak_memory_bytes: int) -> GenerationStats:
        t_first = self.t_first or time.perf_counter()
        t_last = self.t_last or t_first
        reasoning_tokens, reasoning_ms, first_answer_ms = self.thinking()
        return GenerationStats(
            prompt_tokens=reply.prompt_tokens, prompt_ms=(t_first - (reply.t_prefill or self.t_start)) * 1000,
            ttft_ms=(t_first - self.t_start) * 1000, generated_tokens=self.generated,
            decode_ms=(t_last - t_first) * 1000, stop_reason=reply.stop_reason, peak_memory_bytes=peak_memory_bytes,
            stop_string=reply.stop_string, draft_tokens=reply.drafted_tokens, accepted_tokens=reply.accepted_tokens,
            verify_passes=reply.verify_passes, reasoning_tokens=reasoning_tokens, reasoning_ms=reasoning_ms,
            first_answer_ms=first_answer_ms, cached_tokens=reply.cached_tokens)


class ThinkingBudget:
    """``SamplingSettings.reasoning_budget`` held: once the thinking has that many tokens (0: none, where the template
    opened the block anyway) while its block is open, the model is made to write the budget's message and the
    format's end tag (``Backend.force``), once."""

    def __init__(self, sampling: SamplingSettings, prepared: Prepared | None, tracker: ThinkingTracker | None,
                 force: Callable[[str], None]) -> None:
        active = prepared is not None and tracker is not None and tracker.active
        self.limit = sampling.reasoning_budget if active else -1  # -1: none
        self._closing = sampling.reasoning_budget_message + prepared.thinking_end_tags[0] \
            if prepared is not None and active else ""
        self._tracker = tracker
        self._force: Callable[[str], None] | None = force

    def check(self, reasoning_tokens: int) -> None:
        if (self._force is not None and 0 <= self.limit <= reasoning_tokens and self._tracker is not None
                and self._tracker.inside):
            self._force(self._closing)
            self._force = None


class Coalescer:
    """Hands a reply's pieces out in chunks: the first token at once, then whatever came in the last ``window``
    seconds with each later token, and the rest when the reply ends; when the engine fails, what arrived before
    stays with the failure. Each chunk is stamped with its last token's time (the meter's)."""

    def __init__(self, meter: Meter, window: float) -> None:
        self._meter = meter
        self._window = window
        self.t_end_ms = 0.0  # the last chunk's time, once the steps ran out

    def chunks(self, steps: Iterator[Step]) -> Iterator[Chunk]:
        meter, window = self._meter, self._window
        text: list[str] = []
        reasoning: list[str] = []
        entries: list[TokenLogprob] = []
        count = 0
        t_sent = -window  # the first token goes out at once

        def chunk(t: float) -> Chunk:
            nonlocal count
            out = Chunk((t - meter.t_start) * 1000, "".join(text), "".join(reasoning), count, tuple(entries))
            text.clear()
            reasoning.clear()
            entries.clear()
            count = 0
            return out

        try:
            for now, piece, thought, counted, logprobs, ending in steps:
                if piece:
                    text.append(piece)
                if thought:
                    reasoning.append(thought)
                if logprobs:
                    entries.extend(logprobs)
                count += counted
                if not ending and now - t_sent >= window:
                    yield chunk(now)
                    t_sent = now
        except Exception:
            if text or reasoning or entries:
                yield chunk(meter.t_last or time.perf_counter())
            raise
        t_end = meter.t_last if count and meter.t_last is not None else time.perf_counter()  # held-back text: now
        self.t_end_ms = (t_end - meter.t_start) * 1000
        if text or reasoning or count or entries:
            yield chunk(t_end)


class ReplyEvents:
    """The reply reader's layer: each chunk as a Token event and, at the end, the whole reply for the Done. A
    conversation's reply is read through its chat format (backends/chat_format/reply.ReplyReader: thinking, answer
    and tool calls apart); a raw prompt's goes out as it came (an engine's own thinking apart). The first event
    carries the prompt's figures, so that a stream's opening can say them; each, the meter's thinking so far."""

    def __init__(self, request_id: str, reply: Reply, meter: Meter, reader: ReplyReader | None) -> None:
        self._id = request_id
        self._reply = reply
        self._meter = meter
        self._reader = reader
        self._first = True
        self._text: list[str] = []  # a raw prompt's reply, for the Done
        self._reasoning: list[str] = []

    def token(self, chunk: Chunk) -> Token:
        prompt, cached = (self._reply.prompt_tokens, self._reply.cached_tokens) if self._first else (0, 0)
        self._first = False
        if self._reader is None:
            self._text.append(chunk.text)
            self._reasoning.append(chunk.reasoning)
            return self._event(chunk.t_ms, chunk.tokens, chunk.text, chunk.reasoning, (), prompt, cached,
                               chunk.logprobs)
        self._reader.feed(chunk.text)
        return self._read(self._reader.deltas(), chunk.t_ms, chunk.tokens, prompt, cached, chunk.logprobs)

    def finish(self, t_ms: float, cut: bool) -> Iterator[Token]:
        """The reader's last event, if the whole reply says more than its chunks did (``cut``: something other than
        the model ended it, so a call it was writing is no call)."""
        if self._reader is not None:
            last = self._read(self._reader.deltas(final=True, cut=cut), t_ms, 0)
            if last.text or last.reasoning or last.tool_calls:
                yield last

    def message(self) -> tuple[str, str, tuple[ToolCall, ...]]:
        """The whole reply: its answer, its thinking and its tool calls."""
        if self._reader is not None:
            return self._reader.finish()
        return "".join(self._text), "".join(self._reasoning), ()

    def _read(self, deltas: Sequence[Delta], t_ms: float, count: int, prompt_tokens: int = 0, cached_tokens: int = 0,
              logprobs: tuple[TokenLogprob, ...] = ()) -> Token:
        """One event for a chunk's deltas: its answer text, its thinking and the tool calls it begins or extends."""
        calls = tuple(ToolCallDelta(d.tool_index, d.tool_id, d.tool_name, d.tool_arguments)
                      for d in deltas if d.tool_index >= 0)
        return self._event(t_ms, count, "".join(d.content for d in deltas), "".join(d.reasoning for d in deltas),
                           calls, prompt_tokens, cached_tokens, logprobs)

    def _event(self, t_ms: float, count: int, text: str, reasoning: str, calls: tuple[ToolCallDelta, ...],
               prompt_tokens: int, cached_tokens: int, logprobs: tuple[TokenLogprob, ...]) -> Token:
        thought, thought_ms, first_answer_ms = self._meter.thinking()
        return Token(self._id, text, t_ms, count=count, reasoning=reasoning, tool_calls=calls,
                     prompt_tokens=prompt_tokens, cached_tokens=cached_tokens, logprobs=logprobs,
                     reasoning_tokens=thought, reasoning_ms=thought_ms, first_answer_ms=first_answer_ms)


def check_token_ids(tokens: Sequence[int], vocab_size: int) -> None:
    """Refuse ids the model has no embedding for (another tokenizer's), before the engine sees them."""
    bad = next((t for t in tokens if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise GenerationError("vocabulary", f"token id {bad} is outside this model's vocabulary of {vocab_size}",
                              "the variants do not share a tokenizer")


def peak_rss_bytes() -> int:
    """Peak resident memory of this process: ru_maxrss on POSIX (KiB on Linux, bytes on macOS), the peak
    working set on Windows, which has no ``resource`` module (imported here, never at module level, so the
    GUI that imports this module for its types starts on Windows too)."""
    if sys.platform == "win32":
        import psutil

        return int(psutil.Process().memory_info().peak_wset)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def physical_cores() -> int:
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count() or 1
    except ImportError:  # the engine host may run without psutil in a minimal build
        return os.cpu_count() or 1


class Backend(abc.ABC):
    """One inference engine. An instance owns at most one loaded model, on one thread."""

    # Tokens are handed out in chunks at most this often (the first one at once): see ``generate``. 30 a second, a
    # screen's pace: each chunk is read through the chat format and crosses the engine's pipe, ~0.1 ms of CPU right
    # after a decode (cold caches) that comes out of the next token's time; at 10 ms SmolLM2's stream spent 2.5% there.
    COALESCE_S: ClassVar[float] = 0.033

    name: ClassVar[str]
    formats: ClassVar[tuple[str, ...]]  # model formats it runs: gguf, mlx, safetensors, exl2, exl3
    takes_projector: ClassVar[bool] = False  # loads a vision projector (LoadSettings.mmproj) beside the model
    # Whether it can hold a reply to SamplingSettings.json_schema (grammar-constrained decoding).
    structured_output: ClassVar[bool] = False
    # Whether it reports its tokens' log-probabilities (SamplingSettings.logprobs): ``_stream`` then appends to
    # ``reply.logprobs`` the ``TokenLogprob`` of each token it chose before yielding its text (an end-of-generation
    # token's too, never read), and the shared loop hands them out with that piece, a lone entry without text with the
    # piece as its text (a remote server's chunk may bring several entries, each with its text).
    reports_logprobs: ClassVar[bool] = False
    # The loaded model's chat template, with its BOS and EOS texts (backends/chat_format): the prompt is rendered and
    # the reply read through it. None where the engine renders itself (a remote server).
    chat_template: Template | None = None
    # The chat format's name for the loaded model's tools ("" when its template takes no tools); in Loaded.details.
    tool_format: str = ""
    # The request being answered, in one object (its prepared prompt, what the engine learns while it runs, how the
    # reply ended): ``generate`` sets a new one before ``_stream`` runs, which renders ``reply.prepared.prompt`` and
    # writes there what it learns (the prompt's tokens, the cache's reused prefix, ...). An empty one until then.
    reply: Reply = Reply()
    _unreadable_format = ""  # the template whose reply format could not be read, once said in the log

    @classmethod
    @abc.abstractmethod
    def probe(cls) -> Availability:
        """Can this backend run here? Cheap, and must not import the engine library (the GUI calls it)."""

    @abc.abstractmethod
    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        """Load the model; raise GenerationError (or a ModelFileError-like ValueError) with the reason."""

    @abc.abstractmethod
    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        """Yield the text of each generated token (possibly empty), ending at end-of-sequence.

        Before its first yield it sets ``self.reply.prompt_tokens``. The caller stops consuming at max
        tokens, on a stop string or on cancel, and closes the generator.
        """

    def unload(self) -> None:
        """Free the model. Idempotent."""

    def sees_images(self) -> bool:
        """Whether the loaded model takes images (a llama.cpp model loaded with its vision projector)."""
        return False

    def memory_in_use(self) -> dict[str, int]:
        """Bytes per device: for the CPU the process's peak resident size (right after a load, the model's
        footprint); backends with GPU memory add their devices' current figures."""
        return {"cpu": peak_rss_bytes()}

    def peak_memory_bytes(self) -> int:
        return peak_rss_bytes()

    # --- scoring (the quant lab). A backend that exposes logits implements the three methods below;
    # one that does not keeps these defaults, and the lab shows the reason instead of a number.

    def no_logits_reason(self) -> str:
        return f"n/a: {self.name} exposes no next-token logits"

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        """The model's tokens for plain text (no chat template), with BOS where the model wants one; ``special``
        reads special-token text (a rendered chat's turn markers) as those tokens, as the chat does."""
        raise GenerationError("unavailable", self.no_logits_reason())

    def next_token_logits(self, tokens: Sequence[int]) -> Any:
        """float32 numpy array [len(tokens), vocab]: row i scores the token after tokens[:i+1]."""
        raise GenerationError("unavailable", self.no_logits_reason())

    def vocabulary(self) -> list[str]:
        """Token texts by id, as the model file stores them (to check two variants share a vocabulary)."""
        raise GenerationError("unavailable", self.no_logits_reason())

    def logits_width(self) -> int:
        """How many token ids a logit row covers (a conversion may pad the vocabulary's texts with more rows)."""
        return len(self.vocabulary())

    def window_logits(self, tokens: Sequence[int], first: int) -> Iterator[Any]:
        """The logits of one window of ``tokens`` evaluated from an empty cache, for its positions ``first`` to the
        end, as float32 blocks of rows in order (backends.scoring). This default computes every row and hands out
        those asked for; an engine that can compute only those (llama.cpp) does."""
        import numpy as np

        yield np.asarray(self.next_token_logits(tokens), dtype=np.float32)[first:]

    def score(self, request_id: str, *, text: str | None = None, tokens: Sequence[int] | None = None,
              max_tokens: int | None = None) -> Scored:
        """Score ``text`` (tokenized here) or ``tokens`` in one pass, outside the chat path (no template, no
        sampling): the log-probability of each token. (The lab's windowed scoring against a reference is
        ``backends.scoring.score``, on this backend's ``window_logits``.)"""
        clock = time.perf_counter
        t0 = clock()
        import numpy as np

        ids = list(self.tokenize(text or "") if tokens is None else tokens)[:max_tokens]
        if len(ids) < 2:
            raise GenerationError("request", f"scoring needs at least 2 tokens, got {len(ids)}")
        token_logprobs: list[float] = []
        for rows in self.window_logits(ids, 0):  # a few rows at a time: a full [tokens, vocab] array is big
            rows = np.asarray(rows, dtype=np.float32)
            for start in range(0, len(rows), 64):
                block = rows[start:start + 64].astype(np.float64)
                block -= block.max(axis=1, keepdims=True)  # shifted by the row maximum so exp() cannot overflow
                block -= np.log(np.exp(block).sum(axis=1, keepdims=True))
                at = len(token_logprobs)
                targets = ids[at + 1:at + 1 + len(block)]
                token_logprobs += [float(block[i, t]) for i, t in enumerate(targets)]
        return Scored(request_id, ids, token_logprobs, self.logits_width(), (clock() - t0) * 1000)

    # --- embeddings: a backend that loads embedding models implements ``embed``.

    def embed(self, request_id: str, texts: Sequence[str]) -> Embedded:
        raise GenerationError("request", f"{self.name} makes no embeddings", "serve a GGUF embedding model")

    # --- reranking: a backend that loads reranker models (llama.cpp's rank pooling) implements ``rerank``.

    def rerank(self, request_id: str, query: str, texts: Sequence[str]) -> Reranked:
        raise GenerationError("request", f"{self.name} does not rerank", "load a GGUF reranker with llama.cpp")

    # --- counting: a prompt's tokens as a generation would make them (the server's count_tokens), without generating

    def count_prompt_tokens(self, messages: Prompt, sampling: SamplingSettings) -> int:
        """How many tokens ``messages`` is once rendered through the model's chat format with ``sampling``'s tools
        and thinking switch, and tokenized as ``_stream`` tokenizes it: the figure the reply's stats would report as
        ``prompt_tokens``. The KV cache is left as it is."""
        self.reply = Reply(self.prepare(messages, sampling))
        return self._count_prompt(messages)

    def _count_prompt(self, messages: Prompt) -> int:
        """``count_prompt_tokens`` once the prompt is prepared (``self.reply``): each engine tokenizes as its
        ``_stream`` does."""
        raise GenerationError("unavailable", f"{self.name} cannot count a prompt's tokens")

    # --- saved states: a conversation's KV cache kept on disk and brought back (llama.cpp implements these)

    def save_state(self, request_id: str, path: str) -> StateSaved:
        """Write what the KV cache holds (its state and its tokens) to ``path``, checked on the way back in."""
        raise GenerationError("unavailable", f"{self.name} cannot save a conversation's state")

    def restore_state(self, request_id: str, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings) -> StateRestored:
        """Of the saved states at ``paths``, restore the one whose tokens share the longest prefix with
        ``messages`` rendered and tokenized as a generation with ``sampling`` would be (tokens compared, never
        trusted from a name), when it beats what the KV cache already holds; the next generation then reads only
        the rest. Files that cannot be used are named with the reason, never loaded."""
        raise GenerationError("unavailable", f"{self.name} cannot restore a conversation's state")

    def keep_evicted(self, paths: Sequence[str]) -> None:
        """Where a batching engine saves a sequence's state before another conversation takes its cells (files the
        parent's state cache named; empty: none kept), for ``restore_state`` to bring back when that conversation
        returns. llama.cpp's batching keeps them (backends/llama_cpp/backend.py); an engine of one sequence at a time
        has none to keep."""

    def check_request(self, sampling: SamplingSettings) -> None:
        """Refuse, in words, what this engine and model cannot do, before any work."""
        if (sampling.json_schema is not None or sampling.tool_choice == "required") and not self.structured_output:
            raise GenerationError("request", f"{self.name} cannot hold a reply to a JSON schema or force a tool call",
                                  "load a GGUF model (llama.cpp) for structured output")
        if sampling.logprobs >= 0 and not self.reports_logprobs:
            raise GenerationError("request", f"{self.name} does not report its tokens' log-probabilities",
                                  "ask without logprobs, or serve a GGUF model (llama.cpp)")
        if sampling.tools and sampling.tool_choice != "none" and not self.tool_format:
            raise GenerationError("template", "this model's chat template has no tool support, so it cannot be "
                                              "given tools", "use a model whose chat template declares tools")

    # --- the chat format (backends/chat_format): the prompt a conversation renders to, and how the reply reads

    def message_content(self, message: Message, images_in_prompt: bool) -> str:
        """A message's text as the template gets it (the llama.cpp backend puts image markers ahead of it)."""
        return message.content

    def chat_request(self, messages: Sequence[Message], sampling: SamplingSettings) -> Request:
        from backends.chat_format.formats import Request

        thinking = sampling.enable_thinking if sampling.reasoning_budget != 0 else False
        images = any(m.images for m in messages)
        extra = dict(sampling.chat_template_kwargs)
        if sampling.reasoning_effort:
            extra.setdefault("reasoning_effort", sampling.reasoning_effort)
        if thinking is not None:
            extra.setdefault("enable_thinking", thinking)
        return Request(
            messages=[{**m.template_dict(), "content": self.message_content(m, images)} for m in messages],
            tools=list(sampling.tools) or None,
            # (both checked against their Literal's values by SamplingSettings.validate)
            tool_choice=cast("ToolChoice", "none" if not sampling.tools else sampling.tool_choice),
            # the format's own response-format reading, unless literal text is asked for around the JSON
            json_schema=None if sampling.json_prefix or sampling.json_suffix else sampling.json_schema,
            parallel_tool_calls=sampling.parallel_tool_calls,
            reasoning_format=cast("ReasoningFormat", sampling.reasoning_format),
            enable_thinking=bool(extra.get("enable_thinking", True)),
            extra_context=extra)

    def prepare(self, messages: Prompt, sampling: SamplingSettings) -> Prepared | None:
        """The request as the model's chat format makes it: the prompt and the reader of the reply. None for a raw
        prompt, or where the engine has no template of ours."""
        if isinstance(messages, str) or self.chat_template is None:
            return None
        from backends.chat_format import formats
        from backends.chat_format.template import TemplateError

        request = self.chat_request(messages, sampling)
        try:
            return formats.apply(self.chat_template, request)
        except TemplateError as exc:
            raise GenerationError("template", str(exc)) from None
        except ValueError as exc:
            # A template whose reply format the analysis cannot read (llama.cpp refuses the request there): the
            # model still chats, its replies read as plain content, and the log says why once per model.
            if self._unreadable_format != self.chat_template.source:
                self._unreadable_format = self.chat_template.source
                print(f"chat format: {exc}; replies are read as plain text", file=sys.stderr, flush=True)
            try:
                return formats.content_only(self.chat_template, request)
            except TemplateError as render_error:
                raise GenerationError("template", str(render_error)) from None

    def reply_grammar(self, sampling: SamplingSettings) -> tuple[str, str] | None:
        """The grammar the reply is held to, in llguidance's Lark dialect, and the text of the prompt it starts with
        (the generation prompt, which the grammar reads first); None for a free reply. A conversation's response
        format or required tool call is its chat format's grammar (backends/chat_format/grammar.py): the thinking
        block as the format writes it, then the JSON or the call in the model's own syntax, as llama.cpp builds
        it; a raw prompt's response format is the JSON alone."""
        from backends import json_schema

        schema, prepared = sampling.json_schema, self.reply.prepared
        forced_call = bool(sampling.tools) and sampling.tool_choice == "required"
        # llama.cpp's generic tool format holds the whole reply to its JSON shape, a call or a response
        generic = prepared is not None and prepared.format == "generic" and prepared.grammar
        if not forced_call and schema is None and not generic:
            return None
        if prepared is None or prepared.parser is None or sampling.json_prefix or sampling.json_suffix:
            if schema is None:
                raise GenerationError("request", "a tool call can only be forced in a conversation")
            return json_schema.lark_grammar(schema, sampling.json_prefix, sampling.json_suffix), ""
        from backends.chat_format.grammar import to_lark

        return (to_lark(prepared.parser, special_tokens=self.special_tokens(), content=schema is not None),
                prepared.generation_prompt)

    def special_tokens(self) -> dict[str, int]:
        """The model's special tokens (text -> id) that its grammar must match as tokens, not as text: the engine's
        grammar tokenizer marks them so (backends/json_schema.py)."""
        return {}

    @property
    def parallel(self) -> int:
        """How many ``generate`` calls may run at once, each on a thread of its own, their tokens decoded together
        (continuous batching: llama.cpp, MLX); 1 where the engine answers one request at a time."""
        return 1

    def use_sequence_of(self, request_id: str) -> None:
        """Where several replies run at once: the next ``save_state`` saves what ``request_id``'s reply left in the
        cache (its sequence), not another's."""

    def force(self, text: str) -> None:
        """Make the model write ``text`` next, token by token, whatever it would have sampled (a thinking budget that
        ran out closes the thinking block). Engines that can, override it; the rest let the model go on."""

    def mark_prefill_start(self) -> None:
        """Called by ``_stream`` once the prompt is rendered and tokenized, before the engine runs it (and after it
        dropped what an earlier reply left forced): the prefill is timed from here, and a thinking budget of 0 where
        the template opened the block anyway closes it here, before the first token (forced any sooner, the close
        would be dropped with the rest)."""
        reply = self.reply
        reply.t_prefill = time.perf_counter()
        if reply.budget is not None:
            reply.budget.check(0)

    def generate(self, request_id: str, messages: Prompt, sampling: SamplingSettings,
                 cancelled: threading.Event, events_every_s: float | None = None) -> Iterator[Token | Done]:
        """The shared generation loop: yields Token events, then one Done. It is built in layers, as mlx-lm's
        generate_step → stream_generate → generate: the engine's pieces (``_stream``) are metered (``Meter``: counts,
        times, thinking) and cut by the stop filter, ``max_tokens`` and a cancel (``_steps``), handed out in chunks
        (``Coalescer``) and read through the chat format (``ReplyEvents``); what the reply keeps is one ``Reply``.

        Tokens are timed one by one, but handed out in chunks: the first token at once, then whatever came
        in the last ``COALESCE_S`` (or ``events_every_s``, when the caller asks for another window: the
        server asks for its stream's) with each later token, and the rest before the Done. A fast engine
        (thousands of tokens a second) then costs the event channel, the client and the GUI thirty
        small messages a second instead of one per token; a slow one still sends every token as it comes.
        A backend that never holds tokens back (``COALESCE_S`` 0: a remote stream can stall) keeps so.

        A conversation's reply is read through the model's chat format as it comes (backends/chat_format): each
        chunk's thinking, answer and tool calls go out apart, thinking tokens are counted and timed, and a thinking
        budget that runs out closes the thinking block the way the model's format does.
        """
        from backends.chat_format.reply import ReplyReader, ThinkingTracker

        t_start = time.perf_counter()
        self.check_request(sampling)
        prepared = self.prepare(messages, sampling)
        reply = self.reply = Reply(prepared)
        tracker = ThinkingTracker(prepared) if prepared is not None else None
        meter = Meter(t_start, tracker)
        budget = reply.budget = ThinkingBudget(sampling, prepared, tracker, self.force)  # 0: at the engine's start
        extra_stops = prepared.additional_stops if prepared is not None else ()
        stops = StopStringFilter(tuple(sampling.stop) + tuple(extra_stops))
        reader = ReplyReader(prepared, self.chat_template.source if self.chat_template else "") \
            if prepared is not None and prepared.parser is not None else None
        events = ReplyEvents(request_id, reply, meter, reader)
        window = self.COALESCE_S if events_every_s is None or not self.COALESCE_S else events_every_s
        coalescer = Coalescer(meter, window)
        stream = self._stream(messages, sampling)
        try:
            for chunk in coalescer.chunks(self._steps(stream, sampling, meter, stops, budget, cancelled)):
                yield events.token(chunk)
        finally:
            if isinstance(stream, Generator):
                stream.close()
        # a reply the model did not end (max_tokens, a stop word of the request, a cancel): a call it was writing is
        # no call (the format's own stops end a turn as its end-of-text token does)
        cut = reply.stop_reason != "eos" and not (reply.stop_reason == "stop" and reply.stop_string in extra_stops)
        yield from events.finish(coalescer.t_end_ms, cut)
        content, reasoning, calls = events.message()
        yield Done(request_id, content, meter.stats(reply, self.peak_memory_bytes()), reasoning, calls)

    def _steps(self, stream: Iterator[str], sampling: SamplingSettings, meter: Meter, stops: StopStringFilter,
               budget: ThinkingBudget, cancelled: threading.Event) -> Iterator[Step]:
        """The engine's pieces, each metered and through the stop filter, with the log-probabilities the engine wrote
        for it, until the reply ends (``self.reply.stop_reason``: the stream's end, a stop string, ``max_tokens`` or
        a cancel); then the text the stop filter still held, if any. The thinking budget is checked at each token."""
        reply, clock, max_tokens = self.reply, time.perf_counter, sampling.max_tokens
        logprobs = reply.logprobs if sampling.logprobs >= 0 else None
        taken = 0  # of the engine's log-probability entries, those handed on
        budgeted = budget.limit >= 0
        for raw in stream:
            now = clock()
            counted = meter.feed(raw, now)
            thought = ""
            if type(raw) is ReasoningText:
                thought, raw = raw, ""  # counted as a token; its text goes to the thinking
            elif counted and budgeted:
                budget.check(meter.reasoning_tokens)
            text = stops.feed(raw) if stops.active else raw
            entries: tuple[TokenLogprob, ...] = ()
            if logprobs is not None and len(logprobs) > taken:  # the entries the engine wrote for this piece
                fresh, taken = logprobs[taken:], len(logprobs)
                if not stops.matched:  # the token that completes a stop string shows no text
                    if len(fresh) == 1 and not fresh[0].token:  # one token's: its text is the piece
                        fresh = [dataclasses.replace(fresh[0], token=raw)]
                    entries = tuple(fresh)
            if stops.matched:
                reply.stop_reason, reply.stop_string = "stop", stops.matched
            elif meter.generated >= max_tokens:
                reply.stop_reason = "length"
            elif cancelled.is_set():
                reply.stop_reason = "cancelled"
            else:
                yield now, text, thought, counted, entries, False
                continue
            yield now, text, thought, counted, entries, True
            break
        else:
            if cancelled.is_set():
                reply.stop_reason = "cancelled"  # the backend ended early because of the cancel (e.g. during prefill)
        tail = stops.flush()
        if tail:
            yield clock(), tail, "", 0, (), True
