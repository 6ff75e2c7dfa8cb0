"""The starting list's "likely fits" (app/hub/discover.starters_for) counts memory as the fit check does, through the
one budget of app/models/budget: on a machine with a discrete GPU, available RAM plus the GPU's free memory
(llama.cpp splits a model between them); on unified memory, that memory once. Machines replayed from recordings."""

from __future__ import annotations

import pytest

from app.hardware.detect import detect
from app.hub.discover import StarterList, StarterModel, starters_for
from app.models.budget import free_memory_bytes
from app.models.recommend import main_gpu, ram_budget, vram_budget
from tests.hardware.replay import recorded_sources

GiB = 1 << 30


def starting_list(*sizes: int) -> StarterList:
    """Models whose weights plus the list's 30 % for context and buffers need exactly ``sizes`` bytes."""
    return StarterList("", "", [StarterModel(f"acme/m{i}-GGUF", "gguf", "llama", "laptop", "text", 1.0,
                                             int(size / 1.3), "") for i, size in enumerate(sizes)])


def likely(hw, *sizes: int) -> list[bool]:
    found = dict((m.repo_id, fits) for m, fits in starters_for(hw, starting_list(*sizes)))
    return [found[f"acme/m{i}-GGUF"] for i in range(len(sizes))]


@pytest.mark.parametrize("machine", ["rtx3060-laptop-windows", "rtx4090-desktop", "two-gpu-box"])
def test_a_discrete_gpu_machine_counts_its_ram_and_the_gpus_free_memory_together(machine):
    hw = detect(recorded_sources(machine))
    gpu = main_gpu(hw)
    assert gpu is not None and not gpu.unified
    ram, vram = ram_budget(hw), vram_budget(gpu)
    assert ram and vram and free_memory_bytes(hw) == ram + vram
    # More than either alone fits (split between the GPU and RAM); past the two together, not.
    assert likely(hw, max(ram, vram) + GiB, ram + vram - GiB // 8, ram + vram + GiB // 8) == [True, True, False]


@pytest.mark.parametrize("machine", ["m1-16gb", "m3max-128gb"])
def test_unified_memory_counts_once(machine):
    hw = detect(recorded_sources(machine))
    gpu = main_gpu(hw)
    assert gpu is not None and gpu.unified
    budget = vram_budget(gpu)  # the GPU's working set: the same memory as the RAM, never added to it
    assert free_memory_bytes(hw) == budget
    assert likely(hw, budget - GiB // 8, budget + GiB // 8, budget + ram_budget(hw) - GiB) == [True, False, False]


def test_without_a_gpu_the_budget_is_the_available_ram():
    hw = detect(recorded_sources("no-gpu-laptop"))
    assert main_gpu(hw) is None and free_memory_bytes(hw) == ram_budget(hw)
    ram = ram_budget(hw)
    assert likely(hw, ram - GiB // 8, ram + GiB // 8) == [True, False]


def test_without_a_profile_every_model_is_likely():
    assert likely(None, 1000 * GiB) == [True]
