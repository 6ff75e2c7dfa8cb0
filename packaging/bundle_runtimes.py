"""Put llama.cpp runtimes into a packaged app: APP/runtimes/NAME/{runtime.json, site/llama_cpp}.

    python packaging/bundle_runtimes.py APP_FOLDER NAME=SOURCE...

SOURCE is ``env`` (this interpreter's own llama-cpp-python: the CPU build on Linux and Windows, the
Metal one on macOS) or a runtime folder made by ``quantdesk runtime build NAME`` (runtime.json + site/).
The packaged app leaves llama_cpp out of its frozen code (packaging/quantdesk.spec) and imports it from
the runtime chosen for each load (app/runtimes). Runs on every platform the build scripts run on.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from app.runtimes import cpu_variants  # noqa: E402 (the checkout's; it imports only the standard library)

# Wheels hold three copies of each Linux library (libx.so, libx.so.0, libx.so.0.25.3: no symlinks in
# wheels); ctypes opens libx.so and the libraries find each other by SONAME libx.so.0, so the fully
# versioned copies are left out.
VERSIONED_COPY = re.compile(r"\.so\.\d+\.\d+")
GGML_BACKENDS = {"cuda": "cuda", "vulkan": "vulkan", "hip": "rocm", "metal": "metal"}


def _source(spec: str) -> tuple[Path, dict]:
    """(site folder holding llama_cpp, manifest fields) for ``env`` or a runtime folder."""
    if spec == "env":
        import importlib.util

        found = importlib.util.find_spec("llama_cpp")
        if found is None or not found.submodule_search_locations:
            raise SystemExit("bundle_runtimes.py: this interpreter has no llama-cpp-python (pip install '.[llama]')")
        site = Path(list(found.submodule_search_locations)[0]).parent
        libs = " ".join(p.name for p in (site / "llama_cpp" / "lib").iterdir())
        backend = next((b for frag, b in GGML_BACKENDS.items() if f"ggml-{frag}" in libs), "cpu")
        return site, {"backend": backend, "llama_cpp_python": metadata.version("llama_cpp_python"), "cmake_args": ""}
    folder = Path(spec)
    try:
        manifest = json.loads((folder / "runtime.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"bundle_runtimes.py: {folder} is not a runtime folder ({exc})") from None
    return folder / "site", {k: manifest.get(k, "") for k in ("backend", "llama_cpp_python", "cmake_args")}


def not_portable(site: Path, spec: str) -> str:
    """Why a runtime must not be bundled: built for the build machine's CPU (issue 36: SIGILL on an older one).
    A portable Linux / Windows build has its CPU variants beside libggml (app/runtimes/cpu_variants.py); a macOS
    one shows nothing in its files (GGML_NATIVE=OFF only), so only its manifest's flags can say."""
    if sys.platform == "darwin" or cpu_variants.variants(site / "llama_cpp" / "lib"):
        return ""
    flags = " ".join(cpu_variants.portable_flags())
    how = (f'CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir --no-deps '
           f'llama-cpp-python=={metadata.version("llama_cpp_python")}' if spec == "env"
           else "quantdesk runtime build BACKEND (it builds portable runtimes)")
    return (f"bundle_runtimes.py: the llama.cpp of {spec} was built for this machine's CPU (it has no CPU variants "
            f"beside libggml) and would crash on older CPUs; build it again: {how}")


def bundle(app: Path, name: str, spec: str) -> Path:
    site, manifest = _source(spec)
    if problem := not_portable(site, spec):
        raise SystemExit(problem)
    target = app / "runtimes" / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(site / "llama_cpp", target / "site" / "llama_cpp",
                    ignore=lambda _dir, names: [n for n in names if n == "__pycache__" or VERSIONED_COPY.search(n)])
    manifest["built_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    (target / "runtime.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    print(f"runtime {name}: {manifest['backend']}, llama-cpp-python {manifest['llama_cpp_python']}, "
          f"{size / (1 << 20):.0f} MiB")
    return target


def main(argv: list[str]) -> int:
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        print(__doc__, file=sys.stderr)
        return 2
    app = Path(argv[0])
    for item in argv[1:]:
        name, _, spec = item.partition("=")
        bundle(app, name, spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
