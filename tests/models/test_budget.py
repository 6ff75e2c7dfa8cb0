"""The memory budget and its override in words (app/models/budget.py): what counts as free, and the sentences."""

from __future__ import annotations

from app.hardware.profile import CpuInfo, GpuInfo, HardwareProfile
from app.models.budget import RISK, BudgetCheck, fit_refusal, free_memory_bytes, too_large
from app.models.recommend import FitResult

GiB = 1 << 30


def machine(*gpus: GpuInfo, ram_available: int = 12 * GiB) -> HardwareProfile:
    return HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=16 * GiB,
                           ram_available_bytes=ram_available, gpus=list(gpus))


def test_free_memory_is_available_ram_plus_free_vram_and_unified_memory_counts_once():
    assert free_memory_bytes(machine()) == 12 * GiB
    rtx = GpuInfo(0, "nvidia", "RTX", 8 * GiB, 6 * GiB)
    assert free_memory_bytes(machine(rtx)) == 18 * GiB
    apple = GpuInfo(0, "apple", "M3", 16 * GiB, 16 * GiB, unified=True, working_set_limit_bytes=11 * GiB)
    assert free_memory_bytes(machine(apple)) == 11 * GiB


def test_a_check_says_the_estimate_the_budget_and_what_holds_it():
    check = BudgetCheck("big", 5 * GiB, 8 * GiB, (("primary", 2 * GiB), ("other", 2 * GiB)))
    assert not check.fits and check.over_bytes == 1 * GiB
    assert check.refusal("--force") == (f"big needs about 5.0 GiB (estimate), the memory budget is 8.0 GiB with "
                                        f"4.0 GiB of it held by primary (2.0 GiB), other (2.0 GiB). --force loads it "
                                        f"anyway: {RISK}.")
    assert check.warning().startswith("Loading big anyway, 1.0 GiB past the memory budget (big needs about")
    assert BudgetCheck("small", GiB // 2, 8 * GiB).fits


def test_load_anyway_overrides_memory_verdicts_only():
    from app.models.estimate import Estimate

    sized = Estimate("gguf", 4096, 0, 33, [])
    too_big = FitResult("m", "gguf", "Q4_K_M", "does not fit", "needs 9.0 GiB", estimate=sized)
    assert too_large(too_big)
    assert fit_refusal("m.gguf", too_big.reason, "--force").startswith("m.gguf does not fit this machine: needs 9.0")
    no_cuda = FitResult("m", "exl3", "4.0bpw", "does not fit", "EXL3 needs an NVIDIA GPU with CUDA")
    assert not too_large(no_cuda)
    assert not too_large(FitResult("m", "gguf", "Q4_K_M", "CPU only", "", estimate=sized))
