"""The ground floor of types: the words the app and the engines share, importing nothing of the project but
``app.records`` (the one dict → dataclass rule, which imports nothing at all).

What a load and a generation are asked with (``LoadSettings``, ``SamplingSettings``, ``WindowScoring``), what they
are given (``Message``, ``Prompt``), what an engine answers with (the events, each a frozen dataclass with a
``type`` tag: it crosses the engine protocol as a plain dict and comes back as the same type), a tool call
(``ToolCall``), a device as a llama.cpp runtime's ggml sees it (``Device``: app/runtimes probes it, the hardware
profile records it, app/models plans with it), and the constants these carry.

Every layer may import this module; it imports only the standard library and ``app.records``. ``backends/base.py``
keeps the ``Backend`` contract and the generation loop; ``app/engine/protocol.py`` the wire format.

In detail (each module's job, read with docs/architecture.md's module map):

the ground floor of types, importing nothing of the project but ``app/records.py``: ``LoadSettings``,
``SamplingSettings``, ``WindowScoring``, ``Message`` and ``Prompt``, the engine events (``Loaded``, ``Progress``,
``Token``, ``Done``, ``ErrorEvent``, ``Scored``, ``Embedded``, ``Reranked``, ``Counted``, with ``GenerationStats``,
``DeviceLoad``, ``ToolCallDelta``), ``ToolCall``, the runtime ``Device``, ``ModelSampling`` (the sampling a model
recommends), ``ContextUse`` (how much of the context a conversation holds after a reply, of it the documents'
passages (``documents``), and when it is nearly full: the Chat's context meter and ``quantdesk chat``'s stats line),
the overflow policies (``OVERFLOW_POLICIES``) and ``ContextCut`` (what a policy left out of a prompt, and the note
that stands for it: the mark the Chat, the CLI and the server show) and ``choose_sampling`` (the one rule for a
generation's sampling, for the Chat, ``quantdesk chat`` and the server: the user's value, then the model's, then
``SamplingSettings``' default, each with its source),and the constants they carry (draft defaults,
``EXPERT_TENSORS_REGEX``, reasoning efforts); every layer imports it, the engine protocol carries it
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.records import known_fields

StopReason = Literal["eos", "length", "stop", "cancelled"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI's API carries it


PROMPT_LOOKUP = "prompt-lookup"  # LoadSettings.draft: guesses from the text itself, no draft model
DEFAULT_DRAFT_TOKENS = 8
MAX_DRAFT_TOKENS = 64
# A draft model stops guessing at a token it is less sure of than this (its probability among its ten likeliest):
# llama-server's --draft-p-min default (common/common.h, common_params_speculative::p_min). An unsure guess is
# mostly a wrong one, and each costs a draft decode and a wider verification batch.
DEFAULT_DRAFT_P_MIN = 0.75


MAX_PARALLEL = 64  # sequences decoded together at most (llama.cpp allows 256; a CPU gains little past 8)
# Replies decoded together where nobody says otherwise: serve's --parallel, the Server page's and the Chat's "Decode
# together" (llama.cpp's unified cache barely grows with it; MLX's grows, and the load planner lowers it to what fits)
DEFAULT_PARALLEL = 4


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
    # llama.cpp's extra buffer types (the CPU repack, AMX): off is the crash guard's safer configuration
    # (app/engine/guard.py), where llama.cpp's AMX kernels crash (ggml-org/llama.cpp#20824).
    extra_buffer_types: bool = True
    # The chat template the model is served with, where the user picks one (llama.cpp): a bundled template's name
    # (backends/chat_format/bundled.py: gemma, llama3, qwen2, qwen3, phi3, mistral, chatml) or a template file (a
    # .jinja, or a tokenizer_config.json); "" for the model's own, else its base model's, else its family's.
    chat_template: str = ""
    # How many replies the engine decodes together (llama.cpp: each in its own sequence of one unified KV cache, every
    # one up to the whole context; together they share what the cache holds; MLX: mlx-lm's BatchGenerator, a cache
    # per sequence); 1 answers one request at a time.
    parallel: int = 1

    def validate(self) -> None:
        if not 1 <= self.parallel <= MAX_PARALLEL:
            raise ValueError(f"parallel sequences must be between 1 and {MAX_PARALLEL}, not {self.parallel}")
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
    # Log-probabilities of the reply's tokens on its Token events (``Token.logprobs``): -1 none (nothing computed),
    # 0 each chosen token's, N also its N likeliest alternatives (OpenAI's ``top_logprobs``, at most MAX_TOP_LOGPROBS).
    logprobs: int = -1
    # The prompt was cut by an overflow policy (app/engine/overflow.py): runs of it the KV cache holds further on are
    # moved to their new positions instead of read again (llama-server's --cache-reuse). Only then: a moved run's keys
    # are rotated, not recomputed, so the reply may part from a fresh read's; an uncut prompt stays exact.
    cache_reuse: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingSettings:
        """Settings saved or sent as a dict (a chat's saved sampling, a preset, the engine protocol): keys a newer
        or older version wrote are ignored, ``stop`` and ``tools`` may be any sequence."""
        values: dict[str, Any] = {k: (tuple(v) if k in _TUPLE_FIELDS else v)
                                  for k, v in known_fields(cls, data).items()}
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
        if not -1 <= self.logprobs <= MAX_TOP_LOGPROBS:
            problems.append(f"logprobs must be -1 (none) or 0 to {MAX_TOP_LOGPROBS} alternatives, not {self.logprobs}")
        if problems:
            raise ValueError("; ".join(problems))


# The sampling values a model may recommend (GGUF general.sampling.*, generation_config.json) and a chat, a
# command line or a request may set; each is taken from the first that has it: the user, the model's preset (the
# user's values saved for that model: app/hub/presets.py), the model, QuantDesk.
SAMPLING_KNOBS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty")
SamplingSource = Literal["user", "preset", "model", "default"]


@dataclass(frozen=True)
class ModelSampling:
    """The sampling a model's own files recommend (app/models/metadata/sampling.py reads it, bounded): None where
    the model says nothing. ``origin`` names where it was read ("general.sampling.*", "generation_config.json");
    ``ignored`` says, per value left out, why (a value outside what an engine takes, a wrong type)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    origin: str = ""
    ignored: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """The values the model gives, by SamplingSettings' names."""
        return {k: getattr(self, k) for k in SAMPLING_KNOBS if getattr(self, k) is not None}


@dataclass(frozen=True)
class ChosenSampling:
    """A generation's sampling and where each of SAMPLING_KNOBS came from (``sources``: user | preset | model |
    default)."""

    settings: SamplingSettings
    sources: dict[str, SamplingSource]

    def described(self) -> dict[str, dict[str, Any]]:
        """Each knob's value and source, as `quantdesk chat --json` and the API report them."""
        return {k: {"value": getattr(self.settings, k), "source": self.sources[k]} for k in SAMPLING_KNOBS}


def choose_sampling(chosen: dict[str, Any], model: ModelSampling | None,
                    preset: dict[str, Any] | None = None) -> ChosenSampling:
    """The one rule for a generation's sampling (the Chat, ``quantdesk chat``, the server): a value the user set
    (``chosen``: a chat's saved settings, a named preset, a command-line flag, a request's field; None counts as not
    set) wins, then the model's preset (``preset``: the sampling the user saved for this model), then the model's
    recommendation, then SamplingSettings' own default. The rest of ``chosen`` and ``preset`` (max_tokens, seed,
    thinking, ...) passes through, ``chosen``'s first."""
    given = {k: v for k, v in chosen.items() if v is not None or k not in SAMPLING_KNOBS}
    saved = {k: v for k, v in (preset or {}).items() if v is not None or k not in SAMPLING_KNOBS}
    recommended = model.values() if model is not None else {}
    sources: dict[str, SamplingSource] = {
        k: "user" if k in given else "preset" if k in saved else "model" if k in recommended else "default"
        for k in SAMPLING_KNOBS}
    return ChosenSampling(SamplingSettings.from_dict({**recommended, **saved, **given}), sources)


_TUPLE_FIELDS = ("stop", "tools")
MAX_TOP_LOGPROBS = 20  # OpenAI's bound on top_logprobs
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
    # The crash guard's sentence (app/engine/guard.py): the engine crashed and this load is its safer configuration,
    # or a configuration learned after a crash was applied. Set by the client, never by the host.
    notice: str = ""
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
class TopLogprob:
    """One of the likeliest tokens at a step of a reply, with its log-probability under the model (before sampling's
    temperature and cut-offs, as llama-server reports it)."""

    id: int
    token: str  # its text (an incomplete UTF-8 sequence left out; ``bytes`` has all of it)
    logprob: float
    bytes: tuple[int, ...]


@dataclass(frozen=True)
class TokenLogprob:
    """A chosen token's log-probability and, when asked, its likeliest alternatives (``SamplingSettings.logprobs``):
    OpenAI's ``logprobs.content[]`` entry. ``token`` is the text the token added to the reply as generated."""

    id: int
    token: str
    logprob: float
    bytes: tuple[int, ...]
    top: tuple[TopLogprob, ...] = ()


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
    # The prompt's tokens, and how many of them the engine reused from its KV cache, on a reply's first event (0 on
    # the others, and where the engine learns them only at the end: a remote server): a stream's opening can say them.
    prompt_tokens: int = 0
    cached_tokens: int = 0
    # The log-probabilities of the tokens this event stands for, in order, when the request asked for them
    # (SamplingSettings.logprobs); empty otherwise (then nothing was computed). A token that completed a stop string
    # has none, as it has no text.
    logprobs: tuple[TokenLogprob, ...] = ()
    # The thinking so far, as the engine measures it (backends/base.Meter; the Done's stats say the same at the end):
    # its tokens, the time from its first token to its latest, and when the answer's first token came (ms since the
    # request arrived; 0 while none has).
    reasoning_tokens: int = 0
    reasoning_ms: float = 0.0
    first_answer_ms: float = 0.0
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
    # Of the prompt's tokens, those the engine did not evaluate again: the prefix its KV cache already held from the
    # previous request (llama.cpp; 0 where an engine does not say).
    cached_tokens: int = 0

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


# A context this close to full is worth a warning: less than this share of it left (ContextUse.near_full).
CONTEXT_WARN_SHARE = 0.1


@dataclass(frozen=True)
class ContextUse:
    """How much of a loaded model's context a conversation holds after a reply: the prompt the engine read (system
    prompt, history, images, thinking, tools' results, as the model's template wrote them) and the reply it made.
    The one rule behind the Chat's context meter and ``quantdesk chat``'s stats line."""

    used: int
    n_ctx: int
    documents: int = 0  # of ``used``: the tokens of the passages of the user's documents in the prompt (issue 28)

    @classmethod
    def after(cls, stats: GenerationStats, n_ctx: int, documents: int = 0) -> ContextUse:
        return cls(stats.prompt_tokens + stats.generated_tokens, n_ctx, documents)

    @property
    def documents_share(self) -> float:
        """The documents' passages' share of the context, 0 to 1 (0 where the context is not known)."""
        return min(self.documents / self.n_ctx, 1.0) if self.n_ctx > 0 else 0.0

    @property
    def left(self) -> int:
        return max(self.n_ctx - self.used, 0)

    @property
    def share(self) -> float:
        """The used share, 0 to 1 (0 where the context is not known)."""
        return min(self.used / self.n_ctx, 1.0) if self.n_ctx > 0 else 0.0

    def near_full(self, max_tokens: int) -> bool:
        """Whether the next reply may not fit: less than ``CONTEXT_WARN_SHARE`` of the context left, or less than
        the reply's ``max_tokens`` (counted up to half the context: a max_tokens as large as the context would warn
        from the first reply on). A full context ends the chat: the engine refuses the next prompt."""
        reply = min(max_tokens, self.n_ctx // 2)
        return self.n_ctx > 0 and self.left < max(self.n_ctx * CONTEXT_WARN_SHARE, reply)


# What happens to a conversation that no longer fits the context with room for the reply (app/engine/overflow.py
# decides; the Chat, ``quantdesk chat`` and the server offer the same choice): "stop" refuses the message with the
# engine's sentence, as before there was a choice; "drop-oldest" leaves out the oldest turns (the system prompt
# kept); "truncate-middle" leaves out the turns after the first exchange (the system prompt and the first exchange
# kept); "compact" has the model summarise the turns it leaves out into a note it keeps in the system prompt.
OVERFLOW_POLICIES = ("stop", "drop-oldest", "truncate-middle", "compact")
DEFAULT_OVERFLOW = "stop"


def overflow_policy(text: str) -> str:
    """``text`` as one of OVERFLOW_POLICIES (also with an underscore); ValueError with the choices otherwise."""
    policy = text.strip().lower().replace("_", "-")
    if policy not in OVERFLOW_POLICIES:
        raise ValueError(f"the overflow policy must be one of {', '.join(OVERFLOW_POLICIES)}, not {text!r}")
    return policy


@dataclass(frozen=True)
class ContextCut:
    """What an overflow policy left out of the prompt, so that it is marked and never silent: messages
    ``start`` … ``start + dropped - 1`` of the conversation (indices into the whole conversation as the caller
    keeps it, its system prompt included) were not sent to the model; under "compact" the model's ``note`` on them
    (and on the previous note) was sent instead, in the system prompt. Stored with the message whose reply needed
    it (app/chats/store), reported by the server (``quantdesk`` field, ``X-QuantDesk-Context-Dropped``).
    Pinned messages inside that range were sent all the same: ``kept`` lists their indices, and the range then ends
    at ``end`` (``dropped`` counts only the messages left out)."""

    policy: str
    start: int
    dropped: int
    note: str = ""
    prompt_tokens: int = 0  # the prompt as sent, counted before the reply
    kept: tuple[int, ...] = ()  # pinned messages inside the range, sent (same indices as ``start``)

    @property
    def end(self) -> int:
        """One past the range's last message."""
        return self.start + self.dropped + len(self.kept)

    def left_out(self) -> list[int]:
        """The indices of the messages not sent."""
        return [i for i in range(self.start, self.end) if i not in self.kept]

    def words(self) -> str:
        """The mark's sentence, as the Chat, the CLI and the server's field say it."""
        what = f"{self.dropped} earlier message{'s' if self.dropped != 1 else ''}"
        if self.policy == "compact":
            text = f"{what} compacted into a note by the model (context full)"
        else:
            text = f"{what} not sent to the model (context full)"
        if self.kept:
            text += f", {len(self.kept)} pinned message{'s' if len(self.kept) != 1 else ''} kept"
        return text

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not self.kept:  # as before pins: what older readers and stored cuts have
            del out["kept"]
        else:
            out["kept"] = list(self.kept)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextCut:
        fields = known_fields(cls, data)
        if "kept" in fields:
            fields["kept"] = tuple(int(i) for i in fields["kept"] or ())
        return cls(**fields)

    def shifted(self, by: int) -> ContextCut:
        """The same cut with its indices moved by ``by`` (a system prompt added or taken away in front)."""
        return dataclasses.replace(self, start=self.start + by, kept=tuple(i + by for i in self.kept))


@dataclass(frozen=True)
class Done:
    request_id: str
    text: str  # the answer's text, as the Token events' texts add up to
    stats: GenerationStats
    reasoning: str = ""  # the reply's thinking, apart
    tool_calls: tuple[ToolCall, ...] = ()  # the tool calls the reply made, read in the model's own syntax
    # The crash guard's sentence when the engine crashed under this reply and it was replayed in a safer
    # configuration (app/engine/guard.py); set by the client, never by the host.
    notice: str = ""
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


@dataclass(frozen=True)
class Reranked:
    """Each text's relevance to a query by a reranker model (``Backend.rerank``: llama.cpp's rank pooling, the
    first of the classifier head's outputs), in the order the texts came; higher is more relevant."""

    request_id: str
    scores: list[float]
    prompt_tokens: int
    rerank_ms: float
    type: Literal["reranked"] = "reranked"


@dataclass(frozen=True)
class Counted:
    """How many tokens a prompt is, rendered through the model's chat template and tokenized as a generation would
    (``Backend.count_prompt_tokens``), without generating."""

    request_id: str
    prompt_tokens: int
    type: Literal["counted"] = "counted"


@dataclass(frozen=True)
class StateSaved:
    """The engine's state for the conversation it holds, written to ``path`` (a chat resumed later without reading
    it again): ``n_tokens`` the tokens its KV cache holds, ``file_bytes`` the file's size."""

    request_id: str
    path: str
    n_tokens: int
    file_bytes: int
    ms: float
    type: Literal["state_saved"] = "state_saved"


@dataclass(frozen=True)
class StateRestored:
    """Which saved state the engine restored for a prompt (``path``, "" for none: none matched the prompt's tokens
    better than its KV cache already did), how many of the prompt's tokens it holds now (``n_tokens``), and the
    files it refused and why (``discarded``: [path, reason] pairs, for the parent to log and delete)."""

    request_id: str
    path: str
    n_tokens: int
    ms: float
    discarded: tuple[tuple[str, str], ...] = ()
    type: Literal["state_restored"] = "state_restored"


Event = (Loaded | Progress | Token | Done | ErrorEvent | Scored | Embedded | Reranked | Counted | StateSaved
         | StateRestored)


# --- Devices


@dataclass(frozen=True)
class Device:
    """One device as a llama.cpp runtime's ggml reports it (app/runtimes/devices.py asks it in a child; the hardware
    profile keeps it in ``RuntimeInfo.devices``)."""

    name: str  # ggml's device name: "Vulkan0", "CUDA0", "Metal", "CPU"
    description: str = ""  # "NVIDIA GeForce RTX 4070", "llvmpipe (LLVM 15.0.6, 256 bits)"
    type: str = ""  # cpu | gpu | igpu | accel
    memory_total: int = 0
    memory_free: int = 0  # iGPUs and APUs: the shared budget the driver grants, not only the carve-out
    vendor: str = ""  # nvidia | amd | intel | apple | software | "" (unknown, or the host CPU)
    software: bool = False  # a CPU-type Vulkan device (lavapipe, SwiftShader): a CPU dressed as a GPU
    # Vulkan: the largest tensor a shader may address (maxStorageBufferRange); ggml-vulkan runs an op
    # with a bigger input or output on the CPU. None: no such limit known.
    max_tensor_bytes: int | None = None
    # The largest single allocation ggml makes in the device's memory and in its pinned host memory
    # (ggml_backend_buft_get_max_size: Vulkan sub-allocates in 1 GiB blocks); None: unlimited.
    max_buffer_bytes: int | None = None
    host_max_buffer_bytes: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.type in ("gpu", "igpu")

    def label(self) -> str:
        """"llvmpipe (2.0 GiB)": the device's own name and the memory ggml may use on it."""
        name = self.description or self.name
        return f"{name} ({self.memory_total / (1 << 30):.1f} GiB)" if self.memory_total else name
