"""Portable runtimes (issue 36): the CPU variants a runtime holds, the one ggml loads for this CPU, the most basic one
forced for a host, and a real answer through each; the packaging's refusal of a build made for the build machine.

The real runtime is tests/fixtures/portable_runtime.py's (``python -m tests.fixtures.portable_runtime`` builds it; CI
does before the tests). That it runs on older CPUs is checked under qemu by tests/packaging/cpu_levels.py."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from app.runtimes import cpu_variants, devices

ROOT = Path(__file__).resolve().parents[2]
X86 = ["x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex", "cannonlake", "cascadelake",
       "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids"]  # GGML_CPU_ALL_VARIANTS on x86 (gcc)


def lib_folder(where: Path, names: list[str]) -> Path:
    where.mkdir(parents=True)
    for name in names:
        (where / name).write_bytes(b"")
    return where


def test_a_portable_folders_variants_and_its_most_basic_one(tmp_path):
    lib = lib_folder(tmp_path / "portable", ["libggml.so", "libggml-base.so", "libggml-base.so.0", "libllama.so",
                                             "libggml-vulkan.so", "libggml-cpu-skylakex.so", "libggml-cpu-x64.so",
                                             "libggml-cpu-haswell.so", "libggml-cpu-haswell.so.0"])
    assert cpu_variants.variants(lib) == ["haswell", "skylakex", "x64"]
    assert cpu_variants.basic_variant(lib) == "x64"
    assert cpu_variants.basic_env(lib) == {"QUANTDESK_CPU_VARIANT": "x64"}
    arm = lib_folder(tmp_path / "arm", ["libggml-cpu-armv8.2_1.so", "libggml-cpu-armv8.0_1.so"])
    assert cpu_variants.basic_variant(arm) == "armv8.0_1"


def test_a_native_build_has_no_variants_to_force(tmp_path):
    lib = lib_folder(tmp_path / "native", ["libggml.so", "libggml-base.so", "libggml-cpu.so", "libllama.so"])
    assert cpu_variants.variants(lib) == [] and cpu_variants.basic_variant(lib) is None
    assert cpu_variants.basic_env(lib) == {}
    assert cpu_variants.variants(tmp_path / "missing") == []


def test_the_environments_native_build_loads_nothing_more(environment_site):
    """A build that links its backends: the probe sees the CPU and names no variant."""
    found = devices.probe(environment_site / "llama_cpp" / "lib")
    assert found.ok, found.error
    assert found.cpu_variant == "" and [d.type for d in found.devices] == ["cpu"]


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))


def test_a_portable_runtime_loads_the_best_variant_for_this_cpu(portable_runtime):
    lib = portable_runtime.lib_dir
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert cpu_variants.variants(lib) == sorted(X86)
    found = devices.probe(lib)
    assert found.ok, found.error
    assert [d.type for d in found.devices] == ["cpu"]
    assert found.cpu_variant in cpu_variants.variants(lib)
    if {"avx2", "fma", "f16c", "bmi2"} <= cpu_flags():  # this CPU runs the haswell variant at least
        assert X86.index(found.cpu_variant) >= X86.index("haswell"), found.cpu_variant
    if "avx512f" in cpu_flags():
        assert found.cpu_variant not in ("x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell",
                                         "alderlake"), found.cpu_variant


def test_the_most_basic_variant_can_be_forced_and_a_missing_one_is_named(portable_runtime, monkeypatch):
    lib = portable_runtime.lib_dir
    monkeypatch.setenv(cpu_variants.CPU_VARIANT_VAR, cpu_variants.basic_env(lib)[cpu_variants.CPU_VARIANT_VAR])
    found = devices.probe(lib)
    assert found.ok and found.cpu_variant == "x64" and [d.type for d in found.devices] == ["cpu"]
    monkeypatch.setenv(cpu_variants.CPU_VARIANT_VAR, "pentium")
    found = devices.probe(lib)
    assert not found.ok and f"{lib} has no CPU variant 'pentium'" in found.error


def test_runtime_ls_says_which_variant_runs(portable_runtime):
    variant = devices.probe(portable_runtime.lib_dir).cpu_variant
    done = subprocess.run([sys.executable, "-m", "app", "runtime", "ls"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if "CPU variant" in ln]
    assert line.startswith("    CPU: ") and line.endswith(f", the {variant} CPU variant")


def chat(model: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "chat", str(model), "--prompt",
                           "What is the capital of France? Answer in one sentence.", "--temperature", "0", "--max-tokens", "24", *args],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)


@pytest.mark.real_model
@pytest.mark.parametrize("forced", [False, True], ids=["best variant", "most basic variant"])
def test_a_portable_runtime_answers(portable_runtime, smollm2_gguf, monkeypatch, forced):
    if forced:  # what the engine host of a load that crashed on the best variant is started with
        monkeypatch.setenv(cpu_variants.CPU_VARIANT_VAR, "x64")
    done = chat(smollm2_gguf, "--runtime", portable_runtime.name)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Paris" in done.stdout
