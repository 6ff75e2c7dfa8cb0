"""Speculative decoding in the llama.cpp backend, on real tiny models: a draft model or prompt lookup changes the
speed, never the reply (greedy, and sampled with a seed); a draft of another vocabulary is refused with a sentence
before anything loads; cancel stops a speculating reply; the stats count the guesses."""

from __future__ import annotations

import threading

import pytest

from app.datatypes import DEFAULT_DRAFT_P_MIN, Done, LoadSettings, Message, PROMPT_LOOKUP, SamplingSettings, Token
from backends.base import GenerationError

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")

from backends.llama_cpp import LlamaCppBackend  # noqa: E402

# A prompt whose reply a random model tends to copy from: prompt lookup then has n-grams to find.
REPEAT = [Message("user", "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox jumps "
                          "over the lazy dog. the quick brown fox")]
STORY = [Message("user", "Tell me a story about a fox.")]


def _loaded(model, draft: str = "", draft_tokens: int = 4) -> LlamaCppBackend:
    backend = LlamaCppBackend()
    backend.load(str(model), LoadSettings(n_ctx=1024, threads=2, gpu_layers=0, draft=draft, draft_tokens=draft_tokens))
    return backend


@pytest.fixture(scope="module")
def plain(tiny_draft_pair):
    backend = _loaded(tiny_draft_pair.target)
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def drafted(tiny_draft_pair):
    backend = _loaded(tiny_draft_pair.target, str(tiny_draft_pair.draft))
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def lookup(tiny_draft_pair):
    backend = _loaded(tiny_draft_pair.target, PROMPT_LOOKUP, draft_tokens=6)
    yield backend
    backend.unload()


def _done(backend, messages, sampling, cancelled=None) -> Done:
    *_, done = backend.generate("r", messages, sampling, cancelled or threading.Event())
    return done


GREEDY = SamplingSettings(temperature=0.0, max_tokens=80)
GREEDY_NO_PENALTY = SamplingSettings(temperature=0.0, repeat_penalty=1.0, max_tokens=80)
SEEDED = SamplingSettings(seed=11, max_tokens=80)


@pytest.mark.parametrize("sampling", [GREEDY, GREEDY_NO_PENALTY, SEEDED], ids=["greedy", "greedy-no-penalty", "seeded"])
@pytest.mark.parametrize("messages", [STORY, REPEAT], ids=["story", "repeat"])
def test_a_draft_model_leaves_the_reply_as_it_is(plain, drafted, messages, sampling):
    expected = _done(plain, messages, sampling)
    done = _done(drafted, messages, sampling)
    assert done.text == expected.text
    assert done.stats.generated_tokens == expected.stats.generated_tokens
    stats = done.stats
    assert stats.draft_tokens > 0 and 0 <= stats.accepted_tokens <= stats.draft_tokens
    assert 0 < stats.verify_passes <= stats.decode_tokens
    if sampling.temperature == 0:  # the draft is the model's first layer and its second layer adds nothing
        assert stats.acceptance_rate > 0.9
        assert stats.tokens_per_pass > 2
    assert expected.stats.draft_tokens == 0 and expected.stats.acceptance_rate is None


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
def test_prompt_lookup_leaves_the_reply_as_it_is(plain, lookup, sampling):
    for messages in (REPEAT, STORY):
        expected = _done(plain, messages, sampling)
        done = _done(lookup, messages, sampling)
        assert done.text == expected.text
        assert done.stats.verify_passes > 0 and done.stats.accepted_tokens <= done.stats.draft_tokens


def _greedy_story_with(target, draft, p_min: float) -> Done:
    """The greedy story from a fresh backend of ``target`` drafted by ``draft`` with that minimum probability."""
    backend = LlamaCppBackend()
    backend.load(str(target), LoadSettings(n_ctx=1024, threads=2, gpu_layers=0, draft_tokens=4, draft=str(draft),
                                           draft_p_min=p_min))
    try:
        return _done(backend, STORY, GREEDY)
    finally:
        backend.unload()


def test_an_unrelated_draft_guesses_little_and_changes_nothing(plain, tiny_draft_pair, tiny_unrelated_draft):
    """A draft of the same vocabulary but other weights is unsure of its guesses (random weights: a flat
    distribution): with llama-server's minimum probability it guesses nothing, and each pass is one token as without
    a draft; made to guess anyway (p_min 0) its guesses are mostly wrong. The reply is the model's either way."""
    expected = _done(plain, STORY, GREEDY)
    unsure = _greedy_story_with(tiny_draft_pair.target, tiny_unrelated_draft, DEFAULT_DRAFT_P_MIN)
    assert unsure.text == expected.text
    assert unsure.stats.draft_tokens == 0 and unsure.stats.verify_passes == unsure.stats.decode_tokens
    guessing = _greedy_story_with(tiny_draft_pair.target, tiny_unrelated_draft, 0.0)
    assert guessing.text == expected.text
    assert guessing.stats.draft_tokens > 0 and guessing.stats.acceptance_rate < 0.9


def test_a_sure_draft_still_guesses_with_the_minimum(tiny_draft_pair):
    """The built pair's draft is sure of most tokens (its logits sharpened as a trained model's are): the default
    minimum probability leaves it nearly all the guesses it makes without one."""
    guesses = {p_min: _greedy_story_with(tiny_draft_pair.target, tiny_draft_pair.draft, p_min).stats.draft_tokens
               for p_min in (0.0, DEFAULT_DRAFT_P_MIN)}
    assert guesses[0.0] >= guesses[DEFAULT_DRAFT_P_MIN] > 0.8 * guesses[0.0]


def test_later_turns_and_cut_replies_keep_the_caches_right(plain, drafted):
    """A reply cut by max tokens mid-round leaves guesses in the caches; the next turn still gets the model's reply
    (its KV prefix reused, the draft's too)."""
    short = SamplingSettings(temperature=0.0, max_tokens=7)
    first = _done(drafted, STORY, short)
    assert first.text == _done(plain, STORY, short).text
    turn = [*STORY, Message("assistant", first.text), Message("user", "And then?")]
    assert _done(drafted, turn, GREEDY).text == _done(plain, turn, GREEDY).text
    assert _done(drafted, REPEAT, GREEDY).text == _done(plain, REPEAT, GREEDY).text


def test_a_draft_of_another_vocabulary_is_refused_before_anything_loads(tiny_draft_pair, tiny_other_vocab_models):
    bigger, other_tokens = tiny_other_vocab_models
    for draft, reason in ((bigger, "its vocabulary has 1,100 tokens, the model's 1,024"),
                          (other_tokens, "its 1,024 tokens are not the model's (the token texts differ)")):
        backend = LlamaCppBackend()
        with pytest.raises(GenerationError) as caught:
            backend.load(str(tiny_draft_pair.target), LoadSettings(n_ctx=256, threads=2, gpu_layers=0, draft=str(draft)))
        assert caught.value.kind == "draft"
        assert caught.value.message == f"{draft.name} cannot draft for {tiny_draft_pair.target.name}: {reason}"
        assert backend._llm is None and backend._drafter is None


def test_a_missing_draft_is_refused_with_a_sentence(tiny_draft_pair, tmp_path):
    backend = LlamaCppBackend()
    with pytest.raises(GenerationError, match="does not exist"):
        backend.load(str(tiny_draft_pair.target), LoadSettings(n_ctx=256, draft=str(tmp_path / "none.gguf")))
    assert backend._llm is None


def test_cancel_stops_a_speculating_reply(drafted, plain):
    cancelled = threading.Event()
    events = []
    for event in drafted.generate("r", REPEAT, SamplingSettings(temperature=0.0, max_tokens=400), cancelled):
        events.append(event)
        if isinstance(event, Token):
            cancelled.set()
    done = events[-1]
    assert isinstance(done, Done) and done.stats.stop_reason == "cancelled"
    assert done.stats.generated_tokens < 20  # the tokens of the round under way at most, not the 400 asked for
    assert _done(drafted, STORY, GREEDY).text == _done(plain, STORY, GREEDY).text  # and the next reply is right


def test_the_stats_carry_the_speculation(drafted):
    stats = _done(drafted, STORY, GREEDY).stats
    public = stats.to_public_dict()
    assert public["draft_tokens"] == stats.draft_tokens > 0
    assert public["accepted_tokens"] == stats.accepted_tokens
    assert public["acceptance_rate"] == pytest.approx(stats.accepted_tokens / stats.draft_tokens)
    assert public["tokens_per_pass"] == pytest.approx(stats.decode_tokens / stats.verify_passes)


def test_the_load_says_what_drafts(tiny_draft_pair):
    backend = LlamaCppBackend()
    try:
        details = backend.load(str(tiny_draft_pair.target), LoadSettings(n_ctx=256, threads=2, gpu_layers=0,
                                                                         draft=str(tiny_draft_pair.draft))).details
        assert details["draft"]["model"] == str(tiny_draft_pair.draft)
        assert details["draft"]["model_bytes"] > 0
    finally:
        backend.unload()
