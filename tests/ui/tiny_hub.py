"""The local Hub stand-in serving the generated tiny model as one repo with two quants (Q8_0 and Q4_K_M), with
HF_ENDPOINT pointing at it; and hardware profiles the Discover tests fit against."""

from __future__ import annotations

import pytest

from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile

TINY_REPO = "acme/tiny-llama-GGUF"
CARD = b"---\nlicense: mit\n---\n# Tiny llama\n\nA tiny llama for tests: random weights, real tokenizer.\n"


@pytest.fixture(name="tiny_hub")
def tiny_hub_fixture(hub_env, tiny_models):
    hub_env.add_repo(TINY_REPO, files={"README.md": CARD, "tiny-llama-Q8_0.gguf": tiny_models.gguf_q8_0,
                                       "tiny-llama-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                     tags=["gguf", "text-generation"], downloads=1234, likes=5, card_data={"license": "mit"})
    return hub_env


def cpu_only(ram_gib: float = 16) -> HardwareProfile:
    ram = int(ram_gib * 2**30)
    return HardwareProfile(os="Linux", arch="x86_64", cpu=CpuInfo("Test CPU", "x86_64", 4, 8, ["avx2"]),
                           ram_total_bytes=ram, ram_available_bytes=ram * 3 // 4, gpus=[],
                           disk_free_bytes=100 * 10**9, disk_path="/models",
                           backends=[BackendSupport("llama.cpp", True)])


def nvidia(vram_gib: float = 8) -> HardwareProfile:
    profile = cpu_only(32)
    vram = int(vram_gib * 2**30)
    profile.gpus = [GpuInfo(0, "nvidia", "RTX Test", vram, vram, compute_capability="8.9", bandwidth_gbps=400.0)]
    return profile
