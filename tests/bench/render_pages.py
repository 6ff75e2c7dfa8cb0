"""Render every page of the app at 1280×800 with realistic data to PNG files, light and dark (README screenshots).

    QT_QPA_PLATFORM=offscreen python -m tests.bench.render_pages OUT_DIR [--theme light|dark|both] [--pages Chat ...]

Light pages are saved as ``page.png``, dark ones as ``page-dark.png``; both themes come from one window, switched
as a user switches them in Settings (so what a theme change re-renders is in the pictures too).

The chat is driven through the real EngineBridge and ChatStore by a scripted engine that thinks, then answers, with
the figures a 7B Q4_K_M model gives on a mid-range GPU (its thinking shown open, as a click on it opens it); the
hardware page shows this machine as detected, plus a sample laptop with an NVIDIA GPU.
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
from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile, RuntimeInfo  # noqa: E402
from app.ui.chat.engine_bridge import EngineBridge  # noqa: E402
from app.ui.chat.model_bar import Prefill  # noqa: E402
from app.ui.common.formatting import human_bytes  # noqa: E402
from app.ui.common.theme import ThemeFollower  # noqa: E402
from app.ui.common.translations import chosen_language, install  # noqa: E402
from app.ui.main import application  # noqa: E402
from app.ui.window import PAGES, MainWindow  # noqa: E402
from app.datatypes import Device, DeviceLoad, Done, GenerationStats, LoadSettings, Loaded, Message, SamplingSettings, Token  # noqa: E402

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
THINKING = """The user wants the SHA-256 of a large file. Reading it whole with f.read() would hold the entire file in memory, which is bad for model files of tens of gigabytes. hashlib's update() takes the data piece by piece, so read fixed-size chunks in a loop. 1 MiB chunks are a good balance. Mention comparing with the Hub's sha256."""


class ScriptedEngine:
    """Plays back a reply with the timings of a 7B Q4_K_M on an RTX 4070 laptop GPU (~48 tok/s)."""

    def __init__(self) -> None:
        self.reply = REPLY
        self.thinking = THINKING

    alive = True
    pid = None
    loaded: Loaded | None = None  # what the local server reads, as from the real EngineClient

    def start(self) -> None: ...
    def cancel(self, request_id: str | None = None) -> None: ...
    def close(self) -> None: ...

    def load(self, model_path: str, settings: LoadSettings, *, backend=None, on_progress=None) -> Loaded:
        gpu = "NVIDIA GeForce RTX 4070 Laptop GPU"
        self.loaded = Loaded("llama.cpp", model_path, settings.n_ctx, 28, 28, True,
                             {"cpu": int(0.6 * GB)}, 2140.0, runtime="vulkan",
                             runtime_reason=f"{gpu} runs on the Vulkan runtime (no CUDA runtime is installed: "
                                            "`quantdesk runtime build cuda` is usually faster)",
                             devices=(DeviceLoad("Vulkan0", gpu, 28, int(4.17 * 2**30), 448 * 2**20, 304 * 2**20, 0,
                                                 int(7.2 * 2**30)),
                                      DeviceLoad("CPU", "", 0, 292 * 2**20, 0, 23 * 2**20, 2**20)),
                             offloaded_layers=29, offloadable_layers=29)
        return self.loaded

    def generate(self, messages: Sequence[Message], sampling: SamplingSettings, request_id: str = "r1",
                 on_wait=None, events_every_s: float | None = None) -> Iterator[Token | Done]:
        thoughts = self.thinking.replace(" ", " \0").split("\0")
        words = self.reply.replace(" ", " \0").split("\0")
        t = 182.0
        first_answer = 0.0
        for i, (word, thought) in enumerate([("", w) for w in thoughts] + [(w, "") for w in words]):
            interval = 1000 / (44 + 6 * ((i * 7) % 5) / 4)
            time.sleep(interval / 1000)  # real pacing, so the sparkline draws what a user would see
            t += interval
            first_answer = first_answer or (t if word else 0.0)
            yield Token("r", word, t, reasoning=thought)
        yield Done("r", self.reply, GenerationStats(
            prompt_tokens=412, prompt_ms=161.0, ttft_ms=182.0, generated_tokens=len(thoughts) + len(words),
            decode_ms=t - 182.0, stop_reason="eos", peak_memory_bytes=int(5.9 * GB), reasoning_tokens=len(thoughts),
            reasoning_ms=first_answer - 182.0 - 20.0, first_answer_ms=first_answer), reasoning=self.thinking)


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
        runtimes=[RuntimeInfo("cpu", "cpu", "environment", "0.3.36", size_bytes=25 * 2**20,
                              devices=[Device("CPU", "AMD Ryzen 7 7840HS", "cpu", 32 * 2**30, 21 * 2**30)]),
                  RuntimeInfo("vulkan", "vulkan", "user", "0.3.36", size_bytes=151 * 2**20,
                              built_at="2026-11-20T18:02:11+01:00",
                              devices=[Device("Vulkan0", "NVIDIA GeForce RTX 4070 Laptop GPU", "gpu", 8 * 2**30,
                                                     int(7.2 * 2**30), "nvidia", False, 2**32 - 1),
                                       Device("CPU", "AMD Ryzen 7 7840HS", "cpu", 32 * 2**30, 21 * 2**30)])],
        backends=[BackendSupport("llama.cpp", True),
                  BackendSupport("mlx", False, "MLX runs on Apple Silicon (and on Linux CPUs with mlx[cpu])",
                                 "pip install 'quantdesk[mlx]'"),
                  BackendSupport("exllamav2", False, "exllamav2 is not installed", "pip install 'quantdesk[exl2]'"),
                  BackendSupport("exllamav3", False, "exllamav3 is not installed", "pip install 'quantdesk[exl3]'")])


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


def fill_discover_and_downloads(window) -> None:
    """Discover with Qwen2.5-7B-Instruct-GGUF's quants as fitted on the sample laptop (RTX 4070 Laptop, 8 GiB), one
    of them measured by the quant lab here, and the Downloads page with one job running and one finished."""
    from app.hub.download import DownloadResult, Progress
    from app.hub.download_queue import DownloadTask
    from app.hub.plan import DownloadRequest
    from app.hub.discover import ModelChoices, QuantChoice

    repo = "Qwen/Qwen2.5-7B-Instruct-GGUF"
    rows = (("Q3_K_M", 3.81, "full GPU", 4.6, 58.0), ("Q4_K_M", 4.68, "full GPU", 5.5, 47.9),
            ("Q5_K_M", 5.44, "full GPU", 6.3, 41.2), ("Q6_K", 6.25, "partial: 24 of 29 layers", 7.1, 19.4),
            ("Q8_0", 8.10, "partial: 17 of 29 layers", 8.9, 11.8), ("F16", 15.2, "CPU only", 16.1, 3.9))
    choices = ModelChoices(
        repo_id=repo, format="gguf", summary="Qwen2.5 is the latest series of Qwen large language models; "
        "this repo holds the 7B instruction-tuned model in GGUF format.",
        best_reason="Q5_K_M is the highest-precision GGUF quant that fits entirely in GPU memory at 8192 tokens, "
                    "about 41 tok/s.", format_reason="ExLlama is not available here, so GGUF through llama.cpp")
    for quant, size_gb, verdict, memory_gib, tps in rows:
        choices.choices.append(QuantChoice(
            label=f"{repo}/qwen2.5-7b-instruct-{quant.lower()}.gguf", quant=quant, format="gguf", verdict=verdict,
            reason="", request=DownloadRequest(repo, quant=quant), download_bytes=int(size_gb * GB),
            memory_bytes=int(memory_gib * 2**30), decode_tok_s=tps, best=quant == "Q5_K_M"))
    window.discover.set_profile(sample_laptop())
    measured = {f"{repo}/qwen2.5-7b-instruct-q5_k_m.gguf": "KLD 0.00631 ± 0.0002 from Q8_0 measured here (2026-11-20), "
                                                           "1.4× the generation speed of Q8_0"}  # the lab's, on it
    window.discover.show_choices(choices, measured)
    window.discover.results.setCurrentRow(-1)
    running = DownloadTask(id=1, request=DownloadRequest(repo, quant="Q5_K_M"), state="running",
                           progress=Progress("downloading", repo, "qwen2.5-7b-instruct-q5_k_m.gguf",
                                             done=int(2.1 * GB), total=int(5.44 * GB), speed=38.5e6, eta=86.8))
    window.downloads._add_row(running, f"{repo} · Q5_K_M")
    folder = Path("/home/ada/.local/share/QuantDesk/models/bartowski/Llama-3.2-3B-Instruct-GGUF")
    finished = DownloadTask(id=2, request=DownloadRequest("bartowski/Llama-3.2-3B-Instruct-GGUF", quant="Q4_K_M"),
                            state="done", result=DownloadResult("bartowski/Llama-3.2-3B-Instruct-GGUF", "0" * 40, [],
                                                                folder / "Llama-3.2-3B-Instruct-Q4_K_M.gguf", folder))
    window.downloads._add_row(finished, "bartowski/Llama-3.2-3B-Instruct-GGUF · Q4_K_M")


LAB_MODELS = "/home/ada/models/Llama-3.2-3B-Instruct-GGUF"
# Llama 3.2 3B Instruct on the sample laptop's CPU (DDR5, 8 cores): generation is bound by memory bandwidth,
# so it scales with the file size; the quality losses follow llama.cpp's published KL figures per quant.
LAB_ROWS = (  # quant, bpw, size GB, load ms, prompt tok/s, gen tok/s, TTFT ms, peak GiB, ppl, mean KLD, same top p
    ("F16", 16.0, 6.43, 2410, 96.0, 5.1, 5420, 6.3, 11.18, 0.0, 1.0),
    ("Q8_0", 8.5, 3.42, 1310, 141.0, 9.4, 3690, 3.5, 11.19, 0.00071, 0.996),
    ("Q6_K", 6.56, 2.64, 1020, 118.0, 11.6, 4400, 2.7, 11.22, 0.0026, 0.988),
    ("Q5_K_M", 5.69, 2.32, 930, 122.0, 12.8, 4250, 2.4, 11.27, 0.0064, 0.978),
    ("Q4_K_M", 4.89, 2.02, 860, 131.0, 14.6, 3960, 2.1, 11.43, 0.0209, 0.959),
    ("Q3_K_M", 3.91, 1.69, 780, 109.0, 15.9, 4760, 1.8, 11.94, 0.0652, 0.926),
)


def sample_quality(ppl: float, kld: float, same_top: float, seed: int):
    """llama-perplexity's statistics of 2,040 made-up positions whose means are the figures given."""
    import numpy as np

    from app.lab.metrics import KldStatistics
    from backends.scoring import POSITIONS

    rows = np.zeros(2040, dtype=POSITIONS)
    rows["position"] = 256 + np.arange(2040) % 255
    rows["nll_base"] = np.random.default_rng(0).gamma(1.2, np.log(11.18) / 1.2, 2040)  # one reference for all
    rng = np.random.default_rng(seed)
    rows["nll"] = rows["nll_base"] + (np.log(ppl) - np.log(11.18)) + rng.normal(0, 3 * kld ** 0.5, 2040)
    rows["kld"] = rng.gamma(0.35, kld / 0.35, 2040) if kld else 0.0
    rows["p_diff"] = rng.normal(-kld, 2 * kld ** 0.5, 2040) if kld else 0.0
    rows["same_top"] = rng.random(2040) < same_top
    return KldStatistics.of(rows)


def sample_bench(reps: int = 3, created: str = "2026-11-21T16:42:08+00:00", rows=LAB_ROWS):
    """A quant-lab result with the figures above, each run scattered a little around the median."""
    from app.lab import corpus
    from app.lab.metrics import Spread
    from app.lab.results import BenchResult, BenchSettings, RunSample, VariantResult

    variants = []
    for index, (quant, bpw, size_gb, load, ptps, gtps, ttft, peak, ppl, kl, top1) in enumerate(rows):
        runs = [RunSample(rep=r, position=(index + r) % len(rows), load_ms=load * (1 + 0.04 * (r - 1)),
                          prompt_tokens=512, prompt_ms=512_000 / ptps, prompt_tps=ptps * (1 - 0.02 * (r - 1)),
                          ttft_ms=ttft * (1 + 0.015 * (r - 1)), generated_tokens=128,
                          decode_tps=gtps * (1 + 0.03 * (r - 1) * (-1) ** index), stop_reason="length",
                          peak_memory_bytes=int(peak * 2**30 * (1 + 0.005 * (r - 1))),
                          memory_after_load={"cpu": int(size_gb * 10**9)}) for r in range(reps)]
        name = f"Llama-3.2-3B-Instruct-{quant}"
        v = VariantResult(label=name, path=f"{LAB_MODELS}/{name}.gguf", format="gguf", quant=quant, bits_per_weight=bpw, size_bytes=int(size_gb * GB),
                          backend="llama.cpp", is_reference=index == 0, runs=runs,
                          quality=sample_quality(ppl, kl, top1, index))
        v.perplexity = v.quality.ppl.value
        for metric in ("load_ms", "prompt_tps", "ttft_ms", "decode_tps", "peak_memory_bytes"):
            v.speed[metric] = Spread.of([getattr(r, metric) for r in runs])
        variants.append(v)
    variants.append(VariantResult(
        label="Llama-3.2-3B-Instruct-exl2-4.0bpw", path="/home/ada/models/Llama-3.2-3B-Instruct-exl2-4.0bpw",
        format="exl2", quant="4.0bpw", bits_per_weight=4.0, size_bytes=int(1.9 * GB),
        error="exllamav2 cannot run here: exllamav2 is not installed (pip install 'quantdesk[exl2]')"))
    return BenchResult(id=f"{created[:10].replace('-', '')}-{created[11:19].replace(':', '')}-3fa2c1",
                       created_at=created, quantdesk_version="0.1.0",
                       settings=BenchSettings(reps=reps), hardware=sample_laptop().to_dict(),
                       reference=variants[0].label, variants=variants, corpus=corpus.bundled().describe(),
                       reference_file={"path": "", "n_ctx": 512, "chunks": 8, "positions": 2040, "mean_tokens": 61.4,
                                       "mean_left_out": 0.0001, "capped_share": 0.0})


def sample_sweep():
    """A sweep of Q4_K_M and Q8_0 over the KV-cache types and three context lengths: a quantized cache costs more
    the longer the context (made-up figures of that shape, scattered as runs are)."""
    import dataclasses

    from app.lab.results import BenchSettings

    base = sample_bench(reps=1, created="2026-11-22T10:05:12+00:00", rows=LAB_ROWS[:2] + LAB_ROWS[4:5])
    reference, variants = base.variants[0], []
    for source in base.variants[1:3]:
        kld = source.quality.kld.value
        for kv, cache in (("f16", 0.0), ("q8_0", 0.0004), ("q4_0", 0.006)):
            for n, ctx in enumerate((2048, 8192, 32768)):
                stretch = 1 + 0.18 * n * (1 + 6 * cache / 0.006)
                quality = sample_quality(11.2 + 0.3 * n, (kld + cache) * stretch, 0.95, n + len(variants))
                variants.append(dataclasses.replace(
                    source, label=f"{source.label} · KV {kv} · ctx {ctx}", kv_cache_type=kv, ctx=ctx,
                    sweep_of=source.label, quality=quality, perplexity=quality.ppl.value))
    return dataclasses.replace(base, id=base.id[:-6] + "5c0e11", variants=[reference, *variants],
                               settings=BenchSettings(reps=1, kv_types=("f16", "q8_0", "q4_0"),
                                                      contexts=(2048, 8192, 32768)))


def sample_found():
    """What the Lab's "From uploaders…" dialog finds for one quant of a popular model."""
    from app.lab.uploaders import Candidate, Found

    rows = (("bartowski/Qwen2.5-7B-Instruct-GGUF", 4.68, 182_400, ""),
            ("Qwen/Qwen2.5-7B-Instruct-GGUF", 4.68, 151_022, ""),
            ("unsloth/Qwen2.5-7B-Instruct-GGUF", 4.68, 64_310, ""),
            ("lmstudio-community/Qwen2.5-7B-Instruct-GGUF", 4.68, 40_877, ""),
            ("mradermacher/Qwen2.5-7B-Instruct-i1-GGUF", 4.68, 12_905, ""),
            ("someone/Qwen2.5-7B-Instruct-abliterated-GGUF", 4.68, 3_114,
             "its 152,064 tokens are not the reference's (the token texts differ)"))
    candidates = [Candidate(repo, "Q4_K_M", ("Qwen2.5-7B-Instruct-Q4_K_M.gguf",), int(gb * GB), "0" * 40, None,
                            downloads, 0, "qwen2", 152064, problem) for repo, gb, downloads, problem in rows]
    precise = Candidate("Qwen/Qwen2.5-7B-Instruct-GGUF", "F16", ("qwen2.5-7b-instruct-fp16.gguf",), int(15.2 * GB),
                        "0" * 40, None, 151_022, 0, "qwen2", 152064)
    return Found("Qwen/Qwen2.5-7B-Instruct", ("Q4_K_M",), candidates,
                 ["ggml-org/Qwen2.5-7B-Instruct-Q8_0-GGUF has no Q4_K_M (it has: Q8_0)"], precise,
                 precise.label)


class _IdleServer:
    """Stands in for a running ServerThread in the screenshot (two clients streaming)."""

    active_requests = 2

    def stop(self) -> None: ...


def fill_lab_and_server(window, work: Path) -> None:
    """The Quant lab showing a finished six-quant comparison (and two past results), the Local server on."""
    from app.lab.store import ResultStore
    from app.ui.server.server_page import Running

    lab = window.lab
    lab.store = ResultStore(work / "lab")
    older = sample_bench(created="2026-11-18T09:15:40+00:00", rows=LAB_ROWS[:1] + LAB_ROWS[3:5])
    lab.store.save(older)
    result = sample_bench()
    lab.store.save(result)
    lab.refresh_history()
    for v in result.variants:
        lab.picker.add_item(v.path, f"{v.label} — {v.quant} · {v.format} · {human_bytes(v.size_bytes)}", checked=True)
    lab.picker.add_item(MODEL, "Qwen/Qwen2.5-7B-Instruct-GGUF:Q4_K_M — Q4_K_M · gguf · 4.7 GB", checked=False)
    lab.show_result(result)
    lab.progress.setRange(0, 25)
    lab.progress.setValue(25)
    lab.status.setText(f"Finished and saved ({result.id}). Could not measure: Llama-3.2-3B-Instruct-exl2-4.0bpw "
                       "— hover over its row for why.")
    server = window.server
    server.api_key.setText("qd-7hVq2M0xW4kPz9LrT1sYbN3e")
    server.origins.setText("http://localhost:3000")
    server.switch.blockSignals(True)  # as if switched on: the worker's answer follows
    server.switch.setChecked(True)
    server.switch.blockSignals(False)
    server.state = "starting"
    server._on_started(0, Running(_IdleServer(), 8080))  # as the start job answers (ticket, result)
    server._on_poll()


def isolate(work: Path) -> None:
    """Point the settings, data, models and HF folders into the render's temp folder (never the user's)."""
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache"),
                     ("HF_HOME", "hf")):
        os.environ[var] = str(work / sub)
    for var in ("QUANTDESK_MODELS_DIR", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(var, None)


def fill_library(work: Path) -> None:
    """A library as a user has it after a few weeks: downloads, a copied import, a model used in place."""
    from app import settings
    from app.hub import config
    from app.hub.library import Library, LibraryEntry

    root = settings.models_dir()
    library = Library(root)
    usb = work / "usb" / "Mistral-7B-Instruct-v0.3-Q5_K_M.gguf"
    usb.parent.mkdir(parents=True)
    with open(usb, "wb") as fh:  # sparse: the listing reads sizes from the manifest, the disk stays free
        fh.truncate(5_130_000_000)
    rows = (
        ("bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M", "Qwen2.5-7B-Instruct-Q4_K_M", "gguf", "Q4_K_M", "qwen2",
         4_683_073_536, "download", True, "bartowski/Qwen2.5-7B-Instruct-GGUF", "8911e8a47f92bac19d6f5c64a2e2095bd2f7d031"),
        ("bartowski/Llama-3.2-3B-Instruct-GGUF:Q8_0", "Llama-3.2-3B-Instruct-Q8_0", "gguf", "Q8_0", "llama",
         3_421_899_104, "download", True, "bartowski/Llama-3.2-3B-Instruct-GGUF", "5ab33fa94d1d04e903623ae72c95d1696f09f9e8"),
        ("mlx-community/Qwen2.5-3B-Instruct-4bit", "mlx-community/Qwen2.5-3B-Instruct-4bit", "mlx", "4bit", "qwen2",
         1_742_108_201, "download", True, "mlx-community/Qwen2.5-3B-Instruct-4bit", "c1d6a2f0e7b3a9c85d4e1f2b3a4c5d6e7f8a9b0c"),
        ("local:gemma-2-2b-it-Q6_K", "gemma-2-2b-it-Q6_K", "gguf", "Q6_K", "gemma2", 2_151_393_120, "import", True,
         None, None),
        (f"reference:{usb}", usb.stem, "gguf", "Q5_K_M", "llama", 5_130_000_000, "reference", False, None, None),
    )
    for i, (entry_id, name, fmt, quant, arch, size, source, owned, repo, commit) in enumerate(rows):
        path = usb if source == "reference" else root / (repo or "local") / f"{name}.gguf"
        library._put(LibraryEntry(entry_id, name, fmt, str(path), [{"path": path.name, "size": size, "sha256": None}],
                                  size, source, owned, 1_700_000_000 + i, repo, "main" if repo else None, commit,
                                  quant, arch))
    config.save_token("hf_render0example0token0QkV2")
    # Today's update check, kept (so the window asks nothing): the Qwen GGUF's repo re-uploaded it with a new template.
    from app.hub import updates

    now = time.time()
    statuses = {e.id: updates.UpdateStatus(e.id, e.repo_id or "", "main", e.commit_hash or "", e.commit_hash or "", now)
                for e in library.entries(refresh=False) if updates.checkable(e)}
    qwen = statuses["bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"]
    qwen.remote_commit = "0e3f8c1d9b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e"
    qwen.changes = [updates.FileChange("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "template")]
    qwen.files = ["Qwen2.5-7B-Instruct-Q4_K_M.gguf"]
    updates.remember(library, statuses)


def fill_documents(work: Path) -> None:
    """Collections as a user has them (issue 28): a watched folder of manuals embedded, with two files it could not
    read, and a paused folder of papers half read; rows written straight into the store (no indexer runs)."""
    import random

    from app.documents.passages import Chunk
    from app.documents.store import DocumentStore

    rng = random.Random(28)
    model = str(work / "models" / "nomic-embed-text-v1.5.Q8_0.gguf")
    with DocumentStore() as store:
        manuals = work / "Documents" / "Manuals"
        manuals.mkdir(parents=True)
        store.create_collection("Manuals", folder=manuals, embed_model=model)
        for i, name in enumerate(("router-setup.pdf", "dishwasher-SMV4.pdf", "camera-a7iv.pdf", "bike-service.md",
                                  "heat-pump.pdf", "tax-2025-guide.pdf")):
            store.store_file("Manuals", str(manuals / name), size=400_000 + 91_000 * i, mtime_ns=1, sha256=str(i),
                             pages=12 + i, chunks=[Chunk(f"{name} section {n} " * 40, n, page=1 + n // 2)
                                                   for n in range(18 + 3 * i)])
        store.fail_file("Manuals", str(manuals / "warranty-scan.pdf"), "no text: the PDF holds only images of pages "
                        "(a scan); it needs OCR first")
        store.fail_file("Manuals", str(manuals / "old-router.pdf"), "encrypted: the PDF needs a password")
        ids = store.unembedded("Manuals", model, 10_000)
        vectors = []
        for chunk_id, _text in ids:
            v = [rng.gauss(0, 1) for _ in range(8)]
            norm = sum(x * x for x in v) ** 0.5
            vectors.append((chunk_id, [x / norm for x in v]))
        store.put_vectors("Manuals", model, vectors)
        papers = work / "Documents" / "Papers"
        papers.mkdir(parents=True)
        store.create_collection("Papers", folder=papers)
        for i in range(14):
            store.store_file("Papers", str(papers / f"paper-{i:02d}.pdf"), size=900_000, mtime_ns=1, sha256=f"p{i}",
                             pages=10, chunks=[Chunk(f"paper {i} part {n} " * 60, n, page=n + 1) for n in range(10)])
        store.put_pending("Papers", [(str(papers / f"paper-{i:02d}.pdf"), 900_000, 1) for i in range(14, 40)])
        store.set_paused("Papers", True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--theme", choices=("light", "dark", "both"), default="both")
    parser.add_argument("--dark", action="store_true", help="the same as --theme dark")
    parser.add_argument("--pages", nargs="+", choices=PAGES, default=list(PAGES),
                        help="the pages to render (default: all, plus the Lab's charts, the first run's welcome and "
                             "this machine's hardware)")
    args = parser.parse_args(argv)
    themes = ["dark"] if args.dark else ["light", "dark"] if args.theme == "both" else [args.theme]
    args.out.mkdir(parents=True, exist_ok=True)
    app = application([sys.argv[0], "-platform", "offscreen"])
    install(chosen_language("system"))  # as the app starts: QUANTDESK_LANGUAGE=de renders the German pages
    follower = ThemeFollower(app, themes[0])
    work = Path(tempfile.mkdtemp(prefix="quantdesk-render-"))
    isolate(work)
    fill_library(work)
    fill_documents(work)
    store = ChatStore(work / "chats.sqlite3")
    for title, text in (("Packing list for Iceland", "What should I pack for a week in Iceland in October?"),
                        ("Explain KV cache quantization", "Does a q8_0 KV cache hurt quality?")):
        conv = store.create_conversation(title, model_path=MODEL)
        store.add_message(conv.id, "user", text)
        store.add_message(conv.id, "assistant", "…", stats={"generated_tokens": 300, "decode_tps": 47.9})
    bridge = EngineBridge(ScriptedEngine())
    window = MainWindow(store, bridge, QSettings(str(work / "window.ini"), QSettings.Format.IniFormat))
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    if window.library.busy:
        wait_for(app, window.library.changed, lambda: None)
    window.library.select("bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M")
    # The estimate the model bar shows beside what loaded (what prefill_for gives for this file on the laptop).
    chat.prefill = Prefill(MODEL, LoadSettings(n_ctx=8192), estimated_bytes=int(5.6 * 2**30), expected_gpu_blocks=28,
                           verdict="full GPU", reason="all 29 layers on Vulkan0: 5.6 of 7.2 GiB",
                           runtime="Vulkan · NVIDIA GeForce RTX 4070 Laptop GPU (8.0 GiB)", runtimes=["cpu", "vulkan"],
                           estimated_buffers={"Vulkan0": int(4.87 * 2**30), "CPU": 330 * 2**20})
    chat.model_bar.show_estimate(chat.prefill)
    wait_for(app, bridge.loaded, lambda: chat.load_model(MODEL, LoadSettings(n_ctx=8192)))
    chat.new_conversation()
    chat.composer.setPlainText("Write a Python function that returns the SHA-256 of a large file.")
    wait_for(app, bridge.done, chat.send)
    chat.view.bubbles[-1].thinking.toggle.click()  # the thinking, opened as a click on its line opens it
    chat.composer.setPlainText("Can it show progress?")
    window.hardware.set_profile(sample_laptop())
    fill_discover_and_downloads(window)
    fill_lab_and_server(window, work)
    everything = args.pages == list(PAGES)
    for theme in themes:
        follower.set_theme(theme)
        suffix = "-dark" if theme == "dark" else ""
        for name in args.pages:
            window.show_page(name)
            settle(app)
            path = args.out / f"{name.lower()}{suffix}.png"
            window.grab().save(str(path))
            print(path)
        if "Lab" in args.pages:  # the Lab's other tabs: every statistic, and the charts (shown and exported)
            window.show_page("Lab")
            window.lab.tabs.setCurrentWidget(window.lab.statistics)
            settle(app)
            window.grab().save(str(args.out / f"lab-statistics{suffix}.png"))
            window.lab.tabs.setCurrentWidget(window.lab.charts)
            settle(app)
            window.grab().save(str(args.out / f"lab-charts{suffix}.png"))
            window.lab.charts.save_png(str(args.out / f"lab-charts-export{suffix}.png"))
            shown = window.lab.result
            window.lab.show_result(sample_sweep())  # a sweep of KV caches and context lengths, its chart last
            settle(app)
            window.lab.charts.save_png(str(args.out / f"lab-sweep{suffix}.png"))
            window.lab.show_result(shown)
            window.lab.tabs.setCurrentIndex(0)
            from app.ui.lab.lab_uploaders import UploadersDialog

            dialog = UploadersDialog(None, window)
            dialog.base.setText("Qwen/Qwen2.5-7B-Instruct")
            dialog.show_found(sample_found())
            dialog.show()
            settle(app)
            dialog.grab().save(str(args.out / f"lab-uploaders{suffix}.png"))
            dialog.close()
    if everything:  # the first run's page, as a new user sees it on the sample laptop
        welcome = window.show_welcome()
        welcome.set_profile(sample_laptop())
        for theme in themes:
            follower.set_theme(theme)
            settle(app)
            window.grab().save(str(args.out / f"welcome{'-dark' if theme == 'dark' else ''}.png"))
        window.show_page("Chat")  # the welcome gives way
    if everything:
        from app.machine import detect  # this machine, as the app sees it

        window.hardware.set_profile(detect())
        window.show_page("Hardware")
        for theme in themes:
            follower.set_theme(theme)
            settle(app)
            window.grab().save(str(args.out / f"hardware-this-machine{'-dark' if theme == 'dark' else ''}.png"))
    window.server.shutdown()
    window.close()
    bridge.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
