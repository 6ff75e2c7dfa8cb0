"""Every recorded machine (tests/hardware/recordings/) yields the figures it must, through the real probes."""

from __future__ import annotations

import pytest

from app.machine import detect  # the hardware and the recorded runtimes' hints, as the app composes them
from app.hardware.profile import HardwareProfile
from tests.hardware.replay import MACHINES, recorded_sources

GIB = 1024**3
MIB = 1024**2


def profile_of(name: str) -> HardwareProfile:
    profile = detect(recorded_sources(name))
    assert HardwareProfile.from_json(profile.to_json()) == profile  # every recorded profile round-trips
    return profile


def hint_with(profile: HardwareProfile, *words: str) -> str:
    found = [h for h in profile.hints if all(w in h for w in words)]
    assert found, (words, profile.hints)
    return found[0]


def test_every_recording_has_a_test():
    tested = {name.removeprefix("test_").replace("_", "-") for name in globals() if name.startswith("test_")}
    assert set(MACHINES) <= tested, set(MACHINES) - tested


def test_rtx4090_desktop():
    p = profile_of("rtx4090-desktop")
    assert (p.os, p.arch) == ("linux", "x86_64")
    assert p.cpu.model == "AMD Ryzen 9 7950X 16-Core Processor"
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (16, 32)
    assert {"avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16"} <= set(p.cpu.flags)
    assert "amx" not in p.cpu.flags
    assert p.ram_total_bytes == 67108777984
    [gpu] = p.gpus
    # nvidia-smi -q of a real RTX 4090 (thamada/nvidia-smi): FB Total 24564 MiB, Free 24210 MiB, driver 550.127.05.
    assert (gpu.vendor, gpu.name, gpu.driver) == ("nvidia", "NVIDIA GeForce RTX 4090", "550.127.05")
    assert gpu.vram_total_bytes == 24564 * MIB and gpu.vram_free_bytes == 24210 * MIB
    assert gpu.compute_capability == "8.9" and not gpu.unified
    assert gpu.bandwidth_gbps == pytest.approx(1008.1) and gpu.bandwidth_source == "nvml"  # spec: 1008 GB/s
    assert p.llama_cpp_gpu_backends == ["cuda"]
    assert p.hints == []  # a CUDA build on an AVX2 CPU: nothing to warn about
    assert set(p.absent) == {"amd", "apple"}
    assert p.disk_free_bytes == 1312649330688


def test_rtx3060_laptop_windows():
    p = profile_of("rtx3060-laptop-windows")
    assert (p.os, p.arch) == ("windows", "AMD64")
    assert p.cpu.model == "11th Gen Intel(R) Core(TM) i7-11800H @ 2.30GHz"
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (8, 16)  # psutil's counts on Windows
    assert {"avx", "avx2", "avx512f"} <= set(p.cpu.flags)
    [gpu] = p.gpus
    assert gpu.name == "NVIDIA GeForce RTX 3060 Laptop GPU" and gpu.vram_total_bytes == 6 * GIB
    assert gpu.compute_capability == "8.6"
    assert gpu.bandwidth_gbps == pytest.approx(336.0)  # 192-bit at 14 Gbps
    assert p.llama_cpp_gpu_backends == []
    hint = hint_with(p, "RTX 3060 Laptop GPU", "no installed llama.cpp runtime can use it")
    assert "`quantdesk runtime build vulkan` or `quantdesk runtime build cuda`" in hint


def test_two_gpu_box():
    p = profile_of("two-gpu-box")
    assert p.cpu.model == "12th Gen Intel(R) Core(TM) i9-12900K"
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (16, 24)  # 8 P-cores x2 threads + 8 E-cores
    assert "avx_vnni" in p.cpu.flags and "avx512f" not in p.cpu.flags
    assert [(g.index, g.name, g.vram_total_bytes) for g in p.gpus] == [
        (0, "NVIDIA GeForce RTX 3090", 24 * GIB), (1, "NVIDIA GeForce RTX 3060", 12 * GIB)]
    assert [g.bandwidth_gbps for g in p.gpus] == [pytest.approx(936.1), pytest.approx(360.0)]
    # The 3090's figures are a real nvidia-smi -q (FB Free 24154 MiB, driver 560.35.03).
    assert p.gpus[0].vram_free_bytes == 24154 * MIB and {g.driver for g in p.gpus} == {"560.35.03"}
    assert p.gpu_memory_bytes() == 36 * GIB
    assert p.hints == []
    assert [b.name for b in p.backends if b.available] == ["llama.cpp", "exllamav2", "exllamav3"]


def test_m1_16gb():
    # sysctl hw of a real MacBook Air M1 16 GB (zacky1972/qiita_article).
    p = profile_of("m1-16gb")
    assert (p.os, p.arch) == ("darwin", "arm64")
    assert p.cpu.model == "Apple M1" and (p.cpu.physical_cores, p.cpu.logical_cores) == (8, 8)
    assert p.cpu.flags == ["neon", "fp16", "dotprod"]  # the real M1 says FEAT_I8MM: 0, FEAT_BF16: 0
    [gpu] = p.gpus
    assert (gpu.vendor, gpu.name, gpu.unified) == ("apple", "Apple M1", True)
    assert gpu.vram_total_bytes == 16 * GIB == 17179869184
    # No mlx and no wired limit: macOS's default, 2/3 of 16 GiB = the 10922.67 MiB llama.cpp logs on a 16 GB M1.
    assert gpu.working_set_source == "default rule"
    assert gpu.working_set_limit_bytes == 16 * GIB * 2 // 3
    assert gpu.usable_bytes() == gpu.working_set_limit_bytes
    assert gpu.vram_free_bytes == p.ram_available_bytes  # less available than the limit allows
    assert gpu.bandwidth_gbps == 68.25
    assert p.llama_cpp_gpu_backends == ["metal"]
    hint_with(p, "Metal lets the GPU use 10.7 of 16 GiB", "iogpu.wired_limit_mb")
    assert not any("llama.cpp build" in h for h in p.hints)
    assert "nvidia" in p.absent and "apple" not in p.absent


def test_m3max_128gb():
    # sysctl hw of a real 16-core M3 Max with 128 GB (zacky1972/qiita_article): hw.physicalcpu 16,
    # FEAT_I8MM/FEAT_BF16 1; Metal's recommendedMaxWorkingSetSize as llama.cpp logs it on an M3 Max (103079.22 MB).
    p = profile_of("m3max-128gb")
    assert p.cpu.model == "Apple M3 Max" and (p.cpu.physical_cores, p.cpu.logical_cores) == (16, 16)
    assert p.cpu.flags == ["neon", "fp16", "dotprod", "i8mm", "bf16"]  # no SME before the M4
    [gpu] = p.gpus
    assert gpu.vram_total_bytes == 128 * GIB == 137438953472
    assert (gpu.working_set_limit_bytes, gpu.working_set_source) == (103079215104, "metal")
    assert gpu.bandwidth_gbps == 400  # the 16-core M3 Max; the 14-core one has 300 GB/s
    hint_with(p, "Metal lets the GPU use 96.0 of 128 GiB", "recommendedMaxWorkingSetSize")


def test_m3max_without_mlx_and_no_wired_limit_uses_the_default_rule(monkeypatch):
    src = recorded_sources("m3max-128gb")  # iogpu.wired_limit_mb: 0, the default
    monkeypatch.setattr(src, "mlx_device_info", lambda: (_ for _ in ()).throw(OSError("mlx is not installed")))
    [gpu] = detect(src).gpus
    assert (gpu.working_set_limit_bytes, gpu.working_set_source) == (128 * GIB * 3 // 4, "default rule")


def test_m3max_without_mlx_reads_a_raised_wired_limit(monkeypatch):
    src = recorded_sources("m3max-128gb")
    real_run = src.run
    monkeypatch.setattr(src, "run", lambda argv: real_run(argv).replace(
        "iogpu.wired_limit_mb: 0", "iogpu.wired_limit_mb: 122880"))
    monkeypatch.setattr(src, "mlx_device_info", lambda: (_ for _ in ()).throw(OSError("mlx is not installed")))
    [gpu] = detect(src).gpus
    assert (gpu.working_set_limit_bytes, gpu.working_set_source) == (122880 * MIB, "iogpu.wired_limit_mb")


def test_m3max_14_core_has_the_narrower_bus(monkeypatch):
    src = recorded_sources("m3max-128gb")
    real_run = src.run
    monkeypatch.setattr(src, "run", lambda argv: real_run(argv).replace("hw.physicalcpu: 16", "hw.physicalcpu: 14"))
    [gpu] = detect(src).gpus
    assert gpu.bandwidth_gbps == 300


def test_rx7900xtx_linux():
    p = profile_of("rx7900xtx-linux")
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (8, 16)
    [gpu] = p.gpus
    assert (gpu.vendor, gpu.name, gpu.driver) == ("amd", "Radeon RX 7900 XTX", "amdgpu")
    assert gpu.vram_total_bytes == 25753026560 and gpu.vram_free_bytes == 25753026560 - 1073975296
    assert gpu.bandwidth_gbps == 960 and gpu.bandwidth_source == "table"
    assert not gpu.unified and gpu.compute_capability is None
    hint = hint_with(p, "Radeon RX 7900 XTX", "no installed llama.cpp runtime can use it")
    assert "`quantdesk runtime build vulkan` or `quantdesk runtime build rocm`" in hint
    assert "nvidia" in p.absent and "amd" not in p.absent


def test_old_x86_no_avx2():
    p = profile_of("old-x86-no-avx2")
    assert p.cpu.model == "Intel(R) Core(TM) i5-2500K CPU @ 3.30GHz"
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (4, 4)
    assert p.cpu.flags == ["sse3", "ssse3", "sse4_2", "avx"]
    assert p.gpus == []  # Intel HD 3000 on i915 is not a GPU the backends use
    hint = hint_with(p, "no AVX2")
    assert "Illegal instruction" in hint and "-DGGML_AVX2=off" in hint and "-DGGML_AVX=off" not in hint


def test_rpi5_arm_linux():
    # /proc/cpuinfo and /proc/meminfo of a real Raspberry Pi 5 8 GB (ChronoAndross/rpi-5-device-under-testing-tools).
    p = profile_of("rpi5-arm-linux")
    assert p.arch == "aarch64"
    assert (p.ram_total_bytes, p.ram_available_bytes) == (8252368 * 1024, 6126208 * 1024)
    assert p.cpu.vendor == "ARM implementer 0x41"
    assert p.cpu.model == "Raspberry Pi 5 Model B Rev 1.0 (Cortex-A76)"
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (4, 4)
    assert p.cpu.flags == ["neon", "fp16", "dotprod"]  # no i8mm, no SVE on the A76
    assert p.gpus == [] and p.hints == []  # no AVX2 hint on ARM
    assert p.absent["amd"] == "no GPU driven by amdgpu in /sys/class/drm"


def test_no_gpu_laptop():
    p = profile_of("no-gpu-laptop")
    assert (p.cpu.physical_cores, p.cpu.logical_cores) == (4, 8)
    assert {"avx512f", "avx512_vnni"} <= set(p.cpu.flags) and "avx512_bf16" not in p.cpu.flags
    assert p.gpus == [] and p.gpu_memory_bytes() == 0
    assert set(p.absent) == {"nvidia", "amd", "apple"}
    assert "NVML Shared Library Not Found" in p.absent["nvidia"]
    assert p.ram_total_bytes == 16444944384 and p.ram_available_bytes == 9632649216
