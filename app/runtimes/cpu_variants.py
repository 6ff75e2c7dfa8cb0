"""A portable runtime's CPU variants: one libggml-cpu per instruction-set level, the best one for this CPU
loaded when the runtime starts.

A runtime built the portable way (app/runtimes/build.py ``PORTABLE_FLAGS``, as llama.cpp's own releases are:
GGML_NATIVE=OFF, GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON) links no backend into libggml: each one is a
module beside it (libggml-cpu-x64.so, libggml-cpu-haswell.so, ... libggml-cpu-zen4.so, libggml-vulkan.so), and
nothing loads them by itself: llama-cpp-python 0.3.36 never calls ``ggml_backend_load_all``, and llama.cpp then
refuses every model ("no backends are loaded"). So whoever starts such a runtime calls ``load_backends``: the
engine's load (backends/llama_cpp/load.py) and the device probe (app/runtimes/devices.py). ggml asks each
variant's ``ggml_backend_score`` whether this CPU has its instructions and loads the best one.

``CPU_VARIANT_VAR`` names one variant to load instead of the best (``basic_env``: the most basic one, x86-64
with SSE2 / ARMv8.0), for an engine host whose load crashed on the chosen one. A build that links its
backends (a native build, the app environment's own ``pip install``) has no variants and ignores it.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Every runtime is built portable (issue 36): pip builds llama.cpp with GGML_NATIVE on, for the build machine's own CPU,
# and such a build dies of SIGILL on a CPU without its instructions (an AVX-512 build on an AVX2 CPU). These are the
# flags of llama.cpp's own releases: every backend a module of its own and the CPU one in one variant per
# instruction-set level; ggml installs the modules to the bin folder, here the package's own lib folder beside
# libggml. The CPU part of a GPU build gets the same. macOS: Apple's default target (every Apple silicon Mac) instead
# of the build machine's, untried with variants there. Read by app/runtimes/build.py and the packaging scripts (this
# module imports nothing outside the standard library, for any python3 to read them).
PORTABLE_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON",
                  "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib"]
PORTABLE_FLAGS_MACOS = ["-DGGML_NATIVE=OFF"]
CPU_VARIANT_VAR = "QUANTDESK_CPU_VARIANT"  # read by the engine host's load (backends/llama_cpp/load.py)
# The first of these a runtime has is its most basic variant (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS).
BASIC_VARIANTS = ("x64", "armv8.0_1", "android_armv8.0_1", "apple_m1", "power0")
# The backends ggml_backend_load_all_from_path loads before the CPU, in its order (ggml-backend-reg.cpp).
GPU_MODULES = ("blas", "zendnn", "cann", "cuda", "hip", "metal", "rpc", "sycl", "vulkan", "virtgpu", "opencl",
               "hexagon", "musa", "openvino")
_LOADED_FROM = re.compile(r"loaded CPU backend from (.+?)\s*$")

_loaded: dict[str, str] = {}  # lib_dir -> the CPU variant loaded there, for a second call in the same process


def portable_flags(platform: str = sys.platform) -> list[str]:
    """The CMake flags that make a llama-cpp-python build run on every CPU of its platform."""
    return list(PORTABLE_FLAGS_MACOS if platform == "darwin" else PORTABLE_FLAGS)


def _module_name(name: str) -> str:
    """``libggml-cpu-haswell.so`` / ``ggml-cpu-haswell.dll`` -> ``ggml-cpu-haswell``; "" for other files."""
    prefix, extension = ("ggml-", ".dll") if sys.platform == "win32" else ("libggml-", ".so")
    if not (name.startswith(prefix) and name.endswith(extension)):
        return ""
    return name[len(prefix) - len("ggml-"):-len(extension)]


def variants(lib_dir: Path) -> list[str]:
    """The CPU variants a runtime's lib folder holds ("haswell", "skylakex", ...); none for a native build."""
    try:
        names = os.listdir(lib_dir)
    except OSError:
        return []
    return sorted(m[len("ggml-cpu-"):] for m in map(_module_name, names) if m.startswith("ggml-cpu-"))


def basic_variant(lib_dir: Path) -> str | None:
    """The most basic CPU variant of a portable runtime (it runs on every CPU of its platform); None without
    variants."""
    present = variants(lib_dir)
    return next((v for v in BASIC_VARIANTS if v in present), None)


def basic_env(lib_dir: Path) -> dict[str, str]:
    """What an engine host needs in its environment to load a runtime on its most basic CPU variant (for the
    runtime's ``lib_dir``, catalog.Runtime.lib_dir); {} for a runtime without variants."""
    basic = basic_variant(lib_dir)
    return {CPU_VARIANT_VAR: basic} if basic else {}


def _file(lib_dir: Path, module: str) -> Path:
    return lib_dir / (f"{module}.dll" if sys.platform == "win32" else f"lib{module}.so")


_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _function(libraries: Sequence[ctypes.CDLL], name: str, restype: Any, *argtypes: Any) -> Any:
    """``name`` from the first of ``libraries`` that has it, as a prototype of its own (the argtypes set here never
    change the caller's handles' functions)."""
    for library in libraries:
        try:
            return ctypes.CFUNCTYPE(restype, *argtypes)((name, library))
        except AttributeError:
            continue
    raise OSError(f"this llama.cpp build has no {name}")


def load_backends(libraries: Sequence[ctypes.CDLL], lib_dir: Path, variant: str | None = None) -> str:
    """Load a portable runtime's backend modules into ggml's registry; returns the CPU variant loaded ("" where the
    build links its backends itself, as a native one does). ``variant`` forces that CPU variant instead of ggml's
    best. Raises OSError when nothing could be loaded or the variant is not there.

    ``libraries``: where ggml's functions are looked up, in order: libllama first where dlsym reaches its
    dependencies (Linux, macOS), because a wheel's libggml.so and libggml.so.0 are two copies of one library (no
    symlinks in wheels), and ctypes opening libggml.so by its path loads the second copy, with a registry of its own
    that libllama never reads; libggml and libggml-base on Windows (one file each)."""
    key = str(lib_dir)
    reg_count = _function(libraries, "ggml_backend_reg_count", ctypes.c_size_t)
    if key in _loaded:
        return _loaded[key]
    if reg_count() > 0:
        return ""  # the backends are linked in (a native build): nothing to load, nothing to choose
    load_all = _function(libraries, "ggml_backend_load_all_from_path", None, ctypes.c_char_p)
    load_one = _function(libraries, "ggml_backend_load", ctypes.c_void_p, ctypes.c_char_p)
    log_get = _function(libraries, "ggml_log_get", None, ctypes.POINTER(ctypes.c_void_p),
                        ctypes.POINTER(ctypes.c_void_p))
    log_set = _function(libraries, "ggml_log_set", None, ctypes.c_void_p, ctypes.c_void_p)
    lines: list[str] = []

    def on_log(_level: int, text: bytes | None, _data: int | None) -> None:
        chunk = (text or b"").decode("utf-8", "replace")
        lines.append(chunk)
        sys.stderr.write(chunk)  # the engine log still gets it

    callback = _LOG_CALLBACK(on_log)
    old_callback, old_data = ctypes.c_void_p(), ctypes.c_void_p()
    log_get(ctypes.byref(old_callback), ctypes.byref(old_data))
    log_set(ctypes.cast(callback, ctypes.c_void_p), None)
    try:
        if variant:
            chosen = _file(lib_dir, f"ggml-cpu-{variant}")
            if not chosen.is_file():
                raise OSError(f"{lib_dir} has no CPU variant {variant!r} (it has: {', '.join(variants(lib_dir))})")
            for name in GPU_MODULES:  # what load_all would load, then the CPU variant asked for instead of the best
                if _file(lib_dir, f"ggml-{name}").is_file():
                    load_one(str(_file(lib_dir, f"ggml-{name}")).encode())
            if not load_one(str(chosen).encode()):
                raise OSError(f"the CPU variant {variant!r} in {lib_dir} could not be loaded")
        else:
            load_all(str(lib_dir).encode())
    finally:
        log_set(old_callback, old_data)
    if reg_count() == 0:
        raise OSError(f"no ggml backend in {lib_dir} could be loaded")
    found = next((m for line in "".join(lines).splitlines() if (m := _LOADED_FROM.search(line))), None)
    loaded = _module_name(Path(found[1]).name)[len("ggml-cpu-"):] if found else ""
    _loaded[key] = loaded
    return loaded
