"""Chats that resume on MLX: mlx-lm's prompt cache saved after a reply (backends/mlx.py, in backends/states.py's
container), restored by a freshly started engine host, checked before it is loaded. Real hosts on the tiny float16
MLX model, real files, the same calls the Chat and the server make (app/engine/states.py)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from app.engine import states
from app.engine.client import EngineClient

pytest.importorskip("mlx_lm", reason="needs mlx-lm: pip install -e '.[mlx]' (mlx[cpu] on Linux)")

GREEDY = SamplingSettings(temperature=0.0, max_tokens=24, seed=1)
HISTORY = [Message("system", "You are terse."),
           Message("user", "Tell me about lighthouses and the sea, the ships and the keepers. " * 12)]
LOAD = LoadSettings(n_ctx=2048)


def _reply(client, messages) -> Done:
    events = list(client.generate(messages, GREEDY))
    assert isinstance(events[-1], Done)
    return events[-1]


@pytest.fixture
def cache(tmp_path):
    return states.StateCache(tmp_path / "states", lambda: 2**30)


@pytest.fixture
def model(tiny_models, tmp_path) -> Path:
    """The tiny MLX model at a folder of the test's own (a test may replace its files)."""
    folder = tmp_path / "model-mlx"
    shutil.copytree(tiny_models.mlx_f16, folder)
    return folder


@pytest.fixture
def saved(model, cache):
    """A chat's first reply, its state saved (as the Chat does after each reply), and the next message."""
    keys = states.StateKeys((states.chat_key(1, 2),), states.chat_key(1, 2))
    with EngineClient() as client:
        client.load(str(model), LOAD)
        assert client.loaded.backend == "mlx"
        first = _reply(client, HISTORY)
        result = states.save(client, cache, keys)
        ask = [*HISTORY, Message("assistant", first.text), Message("user", "And the keepers?")]
        warm = _reply(client, ask)  # the same host, the chat still in its prompt cache
    assert result is not None and result.n_tokens > first.stats.prompt_tokens
    assert Path(result.path).stat().st_size == result.file_bytes
    assert warm.stats.cached_tokens > first.stats.prompt_tokens
    return keys, ask, warm, result


def test_a_restarted_host_restores_the_saved_prompt_cache_and_reads_only_the_new_message(model, cache, saved):
    keys, ask, warm, result = saved
    with EngineClient() as client:  # QuantDesk restarted
        client.load(str(model), LOAD)
        restored = states.restore(client, cache, keys, ask, GREEDY)
        resumed = _reply(client, ask)
    with EngineClient() as client:
        client.load(str(model), LOAD)
        cold = _reply(client, ask)
    assert restored is not None and restored.path == result.path and restored.discarded == ()
    assert resumed.text == cold.text == warm.text  # greedy: the same reply token for token
    assert resumed.stats.generated_tokens == cold.stats.generated_tokens
    assert cold.stats.cached_tokens == 0
    assert resumed.stats.cached_tokens == restored.n_tokens >= result.n_tokens - 2
    assert resumed.stats.prompt_tokens - resumed.stats.cached_tokens < 40 < 400 < cold.stats.prompt_tokens
    assert not list(Path(result.path).parent.glob("*.safetensors"))  # mlx's scratch files are gone


def _truncate(state: Path, model: Path, models) -> None:
    data = state.read_bytes()
    state.write_bytes(data[:len(data) - 1000])


def _flip_a_byte(state: Path, model: Path, models) -> None:
    data = bytearray(state.read_bytes())
    data[-100] ^= 0xFF
    state.write_bytes(bytes(data))


def _other_model(state: Path, model: Path, models) -> None:
    shutil.rmtree(model)  # the 4-bit conversion put in its place: the same folder, another model
    shutil.copytree(models.mlx_4bit, model)


DAMAGE = {
    "truncated": (_truncate, "truncated"),
    "damaged": (_flip_a_byte, "checksum"),
    "another model": (_other_model, "another model"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_stale_or_damaged_state_is_discarded_with_a_log_line_and_the_chat_answers(tiny_models, model, cache, saved,
                                                                                   caplog, case):
    keys, ask, _, result = saved
    damage, words = DAMAGE[case]
    damage(Path(result.path), model, tiny_models)
    with EngineClient() as client:
        client.load(str(model), LOAD)
        with caplog.at_level(logging.WARNING, logger="app.engine.states"):
            restored = states.restore(client, cache, keys, ask, GREEDY)
        answer = _reply(client, ask)
    assert restored is not None and restored.path == "" and restored.n_tokens == 0
    assert [p for p, _ in restored.discarded] == [result.path]
    line = next(r.getMessage() for r in caplog.records if "discarded" in r.getMessage())
    assert result.path in line and words in line, line
    assert not Path(result.path).exists()  # it would be refused again: gone from the cache
    assert answer.text and answer.stats.cached_tokens == 0  # read again, and answered
