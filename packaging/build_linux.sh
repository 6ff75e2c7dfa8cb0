#!/usr/bin/env bash
# Build the Linux packages: a one-folder app, a tar.gz of it and a .deb.
#
#   packaging/build_linux.sh [--python PY] [--model FILE]... [--vulkan-runtime DIR | --no-vulkan] [--no-deb]
#
#   --python PY    build with this interpreter (it needs the app's dependencies, llama-cpp-python and
#                  PyInstaller: `pip install ".[llama,packaging]"`). Default: a fresh venv in
#                  build/venv with exactly those, so nothing from a development venv (tests, torch,
#                  mlx) can leak into the package.
#   --model FILE   put this model file (e.g. a .gguf) into the package, under models/, for machines
#                  that will never download one. Repeatable. The outputs then carry "-with-models".
#   --vulkan-runtime DIR  bundle this Vulkan runtime folder (runtime.json + site/, as `quantdesk runtime
#                  build vulkan` makes one; QUANTDESK_VULKAN_RUNTIME in the environment does the same).
#                  Default: build it now with `quantdesk runtime build vulkan` (its cached wheel is
#                  reused; a first build compiles for 15+ minutes and needs glslc, spirv-headers and
#                  Vulkan headers 1.3.272+, e.g. VULKAN_SDK=DIR).
#   --no-vulkan    bundle the CPU runtime only.
#   --no-deb       only the folder and the tar.gz.
#   DEB_MAINTAINER="Name <mail>" in the environment sets the .deb's Maintainer field.
#
# Outputs, in dist/:
#   quantdesk/                                  the app: run quantdesk/quantdesk; its llama.cpp runtimes in
#                                               quantdesk/runtimes/{cpu,vulkan} (app/runtimes)
#   quantdesk-VERSION-linux-x86_64.tar.gz       that folder as quantdesk-VERSION/
#   quantdesk_VERSION_amd64.deb                 /opt/quantdesk, /usr/bin/quantdesk, a menu entry and icons
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON=""
MODELS=()
MAKE_DEB=1
VULKAN_RUNTIME="${QUANTDESK_VULKAN_RUNTIME:-}"
VULKAN=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) PYTHON="$2"; shift 2 ;;
        --model) MODELS+=("$(realpath "$2")"); shift 2 ;;
        --vulkan-runtime) VULKAN_RUNTIME="$(realpath "$2")"; shift 2 ;;
        --no-vulkan) VULKAN=0; shift ;;
        --no-deb) MAKE_DEB=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_linux.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for model in "${MODELS[@]}"; do
    [[ -f "$model" ]] || { echo "build_linux.sh: no such model file: $model" >&2; exit 2; }
done

source packaging/build_env.sh
[[ "$ARCH" == x86_64 ]] && DEB_ARCH=amd64 || DEB_ARCH="$ARCH"
SUFFIX=""
[[ ${#MODELS[@]} -gt 0 ]] && SUFFIX="-with-models"
use_build_python "$PYTHON" "llama,packaging" PyInstaller llama_cpp PySide6

log "PyInstaller: dist/quantdesk"
"$PYTHON" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/quantdesk.spec
APP="dist/quantdesk"
if command -v strip >/dev/null; then
    # An interpreter built from source (pyenv) ships libpython and its extension modules with debug
    # info (-17 MB for libpython alone). Only those are stripped, not the whole bundle (PyInstaller's
    # strip=True): wheel libraries repaired by auditwheel/patchelf break when stripped ("ELF load
    # command address/offset not page-aligned", https://github.com/NixOS/patchelf/issues/10).
    strip --strip-debug "$APP"/_internal/libpython3*.so* "$APP"/_internal/python3*/lib-dynload/*.so
fi
if [[ ${#MODELS[@]} -gt 0 ]]; then
    mkdir -p "$APP/models"
    cp --reflink=auto "${MODELS[@]}" "$APP/models/"
    cat > "$APP/models/README.txt" <<EOF
Models shipped with this package. Chat with one directly:
    quantdesk chat $(basename "${MODELS[0]}")   (from this folder)
or add the folder to your library, once, without copying:
    quantdesk import <this folder> --watch
EOF
fi
install -m 0644 packaging/linux/README.txt "$APP/README.txt"  # the desktop libraries it needs, for the tar.gz
# llama.cpp runtimes, each its own folder beside the program (the spec leaves llama_cpp out of the app).
log "llama.cpp runtimes"
RUNTIMES=(cpu=env)
if [[ $VULKAN == 1 ]]; then
    if [[ -z "$VULKAN_RUNTIME" ]]; then
        # The app's own builder, into a data folder of this build (its wheel cache stays the user's).
        PYTHONPATH="$ROOT" XDG_DATA_HOME="$ROOT/build/xdg-data" "$PYTHON" -m app.cli runtime build vulkan
        VULKAN_RUNTIME="$ROOT/build/xdg-data/QuantDesk/runtimes/vulkan"
    fi
    RUNTIMES+=("vulkan=$VULKAN_RUNTIME")
fi
rm -rf "$APP/runtimes"
"$PYTHON" packaging/bundle_runtimes.py "$APP" "${RUNTIMES[@]}"
"$APP/quantdesk" --version >/dev/null  # the bundle starts at all
"$APP/quantdesk" runtime ls  # ... and so does each runtime

log "tar.gz"
TARBALL="dist/quantdesk-${VERSION}-linux-${ARCH}${SUFFIX}.tar.gz"
# Reproducible-ish: sorted names, no build-user ownership.
tar --sort=name --owner=0 --group=0 --numeric-owner \
    --transform "s,^quantdesk,quantdesk-${VERSION}," -C dist -cf - quantdesk | gzip -9 -n > "$TARBALL"

if [[ $MAKE_DEB == 1 ]]; then
    log "deb"
    command -v dpkg-deb >/dev/null || { echo "build_linux.sh: dpkg-deb is missing (apt-get install dpkg-dev)" >&2; exit 1; }
    STAGE="build/deb/quantdesk"
    rm -rf "$STAGE"
    mkdir -p "$STAGE/DEBIAN" "$STAGE/opt" "$STAGE/usr/bin" "$STAGE/usr/share/applications" \
             "$STAGE/usr/share/doc/quantdesk" "$STAGE/usr/share/icons/hicolor/scalable/apps"
    cp -a "$APP" "$STAGE/opt/quantdesk"
    # The bootloader finds its _internal folder through /proc/self/exe, so a symlink on PATH works.
    ln -s /opt/quantdesk/quantdesk "$STAGE/usr/bin/quantdesk"
    install -m 0644 packaging/linux/quantdesk.desktop "$STAGE/usr/share/applications/quantdesk.desktop"
    install -m 0644 resources/icons/quantdesk.svg "$STAGE/usr/share/icons/hicolor/scalable/apps/quantdesk.svg"
    for png in resources/icons/quantdesk-*.png; do
        size="$(basename "$png" .png)"; size="${size#quantdesk-}"
        install -D -m 0644 "$png" "$STAGE/usr/share/icons/hicolor/${size}x${size}/apps/quantdesk.png"
    done
    install -m 0644 packaging/linux/copyright "$STAGE/usr/share/doc/quantdesk/copyright"
    INSTALLED_KB="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"
    # The bundle needs at least the build machine's glibc (PyInstaller does not bundle libc).
    GLIBC="$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)"
    sed -e "s/@VERSION@/${VERSION}/" -e "s/@ARCH@/${DEB_ARCH}/" -e "s/@INSTALLED_KB@/${INSTALLED_KB}/" \
        -e "s/@GLIBC@/${GLIBC}/" -e "s/@MAINTAINER@/${DEB_MAINTAINER:-QuantDesk developers <quantdesk@example.org>}/" \
        packaging/linux/control.in > "$STAGE/DEBIAN/control"
    install -m 0755 packaging/linux/postinst "$STAGE/DEBIAN/postinst"
    install -m 0755 packaging/linux/postinst "$STAGE/DEBIAN/postrm"  # the same cache refresh after removal
    DEB="dist/quantdesk_${VERSION}_${DEB_ARCH}${SUFFIX}.deb"
    dpkg-deb --root-owner-group -Zxz --build "$STAGE" "$DEB" >/dev/null
fi

log "sizes"
du -sh "$APP" "$TARBALL" ${DEB:+"$DEB"}
