# Sourced by build_linux.sh and macos/build_macos.sh, from the repository root.

VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' app/__init__.py)"
ARCH="$(uname -m)"
log() { printf '\n== %s\n' "$*"; }

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
