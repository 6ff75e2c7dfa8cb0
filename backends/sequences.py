"""The sequences of an engine that decodes several replies together (llama.cpp's batch, backends/llama_cpp/batch.py;
MLX's, backends/mlx_batch.py): a ``Slot`` per sequence, the tokens it holds, and which free one a new prompt takes,
llama-server's slot similarity, one rule for both engines."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from backends.states import shared_prefix

uses = itertools.count(1)  # when a slot was last taken, for the least recently used
# A free sequence serves a prompt for its prefix when they share more than SLOT_SIMILARITY of the prompt (llama-server's
# --slot-prompt-similarity default) and either half of the prompt or half of what the sequence holds (SLOT_SHARE).
SLOT_SIMILARITY = 0.1
SLOT_SHARE = 0.5


@dataclass(eq=False)
class Slot:
    """One sequence of the KV cache: its llama.cpp ``seq_id`` and the tokens it holds (for the next prompt's prefix
    reuse); busy while a reply runs in it."""

    seq: int
    tokens: list[int] = field(default_factory=list)
    busy: bool = False
    used: int = 0


def choose_slot(free: Sequence[Slot], units: Sequence[int] | None) -> Slot:
    """The free sequence a reply to the prompt ``units`` runs in: the one holding the longest prefix of it among
    those similar to it (see SLOT_SIMILARITY), else an empty one, else the least recently used. So a conversation
    that comes back (or is regenerated) finds its turns, and an agent its long system prompt, while a prompt that
    shares only a template's opening with another conversation leaves that one in the cache."""

    def similar(slot: Slot) -> int:
        if not units or not slot.tokens:
            return 0
        shared = shared_prefix(slot.tokens, units)
        if shared > SLOT_SIMILARITY * len(units) and (
                shared >= SLOT_SHARE * len(units) or shared >= SLOT_SHARE * len(slot.tokens)):
            return shared
        return 0

    return max(free, key=lambda slot: (similar(slot), not slot.tokens, -slot.used))
