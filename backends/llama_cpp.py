"""llama.cpp through llama-cpp-python: GGUF models on CPU, CUDA, Metal, ROCm or Vulkan builds.

llama_cpp is imported inside ``load``: this module is importable (and ``probe`` answers) without it.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import importlib.util
import inspect
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from backends import chat_template, llama_cpp_log
from backends.base import (
    Availability,
    Backend,
    GenerationError,
    Loaded,
    LoadSettings,
    Prompt,
    SamplingSettings,
    check_token_ids,
    expert_tensor_patterns,
    physical_cores,
)

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


class LlamaCppBackend(Backend):
    name = "llama.cpp"
    formats = ("gguf",)

    def __init__(self) -> None:
        self._llm = None
        self._template = ""
        self._bos = self._eos = ""
        self._cancelled: threading.Event | None = None
        self._abort_cb = None  # keep the ctypes callback alive while llama.cpp holds it
        self._overrides = None  # the tensor-placement array, alive while the model is

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
        patterns = expert_tensor_patterns(settings.cpu_moe)
        self._overrides = expert_overrides(patterns) if patterns else None
        try:
            with _reporting_load_progress(llama_cpp, kwargs, on_progress), \
                    _overriding_tensor_placement(llama_cpp, self._overrides), llama_cpp_log.capturing(llama_cpp) as log:
                self._llm = llama_cpp.Llama(**kwargs)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file" and friends
            raise GenerationError("load", f"llama.cpp could not load {Path(model_path).name}: {exc}",
                                  "see the engine log for llama.cpp's reason") from None
        self._install_abort_callback(llama_cpp)
        metadata = self._llm.metadata
        self._bos = self._token_text(self._llm.token_bos())
        self._eos = self._token_text(self._llm.token_eos())
        self._template = metadata.get("tokenizer.chat_template") or ""
        details = {"chat_template": "model" if self._template else "fallback: ChatML",
                   "model_bytes": int(llama_cpp.llama_model_size(self._llm.model)),
                   "n_params": int(llama_cpp.llama_model_n_params(self._llm.model)),
                   "architecture": metadata.get("general.architecture", ""),
                   "llama_cpp_path": os.path.dirname(llama_cpp.__file__)}  # which runtime's llama_cpp ran
        details.update(self._experts_in_ram(metadata, settings.cpu_moe))
        if not self._template:
            self._template = chat_template.FALLBACK_TEMPLATE
        try:  # refuse a broken or hostile template now, not at the first message
            chat_template.render(self._template, [{"role": "user", "content": "hi"}],
                                 bos_token=self._bos, eos_token=self._eos)
        except chat_template.TemplateError as exc:
            self.unload()
            raise GenerationError("template", f"{Path(model_path).name}: {exc}",
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

    def _install_abort_callback(self, llama_cpp) -> None:
        """Let cancel interrupt a long prompt evaluation, not only the decode loop (CPU backend)."""

        @llama_cpp.ggml_abort_callback
        def should_abort(_data: ctypes.c_void_p) -> bool:
            return bool(self._cancelled is not None and self._cancelled.is_set())

        self._abort_cb = should_abort
        llama_cpp.llama_set_abort_callback(self._llm.ctx, should_abort, None)

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def _render(self, messages: Prompt) -> str:
        if isinstance(messages, str):
            return messages
        try:
            return chat_template.render(self._template, [{"role": m.role, "content": m.content} for m in messages],
                                        bos_token=self._bos, eos_token=self._eos)
        except chat_template.TemplateError as exc:
            raise GenerationError("template", str(exc)) from None

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        import llama_cpp

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        llm = self._llm
        prompt = self._render(messages)
        if self._bos and prompt.startswith(self._bos):
            prompt = prompt[len(self._bos):]  # llama.cpp adds BOS itself when the model asks for it
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        if len(tokens) >= llm.n_ctx():
            raise GenerationError("context", f"the conversation is {len(tokens)} tokens long but the context "
                                             f"holds {llm.n_ctx()}", "start a new chat or load with a larger context")
        self.prompt_tokens = len(tokens)
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)
        vocab = llm._model.vocab
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.mark_prefill_start()
        generator = llm.generate(tokens, top_k=sampling.top_k, top_p=sampling.top_p, min_p=sampling.min_p,
                                 temp=sampling.temperature, repeat_penalty=sampling.repeat_penalty)
        try:
            for token in generator:
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    return
                yield utf8.decode(llm.detokenize([token]))
                if len(tokens) + 1 >= llm.n_ctx():
                    return  # context full: end the reply rather than fail the next decode
                tokens.append(token)
        except RuntimeError as exc:
            if self._cancelled is not None and self._cancelled.is_set():
                llm.reset()  # the aborted decode left the KV cache half-written
                return
            raise GenerationError("decode", f"llama.cpp failed while generating: {exc}") from None
        finally:
            generator.close()

    def generate(self, request_id, messages, sampling, cancelled):
        self._cancelled = cancelled
        try:
            yield from super().generate(request_id, messages, sampling, cancelled)
        finally:
            self._cancelled = None

    # --- scoring (the quant lab): a separate evaluation with a logit row for every token, so the chat
    # context keeps computing only the last row and its speed is untouched.

    def tokenize(self, text: str) -> list[int]:
        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def next_token_logits(self, tokens: Sequence[int]):
        import numpy as np

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        llm = self._llm
        n_vocab = llm.n_vocab()
        check_token_ids(tokens, n_vocab)
        if len(tokens) > llm.n_ctx():
            raise GenerationError("context", f"{len(tokens)} tokens to score but the context holds {llm.n_ctx()}",
                                  "load with a larger context or score fewer tokens")
        logits = np.empty((len(tokens), n_vocab), dtype=np.float32)
        llm.reset()
        llm._ctx.kv_cache_clear()
        try:
            for start in range(0, len(tokens), llm.n_batch):
                chunk = list(tokens[start:start + llm.n_batch])
                llm._batch.set_batch(batch=chunk, n_past=start, logits_all=True)
                llm._ctx.decode(llm._batch)
                rows = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(chunk) * n_vocab,))
                logits[start:start + len(chunk)] = rows.reshape(len(chunk), n_vocab)
        except RuntimeError as exc:
            raise GenerationError("decode", f"llama.cpp failed while scoring: {exc}") from None
        finally:
            # The chat's prefix reuse trusts llm.input_ids and the KV cache: leave neither half-used.
            llm._ctx.kv_cache_clear()
            llm.reset()
        return logits

    def vocabulary(self) -> list[str]:
        import llama_cpp

        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        vocab = self._llm._model.vocab
        return [llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace")
                for i in range(self._llm.n_vocab())]

    def unload(self) -> None:
        if self._llm is not None:
            llm, self._llm = self._llm, None
            llm.close()
        self._overrides = None
