"""``quantdesk runtime build NAME``: compile llama-cpp-python (the app's own version) for one ggml backend
into a runtime folder under the user data folder.

1. Prerequisites, each missing one a sentence: a C++ compiler, CMake 3.21+, and per backend the Vulkan
   headers (new enough: llama.cpp's Vulkan backend uses VK_EXT_layer_settings, which Debian 12's 1.3.239
   lacks), the Vulkan loader, SPIRV-Headers and glslc; nvcc (CUDA); hipcc (ROCm); macOS for Metal.
2. The source distribution of the app's llama-cpp-python version, fetched once with pip into the cache
   (offline: a sentence, or ``--sdist FILE``).
3. ``pip wheel`` with the backend's CMAKE_ARGS, every line into the build log; the progress bar and
   the time left come from the build tool's step counter ("[123/517]" from ninja, "[ 45%]" from make).
   The build folder is kept in the cache when a build fails, so the next try resumes.
4. ``pip install --no-deps --target`` the wheel into a temp folder beside the runtimes, write the
   manifest, start the new runtime in a child (app/runtimes/devices.py) to prove it loads, then rename
   the folder into place. The wheel is kept in the cache: building the same runtime again (after
   ``rm``) reuses it unless ``--rebuild``.

llama-cpp-python wheels are tagged py3-none-PLATFORM (ctypes, no extension modules), so any Python 3
with pip can build a runtime: the app's own interpreter, or ``python3`` on PATH for a packaged app.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from app import paths
from app.errors import QuantDeskError
from app.runtimes import catalog, cpu_variants, devices

MIN_CMAKE = (3, 21)
# Compile work of a first build in CPU-core minutes, to estimate before the step counter can, measured on this project's
# 2-core machines with llama-cpp-python 0.3.36 built portable (14 CPU variants): vulkan 763 steps in 12 min, cpu 440
# steps in 22 min on cores other builds kept busy (a native cpu build: 5 min); cuda and rocm are rough (they compile
# kernels for several GPU generations) and say so.
CORE_MINUTES = {"cpu": 24, "vulkan": 24, "metal": 10, "cuda": 150, "rocm": 150}
MEASURED = {"cpu", "vulkan"}
BUILDABLE = ("cpu", "vulkan", "cuda", "rocm", "metal")
_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_MAKE = re.compile(r"^\s*\[\s*(\d+)%\]")


class BuildError(QuantDeskError):
    """A runtime could not be built; the message says why, the hint what to do."""


@dataclass
class Progress:
    phase: str  # "fetching the source" | "configuring" | "compiling" | "installing" | "checking" | "done"
    step: int = 0
    total: int = 0
    elapsed_s: float = 0.0
    remaining_s: float | None = None

    @property
    def fraction(self) -> float | None:
        return self.step / self.total if self.total else None


@dataclass
class Plan:
    """What a build will do; ``missing`` lists the prerequisites that stop it (sentences)."""

    backend: str
    version: str
    python: str
    cmake_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)  # what was found, for the log
    jobs: int = 1

    def estimate_s(self) -> float:
        return CORE_MINUTES.get(self.backend, 30) * 60 / max(self.jobs, 1)

    def estimate_text(self) -> str:
        minutes = self.estimate_s() / 60
        rough = "" if self.backend in MEASURED else "roughly "
        return f"a first build takes {rough}{minutes:.0f} min here ({self.jobs} cores)"


@dataclass
class Tools:
    """Where prerequisites are looked for; tests point these at folders they made."""

    which: Callable[[str], str | None] = shutil.which
    include_dirs: tuple[str, ...] = ("/usr/include", "/usr/local/include")
    lib_dirs: tuple[str, ...] = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                                 "/usr/local/lib")
    cmake_dirs: tuple[str, ...] = ("/usr/share/cmake", "/usr/lib/cmake", "/usr/local/share/cmake",
                                   "/usr/lib/x86_64-linux-gnu/cmake")
    toolkit_dirs: tuple[str, ...] = ("/usr/local/cuda", "/opt/rocm")  # where CUDA / ROCm install by default
    platform: str = sys.platform
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    def run(self, argv: list[str]) -> str:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout


# --------------------------------------------------------------------------------------------- planning

def build_python(tools: Tools) -> str | None:
    if not getattr(sys, "frozen", False):
        return sys.executable
    return tools.which("python3") or tools.which("python")


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _check_compiler_and_cmake(plan: Plan, tools: Tools) -> None:
    compilers = ("cl", "clang-cl", "g++", "clang++") if tools.platform == "win32" else ("c++", "g++", "clang++")
    compiler = next((tools.which(c) for c in compilers if tools.which(c)), None)
    if compiler:
        plan.found.append(f"C++ compiler: {compiler}")
    elif tools.platform == "win32":
        plan.missing.append("No C++ compiler was found: install Visual Studio Build Tools with the "
                            "\"Desktop development with C++\" workload, then run this from its developer prompt.")
    elif tools.platform == "darwin":
        plan.missing.append("No C++ compiler was found: install Xcode's command line tools (xcode-select --install).")
    else:
        plan.missing.append("No C++ compiler was found: install one (Debian/Ubuntu: sudo apt install build-essential).")
    cmake = tools.which("cmake")
    if cmake is None:
        plan.missing.append("CMake is missing: install CMake 3.21 or newer (Debian/Ubuntu: sudo apt install cmake; "
                            "or pip install cmake).")
        return
    try:
        version = _version_tuple(tools.run([cmake, "--version"]).splitlines()[0])
    except (OSError, subprocess.SubprocessError, IndexError):
        version = ()
    if version and version < MIN_CMAKE:
        plan.missing.append(f"CMake {'.'.join(map(str, version))} is too old: llama-cpp-python needs 3.21 or newer "
                            "(pip install cmake gives a current one).")
    else:
        plan.found.append(f"CMake: {cmake} {'.'.join(map(str, version))}")


def _sdk_roots(tools: Tools, vulkan_sdk: str | None) -> list[Path]:
    roots = [Path(p) for p in (vulkan_sdk, tools.env.get("VULKAN_SDK")) if p]
    return roots


def _first(paths_: Iterable[Path]) -> Path | None:
    return next((p for p in paths_ if p.exists()), None)


def _check_vulkan(plan: Plan, tools: Tools, vulkan_sdk: str | None) -> None:
    """Vulkan headers new enough, the loader, SPIRV-Headers and glslc; their places go into CMAKE_ARGS."""
    roots = _sdk_roots(tools, vulkan_sdk)
    include_dirs = [r / "include" for r in roots] + [Path(d) for d in tools.include_dirs]
    header = _first(d / "vulkan" / "vulkan_core.h" for d in include_dirs)
    sdk_hint = ("get newer headers: Debian 13 / Ubuntu 24.04's libvulkan-dev, or the LunarG Vulkan SDK "
                "(then pass --vulkan-sdk DIR or set VULKAN_SDK)")
    if header is None:
        plan.missing.append(f"The Vulkan headers are missing (vulkan/vulkan_core.h): {sdk_hint}.")
        include = None
    else:
        include = header.parent.parent
        text = header.read_text(encoding="utf-8", errors="replace")
        version = re.search(r"#define VK_HEADER_VERSION (\d+)", text)
        complete = re.search(r"#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION\(\s*0,\s*(\d+),\s*(\d+)", text)
        shown = f"{complete[1]}.{complete[2]}.{version[1]}" if complete and version else "of unknown version"
        if "VK_EXT_layer_settings" not in text:
            plan.missing.append(f"The Vulkan headers in {include} ({shown}) are too old for llama.cpp's Vulkan backend "
                                f"(it needs VK_EXT_layer_settings, in 1.3.272 and newer): {sdk_hint}.")
        elif not (include / "vulkan" / "vulkan.hpp").exists():
            plan.missing.append(f"The Vulkan C++ headers (vulkan/vulkan.hpp) are missing beside {header}: {sdk_hint}.")
        else:
            plan.found.append(f"Vulkan headers: {include} ({shown})")
            plan.cmake_args.append(f"-DVulkan_INCLUDE_DIR={include}")
    loader_names = {"win32": ("vulkan-1.lib",), "darwin": ("libvulkan.dylib", "libvulkan.1.dylib")}.get(
        tools.platform, ("libvulkan.so", "libvulkan.so.1"))
    lib_dirs = [r / "lib" for r in roots] + [r / "Lib" for r in roots] + [Path(d) for d in tools.lib_dirs]
    loader = _first(d / n for n in loader_names for d in lib_dirs)
    if loader is None:
        plan.missing.append("The Vulkan loader is missing: install it (Debian/Ubuntu: sudo apt install libvulkan1; "
                            "Windows: it comes with the GPU driver or the Vulkan SDK).")
    else:
        plan.found.append(f"Vulkan loader: {loader}")
        plan.cmake_args.append(f"-DVulkan_LIBRARY={loader}")
    bundled_glslc = _first(r / "bin" / ("glslc.exe" if tools.platform == "win32" else "glslc") for r in roots)
    glslc = str(bundled_glslc) if bundled_glslc else tools.which("glslc")
    if glslc is None:
        plan.missing.append("The shader compiler glslc is missing: install it (Debian/Ubuntu: sudo apt install glslc; "
                            "it is also in the Vulkan SDK).")
    else:
        plan.found.append(f"glslc: {glslc}")
        plan.cmake_args.append(f"-DVulkan_GLSLC_EXECUTABLE={glslc}")
    spirv_dirs = ([include] if include else []) + include_dirs
    spirv = _first(d / "spirv" / "unified1" / "spirv.hpp" for d in spirv_dirs)
    cmake_roots = [r / sub for r in roots for sub in ("share/cmake", "lib/cmake", "usr/share/cmake")] + \
        [Path(d) for d in tools.cmake_dirs]
    spirv_config = _first(d / "SPIRV-Headers" / "SPIRV-HeadersConfig.cmake" for d in cmake_roots)
    if spirv is None or spirv_config is None:
        plan.missing.append("SPIRV-Headers are missing: install them (Debian/Ubuntu: sudo apt install spirv-headers; "
                            "they are also in the Vulkan SDK).")
    else:
        plan.found.append(f"SPIRV-Headers: {spirv.parents[2]}")
        plan.cmake_args.append(f"-DSPIRV-Headers_DIR={spirv_config.parent}")
        if include is None or spirv.parents[2] != include:
            # ggml-vulkan includes <spirv/unified1/spirv.hpp> without linking the SPIRV-Headers target, so a
            # folder outside the compiler's default paths must be named (ggml/src/ggml-vulkan/CMakeLists.txt).
            plan.cmake_args.append(f"-DCMAKE_CXX_FLAGS=-isystem {spirv.parents[2]}")


def _check_cuda(plan: Plan, tools: Tools) -> None:
    homes = [tools.env.get("CUDA_HOME"), tools.env.get("CUDA_PATH"), *tools.toolkit_dirs]
    candidates = [Path(h) / "bin" / ("nvcc.exe" if tools.platform == "win32" else "nvcc") for h in homes if h]
    nvcc = tools.which("nvcc") or next((str(c) for c in candidates if c.exists()), None)
    if nvcc is None:
        plan.missing.append("nvcc (the CUDA toolkit) is missing: install CUDA 12 from "
                            "https://developer.nvidia.com/cuda-downloads, or pip install nvidia-cuda-nvcc-cu12, "
                            "and put nvcc on PATH (or set CUDA_HOME).")
    else:
        plan.found.append(f"nvcc: {nvcc}")
        plan.cmake_args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")


def _check_rocm(plan: Plan, tools: Tools) -> None:
    homes = [tools.env.get("ROCM_PATH"), *tools.toolkit_dirs]
    hipcc = tools.which("hipcc") or next((str(c) for h in homes if h for c in [Path(h) / "bin" / "hipcc"]
                                          if c.exists()), None)
    if hipcc is None:
        plan.missing.append("hipcc (ROCm) is missing: install ROCm 6 (https://rocm.docs.amd.com) and put hipcc on PATH "
                            "(or set ROCM_PATH); for most AMD cards the Vulkan runtime needs less: "
                            "quantdesk runtime build vulkan.")
        return
    plan.found.append(f"hipcc: {hipcc}")
    # llama.cpp's build docs: HIP's clang compiles the kernels (HIPCXX), HIP_PATH names the install.
    root = Path(hipcc).resolve().parents[1]
    plan.env.update({"HIPCXX": str(root / "llvm" / "bin" / "clang"), "HIP_PATH": str(root)})


BACKEND_FLAGS = {"cpu": [], "vulkan": ["-DGGML_VULKAN=on"], "cuda": ["-DGGML_CUDA=on"], "rocm": ["-DGGML_HIP=on"],
                 "metal": ["-DGGML_METAL=on"]}


def plan_build(backend: str, *, vulkan_sdk: str | None = None, tools: Tools | None = None,
               version: str | None = None, jobs: int | None = None) -> Plan:
    """What building ``backend`` needs on this machine; ``Plan.missing`` says what stops it."""
    tools = tools or Tools()
    if backend not in BUILDABLE:
        raise BuildError(f"there is no {backend!r} runtime to build", f"choose one of: {', '.join(BUILDABLE)}")
    version = version or _runtime_version()
    python = build_python(tools)
    # Portable whatever the backend (app/runtimes/cpu_variants.py): the CPU part of a GPU build runs on any CPU too.
    flags = cpu_variants.portable_flags(tools.platform) + BACKEND_FLAGS[backend]
    plan = Plan(backend, version or "", python or "", flags, jobs=jobs or os.cpu_count() or 1)
    if not version:
        plan.missing.append("The llama-cpp-python version to build is unknown (no llama-cpp-python in this "
                            "environment and no runtime to copy it from).")
    if python is None:
        plan.missing.append("Building needs a Python 3 with pip on PATH (python3).")
    if backend == "metal" and tools.platform != "darwin":
        plan.missing.append("The Metal runtime runs on macOS only.")
    if backend == "cuda" and tools.platform == "darwin":
        plan.missing.append("CUDA does not run on macOS; the Metal runtime uses Apple GPUs.")
    _check_compiler_and_cmake(plan, tools)
    if backend == "vulkan":
        _check_vulkan(plan, tools, vulkan_sdk)
    elif backend == "cuda":
        _check_cuda(plan, tools)
    elif backend == "rocm":
        _check_rocm(plan, tools)
    return plan


def _runtime_version() -> str | None:
    version = catalog.app_version()
    if version:
        return version
    bundled = [r for r in catalog.discover() if r.origin == "bundled" and r.version]
    return bundled[0].version if bundled else None


# --------------------------------------------------------------------------------------------- building

def cache_root() -> Path:
    return paths.cache_dir() / "runtimes"


def fetch_sdist(plan: Plan, log: TextIO, sdist: str | None = None, folder: Path | None = None) -> Path:
    """The llama-cpp-python source of the planned version: ``sdist`` when given, else the cached one (in ``folder``,
    by default the cache's ``sdist``), else downloaded with pip (the package index the user's pip is configured
    for)."""
    if sdist:
        path = Path(sdist).expanduser()
        if not path.is_file():
            raise BuildError(f"the source archive {path} does not exist")
        return path
    folder = folder or cache_root() / "sdist"
    cached = sorted(folder.glob(f"llama_cpp_python-{plan.version}.tar.gz"))
    if cached:
        return cached[0]
    folder.mkdir(parents=True, exist_ok=True)
    argv = [plan.python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
            f"llama-cpp-python=={plan.version}", "-d", str(folder)]
    log.write(f"$ {' '.join(argv)}\n")
    done = subprocess.run(argv, capture_output=True, text=True)
    log.write(done.stdout + done.stderr)
    found = sorted(folder.glob(f"llama_cpp_python-{plan.version}.tar.gz"))
    if done.returncode != 0 or not found:
        last = next((ln.strip() for ln in reversed(done.stderr.splitlines()) if ln.strip()), "")
        raise BuildError(f"the llama-cpp-python {plan.version} source could not be downloaded"
                         + (f" ({last})" if last else ""),
                         "are you offline? Connect, or give the source archive with --sdist FILE "
                         f"(llama_cpp_python-{plan.version}.tar.gz from PyPI)")
    return found[0]


WHEEL_KIND = "portable"


def _wheel_key(plan: Plan, sdist: Path) -> str:
    digest = hashlib.sha256()
    with open(sdist, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    # WHEEL_KIND: a wheel kept by a QuantDesk that built for the build machine's CPU (before issue 36) is never
    # taken for a portable one, whatever its flags were.
    digest.update(json.dumps([plan.backend, plan.cmake_args, sys.platform, WHEEL_KIND]).encode())
    return digest.hexdigest()[:16]


def parse_step(line: str) -> tuple[int, int] | None:
    """The build tool's step counter in one line of its output: (done, total)."""
    if m := _NINJA.match(line):
        return int(m[1]), int(m[2])
    if m := _MAKE.match(line):
        return int(m[1]), 100
    return None


class StepClock:
    """The main build's step counter and the time left, from the build tool's output lines."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.first: tuple[float, int, int] | None = None  # (when, step, total) the rate is measured from

    def feed(self, line: str, now: float) -> Progress | None:
        step = parse_step(line)
        if step is None:
            return None
        done, total = step
        if self.first is not None and total < self.first[2]:
            return None  # a nested build's own counter (vulkan-shaders-gen's "[1/2]"), inside the main one
        if self.first is None or total > self.first[2]:  # the main build's counter, from its first line on
            self.first = (now, done, total)
        when, first_done, _ = self.first
        remaining = None
        if done > first_done and now > when:
            remaining = (total - done) / ((done - first_done) / (now - when))
        return Progress("compiling", done, total, now - self.start, remaining)


def compile_wheel(plan: Plan, sdist: Path, out_dir: Path, log: TextIO, on_progress: Callable[[Progress], None]) -> Path:
    """Run ``pip wheel`` on the source with the plan's CMake flags; returns the wheel."""
    # Named after the flags too: a build folder kept from a failed build with other flags is not resumed.
    flags = hashlib.sha256(json.dumps(plan.cmake_args).encode()).hexdigest()[:8]
    build_dir = cache_root() / "build" / f"{plan.backend}-{plan.version}-{flags}"
    argv = [plan.python, "-m", "pip", "wheel", "--no-deps", "-v", "--disable-pip-version-check", str(sdist),
            "-w", str(out_dir), "-C", f"build-dir={build_dir}"]
    env = dict(os.environ, **plan.env, CMAKE_ARGS=" ".join(plan.cmake_args),
               CMAKE_BUILD_PARALLEL_LEVEL=str(plan.jobs), FORCE_CMAKE="1")
    log.write(f"$ CMAKE_ARGS={env['CMAKE_ARGS']!r} {' '.join(argv)}\n")
    log.flush()
    clock = StepClock(time.monotonic())
    on_progress(Progress("configuring"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            errors="replace", bufsize=1)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        log.write(line)
        tail = (tail + [line.rstrip()])[-40:]
        progress = clock.feed(line, time.monotonic())
        if progress is not None:
            on_progress(progress)
    code = proc.wait()
    log.flush()
    wheels = sorted(out_dir.glob("llama_cpp_python-*.whl"))
    if code != 0 or not wheels:
        raise BuildError(f"the {plan.backend} build failed: {_failure_line(tail)}",
                         f"the whole log is in {log.name}; the build folder {build_dir} is kept, so the next try "
                         "resumes where this one stopped")
    shutil.rmtree(build_dir, ignore_errors=True)
    return wheels[0]


def _failure_line(tail: list[str]) -> str:
    for line in reversed(tail):
        text = line.strip()
        if re.search(r"error|fatal|could not|not found", text, re.I) and not text.startswith("note:") and \
                "subprocess-exited-with-error" not in text and "Failed to build" not in text and \
                "did not run successfully" not in text and "ERROR: Failed building" not in text:
            return text[:300]
    return next((ln.strip() for ln in reversed(tail) if ln.strip()), "no output")[:300]


def build(backend: str, *, vulkan_sdk: str | None = None, sdist: str | None = None, rebuild: bool = False,
          jobs: int | None = None, on_progress: Callable[[Progress], None] = lambda p: None,
          on_plan: Callable[[Plan], None] = lambda p: None, tools: Tools | None = None,
          name: str | None = None, version: str | None = None) -> catalog.Runtime:
    """Build the ``backend`` runtime into the user's runtimes folder (as ``name``, by default the backend's name);
    raises BuildError with the reason."""
    name = name or backend
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise BuildError(f"{name!r} cannot name a runtime", "use letters, digits, '-', '_' and '.'")
    existing = catalog.find(name)
    if existing is not None and existing.origin != "user":
        raise BuildError(f"the {name} runtime is already there ({catalog.ORIGIN_WORDS[existing.origin]})",
                         "nothing to build")
    plan = plan_build(backend, vulkan_sdk=vulkan_sdk, tools=tools, jobs=jobs, version=version)
    on_plan(plan)
    if plan.missing:
        raise BuildError(f"the {backend} runtime cannot be built here: " + " ".join(plan.missing))
    runtimes = catalog.user_dir()
    runtimes.mkdir(parents=True, exist_ok=True)
    logs = runtimes / ".logs"
    logs.mkdir(exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_path = logs / f"{backend}-{stamp}.log"
    start = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{backend}-", dir=runtimes))
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(f"building the {backend} runtime: llama-cpp-python {plan.version}\n")
            log.write("".join(f"found {f}\n" for f in plan.found))
            on_progress(Progress("fetching the source"))
            source = fetch_sdist(plan, log, sdist)
            wheel = _cached_wheel(plan, source, rebuild, log)
            if wheel is None:
                wheel = compile_wheel(plan, source, staging / "wheel", log, on_progress)
                wheel = _keep_wheel(plan, source, wheel)
            on_progress(Progress("installing", elapsed_s=time.monotonic() - start))
            _pip(plan, ["install", "--no-deps", "--no-compile", "--target", str(staging / "site"), str(wheel)], log)
            _drop_versioned_copies(staging / "site" / "llama_cpp" / "lib")
            on_progress(Progress("checking", elapsed_s=time.monotonic() - start))
            found = devices.probe(staging / "site" / "llama_cpp" / "lib")
            log.write(f"the new runtime sees: {found.to_dict()}\n")
            if not found.ok:
                raise BuildError(f"the {backend} runtime was built but cannot start: {found.error}",
                                 f"the build log is {log_path}")
        shutil.rmtree(staging / "wheel", ignore_errors=True)
        final_log = staging / "build.log"
        shutil.copyfile(log_path, final_log)
        manifest = {"backend": backend, "llama_cpp_python": plan.version, "cmake_args": " ".join(plan.cmake_args),
                    "built_at": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                    "build_seconds": round(time.monotonic() - start, 1), "log": str(runtimes / name / "build.log"),
                    "wheel": wheel.name}
        (staging / catalog.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _replace(staging, runtimes / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    on_progress(Progress("done", elapsed_s=time.monotonic() - start))
    return catalog.read_folder(runtimes / name, "user")


def _pip(plan: Plan, args: list[str], log: TextIO) -> None:
    argv = [plan.python, "-m", "pip", *args, "--disable-pip-version-check"]
    log.write(f"$ {' '.join(argv)}\n")
    done = subprocess.run(argv, capture_output=True, text=True)
    log.write(done.stdout + done.stderr)
    if done.returncode != 0:
        last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.strip()), "")
        raise BuildError(f"pip {args[0]} failed: {last}", f"the build log is {log.name}")


def _drop_versioned_copies(lib_dir: Path) -> None:
    """Wheels cannot hold symlinks, so each Linux library comes three times (libx.so, libx.so.0,
    libx.so.0.25.3); ctypes opens libx.so and the libraries find each other by their SONAME libx.so.0,
    so the fully versioned copy is never read (a third of the runtime's size)."""
    for path in lib_dir.glob("*.so.*.*"):
        if re.search(r"\.so\.\d+\.\d+", path.name):
            path.unlink()


def _wheel_dir(plan: Plan) -> Path:
    return cache_root() / "wheels" / plan.backend


def _cached_wheel(plan: Plan, sdist: Path, rebuild: bool, log: TextIO) -> Path | None:
    folder = _wheel_dir(plan)
    key_file = folder / "key.txt"
    if rebuild or not key_file.is_file():
        return None
    if key_file.read_text(encoding="utf-8").strip() != _wheel_key(plan, sdist):
        return None
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if wheels:
        log.write(f"reusing the wheel built before: {wheels[0]} (--rebuild compiles again)\n")
    return wheels[0] if wheels else None


def _keep_wheel(plan: Plan, sdist: Path, wheel: Path) -> Path:
    folder = _wheel_dir(plan)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kept = folder / wheel.name
    shutil.copyfile(wheel, kept)
    (folder / "key.txt").write_text(_wheel_key(plan, sdist) + "\n", encoding="utf-8")
    return kept


def _replace(staging: Path, final: Path) -> None:
    """Move the new runtime into place; the build it replaces is kept as the runtime's previous one, which models load
    on until their trial on the new one succeeded (app/runtimes/trials.py)."""
    from app.runtimes import trials

    trials.keep_previous(final)
    os.replace(staging, final)


def remove(name: str) -> Path:
    runtime = catalog.find(name)
    if runtime is None:
        raise BuildError(f"there is no runtime named {name}", "quantdesk runtime ls lists them")
    if not runtime.removable:
        raise BuildError(f"the {name} runtime is {catalog.ORIGIN_WORDS[runtime.origin]} and cannot be removed")
    folder = runtime.folder
    assert folder is not None
    trash = folder.with_name(f".{folder.name}.removing-{os.getpid()}")
    os.replace(folder, trash)  # gone from discovery at once, even if the delete below is slow
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(catalog.previous_folder(name), ignore_errors=True)  # its previous build goes with it
    from app.runtimes import pins

    pins.forget(name)
    return folder
