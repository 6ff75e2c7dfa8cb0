"""llama.cpp through llama-cpp-python: GGUF models on CPU, CUDA, Metal, ROCm or Vulkan builds.

llama_cpp is imported inside ``load``: this module is importable (and ``probe`` answers) without it.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import inspect
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from backends import json_schema, llama_cpp_log
from backends.chat_format import formats
from backends.chat_format import template as chat_template
from backends.llama_cpp_draft import DraftModel, PromptLookup, penalized_argmax
from app.datatypes import (Embedded, LoadSettings, Loaded, Message, PROMPT_LOOKUP, Prompt, SamplingSettings,
                           expert_tensor_patterns)
from backends.base import Availability, Backend, GenerationError, check_token_ids, physical_cores

# ggml_type values for the KV cache (ggml.h); a quantized V cache needs flash attention.
KV_CACHE_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2, "f32": 0, "bf16": 30}


@contextlib.contextmanager
def _reporting_load_progress(llama_cpp, kwargs: dict, on_progress: Callable[[float], None] | None):
    """Forward llama.cpp's model-loading progress (called per tensor, 0..1) to ``on_progress``, in steps
    of at least 1 %.

    llama-cpp-python's ``Llama`` does not take a progress callback yet
    (https://github.com/abetlen/llama-cpp-python/pull/2340), so until it does, the default model
    params it asks for while loading come back with our callback set.
    """
    if on_progress is None:
        yield
        return
    last = [-1.0]

    @llama_cpp.llama_progress_callback
    def progress(fraction: float, _data: ctypes.c_void_p) -> bool:
        if fraction >= 1.0 or fraction - last[0] >= 0.01:
            last[0] = fraction
            on_progress(min(max(float(fraction), 0.0), 1.0))
        return True  # keep loading

    if "progress_callback" in inspect.signature(llama_cpp.Llama.__init__).parameters:
        kwargs["progress_callback"] = progress
        yield
        return
    bindings = llama_cpp.llama_cpp
    default_params = bindings.llama_model_default_params

    def params_reporting_progress():
        params = default_params()
        params.progress_callback = progress
        return params

    bindings.llama_model_default_params = params_reporting_progress
    try:
        yield
    finally:
        bindings.llama_model_default_params = default_params


class _TensorBuftOverride(ctypes.Structure):
    """llama.h ``struct llama_model_tensor_buft_override {const char *pattern; ggml_backend_buffer_type_t buft;}``.
    llama-cpp-python 0.3.36 types ``llama_model_params.tensor_buft_overrides`` as a plain pointer and
    builds no such array itself, so we do."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h enum ggml_backend_dev_type


def _ggml_function(name: str, argtypes: list, restype):
    """A function of the runtime's own ggml (the libraries llama_cpp loaded): libggml, else libggml-base, where
    ggml-backend.cpp's functions live (dlsym finds them through libggml's dependencies; Windows' GetProcAddress
    does not)."""
    from llama_cpp import _ctypes_extensions, _ggml

    function = getattr(_ggml.libggml, name, None)
    if function is None:
        base = _ctypes_extensions.load_shared_library("ggml-base", _ggml.libggml_base_path)
        function = getattr(base, name, None)
    if function is None:
        raise GenerationError("load", f"this llama.cpp build's ggml has no {name}")
    function.argtypes, function.restype = argtypes, restype
    return function


def _cpu_buffer_type() -> int:
    """The CPU device's buffer type from the runtime's own ggml, as ``--cpu-moe`` passes it: llama.cpp compares
    the pointer with ggml_backend_cpu_buffer_type() and then still picks the CPU's repacked layout where it can."""
    dev_by_type = _ggml_function("ggml_backend_dev_by_type", [ctypes.c_int], ctypes.c_void_p)
    dev_buffer_type = _ggml_function("ggml_backend_dev_buffer_type", [ctypes.c_void_p], ctypes.c_void_p)
    device = dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    buft = dev_buffer_type(device) if device else None
    if not buft:
        raise GenerationError("load", "this llama.cpp build has no CPU device to keep the experts on")
    return buft


def expert_overrides(patterns: Sequence[str]) -> ctypes.Array:
    """A NULL-terminated ``llama_model_tensor_buft_override`` array sending ``patterns`` to the CPU buffer type.
    The caller keeps it alive as long as the model: llama.cpp keeps the pointer in the model's params."""
    overrides = (_TensorBuftOverride * (len(patterns) + 1))()  # zero-filled: the last entry is the terminator
    buft = _cpu_buffer_type()
    for entry, pattern in zip(overrides, patterns, strict=False):  # the terminator entry stays zero
        entry.pattern, entry.buft = pattern.encode(), buft  # the array keeps the bytes alive (ctypes _objects)
    return overrides


@contextlib.contextmanager
def _overriding_tensor_placement(llama_cpp, overrides: ctypes.Array | None):
    """Hand ``overrides`` to llama.cpp through the default model params ``Llama`` asks for while loading
    (it takes no tensor-override argument in 0.3.36), as _reporting_load_progress does for its callback."""
    if overrides is None:
        yield
        return
    bindings = llama_cpp.llama_cpp
    default_params = bindings.llama_model_default_params

    def params_with_overrides():
        params = default_params()
        params.tensor_buft_overrides = ctypes.cast(overrides, ctypes.c_void_p)
        return params

    bindings.llama_model_default_params = params_with_overrides
    try:
        yield
    finally:
        bindings.llama_model_default_params = default_params


class _Pieces(dict):
    """token -> the bytes it prints, or None for an end-of-generation token; each token is asked of
    llama.cpp once, the first time it is generated (a dict hit afterwards). Special tokens print nothing,
    as in ``Llama.detokenize``, unless ``special``: tool calls are marked by special tokens in some models'
    syntax (Mistral's ``[TOOL_CALLS]``, gpt-oss's ``<|channel|>``), which the reply must then keep."""

    def __init__(self, llama_cpp, vocab, special: bool = False) -> None:
        super().__init__()
        self._llama_cpp, self._vocab, self._special = llama_cpp, vocab, special

    def __missing__(self, token: int) -> bytes | None:
        llama_cpp, vocab = self._llama_cpp, self._vocab
        piece = None
        if not llama_cpp.llama_vocab_is_eog(vocab, token):
            buffer = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, self._special)
            if n < 0:  # longer than the buffer: -n is its length
                buffer = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, self._special)
            piece = buffer.raw[:n]
        self[token] = piece
        return piece


def _check_draft(model_path: str, draft: str) -> None:
    """Refuse, before anything loads, a draft model whose vocabulary is not the model's (app/models/drafts)."""
    from app.models import drafts

    problem = drafts.check_draft(model_path, draft)
    if problem:
        raise GenerationError("draft", problem, "a draft must come from the same model family, with the same tokenizer")


def _checked_projector(model_path: str, mmproj: str):
    """The projector's header, checked against the model's before either loads (app/models/vision)."""
    from app.errors import ModelFileError
    from app.models import metadata, vision

    try:
        projector = vision.read_projector(mmproj)
        vision.check_pair(metadata.read_model(model_path), projector)
    except ModelFileError as exc:
        raise GenerationError("projector", exc.message, exc.hint) from None
    return projector


def _content(message: Message, marker: str) -> str:
    """A message's text for the template, with one media marker per image ahead of it (libmtmd puts each image's
    embeddings where its marker is). In a prompt with images a marker typed in any text is dropped, or images and
    markers would not pair up."""
    if not marker:
        return message.content
    text = message.content.replace(marker, "")
    return marker * len(message.images) + "\n" + text if message.images else text


_POOLING_NAMES = {1: "mean", 2: "cls", 3: "last", 4: "rank"}  # llama.h enum llama_pooling_type


def _declared_pooling(model_path: str) -> int:
    """The pooling an embedding model's GGUF declares (``{arch}.pooling_type``); 0 for a chat model (none)."""
    from app.errors import ModelFileError
    from app.models.metadata import read_gguf_header

    try:
        kv, _, _ = read_gguf_header(model_path)
    except (OSError, ModelFileError):
        return 0  # llama.cpp's own load says what is wrong with the file
    arch = kv.get("general.architecture", "")
    pooling = kv.get(f"{arch}.pooling_type")
    return int(pooling) if isinstance(pooling, int) and pooling > 0 else 0


def _guidance_tokenizer(llguidance, llama_cpp, vocab, n_vocab: int):
    """llguidance's view of a llama.cpp vocabulary, its end-of-generation tokens (``<|im_end|>`` as well as
    ``<|endoftext|>``) and its special tokens by text (which a grammar must name as tokens), as
    ``llguidance.llamacpp.lltokenizer_from_vocab`` builds it (every token's bytes, control tokens marked with a leading
    0xff, llama.cpp's own tokenizer for text) but with llama_vocab_get_attr: that helper still calls the deprecated
    llama_token_get_attr."""
    buffer = ctypes.create_string_buffer(16 * 1024)
    tokens, end_of_turn, special = [], [], {}
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
        piece = buffer.raw[:max(n, 0)]
        attr = llama_cpp.llama_vocab_get_attr(vocab, token)
        if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL or (attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
                                                         and piece.startswith(b"<") and piece.endswith(b">")):
            piece = b"\xff" + piece
            special[piece[1:].decode("utf-8", "replace")] = token
        tokens.append(piece)
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            end_of_turn.append(token)
    tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    return (llguidance.LLTokenizer.from_llamacpp(tokens=tokens, vocab_ptr=vocab, tokenize_fptr=tokenize,
                                                 eos_token=end_of_turn, slices=None), frozenset(end_of_turn), special)


class _GreedySampler:
    """Greedy decoding with llama.cpp's repetition penalty, read off the logits row itself: the argmax, and only when
    that token is among the last ``last_n`` generated the row again with their penalty (float32, ``logit <= 0``
    multiplied, else divided, as ``llama_sampler_penalties_apply`` does). ``llama_sampler_sample`` fills a candidate
    array of the whole vocabulary and looks every candidate up in the penalty's table: ~0.7 ms a token at 152k
    entries on a laptop CPU, outside llama.cpp's decode counter. Same token, first maximum on ties, as the chain's
    greedy sampler picks."""

    def __init__(self, llama_cpp, llm, repeat_penalty: float) -> None:
        import collections

        import numpy as np

        self._lib, self._ctx, self._n_vocab, self._np = llama_cpp, llm.ctx, llm.n_vocab(), np
        self._penalty = np.float32(repeat_penalty)
        self._recent: collections.deque[int] = collections.deque(maxlen=llm.last_n_tokens_size)

    def sample(self, _chain, _ctx, idx) -> int:
        """``llama_sampler_sample``'s signature, so the token loop calls either the same way: ``idx`` is the batch
        row whose logits choose (-1: the last; speculative decoding verifies a row per guess)."""
        np = self._np
        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, idx), shape=(self._n_vocab,))
        token = int(logits.argmax())
        if self._penalty != 1 and token in self._recent:  # a penalty lowers only recent tokens: the rest stand
            token = penalized_argmax(np, logits, self._recent, self._penalty)
        self._recent.append(token)
        return token

    def accept(self, token: int) -> None:
        """A token chosen elsewhere (forced): it counts for the repetition penalty as a sampled one does."""
        self._recent.append(token)


class _WithMarkers(dict):
    """A reply's token pieces: the format's marker tokens as their text, every other token as ``base`` prints it."""

    def __init__(self, base: dict[int, bytes | None], kept: dict[int, bytes | None]) -> None:
        super().__init__(kept)
        self._base = base

    def __missing__(self, token: int) -> bytes | None:
        return self._base[token]


class _GuidedSampler:
    """The native sampler chain held to a grammar (backends/json_schema.TokenMask, llguidance): before each token the
    tokens the grammar refuses get a logit of -inf, then the chain chooses as always: llama.cpp's "grammar first"
    order, with a mask that costs tens of microseconds instead of a grammar walk over the vocabulary. The candidates
    live in one array allocated per reply, filled from the logits with numpy; the chain and the matcher are told the
    token taken, as ``llama_sampler_sample`` tells the chain."""

    def __init__(self, llama_cpp, llm, chain, mask: json_schema.TokenMask) -> None:
        import numpy as np

        self._lib, self._ctx, self._chain, self._mask = llama_cpp, llm.ctx, chain, mask
        n_vocab = llm.n_vocab()
        self._n_vocab = n_vocab
        self._data = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._data)  # id, logit, p: numpy fills the C array in place
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._all = llama_cpp.llama_token_data_array(self._data, n_vocab, -1, False)
        self._np = np

    def sample(self, _chain, _ctx, _idx) -> int:
        """``llama_sampler_sample``'s signature, so the token loop calls either the same way."""
        lib, np, view = self._lib, self._np, self._view
        view["id"] = self._ids
        view["logit"] = np.ctypeslib.as_array(lib.llama_get_logits_ith(self._ctx, -1), shape=(self._n_vocab,))
        view["p"] = 0.0
        view["logit"][self._mask.allowed() == 0] = -np.inf
        self._all.size, self._all.selected, self._all.sorted = self._n_vocab, -1, False
        lib.llama_sampler_apply(self._chain, ctypes.byref(self._all))
        token = int(view["id"][self._all.selected])
        try:
            self._mask.take([token])
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None
        lib.llama_sampler_accept(self._chain, token)
        return token

    def accept(self, token: int) -> None:
        """A token chosen elsewhere (forced): the grammar and the chain take it as a sampled one."""
        try:
            self._mask.take([token])
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None
        self._lib.llama_sampler_accept(self._chain, token)


class LlamaCppBackend(Backend):
    name = "llama.cpp"
    formats = ("gguf",)
    takes_projector = True
    structured_output = True

    def __init__(self) -> None:
        self._llm = None
        self._template = ""
        self._bos = self._eos = ""
        self._cancelled: threading.Event | None = None
        self._abort_cb = self._no_abort_cb = None  # keep the ctypes callbacks alive while llama.cpp holds them
        self._kv_tokens: list[int] = []  # what the KV cache holds, for the next prompt's prefix reuse
        self._pieces: dict[int, bytes | None] = {}
        self._special_pieces: dict[int, bytes | None] = {}  # special tokens as text: the format's markers
        self._marker_tokens: dict[str, int | None] = {}  # a format marker's text -> its special token, if it is one
        self._forced: collections.deque[int] = collections.deque()  # tokens to write next (Backend.force)
        self._overrides = None  # the tensor-placement array, alive while the model is
        self._mtmd = None  # the vision projector's mtmd context (llama.cpp tools/mtmd), when one is loaded
        self._pooling = 0  # an embedding model's pooling (llama.h enum llama_pooling_type); 0 for a chat model
        self._ll_tokenizer = None  # llguidance's view of the vocabulary, for structured output
        self._drafter: PromptLookup | DraftModel | None = None  # speculative decoding's guesses (LoadSettings.draft)
        self._draft_tokens = 0

    @classmethod
    def probe(cls) -> Availability:
        from app.runtimes import catalog  # which llama-cpp-python builds exist; none is imported here

        runtime = os.environ.get(catalog.RUNTIME_PATH_VAR)
        if runtime:  # an engine host started for one runtime must not fall back to another llama_cpp
            if not (Path(runtime) / "llama_cpp" / "__init__.py").is_file():
                return Availability.no(f"the llama.cpp runtime in {runtime} holds no llama_cpp package",
                                       "rebuild it: quantdesk runtime build NAME")
            return Availability.ok()
        if importlib.util.find_spec("llama_cpp") is None and not any(not r.problem for r in catalog.discover()):
            return Availability.no("llama-cpp-python is not installed", "pip install 'quantdesk[llama]'")
        return Availability.ok()

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        try:
            import llama_cpp
        except (OSError, RuntimeError) as exc:  # llama-cpp-python raises RuntimeError for a library it cannot load
            raise GenerationError("runtime", f"the llama.cpp runtime cannot start: {exc}",
                                  "choose another runtime (quantdesk runtime ls, quantdesk runtime use NAME)") from None

        settings.validate()
        kv_type = KV_CACHE_TYPES.get(settings.kv_cache_type)
        if kv_type is None:
            raise GenerationError("settings", f"unknown KV cache type {settings.kv_cache_type!r}",
                                  f"use one of {', '.join(KV_CACHE_TYPES)}")
        t0 = time.perf_counter()
        offload_supported = bool(llama_cpp.llama_supports_gpu_offload())
        kwargs = dict(
            model_path=model_path, n_ctx=settings.n_ctx, n_gpu_layers=settings.gpu_layers,
            n_threads=settings.threads or physical_cores(), use_mmap=settings.mmap,
            type_k=kv_type, type_v=kv_type, verbose=True,  # llama.cpp's log goes to the host's stderr
            # Sliding-window layers get a window-sized cache, as llama-server does by default and as
            # app/models/estimate.py assumes; llama-cpp-python's own default (swa_full=True) sizes them
            # for the full context, several times the memory on Gemma-style models.
            swa_full=False,
        )
        if settings.flash_attention is not None:
            kwargs["flash_attn"] = settings.flash_attention
        projector = _checked_projector(model_path, settings.mmproj) if settings.mmproj else None
        if settings.draft and settings.draft != PROMPT_LOOKUP:
            _check_draft(model_path, settings.draft)  # a draft of another vocabulary is refused before either loads
        self._pooling = _declared_pooling(model_path)
        if self._pooling:  # an embedding model: llama.cpp pools as its metadata says (mean, CLS, last, ...)
            kwargs["embedding"] = True
        patterns = expert_tensor_patterns(settings.cpu_moe)
        self._overrides = expert_overrides(patterns) if patterns else None
        try:
            with _reporting_load_progress(llama_cpp, kwargs, on_progress), \
                    _overriding_tensor_placement(llama_cpp, self._overrides), llama_cpp_log.capturing(llama_cpp) as log:
                self._llm = llama_cpp.Llama(**kwargs)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file" and friends
            raise GenerationError("load", f"llama.cpp could not load {Path(model_path).name}: {exc}",
                                  "see the engine log for llama.cpp's reason") from None
        if projector is not None:
            self._mtmd = self._load_projector(settings, projector)
        if settings.draft:
            self._drafter = self._load_drafter(llama_cpp, settings, kwargs)
            self._draft_tokens = settings.draft_tokens
        self._make_abort_callback(llama_cpp)
        self._kv_tokens = []
        self._ll_tokenizer = None
        self._pieces = _Pieces(llama_cpp, self._llm._model.vocab)
        self._special_pieces = _Pieces(llama_cpp, self._llm._model.vocab, special=True)
        metadata = self._llm.metadata
        self._bos = self._token_text(self._llm.token_bos())
        self._eos = self._token_text(self._llm.token_eos())
        self._template = metadata.get("tokenizer.chat_template") or ""
        self.tool_format = formats.tools_name(self._template)
        details = {"chat_template": "model" if self._template else "fallback: ChatML",
                   "tool_format": self.tool_format,
                   "model_bytes": int(llama_cpp.llama_model_size(self._llm.model)),
                   "n_params": int(llama_cpp.llama_model_n_params(self._llm.model)),
                   "architecture": metadata.get("general.architecture", ""),
                   "llama_cpp_path": os.path.dirname(llama_cpp.__file__)}  # which runtime's llama_cpp ran
        details.update(self._experts_in_ram(metadata, settings.cpu_moe))
        if projector is not None:
            details["vision"] = {"projector": projector.file_name, "projector_type": projector.projector_type,
                                 "image_tokens": projector.image_tokens}
        if self._pooling:
            details.update(embedding=True, pooling=_POOLING_NAMES.get(self._pooling, str(self._pooling)),
                           embedding_length=int(self._llm.n_embd()))
        if isinstance(self._drafter, DraftModel):
            details["draft"] = {"model": settings.draft, "model_bytes": self._drafter.model_bytes,
                                "draft_tokens": settings.draft_tokens}
        elif self._drafter is not None:
            details["draft"] = {"model": PROMPT_LOOKUP, "model_bytes": 0, "draft_tokens": settings.draft_tokens}
        if not self._template:
            self._template = chat_template.FALLBACK_TEMPLATE
        self.chat_template = formats.Template.of(self._template, self._bos, self._eos)
        self._marker_tokens = {}
        try:  # refuse a broken or hostile template now, not at the first message (and analyse its format once)
            self.prepare([Message("user", "hi")], SamplingSettings())
        except GenerationError as exc:
            self.unload()
            raise GenerationError("template", f"{Path(model_path).name}: {exc.message}",
                                  "the model file's chat template cannot be used") from None
        n_layers = int(llama_cpp.llama_model_n_layer(self._llm.model))
        devices = tuple(log.device_loads(n_layers))
        gpu_layers = sum(d.layers for d in devices if d.name != llama_cpp_log.HOST)
        offloaded = log.offloaded
        if on_progress:
            on_progress(1.0)
        return Loaded(
            backend=self.name, model_path=model_path, n_ctx=int(self._llm.n_ctx()), n_layers=n_layers,
            gpu_layers=gpu_layers, gpu_offload_supported=offload_supported,
            memory_bytes=self.memory_in_use(), load_ms=(time.perf_counter() - t0) * 1000, details=details,
            devices=devices, offloaded_layers=offloaded[0] if offloaded else None,
            offloadable_layers=offloaded[1] if offloaded else None,
        )

    def _load_projector(self, settings: LoadSettings, projector):
        """llama.cpp's multimodal context (libmtmd) for the projector, on the model just loaded: it encodes images
        into embeddings the text model decodes. On the GPU when the model's layers are there."""
        from llama_cpp import mtmd_cpp

        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu = settings.gpu_layers != 0
        params.n_threads = settings.threads or physical_cores()
        params.print_timings = False
        ctx = mtmd_cpp.mtmd_init_from_file(settings.mmproj.encode(), self._llm.model, params)
        if not ctx:
            self.unload()
            raise GenerationError("projector", f"llama.cpp could not load the vision projector {projector.file_name}",
                                  "see the engine log for llama.cpp's reason")
        if not mtmd_cpp.mtmd_support_vision(ctx):
            mtmd_cpp.mtmd_free(ctx)
            self.unload()
            raise GenerationError("projector", f"{projector.file_name} has no vision encoder")
        return ctx

    def sees_images(self) -> bool:
        return self._mtmd is not None

    def _load_drafter(self, llama_cpp, settings: LoadSettings, kwargs: dict) -> PromptLookup | DraftModel:
        """Prompt lookup, or the draft model loaded as the model was (same context, threads, GPU layers and KV
        cache type) in its own context. Speculation rolls the model's KV cache back after a wrong guess, which a
        recurrent model's state cannot do: refused for those."""
        is_recurrent = getattr(llama_cpp, "llama_model_is_recurrent", None)
        is_hybrid = getattr(llama_cpp, "llama_model_is_hybrid", None)
        model = self._llm.model
        if (is_recurrent and is_recurrent(model)) or (is_hybrid and is_hybrid(model)):
            self.unload()
            raise GenerationError("draft", "speculative decoding needs a model whose KV cache can be cut back; this "
                                           "one keeps a recurrent state", "load it without a draft")
        if settings.draft == PROMPT_LOOKUP:
            return PromptLookup()
        if self._pooling:
            self.unload()
            raise GenerationError("draft", "an embedding model makes no replies to speculate on",
                                  "load it without a draft")
        draft_kwargs = {k: v for k, v in kwargs.items() if k not in ("progress_callback", "embedding")}
        draft_kwargs["model_path"] = settings.draft
        try:
            draft = llama_cpp.Llama(**draft_kwargs)
        except ValueError as exc:
            self.unload()
            raise GenerationError("draft", f"llama.cpp could not load the draft model {Path(settings.draft).name}: "
                                           f"{exc}", "see the engine log for llama.cpp's reason") from None
        return DraftModel(llama_cpp, draft, self._llm.last_n_tokens_size, settings.draft_p_min)

    @staticmethod
    def _experts_in_ram(metadata: dict, cpu_moe: int) -> dict:
        """What ``cpu_moe`` did: the expert layers kept in RAM, or why nothing was."""
        if not cpu_moe:
            return {}
        arch = metadata.get("general.architecture", "")
        n_layers = int(metadata.get(f"{arch}.block_count") or 0)
        if not int(metadata.get(f"{arch}.expert_count") or 0):
            return {"experts_in_ram": 0, "experts_note": "not a mixture-of-experts model: experts in RAM ignored"}
        return {"experts_in_ram": n_layers if cpu_moe < 0 else min(cpu_moe, n_layers)}

    def _make_abort_callback(self, llama_cpp) -> None:
        """Let cancel interrupt a long prompt evaluation, not only the decode loop (CPU backend)."""

        @llama_cpp.ggml_abort_callback
        def should_abort(_data: ctypes.c_void_p) -> bool:
            return bool(self._cancelled is not None and self._cancelled.is_set())

        self._abort_cb = should_abort
        self._no_abort_cb = llama_cpp.ggml_abort_callback()  # NULL: no callback

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def message_content(self, message: Message, images_in_prompt: bool) -> str:
        """With images, one media marker per image ahead of the text (libmtmd puts each image where its marker is)."""
        if not images_in_prompt:
            return message.content
        from llama_cpp import mtmd_cpp

        return _content(message, mtmd_cpp.mtmd_default_marker().decode())

    def _render(self, messages: Prompt) -> str:
        if isinstance(messages, str):
            return messages
        if self.prepared is None:
            raise GenerationError("state", "the conversation was not prepared through the chat format")
        return self.prepared.prompt

    def _format_pieces(self, llama_cpp) -> dict[int, bytes | None] | None:
        """The special tokens this reply's format is written with (gpt-oss's ``<|channel|>``, Mistral's
        ``[TOOL_CALLS]``, a ``<think>`` that is a control token): each as its text, where llama.cpp would print a
        special token as nothing, as llama-server keeps a format's preserved tokens. None when there are none."""
        prepared = self.prepared
        if prepared is None:
            return None
        texts = {*prepared.preserved_tokens, prepared.thinking_start_tag, *prepared.thinking_end_tags}
        vocab = self._llm._model.vocab
        kept: dict[int, bytes | None] = {}
        for text in (t.strip() for t in texts):
            if not text:
                continue
            if text not in self._marker_tokens:
                ids = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                special = len(ids) == 1 and llama_cpp.llama_vocab_get_attr(vocab, ids[0]) & (
                    llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED)
                self._marker_tokens[text] = ids[0] if special and not llama_cpp.llama_vocab_is_eog(vocab, ids[0]) \
                    else None
            token = self._marker_tokens[text]
            if token is not None:
                kept[token] = self._special_pieces[token]
        return kept or None

    def force(self, text: str) -> None:
        self._forced.extend(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _sampler_chain(self, llama_cpp, sampling: SamplingSettings):
        """llama.cpp's native sampler chain, built as llama-cpp-python's ``Llama._init_sampler`` builds it
        (so a seed gives the same reply as through ``Llama.generate``): repetition penalty over the last
        ``last_n_tokens_size`` (64) generated tokens, then greedy, or top-k, top-p, min-p, temperature
        and a seeded draw. Without a seed llama.cpp draws a random one."""
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        add = llama_cpp.llama_sampler_chain_add
        add(chain, llama_cpp.llama_sampler_init_penalties(self._llm.n_vocab(), self._llm.last_n_tokens_size,
                                                          sampling.repeat_penalty, 0.0, 0.0))
        if sampling.temperature == 0:
            add(chain, llama_cpp.llama_sampler_init_greedy())
        else:
            add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
            add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
            add(chain, llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
            add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
            seed = llama_cpp.LLAMA_DEFAULT_SEED if sampling.seed is None else sampling.seed
            add(chain, llama_cpp.llama_sampler_init_dist(seed))
        return chain

    def _decode(self, llama_cpp, tokens: Sequence[int]) -> int:
        """Evaluate ``tokens`` after what the KV cache holds, n_batch at a time; llama_decode's status."""
        ctx, n_batch = self._llm.ctx, self._llm.n_batch
        for start in range(0, len(tokens), n_batch):
            chunk = tokens[start:start + n_batch]
            ids = (llama_cpp.llama_token * len(chunk))(*chunk)  # referenced until llama_decode returns
            status = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(ids, len(chunk)))
            if status != 0:
                return status
            self._kv_tokens.extend(chunk)
        return 0

    def _forget_kv(self, llama_cpp) -> None:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._llm.ctx), True)
        self._kv_tokens = []

    def _prefill(self, llama_cpp, tokens: list[int]) -> int:
        """Bring the KV cache to ``tokens``, reusing the longest prefix it already holds (the earlier turns
        of a chat), as ``Llama.generate`` does; llama_decode's status. Cancel can interrupt it through the
        abort callback, which is installed for the prompt only: llama.cpp calls it after every graph
        node, and a Python call per node would cost each generated token far more than the token loop."""
        ctx = self._llm.ctx
        cached = self._kv_tokens
        reuse = 0
        for a, b in zip(cached, tokens, strict=False):  # the common prefix
            if a != b:
                break
            reuse += 1
        reuse = min(reuse, len(tokens) - 1)  # at least one token to decode: its logits pick the first token
        if reuse and llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), -1, reuse, -1):
            del cached[reuse:]
        else:  # nothing to reuse, or a recurrent model's state cannot be cut back
            self._forget_kv(llama_cpp)
            reuse = 0
        llama_cpp.llama_set_abort_callback(ctx, self._abort_cb, None)
        try:
            return self._decode(llama_cpp, tokens[reuse:])
        finally:
            llama_cpp.llama_set_abort_callback(ctx, self._no_abort_cb, None)

    def _media_chunks(self, prompt: str, images: Sequence[str]):
        """The prompt cut by libmtmd into text chunks and image chunks (each image decoded and checked first,
        app/images); the caller frees them with mtmd_input_chunks_free."""
        from llama_cpp import mtmd_cpp

        from app import images as image_files

        if self._mtmd is None:
            raise GenerationError("vision", "this model does not see images: it was loaded without a vision projector",
                                  "remove the image, or load a vision model with its mmproj file")
        bitmaps = []
        try:
            for n, encoded in enumerate(images, 1):
                try:
                    width, height, rgb = image_files.decode_rgb(image_files.from_base64(encoded))
                except image_files.ImageError as exc:
                    raise GenerationError("image", f"image {n}: {exc.message}") from None
                bitmap = mtmd_cpp.mtmd_bitmap_init(width, height, (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb))
                if not bitmap:
                    raise GenerationError("image", f"image {n}: llama.cpp could not take it")
                bitmaps.append(bitmap)
                # the image's chunk carries this id: the next prompt with the same image reuses its KV cells
                mtmd_cpp.mtmd_bitmap_set_id(bitmap, hashlib.sha256(encoded.encode()).hexdigest().encode())
            text = prompt.encode("utf-8")
            inp = mtmd_cpp.mtmd_input_text()
            inp.text, inp.text_len, inp.add_special, inp.parse_special = text, len(text), True, True
            chunks = mtmd_cpp.mtmd_input_chunks_init()
            array = (mtmd_cpp.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
            status = mtmd_cpp.mtmd_tokenize(self._mtmd, chunks, ctypes.byref(inp), array, len(bitmaps))
            if status != 0:
                mtmd_cpp.mtmd_input_chunks_free(chunks)
                raise GenerationError("image", f"llama.cpp could not place the images in the prompt (mtmd_tokenize "
                                               f"returned {status})", "see the engine log for llama.cpp's reason")
            return chunks
        finally:
            for bitmap in bitmaps:  # the chunks hold their own copies of the images' tokens
                mtmd_cpp.mtmd_bitmap_free(bitmap)

    def _prefill_media(self, llama_cpp, chunks) -> int:
        """Bring the KV cache to a prompt with images, reusing the longest prefix it already holds (an image is
        named in ``_kv_tokens`` by a marker per position made from its id, so the earlier turns of a chat with the
        same images are neither re-encoded nor decoded again); text chunks are decoded, each image encoded by the
        projector and its embeddings decoded (mtmd_helper_eval_chunk_single); llama_decode's status. Models with
        M-RoPE (Qwen-VL: an image's positions are not one per cell) start from an empty cache each time."""
        from llama_cpp import mtmd_cpp

        ctx = self._llm.ctx
        pieces = []  # (chunk, the units it puts in the cache, whether it is text)
        for i in range(mtmd_cpp.mtmd_input_chunks_size(chunks)):
            chunk = mtmd_cpp.mtmd_input_chunks_get(chunks, i)
            if mtmd_cpp.mtmd_input_chunk_get_type(chunk) == mtmd_cpp.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t()
                tokens = mtmd_cpp.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                pieces.append((chunk, list(tokens[:n.value]), True))
            else:
                marker = -1 - (zlib.crc32(mtmd_cpp.mtmd_input_chunk_get_id(chunk) or b"") & 0x3FFFFFFF)
                pieces.append((chunk, [marker] * int(mtmd_cpp.mtmd_input_chunk_get_n_pos(chunk)), False))
        units = [u for _, piece, _ in pieces for u in piece]
        reuse = 0
        if not mtmd_cpp.mtmd_decode_use_mrope(self._mtmd):
            for a, b in zip(self._kv_tokens, units, strict=False):
                if a != b:
                    break
                reuse += 1
            reuse = min(reuse, len(units) - 1)
            start = 0
            for _, piece, is_text in pieces:  # never into the middle of an image: it is evaluated whole
                if not is_text and start < reuse < start + len(piece):
                    reuse = start
                start += len(piece)
        if reuse and llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), -1, reuse, -1):
            del self._kv_tokens[reuse:]
        else:
            self._forget_kv(llama_cpp)
            reuse = 0
        llama_cpp.llama_set_abort_callback(ctx, self._abort_cb, None)
        try:
            position = 0
            for index, (chunk, piece, is_text) in enumerate(pieces):
                end = position + len(piece)
                if end > reuse:
                    if is_text:
                        status = self._decode(llama_cpp, piece[max(reuse - position, 0):])
                    else:
                        n_past = llama_cpp.llama_pos(0)
                        status = mtmd_cpp.mtmd_helper_eval_chunk_single(
                            self._mtmd, ctx, chunk, position, 0, self._llm.n_batch, index == len(pieces) - 1,
                            ctypes.byref(n_past))
                        if status == 0:
                            self._kv_tokens.extend(piece)
                    if status != 0:
                        return int(status)
                position = end
        finally:
            llama_cpp.llama_set_abort_callback(ctx, self._no_abort_cb, None)
        return 0

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        """The token loop on llama.cpp's low-level API: llama_decode on a one-token batch, the native
        sampler chain, and each token's bytes looked up once per model."""
        import llama_cpp

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        if self._pooling:
            raise GenerationError("request", "the loaded model is an embedding model: it makes embeddings, not replies",
                                  "ask /v1/embeddings, or load a chat model")
        llm = self._llm
        prompt = self._render(messages)
        if self._bos and prompt.startswith(self._bos):
            prompt = prompt[len(self._bos):]  # llama.cpp adds BOS itself when the model asks for it
        images = [] if isinstance(messages, str) else [image for m in messages for image in m.images]
        media = self._media_chunks(prompt, images) if images else None  # text and image chunks (mtmd)
        tokens = [] if media else llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        n_prompt = len(tokens)
        n_ctx = llm.n_ctx()
        chain = None
        try:
            if media:
                from llama_cpp import mtmd_cpp

                n_prompt = int(mtmd_cpp.mtmd_helper_get_n_pos(media))
            if n_prompt >= n_ctx:
                raise GenerationError("context", f"the conversation is {n_prompt} tokens long but the context "
                                                 f"holds {n_ctx}", "start a new chat or load with a larger context")
            self.prompt_tokens = n_prompt
            ctx, kv_tokens = llm.ctx, None
            kept = self._format_pieces(llama_cpp)
            pieces = _WithMarkers(self._pieces, kept) if kept else self._pieces
            self._forced.clear()
            decode, sample = llama_cpp.llama_decode, llama_cpp.llama_sampler_sample
            utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
            grammar = self.reply_grammar(sampling)
            mask = self._token_mask(llama_cpp, grammar) if grammar is not None else None
            if mask is None and sampling.temperature == 0:  # no chain: the argmax off the logits row
                greedy = _GreedySampler(llama_cpp, llm, sampling.repeat_penalty)
                sample, accept = greedy.sample, greedy.accept
            else:
                chain = self._sampler_chain(llama_cpp, sampling)
                accept = functools.partial(llama_cpp.llama_sampler_accept, chain)
                if mask is not None:
                    guided = _GuidedSampler(llama_cpp, llm, chain, mask)
                    sample, accept = guided.sample, guided.accept
            drafter = self._drafter if not media and mask is None else None  # guesses of text replies only
            self.mark_prefill_start()
            status = self._prefill_media(llama_cpp, media) if media else self._prefill(llama_cpp, tokens)
            if drafter is not None and status == 0:
                drafter.start(tokens, sampling.repeat_penalty)
                status = yield from self._speculate(llama_cpp, drafter, tokens, sample, accept, chain, pieces, utf8)
                if status is None:
                    return
            n_past = n_prompt
            kv_tokens = self._kv_tokens
            next_token = (llama_cpp.llama_token * 1)()
            one = llama_cpp.llama_batch_get_one(next_token, 1)  # reads next_token at every decode
            forced = self._forced
            while status == 0:  # (after speculation status is its failing one: not entered)
                if forced:  # a thinking budget ran out: its closing tag, whatever the model would sample
                    token = forced.popleft()
                    accept(token)
                else:
                    token = sample(chain, ctx, -1)
                piece = pieces[token]
                if piece is None:  # end of generation
                    return
                yield utf8(piece)
                n_past += 1
                if n_past >= n_ctx:
                    return  # context full: end the reply rather than fail the next decode
                next_token[0] = token
                status = decode(ctx, one)
                if status == 0:
                    kv_tokens.append(token)
            if self._cancelled is not None and self._cancelled.is_set():
                self._forget_kv(llama_cpp)  # an aborted decode leaves the KV cache half-written
                return
            self._forget_kv(llama_cpp)
            raise GenerationError("decode", f"llama.cpp failed while generating (llama_decode returned {status})",
                                  "see the engine log for llama.cpp's reason")
        finally:
            if chain is not None:
                llama_cpp.llama_sampler_free(chain)
            if media:
                from llama_cpp import mtmd_cpp

                mtmd_cpp.mtmd_input_chunks_free(media)

    def _speculate(self, llama_cpp, drafter, prompt: list[int], sample, accept, chain, pieces, utf8):
        """The token loop with speculation: after each token the drafter guesses up to ``draft_tokens`` more, the
        model decodes the token and the guesses in one batch with logits for every row, and the sampler chooses on
        each row in turn as it would have one token at a time (greedy: the argmax; else the same chain, whose seeded
        draw advances once per token), so the reply is the model's own: each guess is kept while it is the token
        the model chose, and the first choice that differs ends the round as the next token (after all the guesses,
        the last row's choice is a token for free). The rejected guesses leave the KV cache. Returns None at the
        end of the reply, else llama_decode's failing status."""
        llm, ctx = self._llm, self._llm.ctx
        n_ctx, batch, kv = llm.n_ctx(), llm._batch, self._kv_tokens
        memory = llama_cpp.llama_get_memory(ctx)
        history = list(prompt)  # the prompt and every token yielded since: what the drafter guesses after
        token = sample(chain, ctx, -1)
        while True:
            piece = pieces[token]
            if piece is None:  # end of generation
                return None
            yield utf8(piece)
            history.append(token)
            if len(history) >= n_ctx:
                return None  # context full: end the reply rather than fail the next decode
            # no guesses while tokens are forced (Backend.force): the next one is not the model's choice
            guesses = [] if self._forced else drafter.propose(history, min(self._draft_tokens, n_ctx - len(history)))
            row_tokens = [token, *guesses]
            start = len(kv)
            batch.set_batch(row_tokens, n_past=start, logits_all=True)
            status = llama_cpp.llama_decode(ctx, batch.batch)
            if status != 0:
                return status
            kv.extend(row_tokens)
            self.verify_passes += 1
            self.drafted_tokens += len(guesses)
            kept = 0
            if self._forced:
                token = self._forced.popleft()
                accept(token)
            else:
                for row, guess in enumerate(guesses):
                    token = sample(chain, ctx, row)
                    if token != guess:
                        break
                    kept += 1
                else:
                    token = sample(chain, ctx, len(guesses))
            self.accepted_tokens += kept
            if kept < len(guesses):  # the rejected guesses' cells go, in the cache and in its record
                if not llama_cpp.llama_memory_seq_rm(memory, -1, start + 1 + kept, -1):
                    self._forget_kv(llama_cpp)
                    raise GenerationError("decode", "llama.cpp could not take rejected draft tokens back out of "
                                                    "the KV cache", "load the model without a draft")
                del kv[start + 1 + kept:]
            for guess in guesses[:kept]:
                piece = pieces[guess]
                if piece is None:
                    return None
                yield utf8(piece)
                history.append(guess)
                if len(history) >= n_ctx:
                    return None

    def _token_mask(self, llama_cpp, grammar: tuple[str, str]) -> json_schema.TokenMask:
        """The reply's grammar (Backend.reply_grammar) on llguidance's view of this model's vocabulary (built at the
        first structured reply, about a second at 150k tokens, then kept with the model), advanced past the
        generation prompt the grammar starts with."""
        try:
            import llguidance
        except ImportError:
            raise GenerationError("request", "structured output needs llguidance, which is not installed",
                                  "pip install 'quantdesk[llama]'") from None
        self._guidance(llguidance, llama_cpp)
        tokenizer, ends, _ = self._ll_tokenizer
        lark, generation_prompt = grammar
        primed = self._llm.tokenize(generation_prompt.encode("utf-8"), add_bos=False, special=True) \
            if generation_prompt else None
        try:
            return json_schema.TokenMask(tokenizer, lark, self._llm.n_vocab(), ends, primed)
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None

    def _guidance(self, llguidance, llama_cpp) -> None:
        if self._ll_tokenizer is None:
            self._ll_tokenizer = _guidance_tokenizer(llguidance, llama_cpp, self._llm._model.vocab, self._llm.n_vocab())

    def special_tokens(self) -> dict[str, int]:
        import llguidance
        import llama_cpp

        self._guidance(llguidance, llama_cpp)
        return self._ll_tokenizer[2]

    def generate(self, request_id, messages, sampling, cancelled, events_every_s=None):
        import llama_cpp

        self._cancelled = cancelled
        if self._llm is not None:
            llama_cpp.llama_perf_context_reset(self._llm.ctx)
        try:
            yield from super().generate(request_id, messages, sampling, cancelled, events_every_s)
        finally:
            self._cancelled = None
            if self._llm is not None:
                self._log_timings(llama_cpp, request_id)

    def _log_timings(self, llama_cpp, request_id: str) -> None:
        """llama.cpp's own timers for this reply, one line in the engine log (stderr): what the engine itself
        spent, beside the stats QuantDesk shows (tests/bench/token_loop.py compares the two)."""
        perf = llama_cpp.llama_perf_context(self._llm.ctx)
        print(f"[{request_id}] llama.cpp timings: prompt {perf.n_p_eval} tokens in {perf.t_p_eval_ms:.3f} ms, "
              f"decode {perf.n_eval} tokens in {perf.t_eval_ms:.3f} ms", file=sys.stderr, flush=True)

    def embed(self, request_id: str, texts: Sequence[str]) -> Embedded:
        """Each text's pooled embedding, unit length; the texts go to llama.cpp together, as many sequences of one
        batch as fit (``Llama.embed``)."""
        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        if not self._pooling:
            raise GenerationError("request", "the loaded model is not an embedding model (its GGUF declares no "
                                             "pooling)", "serve a GGUF embedding model")
        t0 = time.perf_counter()
        longest = max((len(self._llm.tokenize(t.encode("utf-8"))) for t in texts), default=0)
        if longest > self._llm.n_batch:
            raise GenerationError("context", f"a text is {longest} tokens long but the model embeds at most "
                                             f"{self._llm.n_batch} at once", "split the text")
        vectors, tokens = self._llm.embed(list(texts), normalize=True, truncate=False, return_count=True)
        self._kv_tokens = []  # embedding cleared the cache
        return Embedded(request_id, [[float(x) for x in v] for v in vectors], int(tokens),
                        (time.perf_counter() - t0) * 1000)

    # --- scoring (the quant lab): a separate evaluation with a logit row for every token, so the chat
    # context keeps computing only the last row and its speed is untouched.

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=special))

    def window_logits(self, tokens: Sequence[int], first: int):
        """One window from an empty cache, asking llama.cpp for the logit rows of positions ``first`` on only (as
        llama-perplexity does: the output layer over the whole vocabulary is a large share of a small model's work).
        Each block is a view of llama.cpp's own output buffer, valid until the next decode."""
        import numpy as np

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        llm = self._llm
        n_vocab = llm.n_vocab()
        check_token_ids(tokens, n_vocab)
        if len(tokens) > llm.n_ctx():
            raise GenerationError("context", f"{len(tokens)} tokens to score but the context holds {llm.n_ctx()}",
                                  "load with a larger context or score fewer tokens")
        llm.reset()
        llm._ctx.kv_cache_clear()
        self._kv_tokens = []  # the chat's prefix is gone from the cache
        batch = llm._batch
        try:
            for start in range(0, len(tokens), llm.n_batch):
                chunk = list(tokens[start:start + llm.n_batch])
                batch.set_batch(batch=chunk, n_past=start, logits_all=False)
                outputs = 0
                for i in range(len(chunk)):
                    wanted = start + i >= first
                    batch.batch.logits[i] = wanted
                    outputs += wanted
                if not outputs:  # llama.cpp computes the batch's last row anyway (set_batch asks for it)
                    batch.batch.logits[len(chunk) - 1] = False
                llm._ctx.decode(batch)
                if outputs:
                    rows = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(outputs * n_vocab,))
                    yield rows.reshape(outputs, n_vocab)
        except RuntimeError as exc:
            raise GenerationError("decode", f"llama.cpp failed while scoring: {exc}") from None
        finally:
            # The chat's prefix reuse trusts llm.input_ids and the KV cache: leave neither half-used.
            llm._ctx.kv_cache_clear()
            llm.reset()

    def logits_width(self) -> int:
        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        return int(self._llm.n_vocab())

    def vocabulary(self) -> list[str]:
        import llama_cpp

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        vocab = self._llm._model.vocab
        return [llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace")
                for i in range(self._llm.n_vocab())]

    def unload(self) -> None:
        if self._drafter is not None:
            drafter, self._drafter = self._drafter, None
            drafter.close()
        if self._mtmd is not None:
            from llama_cpp import mtmd_cpp

            mtmd, self._mtmd = self._mtmd, None
            mtmd_cpp.mtmd_free(mtmd)
        if self._llm is not None:
            llm, self._llm = self._llm, None
            llm.close()
        self._overrides = None
