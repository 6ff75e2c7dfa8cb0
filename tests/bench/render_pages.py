"""Render every page of the app at 1280×800 with realistic data to PNG files (README screenshots).

    QT_QPA_PLATFORM=offscreen python tests/bench/render_pages.py OUT_DIR [--dark]

The chat is driven through the real EngineBridge and ChatStore by a scripted engine that returns the
figures a 7B Q4_K_M model gives on a mid-range GPU; the hardware page shows this machine as detected,
plus a sample laptop with an NVIDIA GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QSettings, QTimer  # noqa: E402

from app.chats.store import ChatStore  # noqa: E402
from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile  # noqa: E402
from app.ui.engine_bridge import EngineBridge  # noqa: E402
from app.ui.main import application  # noqa: E402
from app.ui.theme import ThemeFollower  # noqa: E402
from app.ui.window import PAGES, MainWindow  # noqa: E402
from backends.base import (Done, GenerationStats, LoadSettings, Loaded, Message,  # noqa: E402
                           SamplingSettings, Token)

GB = 10**9
MODEL = "/home/ada/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
REPLY = """Here is a small function that reads a file in chunks and returns its SHA-256:

```python
import hashlib

def sha256_of(path, chunk=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
```

Reading **1 MiB at a time** keeps memory flat even for a 40 GB model file. If you only need to
check a download, compare the result with the `sha256` the Hub lists for the file."""


class ScriptedEngine:
    """Plays back a reply with the timings of a 7B Q4_K_M on an RTX 4070 laptop GPU (~48 tok/s)."""

    def __init__(self) -> None:
        self.reply = REPLY

    def start(self) -> None: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...

    def load(self, model_path: str, settings: LoadSettings) -> Loaded:
        return Loaded("llama.cpp", model_path, settings.n_ctx, 28, 28, True,
                      {"cuda:0": int(5.3 * GB), "cpu": int(0.6 * GB)}, 2140.0)

    def generate(self, messages: Sequence[Message], sampling: SamplingSettings) -> Iterator[Token | Done]:
        words = self.reply.replace(" ", " \0").split("\0")
        t = 182.0
        for i, word in enumerate(words):
            interval = 1000 / (44 + 6 * ((i * 7) % 5) / 4)
            time.sleep(interval / 1000)  # real pacing, so the sparkline draws what a user would see
            t += interval
            yield Token("r", word, t)
        yield Done("r", self.reply, GenerationStats(
            prompt_tokens=412, prompt_ms=161.0, ttft_ms=182.0, generated_tokens=len(words),
            decode_ms=t - 182.0, stop_reason="eos", peak_memory_bytes=int(5.9 * GB)))


def sample_laptop() -> HardwareProfile:
    return HardwareProfile(
        os="Linux", arch="x86_64",
        cpu=CpuInfo("AMD Ryzen 7 7840HS w/ Radeon 780M Graphics", "x86_64", 8, 16,
                    ["avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "sse4_2"],
                    "AuthenticAMD"),
        ram_total_bytes=32 * 2**30, ram_available_bytes=21 * 2**30,
        gpus=[GpuInfo(0, "nvidia", "NVIDIA GeForce RTX 4070 Laptop GPU", 8 * 2**30, int(7.2 * 2**30),
                      driver="560.35.03", compute_capability="8.9", bandwidth_gbps=256.0)],
        disk_free_bytes=412 * GB, disk_path="/home/ada/models",
        backends=[BackendSupport("llama.cpp", True),
                  BackendSupport("mlx", False, "MLX runs on Apple Silicon (and on Linux CPUs with mlx[cpu])",
                                 "pip install 'quantdesk[mlx]'"),
                  BackendSupport("exllamav2", False, "exllamav2 is not installed", "pip install 'quantdesk[exl2]'"),
                  BackendSupport("exllamav3", False, "exllamav3 is not installed", "pip install 'quantdesk[exl3]'")],
        hints=["Your llama.cpp build has no CUDA support, so the RTX 4070 sits idle: reinstall llama-cpp-python "
               "with CMAKE_ARGS=\"-DGGML_CUDA=on\" to run models up to 8 GB on the GPU."])


def settle(app, ms: int = 80) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()
    app.processEvents()


def wait_for(app, signal, action) -> None:
    loop = QEventLoop()
    signal.connect(loop.quit)
    action()
    QTimer.singleShot(30_000, loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--dark", action="store_true", help="render with the dark colour scheme")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    app = application([sys.argv[0], "-platform", "offscreen"])
    ThemeFollower(app, "dark" if args.dark else "light")
    work = Path(tempfile.mkdtemp(prefix="quantdesk-render-"))
    store = ChatStore(work / "chats.sqlite3")
    for title, text in (("Packing list for Iceland", "What should I pack for a week in Iceland in October?"),
                        ("Explain KV cache quantization", "Does a q8_0 KV cache hurt quality?")):
        conv = store.create_conversation(title, model_path=MODEL)
        store.add_message(conv.id, "user", text)
        store.add_message(conv.id, "assistant", "…", stats={"generated_tokens": 300, "decode_tps": 47.9})
    bridge = EngineBridge(ScriptedEngine)
    window = MainWindow(store, bridge, QSettings(str(work / "window.ini"), QSettings.Format.IniFormat))
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    wait_for(app, bridge.loaded, lambda: chat.load_model(MODEL, LoadSettings(n_ctx=8192)))
    chat.new_conversation()
    chat.composer.setPlainText("Write a Python function that returns the SHA-256 of a large file.")
    wait_for(app, bridge.done, chat.send)
    chat.composer.setPlainText("Can it show progress?")
    window.hardware.set_profile(sample_laptop())
    suffix = "-dark" if args.dark else ""
    for name in PAGES:
        window.show_page(name)
        settle(app)
        path = args.out / f"{name.lower()}{suffix}.png"
        window.grab().save(str(path))
        print(path)
    try:
        from app.hardware.detection import detect

        window.hardware.set_profile(detect())
        window.show_page("Hardware")
        settle(app)
        window.grab().save(str(args.out / f"hardware-this-machine{suffix}.png"))
    except ImportError:
        pass
    window.close()
    bridge.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
