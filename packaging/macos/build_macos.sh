#!/usr/bin/env bash
# Build QuantDesk.app and a .dmg on macOS (Apple silicon: llama.cpp with Metal, and MLX).
# UNTESTED: written on Linux, where PyInstaller cannot make a .app and hdiutil does not exist.
#
#   packaging/macos/build_macos.sh [--python PY] [--model FILE]... [--sign "Developer ID Application: …"]
#
#   --python PY    build with this interpreter (needs ".[llama,mlx,packaging]"). Default: a fresh venv
#                  in build/venv with exactly those.
#   --model FILE   put a model (a .gguf file or an MLX folder) into the app, under
#                  QuantDesk.app/Contents/Resources/models. Repeatable.
#   --sign ID      codesign the app with this identity (hardened runtime), then the .dmg. Without it the
#                  app is ad-hoc signed, which runs on the build Mac but is quarantined elsewhere.
#                  Notarize a signed .dmg with `xcrun notarytool submit … --wait` and `xcrun stapler staple`.
#
# Outputs: dist/QuantDesk.app and dist/quantdesk-VERSION-macos-arm64.dmg
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

PYTHON=""
MODELS=()
SIGN_ID=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) PYTHON="$2"; shift 2 ;;
        --model) MODELS+=("$2"); shift 2 ;;
        --sign) SIGN_ID="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build_macos.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$(uname -s)" == Darwin ]] || { echo "build_macos.sh: run this on macOS" >&2; exit 1; }

source packaging/build_env.sh
# llama-cpp-python builds from source, with Metal on by default on Apple silicon.
use_build_python "$PYTHON" "llama,mlx,packaging" PyInstaller llama_cpp PySide6 mlx.core

log "icon: build/quantdesk.icns"
mkdir -p build
"$PYTHON" packaging/make_icons.py --no-png --icns build/quantdesk.icns

log "PyInstaller: dist/QuantDesk.app"
"$PYTHON" -m PyInstaller --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build/pyinstaller packaging/quantdesk.spec
APP="dist/QuantDesk.app"
if [[ ${#MODELS[@]} -gt 0 ]]; then
    mkdir -p "$APP/Contents/Resources/models"
    cp -R "${MODELS[@]}" "$APP/Contents/Resources/models/"
fi
log "llama.cpp runtime: metal (the build venv's llama-cpp-python: Metal is on by default on Apple silicon)"
"$PYTHON" packaging/bundle_runtimes.py "$APP/Contents/Resources" metal=env
"$APP/Contents/MacOS/quantdesk" --version >/dev/null  # the bundle starts at all
"$APP/Contents/MacOS/quantdesk" runtime ls  # ... and so does its runtime

log "signing"
if [[ -n "$SIGN_ID" ]]; then
    # The engine host is this same binary, so the entitlements cover llama.cpp/MLX too; Python's
    # ctypes needs unsigned executable memory under the hardened runtime.
    codesign --force --deep --options runtime --timestamp \
        --entitlements packaging/macos/entitlements.plist --sign "$SIGN_ID" "$APP"
else
    codesign --force --deep --sign - "$APP"
fi
codesign --verify --deep --strict "$APP"

log "dmg"
DMG="dist/quantdesk-${VERSION}-macos-${ARCH}.dmg"
STAGE="build/dmg"
rm -rf "$STAGE" "$DMG"
mkdir -p "$STAGE"
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"  # drag-to-install
hdiutil create -volname "QuantDesk $VERSION" -srcfolder "$STAGE" -fs HFS+ -format UDZO -ov "$DMG"
[[ -n "$SIGN_ID" ]] && codesign --force --timestamp --sign "$SIGN_ID" "$DMG"
hdiutil verify "$DMG"

log "sizes"
du -sh "$APP" "$DMG"
