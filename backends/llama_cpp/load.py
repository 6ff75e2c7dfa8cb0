"""What a llama.cpp load needs besides ``Llama(**kwargs)``: the KV cache types, the model-loading progress, the expert
tensors kept in RAM (tensor buffer-type overrides, built here as ctypes arrays), the draft check and an embedding
model's pooling, each read or refused before the model loads.

``llama_cpp`` is the runtime's module, imported by ``LlamaCppBackend.load`` (one of several builds, app/runtimes) and
handed in: its attributes are not typed here (``ModuleType``).
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from backends.base import GenerationError

# ggml_type values for the KV cache (ggml.h); a quantized V cache needs flash attention.
KV_CACHE_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2, "f32": 0, "bf16": 30}

def pooling_name(pooling: int) -> str:
    """llama.h's pooling type by its name ("mean", "rank"), from app/models/metadata's one table: imported when a
    model loads, not with this module (the hardware probe imports the backend, and that table brings the GGUF
    reader with it)."""
    from app.models.metadata.architectures import POOLING_NAMES

    return POOLING_NAMES.get(pooling, str(pooling))


GGML_BACKEND_DEVICE_TYPE_CPU = 0  # ggml-backend.h enum ggml_backend_dev_type


def load_ggml_backends() -> str:
    """Load the runtime's backend modules where it is a portable build (app/runtimes/cpu_variants.py: the best
    CPU variant for this CPU, or the one ``QUANTDESK_CPU_VARIANT`` names, and its GPU backend); returns the CPU
    variant loaded ("" for a build that links its backends, as a native one does). Call it once llama_cpp is
    imported, before anything asks ggml for its devices; a second call does nothing."""
    from llama_cpp import _ggml

    from app.runtimes import cpu_variants

    try:
        return cpu_variants.load_backends(_ggml_libraries(), _ggml.libggml_base_path,
                                          os.environ.get(cpu_variants.CPU_VARIANT_VAR) or None)
    except OSError as exc:
        raise GenerationError("runtime", f"the llama.cpp runtime cannot start: {exc}",
                              "choose another runtime (quantdesk runtime ls, quantdesk runtime use NAME)") from None


@contextlib.contextmanager
def reporting_load_progress(llama_cpp: ModuleType, kwargs: dict[str, Any],
                            on_progress: Callable[[float], None] | None) -> Iterator[None]:
    """Forward llama.cpp's model-loading progress (called per tensor, 0..1) to ``on_progress``, in steps
    of at least 1 %.

    llama-cpp-python's ``Llama`` does not take a progress callback yet
    (https://github.com/abetlen/llama-cpp-python/pull/2340), so until it does, the default model
    params it asks for while loading come back with our callback set.
    """
    load_ggml_backends()  # before llama.cpp loads anything (a no-op once backend.load has called it)
    if on_progress is None:
        yield
        return
    last = [-1.0]

    def report(fraction: float, _data: ctypes.c_void_p) -> bool:
        if fraction >= 1.0 or fraction - last[0] >= 0.01:
            last[0] = fraction
            on_progress(min(max(float(fraction), 0.0), 1.0))
        return True  # keep loading

    progress = llama_cpp.llama_progress_callback(report)  # the ctypes callback: alive while the load runs
    if "progress_callback" in inspect.signature(llama_cpp.Llama.__init__).parameters:
        kwargs["progress_callback"] = progress
        yield
        return
    with _default_model_params(llama_cpp, progress_callback=progress):
        yield


@contextlib.contextmanager
def _default_model_params(llama_cpp: ModuleType, **fields: Any) -> Iterator[None]:
    """While loading, the default model params ``Llama`` asks llama.cpp for come back with ``fields`` set: how a
    callback or an array reaches llama.cpp where ``Llama`` takes no argument for it."""
    bindings = llama_cpp.llama_cpp
    default_params = bindings.llama_model_default_params

    def params_with_fields() -> Any:
        params = default_params()
        for name, value in fields.items():
            setattr(params, name, value)
        return params

    bindings.llama_model_default_params = params_with_fields
    try:
        yield
    finally:
        bindings.llama_model_default_params = default_params


@contextlib.contextmanager
def sequences(llama_cpp: ModuleType, parallel: int) -> Iterator[None]:
    """A context for ``parallel`` sequences in one unified KV cache (``n_seq_max``, ``kv_unified``): each sequence may
    use the whole context, and the cache is the context's size whatever their number (llama.cpp: n_ctx_seq = n_ctx
    when unified; a split cache would give each n_ctx / n_seq_max, the trap Jan shipped). ``Llama`` takes neither, so
    they reach llama.cpp through the default context params while it loads."""
    if parallel <= 1:
        yield
        return
    bindings = llama_cpp.llama_cpp
    default_params = bindings.llama_context_default_params

    def params_with_sequences() -> Any:
        params = default_params()
        params.n_seq_max = parallel
        params.kv_unified = True
        return params

    bindings.llama_context_default_params = params_with_sequences
    try:
        yield
    finally:
        bindings.llama_context_default_params = default_params


@contextlib.contextmanager
def choosing_extra_buffer_types(llama_cpp: ModuleType, enabled: bool) -> Iterator[None]:
    """llama.cpp's extra buffer types (the CPU repack, AMX) for this load, or none: ``use_extra_bufts`` reaches
    llama.cpp through the default model params, as the callback above does (``Llama`` takes no argument for it)."""
    if enabled:
        yield
        return
    with _default_model_params(llama_cpp, use_extra_bufts=False):
        yield


TEST_CRASH_VAR = "QUANTDESK_TEST_CRASH"
TEST_CRASH_MODES = ("warm-up", "reply", "always", "optimized-cpu")


class TestCrash:
    """Tests only (``QUANTDESK_TEST_CRASH``): the engine aborts in a decode, as a native crash in llama.cpp's kernels
    would, so the crash guard (app/engine/guard.py) is tested on a real process death. ``warm-up``: at the load's
    warm-up while the extra buffer types are on (what llama.cpp's AMX crash does); ``reply``: at the first decode after
    the load (a reply, an embedding, the lab's scoring) while they are on; ``optimized-cpu``: at the warm-up unless the
    host runs a portable runtime's most basic CPU variant; ``always``: at the warm-up whatever the configuration, a
    crash no retry cures."""

    __test__ = False  # not a pytest class

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.armed = mode != "reply"  # armed by the load once the warm-up is over

    def decode(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def crashing(*args: Any) -> Any:
            if self.armed:
                print(f"[quantdesk] {TEST_CRASH_VAR}={self.mode}: aborting in llama_decode", file=sys.stderr,
                      flush=True)
                os.abort()
            return real(*args)

        return crashing


def install_test_crash(llama_cpp: ModuleType, settings: Any) -> TestCrash | None:
    """Arm ``TestCrash`` in this engine host where the environment asks for it; None otherwise (always, outside
    tests)."""
    mode = os.environ.get(TEST_CRASH_VAR, "")
    if mode == "optimized-cpu":  # a kernel of the chosen CPU variant crashes, whatever the buffer types
        from app.runtimes.cpu_variants import CPU_VARIANT_VAR

        if os.environ.get(CPU_VARIANT_VAR):
            return None
    elif mode not in TEST_CRASH_MODES or (mode != "always" and not settings.extra_buffer_types):
        return None
    crash = TestCrash(mode)
    for name in ("llama_decode", "llama_encode"):  # the package's names and the bindings' (llama-cpp-python's own)
        for module in (llama_cpp, llama_cpp.llama_cpp):
            real = getattr(module, name)
            real = getattr(real, "quantdesk_real", real)  # a later load in the same host wraps the real one anew
            wrapped = crash.decode(real)
            wrapped.quantdesk_real = real  # type: ignore[attr-defined]
            setattr(module, name, wrapped)
    return crash


class _TensorBuftOverride(ctypes.Structure):
    """llama.h ``struct llama_model_tensor_buft_override {const char *pattern; ggml_backend_buffer_type_t buft;}``.
    llama-cpp-python 0.3.36 types ``llama_model_params.tensor_buft_overrides`` as a plain pointer and
    builds no such array itself, so we do."""

    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def _ggml_libraries() -> list[Any]:
    """Where the runtime's ggml functions are looked up, in order: libllama, whose dlsym reaches the libggml and
    libggml-base it really uses (Linux, macOS); then libggml and libggml-base by their file names, for Windows'
    GetProcAddress, which does not search dependencies. Not libggml first: a wheel holds libggml.so and libggml.so.0 as
    two copies (no symlinks in wheels), libllama loads the second, and ctypes opening the first by its path loads a
    second libggml with a backend registry of its own, which holds nothing a portable runtime loaded."""
    from llama_cpp import _ctypes_extensions, _ggml, llama_cpp

    base = _ctypes_extensions.load_shared_library("ggml-base", _ggml.libggml_base_path)
    return [llama_cpp._lib, _ggml.libggml, base]


def _ggml_function(name: str, argtypes: list[type[Any]], restype: type[Any]) -> Callable[..., Any]:
    """A function of the runtime's own ggml, the one libllama uses (``_ggml_libraries``)."""
    for library in _ggml_libraries():
        function = getattr(library, name, None)
        if function is not None:
            break
    else:
        raise GenerationError("load", f"this llama.cpp build's ggml has no {name}")
    function.argtypes, function.restype = argtypes, restype
    return function  # type: ignore[no-any-return]  # a ctypes function of a loaded library: untyped by nature


def _cpu_buffer_type() -> int:
    """The CPU device's buffer type from the runtime's own ggml, as ``--cpu-moe`` passes it: llama.cpp compares
    the pointer with ggml_backend_cpu_buffer_type() and then still picks the CPU's repacked layout where it can."""
    load_ggml_backends()  # a portable runtime has no CPU device before its CPU variant is loaded
    dev_by_type = _ggml_function("ggml_backend_dev_by_type", [ctypes.c_int], ctypes.c_void_p)
    dev_buffer_type = _ggml_function("ggml_backend_dev_buffer_type", [ctypes.c_void_p], ctypes.c_void_p)
    device = dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)
    buft = dev_buffer_type(device) if device else None
    if not buft:
        raise GenerationError("load", "this llama.cpp build has no CPU device to keep the experts on")
    return int(buft)


def expert_overrides(patterns: Sequence[str]) -> ctypes.Array[_TensorBuftOverride]:
    """A NULL-terminated ``llama_model_tensor_buft_override`` array sending ``patterns`` to the CPU buffer type.
    The caller keeps it alive as long as the model: llama.cpp keeps the pointer in the model's params."""
    overrides = (_TensorBuftOverride * (len(patterns) + 1))()  # zero-filled: the last entry is the terminator
    buft = _cpu_buffer_type()
    for entry, pattern in zip(overrides, patterns, strict=False):  # the terminator entry stays zero
        entry.pattern, entry.buft = pattern.encode(), buft  # the array keeps the bytes alive (ctypes _objects)
    return overrides


@contextlib.contextmanager
def overriding_tensor_placement(llama_cpp: ModuleType,
                                overrides: ctypes.Array[_TensorBuftOverride] | None) -> Iterator[None]:
    """Hand ``overrides`` to llama.cpp through the default model params ``Llama`` asks for while loading
    (it takes no tensor-override argument in 0.3.36), as reporting_load_progress does for its callback."""
    if overrides is None:
        yield
        return
    with _default_model_params(llama_cpp, tensor_buft_overrides=ctypes.cast(overrides, ctypes.c_void_p)):
        yield


def experts_in_ram(metadata: Mapping[str, str], cpu_moe: int) -> dict[str, Any]:
    """What ``cpu_moe`` did: the expert layers kept in RAM, or why nothing was."""
    if not cpu_moe:
        return {}
    arch = metadata.get("general.architecture", "")
    n_layers = int(metadata.get(f"{arch}.block_count") or 0)
    if not int(metadata.get(f"{arch}.expert_count") or 0):
        return {"experts_in_ram": 0, "experts_note": "not a mixture-of-experts model: experts in RAM ignored"}
    return {"experts_in_ram": n_layers if cpu_moe < 0 else min(cpu_moe, n_layers)}


def check_draft(model_path: str, draft: str) -> None:
    """Refuse, before anything loads, a draft model whose vocabulary is not the model's (app/models/drafts)."""
    from app.models import drafts

    problem = drafts.check_draft(model_path, draft)
    if problem:
        raise GenerationError("draft", problem, "a draft must come from the same model family, with the same tokenizer")


def declared_pooling(model_path: str) -> int:
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


def build_fingerprint(llama_cpp: ModuleType) -> str:
    """The llama.cpp build this runtime runs, as llama-server sends it in ``system_fingerprint``: ``b<build>-<commit>``
    (tools/server/utils.hpp: ``"b" + std::to_string(LLAMA_BUILD_NUMBER) + "-" + LLAMA_COMMIT``). Those two live in
    llama.cpp's common library, which llama-cpp-python does not ship; its libggml-base exports the same tree's short
    commit (``ggml_commit``), and the build number, the tree's commit count, is not in any library it ships: 0, the
    value llama.cpp's cmake/build-info.cmake gives a build that cannot count it. A mark ggml adds for a tree with local
    changes ("-dirty") is left out, as llama.cpp's ``git rev-parse --short HEAD`` has none; "unknown" (llama.cpp's
    own word) where the library says nothing."""
    commit = ""
    try:
        function = llama_cpp.llama_cpp._lib.ggml_commit  # libllama's handle finds libggml-base's symbols
        function.restype, function.argtypes = ctypes.c_char_p, []
        commit = (function() or b"").decode("utf-8", "replace").strip()
    except (AttributeError, OSError):
        pass
    commit = commit.removesuffix("-dirty") or "unknown"
    return f"b0-{commit}"
