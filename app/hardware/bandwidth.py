"""A quick measurement of CPU memory bandwidth, for speed predictions of models run on the CPU.

Decoding one token reads every weight once, so tokens/s on the CPU is bounded by bandwidth / model
size; the figure is measured once per machine and cached under the cache folder, keyed by CPU model
and RAM size (a new machine, or new RAM, measures again)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.files import write_text_atomic

ARRAY_BYTES = 256 * 1024**2  # well past any CPU cache, small enough for the smallest machines
REPS = 5


def cache_key(cpu_model: str, ram_total_bytes: int | None) -> str:
    return f"{cpu_model}|{ram_total_bytes}"


def _cache_file() -> Path:
    from app import paths

    return paths.cache_dir() / "ram_bandwidth.json"


def cached(cpu_model: str, ram_total_bytes: int | None) -> float | None:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
        value = data.get(cache_key(cpu_model, ram_total_bytes))
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def measure(array_bytes: int = ARRAY_BYTES, reps: int = REPS) -> float:
    """Best-of-``reps`` GB/s of a numpy copy, counting the bytes read and the bytes written."""
    import numpy as np

    src = np.ones(array_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch both arrays once so page faults are not timed
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return round(2 * src.nbytes / best / 1e9, 1)


def measure_and_cache(cpu_model: str, ram_total_bytes: int | None) -> float:
    gbps = measure()
    file = _cache_file()
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[cache_key(cpu_model, ram_total_bytes)] = gbps
    write_text_atomic(file, json.dumps(data, indent=2))
    return gbps
