"""detect() on the machine the tests run on, and its fail-soft rules: a failing or hanging probe
leaves its part absent with the reason and the rest of the profile intact."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from app import machine
from app.hardware import bandwidth, gpus, hints, sources
from app.hardware.detect import detect, probe_disk
from app.hardware.profile import HardwareProfile, HardwareProfileError, load_profile
from app.hardware.sources import Sources
from tests.hardware.replay import recorded_sources

ROOT = Path(__file__).resolve().parents[2]
ON_LINUX = sys.platform.startswith("linux")


@pytest.fixture
def real_profile() -> HardwareProfile:
    # Function scope: detection must run inside the per-test isolated folders (tests/conftest.py).
    return machine.detect()  # the hardware with the engines and llama.cpp runtimes, as the app probes it


@pytest.mark.skipif(not ON_LINUX, reason="compares with Linux /proc/cpuinfo")
def test_real_machine_agrees_with_proc_cpuinfo_and_psutil(real_profile):
    text = Path("/proc/cpuinfo").read_text()
    processors = [b for b in text.split("\n\n") if b.startswith("processor")]
    flags = set()
    for block in processors:
        for line in block.splitlines():
            if line.startswith(("flags", "Features")):
                flags |= set(line.split(":", 1)[1].split())
    cpu = real_profile.cpu
    assert cpu.logical_cores == len(processors) == psutil.cpu_count(logical=True)
    assert cpu.physical_cores == psutil.cpu_count(logical=False)
    # Every feature llama.cpp cares about is reported exactly when the kernel lists it.
    for kernel_name, ours in {"avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "avx512f": "avx512f",
                              "avx512_vnni": "avx512_vnni", "avx512_bf16": "avx512_bf16", "amx_tile": "amx",
                              "asimd": "neon", "asimddp": "dotprod", "i8mm": "i8mm", "sve": "sve"}.items():
        assert (ours in cpu.flags) == (kernel_name in flags), kernel_name
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), None)
    if model:
        assert cpu.model == model
    vm = psutil.virtual_memory()
    assert real_profile.ram_total_bytes == vm.total
    assert 0 < real_profile.ram_available_bytes <= vm.total
    assert real_profile.arch == cpu.arch == os.uname().machine
    assert real_profile.os == "linux"


def test_real_machine_profile_round_trips_through_json(real_profile, tmp_path):
    file = tmp_path / "me.json"
    file.write_text(real_profile.to_json())
    assert load_profile(file) == real_profile
    assert json.loads(real_profile.to_json())["schema_version"] == 1


def test_real_machine_disk_is_measured_where_models_go(real_profile):
    from app import settings

    # The isolated models folder does not exist yet: its nearest existing parent is measured.
    assert Path(settings.models_dir()).is_relative_to(real_profile.disk_path)
    assert real_profile.disk_free_bytes == pytest.approx(shutil.disk_usage(real_profile.disk_path).free, rel=0.01)


def test_real_machine_reads_the_llama_cpp_build_without_importing_it():
    code = ("import sys, json\n"
            "from app.machine import detect\n"
            "p = detect()\n"
            "leaked = sorted(m for m in sys.modules if m.split('.')[0] in ('llama_cpp', 'mlx', 'mlx_lm', 'torch'))\n"
            "print(json.dumps({'leaked': leaked, 'libs': p.llama_cpp_gpu_backends, 'absent': p.absent}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["leaked"] == []
    libs = machine._llama_cpp_lib_files()
    if libs is None:
        assert "llama_cpp" in result["absent"]
    else:
        assert result["libs"] == hints.llama_gpu_backends(libs)


def test_hardware_detection_alone_imports_no_runtime_and_no_engine_module():
    """app/hardware reads the hardware; the llama.cpp runtimes and the engines are composed above it (app/machine)."""
    code = ("import sys, json\n"
            "from app.hardware.detect import detect\n"
            "p = detect()\n"
            "ours = sorted(m for m in sys.modules if m.startswith(('app.runtimes', 'backends')))\n"
            "print(json.dumps({'ours': ours, 'runtimes': p.runtimes, 'backends': p.backends}))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"ours": [], "runtimes": None, "backends": []}


@pytest.mark.parametrize("files, expected", [
    (["libggml-base.so", "libggml-cpu.so", "libggml.so", "libllama.so"], []),
    (["libggml-base.so", "libggml-cpu.so", "libggml-cuda.so", "libggml.so", "libllama.so"], ["cuda"]),
    (["ggml-base.dll", "ggml-cpu.dll", "ggml-cuda.dll", "ggml.dll", "llama.dll"], ["cuda"]),
    (["libggml-metal.dylib", "libggml-blas.dylib", "libggml.dylib"], ["metal"]),
    (["libggml-cpu-haswell.so", "libggml-cpu-sapphirerapids.so", "libggml-vulkan.so", "libggml.so"], ["vulkan"]),
    (["libggml-hip.so", "libggml.so"], ["hip"]),
    (["libllama.so"], None),  # everything linked into one library: cannot tell
])
def test_llama_build_backends_from_library_names(files, expected):
    assert hints.llama_gpu_backends(files) == expected


def test_a_failing_probe_leaves_its_part_absent_and_the_rest_intact():
    def broken(src):
        raise RuntimeError("driver exploded")

    p = detect(recorded_sources("rtx4090-desktop"), probes={"nvidia": broken})
    assert p.gpus == []
    assert p.absent["nvidia"] == "the nvidia probe failed: RuntimeError: driver exploded"
    assert p.cpu.physical_cores == 16 and p.ram_total_bytes == 67108777984


def test_a_broken_nvml_call_fails_soft_through_the_real_probe():
    src = recorded_sources("two-gpu-box")
    nvml = src.nvml()

    def count():
        raise OSError("GPU has fallen off the bus")

    nvml.nvmlDeviceGetCount = count
    p = detect(src)
    assert p.gpus == [] and "fallen off the bus" in p.absent["nvidia"]
    assert p.cpu.logical_cores == 24


def test_a_hanging_probe_is_timed_out_and_the_others_still_report():
    release = threading.Event()
    started = threading.Event()

    def hangs(src):
        started.set()
        release.wait()  # never set until the test is done: a driver call that never returns
        return []

    try:
        p = detect(recorded_sources("rx7900xtx-linux"), probes={"amd": hangs}, timeout_s=0.5)
        assert started.is_set()
        assert p.absent["amd"] == "the amd probe did not answer within 0.5 s"
        assert p.gpus == []
        assert p.cpu.logical_cores == 16 and p.ram_total_bytes == 32818028544 and p.disk_free_bytes == 402653184000
    finally:
        release.set()


def test_a_hanging_command_is_killed(monkeypatch):
    monkeypatch.setattr(sources, "COMMAND_TIMEOUT_S", 0.3)
    with pytest.raises(OSError, match="did not answer within 0.3 s"):
        sources.run_command([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_hanging_sysctl_on_a_mac_leaves_cpu_and_gpu_absent(monkeypatch):
    src = recorded_sources("m1-16gb")
    monkeypatch.setattr(sources, "COMMAND_TIMEOUT_S", 0.3)
    monkeypatch.setattr(src, "run", lambda argv: sources.run_command(
        [sys.executable, "-c", "import time; time.sleep(60)"]))
    p = detect(src)
    assert "did not answer" in p.absent["cpu"] and "did not answer" in p.absent["apple"]
    assert p.ram_total_bytes == 17179869184


def test_metal_figures_are_cached_between_runs():
    src = recorded_sources("m3max-128gb")
    calls = []
    real = src.mlx_device_info
    src.mlx_device_info = lambda: calls.append(1) or real()
    first = detect(src).gpus[0]
    second = detect(src).gpus[0]
    assert len(calls) == 1
    assert first.working_set_limit_bytes == second.working_set_limit_bytes == 103079215104


def test_memory_falls_back_to_sysctl_without_psutil():
    src = recorded_sources("m1-16gb")

    def no_psutil():
        raise ImportError("No module named 'psutil'")

    src.virtual_memory = no_psutil
    p = detect(src)
    assert (p.ram_total_bytes, p.ram_available_bytes) == (17179869184, None)


def test_disk_free_is_read_at_the_nearest_existing_folder(tmp_path):
    src = Sources(models_dir=lambda: str(tmp_path / "not" / "yet" / "models"))
    path, free = probe_disk(src)
    assert path == str(tmp_path)
    assert free == pytest.approx(shutil.disk_usage(tmp_path).free, rel=0.01)


def test_apple_probe_says_why_on_other_systems():
    with pytest.raises(gpus.ProbeAbsent, match="macOS only"):
        gpus.probe_apple(recorded_sources("no-gpu-laptop"))


def test_measured_bandwidth_is_cached_per_cpu_and_ram():
    gbps = bandwidth.measure_and_cache("Test CPU", 123)
    assert gbps > 0.5  # any machine that runs models copies faster than this
    assert bandwidth.cached("Test CPU", 123) == gbps
    assert bandwidth.cached("Test CPU", 456) is None  # more RAM: measure again
    assert bandwidth.cached("Other CPU", 123) is None


def test_detect_picks_the_cached_bandwidth_up(monkeypatch):
    src = recorded_sources("no-gpu-laptop")
    assert detect(src).ram_bandwidth_gbps is None
    monkeypatch.setattr(bandwidth, "measure", lambda: 41.5)
    assert detect(src, measure_bandwidth=True).ram_bandwidth_gbps == 41.5
    assert detect(src).ram_bandwidth_gbps == 41.5
    assert detect(recorded_sources("old-x86-no-avx2")).ram_bandwidth_gbps is None


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "a hardware profile is a JSON object"),
    ('{"ram_total_bytes": "24 GiB"}', "profile.ram_total_bytes must be int or null, not '24 GiB'"),
    ('{"gpus": [{"vendor": "nvidia", "name": "x"}]}', "profile.gpus[0].index is missing"),
    ('{"cpu": {"flags": "avx2"}}', "profile.cpu.flags must be list"),
    ('{"schema_version": 99}', "schema version 99"),
])
def test_load_profile_explains_a_bad_file(tmp_path, content, message):
    file = tmp_path / "machine.json"
    if content is not None:
        file.write_text(content)
    with pytest.raises(HardwareProfileError) as err:
        load_profile(file)
    assert message in str(err.value) and str(file) in str(err.value)


def test_load_profile_accepts_an_edited_file_with_unknown_keys(tmp_path):
    data = detect(recorded_sources("two-gpu-box")).to_dict()
    data["gpus"][1]["vram_total_bytes"] = 16 * 1024**3  # the user plans for a bigger second card
    data["from_the_future"] = True
    data["gpus"][0]["new_field"] = 1
    file = tmp_path / "edited.json"
    file.write_text(json.dumps(data))
    p = load_profile(file)
    assert p.gpu_memory_bytes() == 40 * 1024**3

