"""The sentences for a dead engine, from recorded real stderr tails."""

from __future__ import annotations

from app.engine.client import describe_exit

# Recorded from llama.cpp (ggml-cuda.cu / llama-context.cpp) when VRAM runs out while loading.
CUDA_OOM = [
    "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3060 Laptop GPU) - 5815 MiB free",
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 6144.00 MiB on device 0: cudaMalloc failed: out of memory",
    "alloc_tensor_range: failed to allocate CUDA0 buffer of size 6442450944",
    "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
]
# Recorded from a C++ std::bad_alloc escaping llama.cpp: libstdc++ prints this, then abort() -> SIGABRT.
BAD_ALLOC = ["terminate called after throwing an instance of 'std::bad_alloc'", "  what():  std::bad_alloc"]


def test_out_of_memory_while_loading_is_named_as_such():
    error = describe_exit(-6, BAD_ALLOC, "while loading big.gguf")
    assert str(error).startswith("the engine ran out of memory while loading big.gguf")
    assert "smaller quant" in error.hint
    error = describe_exit(1, CUDA_OOM, "while loading big.gguf")
    assert error.message == "the engine ran out of memory while loading big.gguf"


def test_signals_and_exit_codes_become_sentences():
    assert describe_exit(-11, ["Fatal Python error: Segmentation fault"], "during generation").message == \
        "the engine crashed (SIGSEGV) during generation"
    killed = describe_exit(-9, [], "during generation")
    assert killed.message == "the engine was killed (SIGKILL) during generation"
    assert "out of memory" in killed.hint
    exited = describe_exit(3, ["something odd", "the last words", ""], "while idle")
    assert exited.message == "the engine exited unexpectedly (code 3) while idle"
    assert exited.hint == "last log line: the last words"
    assert exited.returncode == 3 and exited.phase == "while idle"
