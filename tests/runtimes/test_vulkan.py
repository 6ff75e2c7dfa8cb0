"""The Vulkan runtime on a real Vulkan device: Mesa's lavapipe (tests/fixtures/runtimes.py).

What the app reports after a load (layers per device, per-device buffers) is compared with llama.cpp's
own log of the same load made without the app; chats stream through the Vulkan runtime in the engine
host; the automatic choice, a pin and the fallback from a runtime with a deleted library do what the
model bar and the CLI say. Loads use SmolLM2-135M's shapes (30 layers); chats the tiny model (lavapipe
generates slowly)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.engine.client import EngineClient
from app.runtimes import devices, pins
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from tests.fixtures.models import SMOLLM2_135M, build_model_set
from tests.fixtures.runtimes import install_copy

MiB = 1 << 20
LLVMPIPE = "llvmpipe (LLVM"


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    return build_model_set(SMOLLM2_135M, quants=("Q4_K_M",), mlx=False).gguf_q4_k_m


def test_the_vulkan_runtime_sees_lavapipe_only_when_tests_allow_it(vulkan_runtime, monkeypatch):
    probe = devices.probe(vulkan_runtime.lib_dir)
    gpu = next(d for d in probe.devices if d.name == "Vulkan0")
    assert gpu.description.startswith(LLVMPIPE) and gpu.software and gpu.vendor == "software"
    assert gpu.type == "gpu" and gpu.memory_total > 0 and probe.gpus() == [gpu]
    assert probe.env == {devices.VISIBLE_VAR: "0"}
    monkeypatch.delenv(devices.SOFTWARE_VULKAN_VAR)  # as on a user's machine: ggml skips CPU-type devices
    assert [d.name for d in devices.probe(vulkan_runtime.lib_dir).devices] == ["CPU"]


# llama.cpp's own lines, read here without the app's parser (backends/llama_cpp/log.py).
BUFFER = re.compile(r"^(?:load_tensors|llama_kv_cache|sched_reserve|llama_context):\s+(\S+)\s+(model|KV|compute|output)"
                    r" buffer size =\s+([\d.]+) MiB$", re.M)
ASSIGNED = re.compile(r"^load_tensors: layer\s+(\d+) assigned to device (\S+),", re.M)
OFFLOADED = re.compile(r"^load_tensors: offloaded (\d+)/(\d+) layers to GPU$", re.M)
RAW_LOAD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import llama_cpp
from llama_cpp import _ggml
lib = llama_cpp.llama_cpp._lib  # libllama: dlsym reaches the libggml it uses (_ggml.libggml is a second copy)
if not lib.ggml_backend_reg_count():  # a portable runtime: its backends loaded as llama.cpp's tools do
    lib.ggml_backend_load_all_from_path(str(_ggml.libggml_base_path).encode())
llama_cpp.Llama(model_path=sys.argv[2], n_ctx=int(sys.argv[3]), n_gpu_layers=int(sys.argv[4]), swa_full=False,
                type_k=1, type_v=1, verbose=True)
"""


def llama_cpp_says(runtime, env: dict[str, str], model: Path, n_ctx: int, ngl: int) -> dict:
    """The same load in plain llama-cpp-python from the runtime's folder: what its log says per device."""
    done = subprocess.run([sys.executable, "-c", RAW_LOAD, str(runtime.site), str(model), str(n_ctx), str(ngl)],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=600, check=True)
    per_device: dict[str, dict[str, int]] = {}
    for buffer, kind, mib in BUFFER.findall(done.stderr):
        device = buffer if buffer.startswith("Vulkan") and buffer[6:].isdigit() else "CPU"
        sizes = per_device.setdefault(device, {})
        sizes[kind] = sizes.get(kind, 0) + round(float(mib) * MiB)
    layers: dict[str, int] = {}
    n_layer = max(int(il) for il, _ in ASSIGNED.findall(done.stderr))  # the last index is the output layer
    for il, device in ASSIGNED.findall(done.stderr):
        if int(il) < n_layer:
            layers[device] = layers.get(device, 0) + 1
    offloaded = OFFLOADED.search(done.stderr)
    return {"buffers": per_device, "layers": layers, "offloaded": (int(offloaded[1]), int(offloaded[2]))}


@pytest.mark.parametrize("layers", ["all", "half", "none"])
def test_layers_and_buffers_reported_equal_llama_cpps_own_log(vulkan_runtime, smollm2_gguf, layers):
    n_layer = SMOLLM2_135M.n_layer
    ngl = {"all": n_layer + 1, "half": (n_layer + 1) // 2, "none": 0}[layers]
    with EngineClient() as client:
        loaded = client.load(smollm2_gguf, LoadSettings(n_ctx=2048, gpu_layers=ngl))
    assert loaded.runtime == "vulkan"
    said = llama_cpp_says(vulkan_runtime, devices.probe(vulkan_runtime.lib_dir).env, smollm2_gguf, 2048, ngl)

    assert (loaded.offloaded_layers, loaded.offloadable_layers) == said["offloaded"] == (ngl, n_layer + 1)
    reported = {d.name: {"model": d.model_bytes, "KV": d.kv_bytes, "compute": d.compute_bytes,
                         "output": d.output_bytes} for d in loaded.devices}
    expected = {device: {kind: sizes.get(kind, 0) for kind in ("model", "KV", "compute", "output")}
                for device, sizes in said["buffers"].items()}
    assert reported == expected
    assert {d.name: d.layers for d in loaded.devices if d.layers} == said["layers"]
    gpu = next(d for d in loaded.devices if d.name == "Vulkan0")
    assert gpu.layers == max(ngl - 1, 0) and gpu.description.startswith(LLVMPIPE)
    assert loaded.gpu_layers == gpu.layers


def test_a_chat_streams_through_the_vulkan_runtime_in_the_engine_host(vulkan_runtime, tiny_models):
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=256))
        host_libraries = Path(f"/proc/{client.pid}/maps").read_text()
        events = list(client.generate([Message("user", "hello")], SamplingSettings(max_tokens=8, seed=1)))
    assert loaded.runtime == "vulkan" and (loaded.offloaded_layers, loaded.offloadable_layers) == (3, 3)
    assert str(vulkan_runtime.lib_dir.resolve() / "libggml-vulkan.so") in host_libraries
    tokens = [e for e in events if isinstance(e, Token)]
    [done] = [e for e in events if isinstance(e, Done)]
    assert done.stats.generated_tokens == 8 == sum(t.count for t in tokens)
    assert done.text == "".join(t.text for t in tokens)


def test_the_automatic_choice_and_what_the_cli_says(vulkan_runtime, tiny_models, capsys):
    assert main(["chat", str(tiny_models.gguf_q4_k_m), "--prompt", "hi", "--max-tokens", "2", "--ctx", "256"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"· Vulkan · llvmpipe \(LLVM [^)]*\) \(\d+\.\d GiB\) · 3/3 layers · context 256", err), err
    assert "runtime vulkan: llvmpipe (LLVM" in err and "(a software Vulkan device, allowed for tests only)" in err
    assert re.search(r"Vulkan0: 2 layers, model [\d.]+ MiB, KV [\d.]+ MiB, compute [\d.]+ MiB", err), err


def test_a_pinned_runtime_wins_and_the_model_bar_says_so(vulkan_runtime, tiny_models, qtbot):
    from app.ui.chat.model_bar import ModelBar

    pins.pin("cpu", tiny_models.gguf_q4_k_m)
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=256))
    assert (loaded.runtime, loaded.runtime_reason) == ("cpu", "cpu is pinned for this model")
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar.show_loaded(loaded, None)
    assert "CPU · all layers on the CPU · context 256" in bar.model_label.text()
    assert bar.model_label.toolTip().startswith("Runtime cpu: cpu is pinned for this model")


def test_a_runtime_with_a_deleted_library_falls_back_and_the_model_bar_and_cli_say_why(
        vulkan_runtime, tiny_models, qtbot, capsys):
    from app.ui.chat.model_bar import ModelBar

    broken = install_copy(vulkan_runtime.site, "vulkan-broken", "vulkan")
    lib = broken / "site" / "llama_cpp" / "lib"
    if (lib / "libggml-vulkan.so.0").exists():  # a build that links its backends: libggml.so needs this (its SONAME)
        gone, said = "libggml-vulkan.so.0", "libggml-vulkan.so.0: cannot open shared object file: No such file or directory"
    else:  # a portable build (issue 36): ggml opens libggml-vulkan.so itself; every start opens libllama.so
        gone, said = "libllama.so", f"{lib / 'libllama.so'} is missing"
    (lib / gone).unlink()
    assert (vulkan_runtime.lib_dir / gone).exists()  # the copy's file was a link of its own
    pins.pin("vulkan-broken")
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=256))
    why = f"the runtime vulkan-broken pinned for every model cannot start ({said}); llvmpipe (LLVM"
    assert loaded.runtime == "vulkan" and loaded.runtime_reason.startswith(why)
    bar = ModelBar()
    qtbot.addWidget(bar)
    bar.show_loaded(loaded, None)
    assert re.search(r"Vulkan · llvmpipe \(LLVM [^)]*\) \(\d+\.\d GiB\) · 3/3 layers", bar.model_label.text())
    assert bar.model_label.toolTip().startswith(f"Runtime vulkan: {why}")

    assert main(["chat", str(tiny_models.gguf_q4_k_m), "--prompt", "hi", "--max-tokens", "2", "--ctx", "256"]) == 0
    assert f"runtime vulkan: {why}" in capsys.readouterr().err
    assert main(["runtime", "ls"]) == 0
    listing = capsys.readouterr().out
    assert "vulkan-broken" in listing and f"cannot start: {said}" in listing
