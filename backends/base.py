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
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from app.records import known_fields
from backends.chat_format.tool_calls import ToolCall

if TYPE_CHECKING:
    from backends.chat_format.formats import Prepared, Request, Template

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
    # chat template as ``tools``, as Hugging Face's apply_chat_template passes them. ``tool_choice`` "required"
    # holds the reply to one call at least, in the model's own syntax (a named function: give only that tool).
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: str = "auto"  # auto | required | none
    parallel_tool_calls: bool = True
    # Thinking models (backends/chat_format): ``enable_thinking`` False asks the template for no thinking (None: the
    # template's default); ``reasoning_effort`` (low | medium | high) is gpt-oss's knob; ``reasoning_budget`` closes
    # the thinking block after that many tokens, the way the model's format closes it, with
    # ``reasoning_budget_message`` written before the closing tag (-1: no budget; 0: no thinking).
    # ``reasoning_format`` "none" leaves the thinking in the reply's text, as llama-server's option of that name.
    enable_thinking: bool | None = None
    reasoning_effort: str = ""
    reasoning_budget: int = -1
    reasoning_budget_message: str = ""
    reasoning_format: str = "auto"  # auto | deepseek | deepseek-legacy | none
    # Further variables for the chat template, as llama-server's ``chat_template_kwargs`` (JSON values).
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingSettings:
        """Settings saved or sent as a dict (a chat's saved sampling, a preset, the engine protocol): keys a newer
        or older version wrote are ignored, ``stop`` and ``tools`` may be any sequence."""
        values = {k: (tuple(v) if k in _TUPLE_FIELDS else v) for k, v in known_fields(cls, data).items()}
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
        if self.tool_choice not in TOOL_CHOICES:
            problems.append(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, not {self.tool_choice!r}")
        if self.tool_choice == "required" and not self.tools:
            problems.append("tool_choice required needs tools")
        if self.reasoning_effort not in REASONING_EFFORTS:
            problems.append(f"reasoning_effort must be one of {', '.join(e or '(none)' for e in REASONING_EFFORTS)}, "
                            f"not {self.reasoning_effort!r}")
        if not -1 <= self.reasoning_budget <= 1_000_000:
            problems.append(f"reasoning_budget must be -1 (none) or 0 to 1,000,000 tokens, not {self.reasoning_budget}")
        if self.reasoning_format not in REASONING_FORMATS:
            problems.append(f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}, "
                            f"not {self.reasoning_format!r}")
        if not isinstance(self.chat_template_kwargs, dict):
            problems.append("chat_template_kwargs must be an object")
        if problems:
            raise ValueError("; ".join(problems))


_TUPLE_FIELDS = ("stop", "tools")
TOOL_CHOICES = ("auto", "required", "none")
REASONING_EFFORTS = ("", "low", "medium", "high")
REASONING_FORMATS = ("auto", "deepseek", "deepseek-legacy", "none")


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
    reasoning: str = ""  # an assistant turn's thinking; the template decides whether the model sees it again

    def template_dict(self) -> dict[str, Any]:
        """The message as a chat template reads it: only the fields it has."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.reasoning:
            out["reasoning_content"] = self.reasoning
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
class ToolCallDelta:
    """A streamed piece of a tool call: the first for a call has its id and name, later ones more arguments."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class Token:
    """One generated token. ``text`` is what became printable with it: it may be empty while a
    multi-byte character or a possible stop string is still incomplete."""

    request_id: str
    text: str  # the answer's text (for a chat, what its format shows: not the thinking, not tool-call syntax)
    t_ms: float  # since the request arrived in the engine
    count: int = 1  # tokens this event stands for: 0 for the held-back text released at the end
    reasoning: str = ""  # the thinking written with these tokens
    tool_calls: tuple[ToolCallDelta, ...] = ()  # tool calls begun or extended with these tokens
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
    # Thinking models: tokens inside the thinking block, the time from its first token to its last, and the time
    # from the request's arrival to the first token of the answer (0 when the reply has none).
    reasoning_tokens: int = 0
    reasoning_ms: float = 0.0
    first_answer_ms: float = 0.0

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
        if not self.reasoning_tokens:  # no thinking: likewise
            for name in ("reasoning_tokens", "reasoning_ms"):
                del out[name]
        return out


@dataclass(frozen=True)
class Done:
    request_id: str
    text: str  # the answer's text, as the Token events' texts add up to
    stats: GenerationStats
    reasoning: str = ""  # the reply's thinking, apart
    tool_calls: tuple[ToolCall, ...] = ()  # the tool calls the reply made, read in the model's own syntax
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
    # The loaded model's chat template, with its BOS and EOS texts (backends/chat_format): the prompt is rendered and
    # the reply read through it. None where the engine renders itself (a remote server).
    chat_template: Template | None = None
    # The chat format's name for the loaded model's tools ("" when its template takes no tools); in Loaded.details.
    tool_format: str = ""
    # The request being generated, as the chat format prepared it (its prompt, its reply parser); None for a raw
    # prompt. Set by ``generate`` before ``_stream`` runs, which renders ``prepared.prompt``.
    prepared: Prepared | None = None
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
        if (sampling.json_schema is not None or sampling.tool_choice == "required") and not self.structured_output:
            raise GenerationError("request", f"{self.name} cannot hold a reply to a JSON schema or force a tool call",
                                  "load a GGUF model (llama.cpp) for structured output")
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
            tool_choice="none" if not sampling.tools else sampling.tool_choice,
            # the format's own response-format reading, unless literal text is asked for around the JSON
            json_schema=None if sampling.json_prefix or sampling.json_suffix else sampling.json_schema,
            parallel_tool_calls=sampling.parallel_tool_calls,
            reasoning_format=sampling.reasoning_format,
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

        schema, prepared = sampling.json_schema, self.prepared
        forced_call = bool(sampling.tools) and sampling.tool_choice == "required"
        if not forced_call and schema is None:
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

    def force(self, text: str) -> None:
        """Make the model write ``text`` next, token by token, whatever it would have sampled (a thinking budget that
        ran out closes the thinking block). Engines that can, override it; the rest let the model go on."""

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

        A conversation's reply is read through the model's chat format as it comes (backends/chat_format): each
        chunk's thinking, answer and tool calls go out apart, thinking tokens are counted and timed, and a thinking
        budget that runs out closes the thinking block the way the model's format does.
        """
        from backends.chat_format.reply import ReplyReader, ThinkingTracker

        clock = time.perf_counter
        t_start = clock()
        self.check_request(sampling)
        self.prepared = prepared = self.prepare(messages, sampling)
        extra_stops = prepared.additional_stops if prepared is not None else ()
        stops = StopStringFilter(tuple(sampling.stop) + tuple(extra_stops))
        reader = ReplyReader(prepared, self.chat_template.source if self.chat_template else "") \
            if prepared is not None and prepared.parser is not None else None
        thinking = ThinkingTracker(prepared) if prepared is not None else None
        budget = sampling.reasoning_budget if thinking is not None and thinking.active else -1
        max_tokens = sampling.max_tokens
        coalesce_s = self.COALESCE_S if events_every_s is None or not self.COALESCE_S else events_every_s
        chunk: list[str] = []  # released text not handed out yet
        chunk_reasoning: list[str] = []  # thinking a remote engine sent apart (ReasoningText), not handed out yet
        released: list[str] = []  # everything released, for the Done of a reply without a reader
        released_reasoning: list[str] = []
        chunk_tokens = 0
        generated = reasoning_tokens = 0
        t_first = t_last = t_reasoning_first = t_reasoning_last = t_answer = None
        t_sent = -coalesce_s  # the first token goes out at once
        stop_reason: StopReason = "eos"
        forced = False
        self.prompt_tokens = 0
        self.drafted_tokens = self.accepted_tokens = self.verify_passes = 0
        self._t_prefill = None

        def event(t_ms: float, count: int) -> Token:
            text, reasoning = "".join(chunk), "".join(chunk_reasoning)
            chunk.clear()
            chunk_reasoning.clear()
            released.append(text)
            released_reasoning.append(reasoning)
            if reader is None:
                return Token(request_id, text, t_ms, count=count, reasoning=reasoning)
            reader.feed(text)
            return _token_from(request_id, reader.deltas(), t_ms, count)

        if budget == 0 and thinking is not None and thinking.inside:  # the template opened it anyway: close it
            self.force(sampling.reasoning_budget_message + prepared.thinking_end_tags[0])  # type: ignore[union-attr]
            forced = True
        stream = self._stream(messages, sampling)
        try:
            for raw in stream:
                now = clock()
                if type(raw) is ReasoningText:
                    chunk_reasoning.append(raw)
                    raw = TrailingText("")  # counted above as a token; its text went to the thinking
                    generated += 1
                    chunk_tokens += 1
                    reasoning_tokens += 1
                    t_first = t_first or now
                    t_reasoning_first = t_reasoning_first or now
                    t_last = t_reasoning_last = now
                elif type(raw) is not TrailingText:
                    generated += 1
                    chunk_tokens += 1
                    if t_first is None:
                        t_first = now
                    t_last = now
                    if thinking is not None and thinking.feed(raw):
                        reasoning_tokens += 1
                        t_reasoning_first = t_reasoning_first or now
                        t_reasoning_last = now
                        if 0 <= budget <= reasoning_tokens and thinking.inside and not forced:
                            self.force(sampling.reasoning_budget_message
                                       + prepared.thinking_end_tags[0])  # type: ignore[union-attr]
                            forced = True
                    elif t_answer is None and raw.strip():
                        t_answer = now
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
                    yield event((now - t_start) * 1000, chunk_tokens)
                    chunk_tokens = 0
                    t_sent = now
        except Exception:
            if chunk or chunk_reasoning:  # what arrived before the engine failed stays with the caller
                yield event(((t_last or clock()) - t_start) * 1000, chunk_tokens)
            raise
        finally:
            stream.close()
        if stop_reason == "eos" and cancelled.is_set():
            stop_reason = "cancelled"  # the backend ended early because of the cancel (e.g. during prefill)
        tail = stops.flush() if not stops.matched else ""
        if tail:
            chunk.append(tail)
        t_chunk = t_last if chunk_tokens and t_last is not None else clock()  # held-back text alone: now
        if chunk or chunk_reasoning or chunk_tokens:
            yield event((t_chunk - t_start) * 1000, chunk_tokens)
        if reader is not None:
            last = _token_from(request_id, reader.deltas(final=True), (t_chunk - t_start) * 1000, 0)
            if last.text or last.reasoning or last.tool_calls:
                yield last
            content, reasoning, calls = reader.finish()
        else:
            content, reasoning, calls = "".join(released), "".join(released_reasoning), ()
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
            reasoning_tokens=reasoning_tokens,
            reasoning_ms=((t_reasoning_last - t_reasoning_first) * 1000
                          if t_reasoning_first is not None and t_reasoning_last is not None else 0.0),
            first_answer_ms=(t_answer - t_start) * 1000 if t_answer is not None else 0.0,
        )
        yield Done(request_id, content, stats, reasoning, calls)


def _token_from(request_id: str, deltas: Sequence[Any], t_ms: float, count: int) -> Token:
    """One Token event for a chunk's deltas (backends/chat_format/stream.Delta): its answer text, its thinking and
    the tool calls it begins or extends."""
    return Token(request_id, "".join(d.content for d in deltas), t_ms, count=count,
                 reasoning="".join(d.reasoning for d in deltas),
                 tool_calls=tuple(ToolCallDelta(d.tool_index, d.tool_id, d.tool_name, d.tool_arguments)
                                  for d in deltas if d.tool_index >= 0))
