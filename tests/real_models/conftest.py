"""The real-model tier's shared parts: the question with one right answer, and one engine host on SmolLM2 for the
modules that only ask it things (the server's APIs, the parity with llama.cpp), loaded once per module.

The tier lives in one folder, not beside the tests of each home it reaches (the CLI, the Chat, the server, the
engine, the estimator, the documents): each of its tests crosses those homes on a trained model, the tier is
selected and timed as one (``pytest tests/real_models``), and its fixtures load each real file once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.datatypes import LoadSettings, SamplingSettings
from app.engine.client import EngineClient
from tests.ui.conftest import build_window, real_window  # noqa: F401 - fixtures: the Chat on a real engine host

QUESTION = "What is the capital of France? Answer in one sentence."
ANSWER = "Paris"
# Greedy, and nothing else between the logits and the token: llama-cpp-python's own defaults at temperature 0
# (repeat penalty 1.0), so a reply compares token for token with llama.cpp's.
GREEDY = SamplingSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=64)
N_CTX = 1024
THREADS = 2


@pytest.fixture(scope="module")  # not the session's: tests elsewhere count the processes they leave
def smollm2_engine(smollm2_gguf: Path) -> Iterator[EngineClient]:
    with EngineClient() as client:
        client.load(smollm2_gguf, LoadSettings(n_ctx=N_CTX, threads=THREADS, gpu_layers=0))
        yield client
