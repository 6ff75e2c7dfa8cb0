"""Which llama.cpp runtimes this installation has, found without importing any of them.

A runtime is one build of llama-cpp-python (the app's own version) for one ggml backend. Three kinds:
- the app environment's own llama-cpp-python (a source install; named after its backend, normally
  ``cpu``): nothing to add to the engine host's import path;
- bundled ones, inside a packaged app (``<app>/runtimes/NAME/``);
- user-built ones (``quantdesk runtime build NAME``), in ``<user data>/runtimes/NAME/``.
A bundled or user-built runtime is a folder holding ``runtime.json`` (its manifest) and ``site/``, a
pip ``--target`` folder with the ``llama_cpp`` package and its libraries; never mixed into the app's
own environment. An engine host imports llama_cpp from the runtime chosen for its load
(``Runtime.host_env``: the host puts ``site/`` first on ``sys.path``, app/engine/host.py).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from app import paths

MANIFEST = "runtime.json"
RUNTIME_PATH_VAR = "QUANTDESK_RUNTIME_PATH"  # read by the engine host
BUNDLED_VAR = "QUANTDESK_BUNDLED_RUNTIMES"  # where a packaged app's runtimes are (tests point it elsewhere)
BACKENDS = ("cpu", "vulkan", "cuda", "rocm", "metal")
# ggml library name fragment -> runtime backend (libggml-cuda.so, ggml-vulkan.dll, libggml-metal.dylib ...)
GGML_LIBS = {"cuda": "cuda", "vulkan": "vulkan", "hip": "rocm", "metal": "metal", "sycl": "sycl",
             "opencl": "opencl", "musa": "musa"}
ORIGIN_WORDS = {"environment": "the app's own environment", "bundled": "bundled with the app",
                "user": "built on this machine"}


@dataclass(frozen=True)
class Runtime:
    name: str
    backend: str  # cpu | vulkan | cuda | rocm | metal (others: their ggml name)
    origin: str  # environment | bundled | user
    lib_dir: Path  # llama_cpp/lib: the libraries the engine loads
    site: Path | None = None  # the folder the host puts first on sys.path; None: the app's environment
    version: str = ""  # llama-cpp-python's version
    cmake_args: str = ""
    built_at: str = ""
    build_seconds: float | None = None
    log: str = ""  # the build log kept with it
    problem: str = ""  # why this folder cannot be a runtime (shown by `runtime ls`, never chosen)

    @property
    def folder(self) -> Path | None:
        return self.site.parent if self.site is not None else None

    @property
    def removable(self) -> bool:
        return self.origin == "user"

    def host_env(self) -> dict[str, str]:
        """What an engine host needs in its environment to import llama_cpp from this runtime."""
        return {RUNTIME_PATH_VAR: str(self.site)} if self.site is not None else {}

    def size_bytes(self) -> int:
        root = self.folder or self.lib_dir.parent
        total = 0
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total

    def describe(self) -> str:
        return f"{self.name} ({self.backend}, llama-cpp-python {self.version or '?'}, {ORIGIN_WORDS[self.origin]})"


def user_dir() -> Path:
    return paths.data_dir() / "runtimes"


def bundled_dir() -> Path | None:
    override = os.environ.get(BUNDLED_VAR)
    if override:
        return Path(override)
    if getattr(sys, "frozen", False):
        program = Path(sys.executable).resolve().parent
        # Linux and Windows: beside the program; macOS: in the .app's Resources (code signing wants
        # nothing but code in Contents/MacOS).
        return next((d for d in (program / "runtimes", program.parent / "Resources" / "runtimes") if d.is_dir()),
                    program / "runtimes")
    return None


def backend_of(lib_files: list[str]) -> str:
    """The GPU backend a llama_cpp/lib folder ships ("cpu" when it has none)."""
    names = [n.lower() for n in lib_files]
    for fragment, backend in GGML_LIBS.items():
        if any(f"ggml-{fragment}" in n for n in names):
            return backend
    return "cpu"


def app_version() -> str | None:
    """The llama-cpp-python version the app is installed with (what `build` compiles), if known."""
    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return None


def environment_package() -> Path | None:
    """The folder of the app environment's own llama_cpp package, found with find_spec: the app process
    never imports an engine."""
    try:
        spec = find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def environment_runtime() -> Runtime | None:
    """The app environment's own llama-cpp-python as a runtime."""
    package = None if getattr(sys, "frozen", False) else environment_package()  # frozen: runtimes are folders
    if package is None:
        return None
    lib_dir = package / "lib"
    files = os.listdir(lib_dir) if lib_dir.is_dir() else []
    backend = backend_of(files)
    return Runtime(name=backend, backend=backend, origin="environment", lib_dir=lib_dir, version=app_version() or "",
                   problem="" if files else f"{lib_dir} holds no libraries")


def read_folder(folder: Path, origin: str) -> Runtime:
    """A runtime folder (bundled or user-built); a broken one comes back with ``problem`` set."""
    site = folder / "site"
    lib_dir = site / "llama_cpp" / "lib"
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return Runtime(folder.name, "?", origin, lib_dir, site, problem=f"its {MANIFEST} cannot be read: {exc}")
    backend = str(manifest.get("backend", "?"))
    version = str(manifest.get("llama_cpp_python", ""))
    problem = ""
    if not (site / "llama_cpp" / "__init__.py").is_file():
        problem = f"{site} holds no llama_cpp package"
    elif not lib_dir.is_dir():
        problem = f"{lib_dir} is missing"
    elif version and app_version() and version != app_version() and not \
            (origin == "user" and (previous_folder(folder.name) / MANIFEST).is_file()):
        # The engine speaks to llama_cpp through the app's own version's API: another version is used only on trial,
        # with the build it replaced to fall back on (app/runtimes/trials.py: `quantdesk runtime build --version`).
        problem = (f"it was built from llama-cpp-python {version} and the app uses {app_version()}: rebuild it "
                   f"(quantdesk runtime build {backend})")
    seconds = manifest.get("build_seconds")
    return Runtime(name=folder.name, backend=backend, origin=origin, lib_dir=lib_dir, site=site,
                   version=version, cmake_args=str(manifest.get("cmake_args", "")),
                   built_at=str(manifest.get("built_at", "")),
                   build_seconds=float(seconds) if isinstance(seconds, int | float) else None,
                   log=str(manifest.get("log", "")), problem=problem)


def previous_folder(name: str) -> Path:
    """Where a user-built runtime's previous build is kept (app/runtimes/trials.py); hidden from discovery."""
    return user_dir() / ".previous" / name


def _folders(root: Path | None) -> list[Path]:
    if root is None or not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def discover() -> list[Runtime]:
    """Every runtime, the app environment's first, then bundled, then user-built; names are unique
    (a user-built runtime of the same name as a bundled one is listed with its problem)."""
    found: list[Runtime] = []
    env = environment_runtime()
    if env is not None:
        found.append(env)
    for origin, root in (("bundled", bundled_dir()), ("user", user_dir())):
        for folder in _folders(root):
            runtime = read_folder(folder, origin)
            if any(r.name == runtime.name for r in found):
                other = next(r for r in found if r.name == runtime.name)
                runtime = Runtime(runtime.name, runtime.backend, origin, runtime.lib_dir, runtime.site,
                                  runtime.version,
                                  problem=f"its name is taken by the runtime {ORIGIN_WORDS[other.origin]}")
            found.append(runtime)
    return found


def find(name: str, runtimes: list[Runtime] | None = None) -> Runtime | None:
    return next((r for r in (discover() if runtimes is None else runtimes) if r.name == name), None)
