"""Helpers for the Hub tests: fast retry settings, deterministic test payloads, tiny real GGUF files, and the tiny
model pulled from the Hub stand-in (for update checks)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from app.hub.download import Settings, download
from app.hub.library import Library
from app.hub.plan import DownloadRequest
from tests.fixtures.models import TINY, write_gguf_f16


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


REPO = "acme/tiny-llama-GGUF"
FILE = "tiny-llama-F16.gguf"
ENTRY = f"{REPO}:F16"
README = b"---\nlicense: mit\n---\n# Tiny llama\n"
FIXED_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture
def gguf_repo(hub_env, tiny_models, fast):
    """The tiny model's F16 GGUF pulled from the stand-in: (server, the installed entry)."""
    hub_env.add_repo(REPO, {FILE: tiny_models.gguf_f16, "README.md": README}, tags=["gguf"])
    download(DownloadRequest(REPO, files=(FILE,)), settings=fast)
    return hub_env, Library().find(ENTRY)


@pytest.fixture
def fixed_template(tiny_models, tmp_path):
    """The same weights re-uploaded with a repaired chat template, as uploaders do."""
    (tmp_path / "fixed").mkdir()
    return write_gguf_f16(TINY, tiny_models.hf, tmp_path / "fixed" / FILE, chat_template=FIXED_TEMPLATE)
