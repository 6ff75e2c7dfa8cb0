# Sourced by build_linux.sh and macos/build_macos.sh, from the repository root.

VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' app/__init__.py)"
ARCH="$(uname -m)"
log() { printf '\n== %s\n' "$*"; }

# The CMake flags of a llama.cpp build that runs on every CPU of this platform (app/runtimes/cpu_variants.py, which
# imports only the standard library).
portable_cmake_args() {
    python3 -c 'import sys; sys.path.insert(0, "."); from app.runtimes.cpu_variants import portable_flags
print(" ".join(portable_flags()))'
}

# use_build_python PYTHON EXTRAS MODULE...: set PYTHON to an interpreter that can freeze the app.
# An empty PYTHON gets a fresh build/venv with exactly ".[EXTRAS]", so nothing from a development
# venv (test tools, torch) can leak into a package. Fails unless every MODULE imports.
use_build_python() {
    PYTHON="$1"
    local extras="$2"
    shift 2
    if [[ -z "$PYTHON" ]]; then
        log "build environment: build/venv with .[$extras]"
        python3 -m venv build/venv
        build/venv/bin/python -m pip install --quiet --upgrade pip
        # llama-cpp-python for every CPU of the platform (issue 36): pip builds it for this machine's CPU unless
        # told otherwise, and the package bundles it (bundle_runtimes.py refuses a build without CPU variants).
        # The flags are the app's own runtime builder's; --no-cache-dir: pip's wheel cache could hand back a wheel
        # built with other flags. First, alone, so that ".[extras]" finds it there.
        local llama_req
        llama_req="$(sed -n 's/^ *"\(llama-cpp-python[^"]*\)",.*/\1/p' pyproject.toml | head -1)"
        CMAKE_ARGS="$(portable_cmake_args)" build/venv/bin/python -m pip install --quiet --no-cache-dir --no-deps \
            "$llama_req"
        build/venv/bin/python -m pip install --quiet ".[$extras]"
        # The app is frozen from this checkout's source (the spec puts it first on sys.path); an
        # installed copy beside it would only be a stale second source of truth.
        build/venv/bin/python -m pip uninstall --quiet --yes quantdesk
        PYTHON="build/venv/bin/python"
    fi
    local module
    for module in "$@"; do
        "$PYTHON" -c "import $module" 2>/dev/null || {
            echo "$(basename "$0"): $PYTHON cannot import $module; pip install \".[$extras]\"" >&2
            exit 1
        }
    done
}
