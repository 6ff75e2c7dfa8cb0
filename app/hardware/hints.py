"""What the installed llama.cpp build can offload to, and sentences for the classic mismatches."""

from __future__ import annotations

import re

from app.hardware.profile import HardwareProfile
from app.runtimes.choose import PREFERENCE

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
    hints = []
    hints += _offload_hints(p)
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


def _offload_hints(p: HardwareProfile) -> list[str]:
    """A GPU that no installed llama.cpp runtime can use: say which runtime to build. Judged by what each
    runtime's ggml saw (``p.runtimes``), else, for a profile without runtime probes, by the app's own
    llama.cpp build's libraries."""
    if not p.gpus:
        return []
    hints = []
    for runtime in p.runtimes or []:
        if runtime.backend != "cpu" and (runtime.problem or runtime.error):
            hints.append(f"The {runtime.name} runtime cannot start ({runtime.problem or runtime.error}), so loads "
                         f"use another: rebuild it with `quantdesk runtime build {runtime.backend}` or remove it "
                         f"with `quantdesk runtime rm {runtime.name}`.")
    if p.runtimes is not None:
        seen = {(d.vendor, r.backend) for r in p.runtimes if not (r.problem or r.error)
                for d in r.devices if d.type in ("gpu", "igpu") and not d.software}
        backends_for = {vendor: {b for v, b in seen if v == vendor} for vendor in PREFERENCE}
    elif p.llama_cpp_gpu_backends is not None and "llama_cpp" not in p.absent:
        shipped = {"hip": "rocm"}
        libs = {shipped.get(lib, lib) for lib in p.llama_cpp_gpu_backends}
        backends_for = {vendor: libs & set(options) for vendor, options in PREFERENCE.items()}
    else:
        return hints
    for vendor in dict.fromkeys(g.vendor for g in p.gpus):
        if vendor not in PREFERENCE or backends_for.get(vendor):
            continue
        names = ", ".join(dict.fromkeys(g.name for g in p.gpus if g.vendor == vendor))
        options = PREFERENCE[vendor]
        builds = " or ".join(f"`quantdesk runtime build {b}`" for b in reversed(options))
        hints.append(f"{names} is present, but no installed llama.cpp runtime can use it, so GGUF models run on the "
                     f"CPU. Build one with {builds} (or the Build button on the Hardware page; a first Vulkan build "
                     "takes about 15 minutes), and QuantDesk uses it from the next load.")
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
