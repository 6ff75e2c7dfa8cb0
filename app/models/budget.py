"""One memory budget and its override, "load anyway", in the same words everywhere: the Chat's load path, ``quantdesk
chat --force`` and the server (``quantdesk serve --memory-budget GIB --force``, the Server page).

The budget is what the fit check counts as free on this machine: available RAM plus the free memory of the GPU
the estimate plans for (unified memory counts once). The Chat and ``quantdesk chat`` hold one model, so their
budget is the fit check's verdict itself ("does not fit"); the server may hold several, so it adds up their
estimates against one figure. Loading anyway goes past that figure knowingly: ``RISK`` says what can happen.
Pure: no Qt, no engine, no network.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.hardware.profile import HardwareProfile
from app.models.recommend import FitResult, main_gpu, ram_budget, vram_budget

GiB = 1 << 30
RISK = ("past it the system may swap and slow to a crawl, or run out of memory, which ends the engine process "
        "(only that model's: chats and other models are kept)")


def gib(n_bytes: int) -> str:
    return f"{n_bytes / GiB:.2f} GiB" if n_bytes < GiB else f"{n_bytes / GiB:.1f} GiB"


def free_memory_bytes(hw: HardwareProfile) -> int | None:
    """What the fit check counts as free on ``hw``, RAM and GPU memory together; None when unknown."""
    gpu = main_gpu(hw)
    if gpu is not None and gpu.unified:
        return vram_budget(gpu) or ram_budget(hw)
    parts = [ram_budget(hw), vram_budget(gpu) if gpu is not None else None]
    known = [p for p in parts if p]
    return sum(known) if known else None


def too_large(fit: FitResult) -> bool:
    """The fit check says the model does not fit in this machine's memory (not: cannot run here at all, such as EXL
    without an NVIDIA GPU, which no override changes and the engine words itself)."""
    return not fit.fits and fit.estimate is not None


def fit_refusal(name: str, reason: str, how_to_force: str) -> str:
    """A load the fit check says does not fit (``reason``: its FitResult's): why, and how to load it anyway with
    what risk."""
    return f"{name} does not fit this machine: {reason}. {how_to_force} loads it anyway: {RISK}."


def fit_warning(name: str, reason: str) -> str:
    return f"Loading {name} anyway, though it does not fit this machine ({reason}): {RISK}."


@dataclass(frozen=True)
class BudgetCheck:
    """One more model against the memory budget and the models already counted in it."""

    name: str
    estimate_bytes: int
    budget_bytes: int
    held: tuple[tuple[str, int], ...] = ()  # (model, its estimate) counted against the budget now

    @property
    def held_bytes(self) -> int:
        return sum(n for _, n in self.held)

    @property
    def fits(self) -> bool:
        return self.estimate_bytes + self.held_bytes <= self.budget_bytes

    @property
    def over_bytes(self) -> int:
        return max(0, self.estimate_bytes + self.held_bytes - self.budget_bytes)

    def situation(self) -> str:
        held = (f"{gib(self.held_bytes)} of it held by " + ", ".join(f"{m} ({gib(n)})" for m, n in self.held)
                if self.held else "nothing loaded in it")
        return (f"{self.name} needs about {gib(self.estimate_bytes)} (estimate), the memory budget is "
                f"{gib(self.budget_bytes)} with {held}")

    def refusal(self, how_to_force: str) -> str:
        return f"{self.situation()}. {how_to_force} loads it anyway: {RISK}."

    def warning(self) -> str:
        return (f"Loading {self.name} anyway, {gib(self.over_bytes)} past the memory budget ({self.situation()}): "
                f"{RISK}.")
