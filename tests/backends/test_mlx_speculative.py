"""Speculative decoding in the MLX backend (mlx-lm's draft model), on real tiny float16 models: a greedy reply is the
model's own with and without the draft, the stats count the guesses, and a draft of another vocabulary is refused
with a sentence before anything loads."""

from __future__ import annotations

import threading

import pytest

from app.datatypes import Done, LoadSettings, Message, PROMPT_LOOKUP, SamplingSettings, Token
from backends.base import GenerationError

pytest.importorskip("mlx_lm", reason="needs mlx-lm: pip install -e '.[mlx]' (mlx[cpu] on Linux)")

from backends.mlx import MlxBackend  # noqa: E402

STORY = [Message("user", "Tell me a story about a fox.")]
GREEDY = SamplingSettings(temperature=0.0, max_tokens=40)


def _loaded(model, draft: str = "") -> MlxBackend:
    backend = MlxBackend()
    backend.load(str(model), LoadSettings(n_ctx=1024, draft=draft, draft_tokens=4))
    return backend


def _done(backend, messages, sampling, cancelled=None) -> Done:
    *_, done = backend.generate("r", messages, sampling, cancelled or threading.Event())
    return done


def test_a_draft_model_leaves_a_greedy_reply_as_it_is_and_counts_its_guesses(tiny_draft_pair):
    plain = _loaded(tiny_draft_pair.mlx_target)
    try:
        expected = _done(plain, STORY, GREEDY)
    finally:
        plain.unload()
    drafted = _loaded(tiny_draft_pair.mlx_target, str(tiny_draft_pair.mlx_draft))
    try:
        done = _done(drafted, STORY, GREEDY)
        assert done.text == expected.text
        stats = done.stats
        assert stats.generated_tokens == expected.stats.generated_tokens
        assert stats.draft_tokens > 0 and stats.acceptance_rate > 0.9  # the draft is the model's first layer
        assert stats.tokens_per_pass > 2
        seeded = _done(drafted, STORY, SamplingSettings(seed=5, max_tokens=30)).stats  # a valid sampled run
        assert seeded.generated_tokens == 30 and 0 <= seeded.accepted_tokens <= seeded.draft_tokens
        cancelled = threading.Event()
        events = []
        for event in drafted.generate("r", STORY, SamplingSettings(temperature=0.0, max_tokens=400), cancelled):
            events.append(event)
            if isinstance(event, Token):
                cancelled.set()
        assert events[-1].stats.stop_reason == "cancelled" and events[-1].stats.generated_tokens < 20
        assert _done(drafted, STORY, GREEDY).text == expected.text
    finally:
        drafted.unload()


def test_a_draft_of_another_vocabulary_or_prompt_lookup_is_refused_before_loading(tiny_draft_pair, tiny_other_vocab_mlx):
    backend = MlxBackend()
    with pytest.raises(GenerationError) as caught:
        backend.load(str(tiny_draft_pair.mlx_target), LoadSettings(n_ctx=256, draft=str(tiny_other_vocab_mlx)))
    assert caught.value.message == (f"{tiny_other_vocab_mlx.name} cannot draft for {tiny_draft_pair.mlx_target.name}: "
                                    "its vocabulary has 1,100 tokens, the model's 1,024")
    with pytest.raises(GenerationError, match="MLX has no prompt-lookup decoding"):
        backend.load(str(tiny_draft_pair.mlx_target), LoadSettings(n_ctx=256, draft=PROMPT_LOOKUP))
    assert backend._model is None
