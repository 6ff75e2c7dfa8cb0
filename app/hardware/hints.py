"""What the installed llama.cpp build can offload to (from its library names), and sentences for the classic
mismatches of the hardware itself."""

from __future__ import annotations

import re

from app.hardware.profile import HardwareProfile

# ggml backend library name fragments (libggml-cuda.so, ggml-cuda.dll, libggml-metal.dylib ...) -> backend.
GGML_GPU_LIBS = {"cuda": "cuda", "metal": "metal", "vulkan": "vulkan", "hip": "hip", "sycl": "sycl",
                 "opencl": "opencl", "musa": "musa"}
WORKING_SET_SOURCES = {"metal": "Metal's recommendedMaxWorkingSetSize",
                       "iogpu.wired_limit_mb": "set with iogpu.wired_limit_mb",
                       "default rule": "the macOS default, estimated: 2/3 of RAM up to 32 GiB, 3/4 above"}


def llama_gpu_backends(lib_files: list[str]) -> list[str] | None:
    """GPU backends the llama.cpp build ships, from its library names. None when the build has no
    separate ggml libraries (an old, statically linked layout) and so cannot be read this way."""
    ggml = [n.lower() for n in lib_files if re.match(r"(lib)?ggml[-.]", n.lower())]
    if not ggml:
        return None
    found = {backend for n in ggml for frag, backend in GGML_GPU_LIBS.items() if f"ggml-{frag}" in n}
    return sorted(found)


def build_hints(p: HardwareProfile) -> list[str]:
    """The hardware's own hints (app/machine.py puts the llama.cpp runtimes' before them)."""
    hints = []
    hints += _cpu_hints(p)
    for gpu in p.gpus:
        if gpu.vendor == "apple" and gpu.working_set_limit_bytes and gpu.vram_total_bytes:
            hints.append(
                f"Metal lets the GPU use {gpu.working_set_limit_bytes / 1024**3:.1f} of "
                f"{gpu.vram_total_bytes / 1024**3:.0f} GiB unified memory "
                f"({WORKING_SET_SOURCES.get(gpu.working_set_source or '', 'source unknown')}); "
                "models are planned against that limit. It can be raised until the next reboot with "
                "`sudo sysctl iogpu.wired_limit_mb=N` (leave several GiB for macOS).")
        if gpu.vendor == "amd" and gpu.unified and gpu.vram_total_bytes is not None and gpu.shared_bytes:
            hints.append(
                f"{gpu.name} is an APU: only {gpu.vram_total_bytes / 1024**3:.1f} GiB is carved out as VRAM, "
                f"but the driver can map {gpu.shared_bytes / 1024**3:.1f} GiB of system memory for it (GTT), "
                "which llama.cpp's Vulkan and ROCm builds use. A bigger carve-out is a BIOS setting (UMA frame buffer size).")
    return hints


def _cpu_hints(p: HardwareProfile) -> list[str]:
    cpu = p.cpu
    if cpu.arch.lower() not in ("x86_64", "amd64", "i686", "x86") or not cpu.flags:
        return []
    if not cpu.has("avx2"):
        level = "AVX" if cpu.has("avx") else "SSE only, no AVX"
        return [
            f"This CPU ({cpu.model or 'unknown'}) has no AVX2 ({level}). Prebuilt llama.cpp binaries compiled for "
            "AVX2 stop with 'Illegal instruction' here. What works: llama-cpp-python built from source on this "
            "machine (pip's default build targets the CPU it is built on, GGML_NATIVE=on), or a build with "
            'CMAKE_ARGS="-DGGML_NATIVE=off -DGGML_AVX2=off -DGGML_FMA=off -DGGML_F16C=off'
            + ('' if cpu.has("avx") else ' -DGGML_AVX=off')
            + '"; expect CPU inference several times slower than on an AVX2 CPU.']
    return []
