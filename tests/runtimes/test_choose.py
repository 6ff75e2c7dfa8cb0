"""The per-load choice and its sentence (app/runtimes/choose.py), on probe results.

The devices are what each runtime's ggml reports (app/runtimes/devices.py): this machine's real
probes are in tests/runtimes/test_devices.py and test_vulkan.py; CUDA, ROCm and Metal cannot run
here, so for them only the choice is checked, on device records shaped like ggml's."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from app.runtimes.choose import choose
from app.datatypes import Device
from app.runtimes.devices import Probe, SOFTWARE_VULKAN_VAR

GIB = 1 << 30
CPU = Device("CPU", "AMD Ryzen 9 7950X", "cpu", 64 * GIB, 60 * GIB)
RTX = Device("Vulkan0", "NVIDIA GeForce RTX 4070", "gpu", 12 * GIB, 11 * GIB, "nvidia")
RTX_CUDA = Device("CUDA0", "NVIDIA GeForce RTX 4070", "gpu", 12 * GIB, 11 * GIB, "nvidia")
RADEON = Device("Vulkan0", "AMD Radeon RX 7900 XTX (RADV NAVI31)", "gpu", 24 * GIB, 23 * GIB, "amd")
ARC = Device("Vulkan0", "Intel(R) Arc(tm) A770 Graphics (DG2)", "gpu", 16 * GIB, 15 * GIB, "intel")
IRIS = Device("Vulkan1", "Intel(R) Iris(R) Xe Graphics (TGL GT2)", "igpu", 8 * GIB, 8 * GIB, "intel")
LAVAPIPE = Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "gpu", 2 * GIB, 2 * GIB, "software", software=True)


@dataclass
class R:
    name: str
    backend: str
    problem: str = ""


def probes(**seen):
    """A probe function: runtime name -> Probe (an Exception value: the runtime cannot start)."""
    def probe(runtime):
        value = seen[runtime.name]
        return Probe(error=value) if isinstance(value, str) else Probe((CPU, *value))
    return probe


CPU_ONLY = R("cpu", "cpu")


def test_no_gpu_means_the_cpu_runtime():
    choice = choose([CPU_ONLY], probes(cpu=()))
    assert (choice.name, choice.reason) == ("cpu", "No GPU was found, so the CPU runs the model")
    assert choice.gpu is None and choice.label() == "CPU"


def test_nvidia_prefers_cuda_over_vulkan():
    runtimes = [CPU_ONLY, R("vulkan", "vulkan"), R("cuda", "cuda")]
    choice = choose(runtimes, probes(cpu=(), vulkan=(RTX,), cuda=(RTX_CUDA,)))
    assert choice.name == "cuda"
    assert choice.reason == "NVIDIA GeForce RTX 4070 runs on the CUDA runtime"
    assert choice.label() == "CUDA · NVIDIA GeForce RTX 4070 (12.0 GiB)"


def test_nvidia_without_cuda_runs_on_vulkan_and_says_what_would_be_faster():
    choice = choose([CPU_ONLY, R("vulkan", "vulkan")], probes(cpu=(), vulkan=(RTX,)))
    assert choice.name == "vulkan"
    assert choice.reason == ("NVIDIA GeForce RTX 4070 runs on the Vulkan runtime (no CUDA runtime is installed: "
                             "`quantdesk runtime build cuda` is usually faster)")


def test_amd_prefers_rocm_then_vulkan():
    runtimes = [CPU_ONLY, R("vulkan", "vulkan"), R("rocm", "rocm")]
    rocm = Device("ROCm0", RADEON.description, "gpu", RADEON.memory_total, RADEON.memory_free, "amd")
    assert choose(runtimes, probes(cpu=(), vulkan=(RADEON,), rocm=(rocm,))).name == "rocm"
    assert choose(runtimes[:2], probes(cpu=(), vulkan=(RADEON,))).name == "vulkan"


def test_intel_runs_on_vulkan_and_the_bigger_gpu_takes_the_layers():
    choice = choose([CPU_ONLY, R("vulkan", "vulkan")], probes(cpu=(), vulkan=(IRIS, ARC)))
    assert choice.name == "vulkan" and choice.gpu == ARC


def test_apple_runs_on_metal():
    metal = Device("Metal", "Apple M3 Max", "gpu", 96 * GIB, 96 * GIB, "apple")
    choice = choose([R("metal", "metal")], probes(metal=(metal,)))
    assert choice.name == "metal" and choice.reason == "Apple M3 Max runs on the Metal runtime"


def test_a_software_vulkan_device_is_never_the_gpu(monkeypatch):
    monkeypatch.delenv(SOFTWARE_VULKAN_VAR, raising=False)
    choice = choose([CPU_ONLY, R("vulkan", "vulkan")], probes(cpu=(), vulkan=(LAVAPIPE,)))
    assert choice.name == "cpu" and choice.reason == "No GPU was found, so the CPU runs the model"


def test_tests_may_opt_in_to_the_software_vulkan_device(monkeypatch):
    monkeypatch.setenv(SOFTWARE_VULKAN_VAR, "1")
    choice = choose([CPU_ONLY, R("vulkan", "vulkan")], probes(cpu=(), vulkan=(LAVAPIPE,)))
    assert choice.name == "vulkan" and choice.gpu == LAVAPIPE
    assert choice.reason.endswith("(a software Vulkan device, allowed for tests only)")


def test_a_gpu_no_runtime_can_use_names_the_runtime_to_build():
    choice = choose([CPU_ONLY], probes(cpu=()), machine_gpus=[("nvidia", "NVIDIA GeForce RTX 4070")])
    assert choice.name == "cpu"
    assert choice.reason == ("NVIDIA GeForce RTX 4070 is present, but no installed runtime can use it, so the CPU "
                             "runs the model: build one with `quantdesk runtime build vulkan` or `cuda`")


def test_a_runtime_that_cannot_start_is_passed_over_with_the_reason():
    runtimes = [CPU_ONLY, R("vulkan", "vulkan")]
    choice = choose(runtimes, probes(cpu=(), vulkan="libggml-vulkan.so: cannot open shared object file"),
                    machine_gpus=[("amd", "Radeon RX 7900 XTX")])
    assert choice.name == "cpu"
    assert "the vulkan runtime cannot start (libggml-vulkan.so: cannot open shared object file)" in choice.reason


def test_a_pin_wins_while_its_runtime_starts():
    runtimes = [CPU_ONLY, R("vulkan", "vulkan")]
    choice = choose(runtimes, probes(cpu=(), vulkan=(RTX,)), pin=("cpu", "for this model"))
    assert (choice.name, choice.reason, choice.fallback_from) == ("cpu", "cpu is pinned for this model", "")


@pytest.mark.parametrize("runtimes, seen, why", [
    ([CPU_ONLY], {"cpu": ()}, "the runtime vulkan pinned for every model is not installed"),
    ([CPU_ONLY, R("vulkan", "vulkan", problem="its runtime.json cannot be read")], {"cpu": ()},
     "the runtime vulkan pinned for every model is broken: its runtime.json cannot be read"),
    ([CPU_ONLY, R("vulkan", "vulkan")], {"cpu": (), "vulkan": "libvulkan.so.1: cannot open shared object file"},
     "the runtime vulkan pinned for every model cannot start (libvulkan.so.1: cannot open shared object file)"),
])
def test_a_pinned_runtime_that_cannot_start_falls_back_and_says_why(runtimes, seen, why):
    choice = choose(runtimes, probes(**seen), pin=("vulkan", "for every model"))
    assert choice.name == "cpu" and choice.fallback_from == "vulkan"
    assert choice.reason == f"{why}; no GPU was found, so the CPU runs the model"


def test_no_runtime_at_all():
    choice = choose([], probes())
    assert choice.name == "" and choice.reason == "No llama.cpp runtime can run here: no llama.cpp runtime is installed."
