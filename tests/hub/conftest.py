"""Helpers for the Hub tests: fast retry settings, deterministic test payloads, tiny real GGUF files."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from app.hub.download import Settings


def payload(size: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


def sha256(data: bytes | Path) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.read_bytes()).hexdigest()


def write_gguf(path: Path, arch: str = "llama", file_type: int = 15, n: int = 4096) -> Path:
    """A real (tiny) GGUF written by the gguf package: general.architecture and general.file_type set."""
    import gguf
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_file_type(file_type)
    writer.add_tensor("token_embd.weight", np.arange(n, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def fast() -> Settings:
    """Retries without long waits; stalls noticed after half a second."""
    return Settings(backoff_base=0.01, backoff_max=0.05, stall_timeout=0.5, max_retries=3, disk_reserve=0)
