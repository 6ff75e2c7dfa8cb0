"""The inference backend interface: one small contract every engine implements.

Qt-free and free of inference imports: this module is imported by the GUI process (for the types)
and by the engine host (for the loop). A backend module imports its engine library lazily, inside
``load``, so ``probe`` can say "not installed" instead of breaking an import.

A backend supplies three things: ``probe`` (can it run here, and if not why), ``load`` and a raw
token stream (``_stream``). The shared ``generate`` loop around that stream does what must be the same
for every engine: stop strings, max tokens, cancel between tokens, and the timing of every phase,
measured here, in the process that produces the tokens.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

StopReason = Literal["eos", "length", "stop", "cancelled"]


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


PROMPT_LOOKUP = "prompt-lookup"  # LoadSettings.draft: guesses from the text itself, no draft model
DEFAULT_DRAFT_TOKENS = 8
MAX_DRAFT_TOKENS = 64
# A draft model stops guessing at a token it is less sure of than this (its probability among its ten likeliest):
# llama-server's --draft-p-min default (common/common.h, common_params_speculative::p_min). An unsure guess is
# mostly a wrong one, and each costs a draft decode and a wider verification batch.
DEFAULT_DRAFT_P_MIN = 0.75


@dataclass
class LoadSettings:
    n_ctx: int = 4096
    gpu_layers: int = -1  # -1: every layer the build can offload; 0: CPU only
    flash_attention: bool | None = None  # None: the engine decides
    kv_cache_type: str = "f16"  # f16 | q8_0 | q4_0 (ExLlama: fp16 | q8 | q6 | q4)
    threads: int | None = None  # None: physical cores
    mmap: bool = True
    gpu_split: list[float] | None = None  # GiB per GPU (ExLlama); None: automatic
    # Mixture-of-experts models (llama.cpp): keep the expert weights of the first N layers in system RAM while
    # the rest of each layer runs on the GPU; -1 keeps every layer's experts in RAM, 0 none (--n-cpu-moe / --cpu-moe).
    cpu_moe: int = 0
    # A vision projector (mmproj GGUF) loaded beside a llama.cpp model, so its chats take images; "" for none.
    mmproj: str = ""
    # Speculative decoding: a draft model's path (same vocabulary, llama.cpp: a GGUF; MLX: a model folder) whose
    # guesses the model verifies several at a time, or "prompt-lookup" (llama.cpp: guesses copied from the prompt
    # and the reply so far, after the last few tokens' earlier occurrence); "" for none. ``draft_tokens`` is how
    # many tokens are guessed per verification at most; ``draft_p_min`` ends a draft model's guesses at the first it
    # is less sure of (llama.cpp; mlx-lm's drafts always run ``draft_tokens``; prompt lookup has no probabilities).
    draft: str = ""
    draft_tokens: int = DEFAULT_DRAFT_TOKENS
    draft_p_min: float = DEFAULT_DRAFT_P_MIN

    def validate(self) -> None:
        if self.n_ctx < 16:
            raise ValueError(f"context length must be at least 16 tokens, not {self.n_ctx}")
        if self.cpu_moe < -1:
            raise ValueError(f"experts in RAM must be -1 (all), 0 or a number of layers, not {self.cpu_moe}")
        if self.gpu_layers < -1:
            raise ValueError(f"GPU layers must be -1 (all), 0 or more, not {self.gpu_layers}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be at least 1, not {self.threads}")
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise ValueError(f"draft tokens must be between 1 and {MAX_DRAFT_TOKENS}, not {self.draft_tokens}")
        if not 0 <= self.draft_p_min <= 1:
            raise ValueError(f"the draft's minimum probability must be between 0 and 1, not {self.draft_p_min}")


# llama.cpp's own patterns for --cpu-moe and --n-cpu-moe (common/common.h: LLM_FFN_EXPS_REGEX and
# llm_ffn_block_regex), matched with std::regex_search against each tensor name: the expert stacks
# (ffn_up_exps, ffn_gate_exps, ffn_down_exps, fused ffn_gate_up_exps and chunked *_chexps, weights and biases).
EXPERT_TENSORS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


def expert_tensor_patterns(cpu_moe: int) -> list[str]:
    """The tensor-name patterns whose tensors stay in system RAM for ``LoadSettings.cpu_moe``."""
    if cpu_moe < 0:
        return [EXPERT_TENSORS_REGEX]
    return [rf"blk\.{il}{EXPERT_TENSORS_REGEX}" for il in range(cpu_moe)]


@dataclass
class SamplingSettings:
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # Structured output: the reply is JSON valid against this JSON Schema (``{"type": "object"}``: any object),
    # enforced by the engine's grammar-constrained decoding; ``json_prefix`` and ``json_suffix`` are literal text
    # around it (a forced tool call in the model's own syntax: ``<tool_call>\n`` … ``\n</tool_call>``).
    json_schema: dict[str, Any] | None = None
    json_prefix: str = ""
    json_suffix: str = ""
    # Tools the model may call, as OpenAI's ``tools`` list ({"type": "function", "function": {...}}): they reach the
    # chat template as ``tools``, as Hugging Face's apply_chat_template passes them.
    tools: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingSettings:
        """Settings saved or sent as a dict (a chat's saved sampling, a preset, the engine protocol): keys a newer
        or older version wrote are ignored, ``stop`` and ``tools`` may be any sequence."""
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {k: (tuple(v) if k in _TUPLE_FIELDS else v) for k, v in data.items() if k in known}
        return cls(**values)

    def validate(self) -> None:
        """Refuse values no engine should see (the local server relies on this too)."""
        problems = []
        if not 0 <= self.temperature <= 10:
            problems.append(f"temperature must be between 0 and 10, not {self.temperature}")
        if not 0 < self.top_p <= 1:
            problems.append(f"top_p must be in (0, 1], not {self.top_p}")
        if self.top_k < 0:
            problems.append(f"top_k must be 0 (off) or more, not {self.top_k}")
        if not 0 <= self.min_p <= 1:
            problems.append(f"min_p must be between 0 and 1, not {self.min_p}")
        if not 0 < self.repeat_penalty <= 10:
            problems.append(f"repeat_penalty must be in (0, 10], not {self.repeat_penalty}")
        if not 1 <= self.max_tokens <= 1_000_000:
            problems.append(f"max_tokens must be between 1 and 1,000,000, not {self.max_tokens}")
        if self.seed is not None and not 0 <= self.seed < 2**32:
            problems.append(f"seed must be between 0 and 2**32-1, not {self.seed}")
        if len(self.stop) > 16 or any(not s for s in self.stop):
            problems.append("stop takes at most 16 non-empty strings")
        if self.json_schema is not None and not isinstance(self.json_schema, dict):
            problems.append("json_schema must be a JSON Schema object")
        if (self.json_prefix or self.json_suffix) and self.json_schema is None:
            problems.append("json_prefix and json_suffix need a json_schema")
        if problems:
            raise ValueError("; ".join(problems))


_TUPLE_FIELDS = ("stop", "tools")


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant | tool
    content: str
    # Images that come with the message, before its text: each a PNG, JPEG or WebP file, base64-encoded (the
    # engine protocol is JSON lines). Only a model loaded with a vision projector takes them.
    images: tuple[str, ...] = ()
    # An assistant turn's tool calls, as chat templates read them: [{"id", "type": "function", "function":
    # {"name", "arguments": {...}}}] (arguments as an object, as Hugging Face templates expect).
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str = ""  # a tool turn: the call it answers
    name: str = ""  # a tool turn: the function that answered

    def template_dict(self) -> dict[str, Any]:
        """The message as a chat template reads it: only the fields it has."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        return out


# What a generation starts from: a conversation, rendered through the model's chat template, or a raw
# string given to the model as it is (OpenAI's /v1/completions, the quant lab's fixed prompts).
Prompt = Sequence[Message] | str


# --- Events. Every event is a frozen dataclass with a ``type`` tag, so it crosses the process
# boundary as a plain dict (app/engine/protocol.py) and comes back as the same type.


@dataclass(frozen=True)
class DeviceLoad:
    """What one device holds after a load, as the engine itself reported it (llama.cpp: its load log)."""

    name: str  # the engine's device name: "Vulkan0", "CUDA0", "Metal"; "CPU" for host memory
    description: str = ""  # "NVIDIA GeForce RTX 4070", "llvmpipe (LLVM 15.0.6, 256 bits)"
    layers: int = 0  # transformer blocks placed on it
    model_bytes: int = 0
    kv_bytes: int = 0
    compute_bytes: int = 0
    output_bytes: int = 0
    free_bytes_before: int | None = None  # what the device had free when the load started

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.kv_bytes + self.compute_bytes + self.output_bytes


@dataclass(frozen=True)
class Loaded:
    backend: str
    model_path: str
    n_ctx: int
    n_layers: int  # transformer blocks in the model (0 when the backend cannot tell)
    gpu_layers: int  # blocks actually placed on a GPU
    gpu_offload_supported: bool  # whether this build of the engine can use a GPU at all
    memory_bytes: dict[str, int]  # device name -> bytes the loaded model holds there
    load_ms: float
    details: dict[str, Any] = field(default_factory=dict)
    # llama.cpp: the runtime that ran the load (app/runtimes), why it was chosen, and what went where.
    runtime: str = ""
    runtime_reason: str = ""
    devices: tuple[DeviceLoad, ...] = ()  # GPUs first, host memory ("CPU") last
    offloaded_layers: int | None = None  # llama.cpp's "offloaded N/M layers", the output layer counted
    offloadable_layers: int | None = None
    type: Literal["loaded"] = "loaded"


@dataclass(frozen=True)
class Progress:
    fraction: float
    type: Literal["progress"] = "progress"


@dataclass(frozen=True)
class Token:
    """One generated token. ``text`` is what became printable with it: it may be empty while a
    multi-byte character or a possible stop string is still incomplete."""

    request_id: str
    text: str
    t_ms: float  # since the request arrived in the engine
    count: int = 1  # tokens this event stands for: 0 for the held-back text released at the end
    type: Literal["token"] = "token"


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int
    prompt_ms: float  # prompt processing: the engine starting on the prompt until the first token
    ttft_ms: float  # request arrival until the first token was handed out (includes templating)
    generated_tokens: int
    decode_ms: float  # first token until the last: the decode phase
    stop_reason: StopReason
    peak_memory_bytes: int
    stop_string: str = ""  # which of the request's stop strings ended the reply (stop_reason "stop"); "" if unknown
    # What a remote server reported about the same generation (llama.cpp-style ``timings``), kept beside the
    # figures measured here; None for local engines.
    server: dict[str, float] | None = None
    # Speculative decoding (LoadSettings.draft): tokens the draft (or prompt lookup) proposed, how many of them the
    # model confirmed, and how many verification passes the model ran for the reply's tokens after the first.
    draft_tokens: int = 0
    accepted_tokens: int = 0
    verify_passes: int = 0

    @property
    def acceptance_rate(self) -> float | None:
        """Share of the drafted tokens the model confirmed; None when nothing was drafted."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else None

    @property
    def tokens_per_pass(self) -> float | None:
        """Decode-phase tokens per verification pass of the model: 1 without a draft, so the most speculation can
        speed up decoding when a draft costs nothing (the measured speed-up: tests/bench/speculative.py)."""
        return self.decode_tokens / self.verify_passes if self.verify_passes else None

    @property
    def decode_tokens(self) -> int:
        """Tokens produced in the decode phase: the first one comes out of prompt processing."""
        return max(self.generated_tokens - 1, 0)

    @property
    def decode_tps(self) -> float:
        return self.decode_tokens / (self.decode_ms / 1000) if self.decode_ms > 0 else 0.0

    @property
    def prompt_tps(self) -> float:
        return self.prompt_tokens / (self.prompt_ms / 1000) if self.prompt_ms > 0 else 0.0

    def to_public_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.update(decode_tokens=self.decode_tokens, decode_tps=self.decode_tps, prompt_tps=self.prompt_tps)
        if self.draft_tokens or self.verify_passes:
            out.update(acceptance_rate=self.acceptance_rate, tokens_per_pass=self.tokens_per_pass)
        else:  # no speculation: the fields would only say zero
            for name in ("draft_tokens", "accepted_tokens", "verify_passes"):
                del out[name]
        return out


@dataclass(frozen=True)
class Done:
    request_id: str
    text: str
    stats: GenerationStats
    type: Literal["done"] = "done"


@dataclass(frozen=True)
class ErrorEvent:
    """A failure the engine survived (bad request, load failure, unsafe template)."""

    kind: str
    message: str
    hint: str = ""
    request_id: str = ""
    type: Literal["error"] = "error"


@dataclass(frozen=True)
class Scored:
    """How the loaded model scores a fixed text (``Backend.score``): the quant lab's perplexity and, against a
    reference, llama-perplexity's KL-divergence figures, computed from it in the parent.

    Plain scoring gives the log-probability of each token. Windowed scoring (``backends.scoring``) writes its
    per-position figures, and a new reference, to the files the request named: they would be too big for the event
    channel, and a window's logits are never kept past the window.
    """

    request_id: str
    tokens: list[int]  # plain: the scored ids (empty where a remote server tokenizes itself); windowed: empty
    token_logprobs: list[float]  # plain: log p(tokens[i+1] | tokens[:i+1]), one value fewer than tokens
    vocab_size: int  # width of the distributions (0 where unknown)
    score_ms: float
    windows: int = 0  # windowed: the windows scored
    positions: int = 0  # windowed: the positions scored (their figures are in the request's positions_out)
    peak_memory_bytes: int = 0  # windowed: the engine process's peak RAM by the end of the pass
    type: Literal["scored"] = "scored"


# The reference keeps each position's likeliest tokens until at most this much probability is left out, and at most
# this many of them (backends.scoring measures what that costs the KL divergence).
DEFAULT_TAIL = 1e-4
DEFAULT_MAX_TOKENS = 4096


@dataclass(frozen=True)
class WindowScoring:
    """How a model scores a text in llama-perplexity's windows (backends.scoring), and which file it reads or
    writes: a ``score`` request's ``windows``."""

    n_ctx: int = 512
    chunks: int = 0  # at most this many windows; 0: every whole window of the text
    reference_path: str = ""  # compare with this reference (its tokens are scored; no text needed)
    reference_out: str = ""  # write this model's reference here (from the request's text)
    positions_out: str = ""  # the per-position figures (POSITIONS, .npy)
    tail: float = DEFAULT_TAIL
    max_tokens: int = DEFAULT_MAX_TOKENS
    special: bool = False  # read special-token text as those tokens (a chat rendered with its template)
    description: dict[str, Any] = field(default_factory=dict)  # kept in a new reference's header

    def validate(self) -> None:
        if self.n_ctx < 16 or self.n_ctx % 2:
            raise ValueError(f"the scoring context must be an even number of tokens, at least 16, not {self.n_ctx}")
        if self.chunks < 0:
            raise ValueError(f"chunks must be 0 (all) or more, not {self.chunks}")
        if not 0 <= self.tail < 1:
            raise ValueError(f"the left-out mass must be between 0 and 1, not {self.tail}")
        if self.max_tokens < 1:
            raise ValueError(f"the reference keeps at least one token per position, not {self.max_tokens}")
        if bool(self.reference_path) == bool(self.reference_out):
            raise ValueError("windowed scoring reads a reference or writes one")


@dataclass(frozen=True)
class Embedded:
    """Embeddings of a batch of texts (``Backend.embed``), in order, each normalized to unit length."""

    request_id: str
    vectors: list[list[float]]
    prompt_tokens: int
    embed_ms: float
    type: Literal["embedded"] = "embedded"


Event = Loaded | Progress | Token | Done | ErrorEvent | Scored | Embedded


class GenerationError(Exception):
    """Raised by a backend for a request it cannot serve; becomes an ErrorEvent, the engine lives on."""

    def __init__(self, kind: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint


class TrailingText(str):
    """Text a backend releases at the end of a stream without a new token (a detokenizer's remainder)."""


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

    # Tokens are handed out in chunks at most this often (the first one at once): see ``generate``.
    COALESCE_S: ClassVar[float] = 0.010

    name: ClassVar[str]
    formats: ClassVar[tuple[str, ...]]  # model formats it runs: gguf, mlx, safetensors, exl2, exl3
    takes_projector: ClassVar[bool] = False  # loads a vision projector (LoadSettings.mmproj) beside the model
    # Whether it can hold a reply to SamplingSettings.json_schema (grammar-constrained decoding).
    structured_output: ClassVar[bool] = False
    # The loaded model's tool-call syntax (backends/tool_calls.py), "" when its chat template declares no tools.
    tool_format: str = ""

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

        Before its first yield it sets ``self.prompt_tokens``. The caller stops consuming at max
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

        ids = list(self.tokenize(text) if tokens is None else tokens)[:max_tokens]
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

    prompt_tokens: int = 0
    _t_prefill: float | None = None
    # Speculative decoding's counts for the reply being generated (GenerationStats' fields of the same names):
    # ``_stream`` sets them, the shared loop reports them.
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    verify_passes: int = 0

    def check_request(self, sampling: SamplingSettings) -> None:
        """Refuse, in words, what this engine and model cannot do, before any work."""
        if sampling.json_schema is not None and not self.structured_output:
            raise GenerationError("request", f"{self.name} cannot hold a reply to a JSON schema",
                                  "load a GGUF model (llama.cpp) for structured output")
        if sampling.tools and not self.tool_format:
            raise GenerationError("template", "this model's chat template has no tool support, so it cannot be "
                                              "given tools", "use a model whose chat template declares tools")

    def mark_prefill_start(self) -> None:
        """Called by ``_stream`` once the prompt is rendered and tokenized, before the engine runs it."""
        self._t_prefill = time.perf_counter()

    def generate(self, request_id: str, messages: Prompt, sampling: SamplingSettings,
                 cancelled: threading.Event, events_every_s: float | None = None) -> Iterator[Token | Done]:
        """The shared generation loop: yields Token events, then one Done.

        Tokens are timed one by one, but handed out in chunks: the first token at once, then whatever came
        in the last ``COALESCE_S`` (or ``events_every_s``, when the caller asks for another window: the
        server asks for its stream's) with each later token, and the rest before the Done. A fast engine
        (thousands of tokens a second) then costs the event channel, the client and the GUI a hundred
        small messages a second instead of one per token; a slow one still sends every token as it comes.
        A backend that never holds tokens back (``COALESCE_S`` 0: a remote stream can stall) keeps so.
        """
        clock = time.perf_counter
        t_start = clock()
        self.check_request(sampling)
        stops = StopStringFilter(sampling.stop)
        max_tokens = sampling.max_tokens
        coalesce_s = self.COALESCE_S if events_every_s is None or not self.COALESCE_S else events_every_s
        pieces: list[str] = []  # the whole released text, for the Done
        chunk: list[str] = []  # released text not handed out yet
        chunk_tokens = 0
        generated = 0
        t_first = t_last = None
        t_sent = -coalesce_s  # the first token goes out at once
        stop_reason: StopReason = "eos"
        self.prompt_tokens = 0
        self.drafted_tokens = self.accepted_tokens = self.verify_passes = 0
        self._t_prefill = None
        stream = self._stream(messages, sampling)
        try:
            for raw in stream:
                now = clock()
                if type(raw) is not TrailingText:
                    generated += 1
                    chunk_tokens += 1
                    if t_first is None:
                        t_first = now
                    t_last = now
                text = stops.feed(raw) if stops.active else raw
                if text:
                    chunk.append(text)
                if stops.matched:
                    stop_reason = "stop"
                    break
                if generated >= max_tokens:
                    stop_reason = "length"
                    break
                if cancelled.is_set():
                    stop_reason = "cancelled"
                    break
                if now - t_sent >= coalesce_s:
                    text = "".join(chunk)
                    pieces.append(text)
                    chunk.clear()
                    yield Token(request_id, text, (now - t_start) * 1000, count=chunk_tokens)
                    chunk_tokens = 0
                    t_sent = now
        except Exception:
            if chunk:  # what arrived before the engine failed stays with the caller, ahead of the error
                yield Token(request_id, "".join(chunk), ((t_last or clock()) - t_start) * 1000, count=chunk_tokens)
            raise
        finally:
            stream.close()
        if stop_reason == "eos" and cancelled.is_set():
            stop_reason = "cancelled"  # the backend ended early because of the cancel (e.g. during prefill)
        tail = stops.flush() if not stops.matched else ""
        if tail:
            chunk.append(tail)
        if chunk or chunk_tokens:
            text = "".join(chunk)
            pieces.append(text)
            t_chunk = t_last if chunk_tokens and t_last is not None else clock()  # held-back text alone: now
            yield Token(request_id, text, (t_chunk - t_start) * 1000, count=chunk_tokens)
        t_first = t_first or clock()
        t_last = t_last or t_first
        stats = GenerationStats(
            prompt_tokens=self.prompt_tokens,
            prompt_ms=(t_first - (self._t_prefill or t_start)) * 1000,
            ttft_ms=(t_first - t_start) * 1000,
            generated_tokens=generated,
            decode_ms=(t_last - t_first) * 1000,
            stop_reason=stop_reason,
            peak_memory_bytes=self.peak_memory_bytes(),
            stop_string=stops.matched,
            draft_tokens=self.drafted_tokens,
            accepted_tokens=self.accepted_tokens,
            verify_passes=self.verify_passes,
        )
        yield Done(request_id, "".join(pieces), stats)
