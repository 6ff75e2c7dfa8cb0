"""Small GGUFs written with the gguf package (real headers, tiny random weights), shared by this folder."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.gguf_builder import TINY_GEMMA3, TINY_LLAMA, TINY_MOE, write_gguf


@pytest.fixture(scope="session")
def tiny_ggufs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ggufs")
    return {
        "llama": write_gguf(folder / "tiny-llama-F16.gguf", TINY_LLAMA, chat_template="{{ messages }}"),
        "gemma3": write_gguf(folder / "tiny-gemma3-F16.gguf", TINY_GEMMA3),
        "moe": write_gguf(folder / "tiny-moe-F32.gguf", TINY_MOE, dtype=np.float32),
    }
