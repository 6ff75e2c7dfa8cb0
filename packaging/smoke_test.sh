#!/usr/bin/env bash
# Packaging smoke check: build the Linux packages from a clean checkout and try them the way an
# offline user would, with nothing of the development setup around.
#
#   packaging/smoke_test.sh [--model TINY.gguf] [--python PY] [--keep]
#
#   --model FILE  the GGUF to chat with. Default: the tiny test model, built offline with
#                 `python -m tests.fixtures.models` by the dev venv's python (.venv/bin/python, or
#                 QUANTDESK_DEV_PYTHON). Only this model build uses the dev venv.
#   --python PY   build with this interpreter instead of a fresh build venv (see build_linux.sh);
#                 QUANTDESK_BUILD_PYTHON in the environment does the same.
#   --keep        keep the work folder (printed at the end).
#
# Steps: `git clone` this repository (committed state only) into a temp folder, run
# packaging/build_linux.sh there (tar.gz + .deb), delete the clone, unpack the tar.gz, and run the app
# with `env -i` (minimal PATH, fresh HOME and XDG folders, HF_HUB_OFFLINE=1, no venv, cwd outside any
# checkout) and, where the kernel lets us, in a network namespace with no network at all:
#   quantdesk --version; quantdesk hw --json; quantdesk runtime ls --json (the bundled CPU and Vulkan
#   runtimes); quantdesk chat TINY.gguf --prompt hi --json (the frozen engine host) on the CPU runtime,
#   and on the Vulkan runtime with Mesa's lavapipe as the GPU (QUANTDESK_TEST_SOFTWARE_VULKAN=1; skipped,
#   saying so, where lavapipe is not installed); the GUI offscreen until its main window has painted; and
#   `quantdesk search` refusing plainly because it needs the network.
# Then the .deb's --info and --contents, and its binary run through a /usr/bin-style symlink.
# Prints sizes and start-up times, cold (the bundle's files evicted from the page cache) and warm;
# exits non-zero on the first failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL=""
BUILD_PYTHON="${QUANTDESK_BUILD_PYTHON:-}"
KEEP=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --model) MODEL="$(realpath "$2")"; shift 2 ;;
        # Absolute but not resolved: a venv's python is a symlink to the base interpreter.
        --python) BUILD_PYTHON="$(realpath --no-symlinks "$2")"; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "smoke_test.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/quantdesk-smoke.XXXXXX")"
cleanup() { if [[ $KEEP == 1 ]]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }
fail() { echo "SMOKE FAIL: $*" >&2; exit 1; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

if [[ -z "$MODEL" ]]; then
    step "tiny test model (built offline by tests/fixtures/models.py)"
    dev_python="${QUANTDESK_DEV_PYTHON:-$REPO/.venv/bin/python}"
    folder="$(cd "$REPO" && "$dev_python" -m tests.fixtures.models "$WORK/models" | tail -1)"
    MODEL="$folder/tiny-llama-Q4_K_M.gguf"
fi
[[ -f "$MODEL" ]] || fail "no model file at $MODEL"

step "clean checkout: git clone $REPO ($(git -C "$REPO" rev-parse --short HEAD))"
git clone --quiet --no-hardlinks "$REPO" "$WORK/src"

step "build (packaging/build_linux.sh)"
build_args=()
[[ -n "$BUILD_PYTHON" ]] && build_args+=(--python "$BUILD_PYTHON")
build_start=$(date +%s%N)
(cd "$WORK/src" && packaging/build_linux.sh "${build_args[@]}")
echo "build took $(( $(ms_since "$build_start") / 1000 )) s"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$WORK/src/app/__init__.py")"
mkdir -p "$WORK/out"
mv "$WORK/src/dist/"*.tar.gz "$WORK/src/dist/"*.deb "$WORK/out/"
FOLDER_SIZE="$(du -sh "$WORK/src/dist/quantdesk" | cut -f1)"
rm -rf "$WORK/src"  # from here on nothing can come from the source tree
TARBALL="$(ls "$WORK/out/"*.tar.gz)"
DEB="$(ls "$WORK/out/"*.deb)"

step "unpack $(basename "$TARBALL") into a clean place"
RUN="$WORK/run"
mkdir -p "$RUN/home" "$RUN/tmp"
tar -xzf "$TARBALL" -C "$RUN"
APP="$RUN/quantdesk-$VERSION/quantdesk"
[[ -x "$APP" ]] || fail "no executable at $APP"
cp "$MODEL" "$RUN/tiny.gguf"
for data in _internal/resources/icons/quantdesk.svg runtimes/cpu/runtime.json runtimes/cpu/site/llama_cpp/lib/libllama.so \
            runtimes/vulkan/runtime.json runtimes/vulkan/site/llama_cpp/lib/libggml-vulkan.so; do
    [[ -f "$RUN/quantdesk-$VERSION/$data" ]] || fail "the bundle lacks $data"
done

# A network namespace of our own has only a downed loopback: any network call fails at once, so a
# passing run proves the app needs none. Needs root or user namespaces; otherwise run as we are.
ISOLATE=()
if unshare --net true 2>/dev/null; then
    ISOLATE=(unshare --net)
    echo "network: none (unshare --net)"
elif unshare --net --map-root-user true 2>/dev/null; then
    ISOLATE=(unshare --net --map-root-user)
    echo "network: none (unshare --net --map-root-user)"
else
    echo "network: left as is (unshare --net is not permitted here); HF_HUB_OFFLINE=1 still set"
fi
clean() {
    (cd "$RUN" && "${ISOLATE[@]}" env -i PATH=/usr/bin:/bin HOME="$RUN/home" TMPDIR="$RUN/tmp" LANG=C.UTF-8 \
        XDG_CONFIG_HOME="$RUN/home/.config" XDG_DATA_HOME="$RUN/home/.local/share" \
        XDG_CACHE_HOME="$RUN/home/.cache" XDG_RUNTIME_DIR="$RUN/tmp" HF_HUB_OFFLINE=1 "$@")
}
# A cold start: drop the bundle's files (only those) from the page cache first, as after a reboot.
# POSIX_FADV_DONTNEED evicts clean pages without root and without touching anyone else's files.
evict_bundle() {
    python3 -c "
import os, sys
for root, _, files in os.walk(sys.argv[1]):
    for name in files:
        path = os.path.join(root, name)
        if not os.path.islink(path):
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)" "$RUN/quantdesk-$VERSION"
}
check_json() {  # check_json FILE PYTHON-EXPRESSION-ON-d
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1" \
        || fail "$1 does not satisfy: $2 ($(head -c 400 "$1"))"
}

step "quantdesk --version"
evict_bundle
t=$(date +%s%N); out="$(clean "$APP" --version)"; VERSION_MS=$(ms_since "$t")
[[ "$out" == "quantdesk $VERSION" ]] || fail "--version said: $out"
echo "$out  (${VERSION_MS} ms, cold)"

step "quantdesk hw --json"
evict_bundle
t=$(date +%s%N); clean "$APP" hw --json > "$RUN/hw.json"; HW_MS=$(ms_since "$t")
check_json "$RUN/hw.json" "d['cpu']['logical_cores'] >= 1 and d['ram_total_bytes'] > 0 and any(b['name'] == 'llama.cpp' and b['available'] for b in d['backends'])"
echo "CPU and RAM found, llama.cpp available  (${HW_MS} ms, cold)"

step "quantdesk runtime ls --json  (the bundled runtimes)"
clean "$APP" runtime ls --json > "$RUN/runtimes.json"
check_json "$RUN/runtimes.json" "[(r['name'], r['origin'], r['error']) for r in d['runtimes']] == [('cpu', 'bundled', ''), ('vulkan', 'bundled', '')]"
echo "cpu and vulkan, both start"

step "quantdesk chat tiny.gguf --prompt hi --json  (the frozen engine host, CPU runtime)"
t=$(date +%s%N); clean "$APP" chat tiny.gguf --prompt hi --json --max-tokens 16 --seed 1 > "$RUN/chat.json"
CHAT_MS=$(ms_since "$t")
check_json "$RUN/chat.json" "d['backend'] == 'llama.cpp' and d['runtime'] == 'cpu' and d['completion_tokens'] > 0 and isinstance(d['text'], str)"
python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(f\"{d['completion_tokens']} tokens at {d['decode_tps']:.0f} tok/s, load {d['load_ms']:.0f} ms\")" "$RUN/chat.json"
echo "(${CHAT_MS} ms in all)"

step "quantdesk chat through the Vulkan runtime, lavapipe as the GPU"
if [[ -n "$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null)" ]]; then
    t=$(date +%s%N)
    clean QUANTDESK_TEST_SOFTWARE_VULKAN=1 "$APP" chat tiny.gguf --prompt hi --json --max-tokens 16 --seed 1 \
        > "$RUN/chat-vulkan.json" 2> "$RUN/chat-vulkan.err" || fail "Vulkan chat: $(tail -5 "$RUN/chat-vulkan.err")"
    VULKAN_MS=$(ms_since "$t")
    check_json "$RUN/chat-vulkan.json" "d['runtime'] == 'vulkan' and d['completion_tokens'] > 0 and any(v['name'] == 'Vulkan0' and v['layers'] == 2 for v in d['devices']) and d['offloaded_layers'] == d['offloadable_layers']"
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); g = d['devices'][0]; print(f\"{d['completion_tokens']} tokens on {g['description']}, {d['offloaded_layers']}/{d['offloadable_layers']} layers, Vulkan0 buffers {(g['model_bytes'] + g['kv_bytes'] + g['compute_bytes']) / 2**20:.1f} MiB, {d['decode_tps']:.1f} tok/s, load {d['load_ms']:.0f} ms\")" "$RUN/chat-vulkan.json"
    echo "(${VULKAN_MS} ms in all)"
else
    VULKAN_MS="skipped (no lavapipe: apt-get install mesa-vulkan-drivers)"
    echo "$VULKAN_MS"
fi

step "GUI offscreen until the main window has painted"
evict_bundle
t=$(date +%s%N)
gui_out="$(clean QT_QPA_PLATFORM=offscreen QUANTDESK_EXIT_AFTER_SHOWN=1 timeout 120 "$APP" 2>"$RUN/gui.err")" \
    || fail "the GUI exited with $?: $(tail -5 "$RUN/gui.err")"
GUI_MS=$(ms_since "$t")
[[ "$gui_out" == *"main window shown"* ]] || fail "the GUI did not report its window: $gui_out $(tail -5 "$RUN/gui.err")"
echo "$gui_out  (${GUI_MS} ms, cold)"

step "a network action offline says so plainly"
set +e
clean "$APP" search llama > "$RUN/search.out" 2> "$RUN/search.err"; rc=$?
set -e
[[ $rc == 1 ]] && grep -q "offline" "$RUN/search.err" || fail "search offline: exit $rc, stderr: $(cat "$RUN/search.err")"
cat "$RUN/search.err"

step "warm start, 5 more runs each (files now in the page cache; median)"
median() { sort -n | sed -n 3p; }
runs() { for _ in 1 2 3 4 5; do t=$(date +%s%N); clean "$@" > /dev/null 2>&1; ms_since "$t"; done | median; }
VERSION_MED=$(runs "$APP" --version)
HW_MED=$(runs "$APP" hw --json)
GUI_MED=$(runs QT_QPA_PLATFORM=offscreen QUANTDESK_EXIT_AFTER_SHOWN=1 "$APP")

step ".deb: $(basename "$DEB")"
dpkg-deb --info "$DEB" > "$RUN/deb.info"
dpkg-deb --contents "$DEB" > "$RUN/deb.contents"
grep -q "^ Package: quantdesk$" "$RUN/deb.info" || fail ".deb control has no Package: quantdesk"
grep -q "^ Version: $VERSION$" "$RUN/deb.info" || fail ".deb control has the wrong version"
for path in ./opt/quantdesk/quantdesk ./opt/quantdesk/runtimes/cpu/site/llama_cpp/lib/libllama.so \
            ./opt/quantdesk/runtimes/vulkan/site/llama_cpp/lib/libggml-vulkan.so \
            ./usr/share/applications/quantdesk.desktop ./usr/share/icons/hicolor/scalable/apps/quantdesk.svg \
            ./usr/share/icons/hicolor/256x256/apps/quantdesk.png ./usr/share/icons/hicolor/48x48/apps/quantdesk.png; do
    grep -q " $path$" "$RUN/deb.contents" || fail ".deb lacks $path"
done
grep -q " ./usr/bin/quantdesk -> /opt/quantdesk/quantdesk$" "$RUN/deb.contents" || fail ".deb lacks the /usr/bin symlink"
grep -q "^ Depends:.* libvulkan1" "$RUN/deb.info" || fail ".deb does not depend on libvulkan1"
grep -q "^ Recommends:.* mesa-vulkan-drivers" "$RUN/deb.info" || fail ".deb does not recommend mesa-vulkan-drivers"
if command -v desktop-file-validate >/dev/null; then
    dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/share/applications/quantdesk.desktop > "$RUN/quantdesk.desktop"
    desktop-file-validate "$RUN/quantdesk.desktop"
fi
mkdir -p "$RUN/deb-root" "$RUN/bin"
dpkg-deb -x "$DEB" "$RUN/deb-root"
ln -s "$RUN/deb-root/opt/quantdesk/quantdesk" "$RUN/bin/quantdesk"  # as /usr/bin/quantdesk points into /opt
out="$(clean "$RUN/bin/quantdesk" --version)"
[[ "$out" == "quantdesk $VERSION" ]] || fail "the .deb's binary through a symlink said: $out"
grep -E "^ (Installed-Size|Depends|Recommends):" "$RUN/deb.info"
echo "control, desktop entry, icons, /usr/bin symlink: ok"

step "summary"
echo "sizes: folder $FOLDER_SIZE, $(basename "$TARBALL") $(du -h "$TARBALL" | cut -f1), $(basename "$DEB") $(du -h "$DEB" | cut -f1)"
echo "cold start (bundle evicted from the page cache): --version ${VERSION_MS} ms, hw --json ${HW_MS} ms, GUI to painted window ${GUI_MS} ms"
echo "warm start (median of 5):                       --version ${VERSION_MED} ms, hw --json ${HW_MED} ms, GUI to painted window ${GUI_MED} ms"
echo "chat with the tiny model through the frozen engine host: CPU runtime ${CHAT_MS} ms, Vulkan runtime on lavapipe ${VULKAN_MS} ms"
echo "SMOKE OK"
