"""The MLX backend's prompt cache kept across replies, on the real tiny float16 MLX model: the next prompt that
starts with what the cache holds evaluates only the rest (``cached_tokens``), a prompt that parts earlier cuts the
cache back, and a greedy reply is token for token a fresh backend's."""

from __future__ import annotations

import threading

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings

pytest.importorskip("mlx_lm", reason="needs mlx-lm: pip install -e '.[mlx]' (mlx[cpu] on Linux)")

from backends.mlx import MlxBackend  # noqa: E402

GREEDY = SamplingSettings(temperature=0.0, max_tokens=20)
PENALTY = SamplingSettings(temperature=0.0, max_tokens=20, repeat_penalty=1.3)
HISTORY = [Message("system", "You are terse."),
           Message("user", "Tell me about lighthouses and the sea, the ships and the keepers. " * 6 + "sampled sampled")]


def _loaded(model) -> MlxBackend:
    backend = MlxBackend()
    backend.load(str(model), LoadSettings(n_ctx=2048))
    return backend


def _done(backend, messages, sampling=GREEDY) -> Done:
    *_, done = backend.generate("r", messages, sampling, threading.Event())
    assert isinstance(done, Done)
    return done


def _fresh(model, messages, sampling=GREEDY) -> Done:
    backend = _loaded(model)
    try:
        return _done(backend, messages, sampling)
    finally:
        backend.unload()


@pytest.mark.parametrize("sampling", [GREEDY, PENALTY], ids=["greedy", "repeat-penalty"])
def test_the_next_turn_reads_only_its_new_tokens_and_answers_as_a_fresh_run(tiny_models, sampling):
    model = tiny_models.mlx_f16
    backend = _loaded(model)
    try:
        first = _done(backend, HISTORY, sampling)
        assert first.stats.cached_tokens == 0
        ask = [*HISTORY, Message("assistant", first.text), Message("user", "And the keepers?")]
        warm = _done(backend, ask, sampling)
        # a branch: another last message parts from the cache inside the history; it is cut back to the prefix
        other = [*HISTORY, Message("assistant", first.text), Message("user", "What about submarines, then?")]
        cut = _done(backend, other, sampling)
        again = _done(backend, HISTORY, sampling)  # an earlier prompt: the cache is cut back to all of it but one
    finally:
        backend.unload()
    cold = _fresh(model, ask, sampling)
    assert warm.text == cold.text and warm.stats.generated_tokens == cold.stats.generated_tokens
    assert cold.stats.cached_tokens == 0
    assert warm.stats.prompt_tokens == cold.stats.prompt_tokens
    assert first.stats.prompt_tokens < warm.stats.cached_tokens < warm.stats.prompt_tokens
    assert warm.stats.prompt_tokens - warm.stats.cached_tokens < 40 < 200 < warm.stats.cached_tokens
    assert cut.text == _fresh(model, other, sampling).text
    assert first.stats.prompt_tokens < cut.stats.cached_tokens < warm.stats.prompt_tokens
    assert again.text == first.text and again.stats.cached_tokens == first.stats.prompt_tokens - 1


def test_a_cancelled_reply_leaves_a_cache_the_next_reply_can_use(tiny_models):
    model = tiny_models.mlx_f16
    backend = _loaded(model)
    try:
        cancelled = threading.Event()
        events = []
        for event in backend.generate("r", HISTORY, SamplingSettings(temperature=0.0, max_tokens=200), cancelled):
            events.append(event)
            if len(events) == 3:
                cancelled.set()
        assert events[-1].stats.stop_reason == "cancelled"
        done = _done(backend, HISTORY)
    finally:
        backend.unload()
    assert done.stats.cached_tokens == done.stats.prompt_tokens - 1
    assert done.text == _fresh(model, HISTORY).text
