"""Typed, bounded reads of the fields of model files. A model's header and config.json come from strangers:
every number we use is checked for its type and range here, so a hostile or broken file ends in
ModelMetadataError with a sentence that names the field, never in a bare ValueError, TypeError or a list
allocated for a count of 2**60."""

from __future__ import annotations

import math
from typing import Any

from app.errors import ModelFileError

U32_MAX = (1 << 32) - 1  # llama.cpp reads hyperparameters as 32-bit integers
INT64_MAX = (1 << 63) - 1  # a GGUF dimension or a safetensors offset
# Per-layer lists are sized by the layer count. llama.cpp stops at 512 (LLAMA_MAX_LAYERS); this leaves room for
# its growth and still keeps a hostile count from allocating.
MAX_LAYERS = 4096


class ModelMetadataError(ModelFileError):
    """A model's header or config is missing, truncated or malformed."""


def shown(value: Any, limit: int = 60) -> str:
    """A value as an error sentence quotes it: its repr, cut short (a hostile string can be a gigabyte long)."""
    text = repr(value) if not isinstance(value, (list, dict)) or len(value) < 20 else f"a {type(value).__name__} " \
                                                                                      f"of {len(value)} items"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def whole_number(value: Any, what: str, *, low: int = 0, high: int = U32_MAX, default: int | None = 0) -> int:
    """``value`` as an int from ``low`` to ``high`` (a float with no fraction counts; None gives ``default``, or
    is refused when that is None), or ModelMetadataError naming ``what``."""
    if value is None and default is not None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ModelMetadataError(f"{what} is {shown(value)}; expected a whole number from {low} to {high:,}.")
    return value


def real_number(value: Any, what: str, *, low: float = 0.0, high: float = 1e6) -> float:
    """``value`` as a finite float in [low, high], or ModelMetadataError naming ``what``."""
    finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))  # no float(): 10**400
    if isinstance(value, bool) or not finite or not low <= value <= high:
        raise ModelMetadataError(f"{what} is {shown(value)}; expected a number from {low:g} to {high:g}.")
    return float(value)
