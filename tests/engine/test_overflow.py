"""The overflow policy (app/engine/overflow.py) on the real engine: a tiny llama.cpp model with a 256-token context,
a conversation that goes on 20 turns past the point where it no longer fits."""

from __future__ import annotations

import dataclasses

import pytest

from app.datatypes import ContextCut, Done, LoadSettings, Message, SamplingSettings
from app.engine.client import EngineClient
from app.engine.overflow import NOTE_HEADER, fit, note_room, reply_room
from app.errors import EngineError

N_CTX = 256
REPLY = 24
SYSTEM = Message("system", "You are a terse assistant.")


@pytest.fixture(scope="module")
def engine(tiny_models):
    with EngineClient() as client:
        client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=N_CTX))
        yield client


def _reply(engine, messages, sampling) -> Done:
    events = list(engine.generate(messages, sampling))
    assert isinstance(events[-1], Done)
    return events[-1]


def _question(i: int) -> str:
    return f"Question number {i}: what comes after {i} apples and {i + 1} pears?"


@pytest.mark.parametrize("policy", ["drop-oldest", "truncate-middle", "compact"])
def test_each_policy_keeps_answering_twenty_turns_past_the_limit(engine, policy):
    sampling = SamplingSettings(max_tokens=REPLY, seed=1, temperature=0.7)
    history = [SYSTEM]
    cut: ContextCut | None = None
    cuts: list[ContextCut] = []
    past = 0
    i = 0
    while past < 20:
        i += 1
        history.append(Message("user", _question(i)))
        fitted = fit(engine, history, sampling, policy, N_CTX, cut)
        sent = fitted.messages
        if fitted.cut is not None:
            past += 1
            if cut is None or fitted.cut.dropped != cut.dropped:
                cuts.append(fitted.cut)
            if cut is not None:  # what was left out stays out
                assert fitted.cut.start == cut.start and fitted.cut.dropped >= cut.dropped
            cut = fitted.cut
            # the system prompt and the newest message are always sent
            assert sent[0].role == "system" and sent[0].content.startswith(SYSTEM.content)
            assert sent[-1] == history[-1]
            left_out = history[cut.start:cut.start + cut.dropped]
            assert not any(m in sent for m in left_out if m.role == "user")  # (every user message differs)
            assert len(sent) == len(history) - cut.dropped
            assert history[cut.start].role == "user"
            if policy == "truncate-middle":  # the first exchange kept
                assert cut.start == 3 and sent[1:3] == history[1:3]
            else:
                assert cut.start == 1
            if policy == "compact":
                assert cut.note and sent[0].content == f"{SYSTEM.content}\n\n{NOTE_HEADER}\n{cut.note}"
        else:
            assert sent == history
        done = _reply(engine, sent, sampling)
        assert done.stats.generated_tokens > 0 and done.text  # it keeps answering
        if fitted.cut is not None:
            assert done.stats.prompt_tokens == fitted.cut.prompt_tokens  # the count the rule decided by
            assert done.stats.prompt_tokens + reply_room(N_CTX, REPLY) <= N_CTX
        history.append(Message("assistant", done.text))
    assert i > 20 and len(cuts) >= 2  # it cut more than once, and not on every turn (room freed ahead)
    assert len(cuts) < 20
    if policy == "compact":
        # each new note is the model's: a fresh generation, at most its room, the earlier note folded in
        notes = [c.note for c in cuts]
        assert all(notes) and len(set(notes)) == len(notes)
        assert all(engine.count_tokens([Message("user", n)]) <= note_room(N_CTX) + 20 for n in notes)


def test_stop_sends_everything_and_the_engine_refuses_with_its_sentence(engine):
    sampling = SamplingSettings(max_tokens=REPLY, seed=1)
    history = [SYSTEM]
    for i in range(1, 40):
        history.append(Message("user", _question(i)))
        fitted = fit(engine, history, sampling, "stop", N_CTX)
        assert fitted.messages == history and fitted.cut is None
        try:
            done = _reply(engine, fitted.messages, sampling)
        except EngineError as exc:
            assert exc.kind == "context"
            assert str(exc).startswith("the conversation is ") and f"but the context holds {N_CTX}" in str(exc)
            assert exc.hint == "start a new chat or load with a larger context"
            return
        history.append(Message("assistant", done.text))
    pytest.fail("the context never filled")


def test_a_newest_message_that_cannot_fit_is_refused_in_words(engine):
    sampling = SamplingSettings(max_tokens=REPLY, seed=1)
    long = Message("user", " ".join(f"word{i}" for i in range(400)))
    for policy in ("drop-oldest", "truncate-middle", "compact"):
        with pytest.raises(EngineError) as caught:
            fit(engine, [SYSTEM, Message("user", "hi"), Message("assistant", "hello"), long], sampling, policy, N_CTX)
        assert caught.value.kind == "context" and "the newest message does not fit the context" in str(caught.value)
        assert f"the context of {N_CTX}" in str(caught.value) and caught.value.hint


def test_a_cut_reuses_the_kv_cache_of_the_turns_it_keeps(engine):
    """After drop-oldest leaves turns out, the engine moves the kept turns' cells in the KV cache to their new
    positions (llama-server's cache reuse) instead of evaluating them again: the cached tokens are the system prompt
    and the kept turn up to where the cache held the model's own reply (the history has a fixed answer instead)."""
    sampling = SamplingSettings(max_tokens=REPLY, temperature=0)
    history = [SYSTEM]
    cut: ContextCut | None = None
    checked = 0
    previous_prompt = 0
    for i in range(1, 16):
        history.append(Message("user", _question(i)))
        fitted = fit(engine, history, sampling, "drop-oldest", N_CTX, cut)
        done = _reply(engine, fitted.messages, fitted.sampling_for(sampling))
        if fitted.cut is not None and (cut is None or fitted.cut.dropped != cut.dropped):
            sent = fitted.messages
            assert sent[0] == SYSTEM and [m.role for m in sent[-3:]] == ["user", "assistant", "user"]
            # the cache held: the system prompt, …the turns left out…, the kept turns up to the last user message and
            # the generation prompt, then the model's own reply (the history has another answer in its place)
            kept = engine.count_tokens(sent[:-2], sampling)
            system_only = engine.count_tokens(sent[:1], sampling)
            assert done.stats.cached_tokens == kept > system_only + 16
            checked += 1
        elif i > 1 and fitted.cut is None:  # no cut: the previous prompt is the cached prefix, as always
            assert done.stats.cached_tokens == previous_prompt
        cut = fitted.cut or cut
        previous_prompt = done.stats.prompt_tokens
        history.append(Message("assistant", f"Fine, {i}."))
    assert checked >= 2


def test_only_a_cut_prompt_has_its_cached_runs_moved(engine):
    """Moving cached cells re-rotates their keys instead of computing them afresh, so a reply may part from a fresh
    read's: only a prompt an overflow policy cut asks for it (SamplingSettings.cache_reuse); any other prompt reuses
    its exact common prefix alone, as llama-server without --cache-reuse."""
    sampling = SamplingSettings(max_tokens=1, temperature=0)
    first = Message("user", "First.")
    later = Message("user", _question(7))
    conversation = [SYSTEM, first, Message("assistant", "Fine."), later]
    system_only = engine.count_tokens([SYSTEM], sampling)
    _reply(engine, conversation, sampling)
    assert _reply(engine, [SYSTEM, later], sampling).stats.cached_tokens < system_only + 16  # read again
    _reply(engine, conversation, sampling)
    moved = _reply(engine, [SYSTEM, later], dataclasses.replace(sampling, cache_reuse=True)).stats.cached_tokens
    assert moved > system_only + 16


@pytest.mark.parametrize("fixture", ["tiny_mamba2", "tiny_granite_hybrid"])
def test_a_recurrent_or_hybrid_model_reads_the_cut_prompt_again_and_keeps_answering(request, fixture):
    """Their state cannot be moved or cut back (llama_memory_can_shift is false): after a cut the whole prompt is
    evaluated again, and the replies go on."""
    models = request.getfixturevalue(fixture)
    sampling = SamplingSettings(max_tokens=REPLY, temperature=0)
    with EngineClient() as client:
        client.load(models.gguf_q8_0, LoadSettings(n_ctx=N_CTX))
        history = [SYSTEM]
        cut: ContextCut | None = None
        cuts = 0
        for i in range(1, 12):
            history.append(Message("user", _question(i)))
            fitted = fit(client, history, sampling, "drop-oldest", N_CTX, cut)
            done = _reply(client, fitted.messages, sampling)
            assert done.stats.generated_tokens > 0
            if fitted.cut is not None and (cut is None or fitted.cut.dropped != cut.dropped):
                cuts += 1
                assert done.stats.cached_tokens == 0  # read again from the start
            cut = fitted.cut or cut
            history.append(Message("assistant", f"Fine, {i}."))
        assert cuts >= 1


@pytest.mark.parametrize("policy", ["drop-oldest", "truncate-middle", "compact"])
def test_a_pinned_message_is_sent_twenty_turns_past_the_limit(engine, policy):
    """A pinned early question keeps its whole turn (its answer too) in every prompt, under each policy: the turns
    left out are the droppable ones around it, and the cut says so (``kept``, and its words)."""
    sampling = SamplingSettings(max_tokens=REPLY, seed=1, temperature=0.7)
    history = [SYSTEM]
    pinned = 5  # the third question (0 system, 1-2 the first exchange, 3-4 the second)
    cut: ContextCut | None = None
    past = 0
    i = 0
    while past < 20:
        i += 1
        history.append(Message("user", _question(i)))
        fitted = fit(engine, history, sampling, policy, N_CTX, cut, keep={pinned})
        sent = fitted.messages
        if i >= 3:  # the pinned turn: its question, and from the next turn on its answer
            assert all(m in sent for m in history[pinned:pinned + 2])
        assert sent[0].role == "system" and sent[0].content.startswith(SYSTEM.content)
        assert sent[-1] == history[-1]
        if fitted.cut is not None:
            past += 1
            if cut is not None:  # what was left out stays out
                assert fitted.cut.start == cut.start and fitted.cut.dropped >= cut.dropped
            cut = fitted.cut
            assert cut.start == (3 if policy == "truncate-middle" else 1)
            if cut.end > pinned:  # the cut runs past the pin: two messages kept inside it, and said
                assert cut.kept == (pinned, pinned + 1)
                assert cut.words().endswith(", 2 pinned messages kept")
            left_out = [history[j] for j in cut.left_out()]
            assert len(left_out) == cut.dropped and len(sent) == len(history) - cut.dropped
            assert not any(m in sent for m in left_out if m.role == "user")
            assert ContextCut.from_dict(cut.to_dict()) == cut
        done = _reply(engine, sent, fitted.sampling_for(sampling))
        assert done.stats.generated_tokens > 0
        if fitted.cut is not None:
            assert done.stats.prompt_tokens == fitted.cut.prompt_tokens
            assert done.stats.prompt_tokens + reply_room(N_CTX, REPLY) <= N_CTX
        history.append(Message("assistant", done.text))
    assert cut is not None and cut.kept == (pinned, pinned + 1)  # the cut went past the pin


def test_pins_that_leave_no_room_are_refused_in_words(engine):
    sampling = SamplingSettings(max_tokens=REPLY, seed=1)
    history = [SYSTEM]
    for i in range(1, 12):
        history += [Message("user", _question(i)), Message("assistant", f"Fine, {i}.")]
    history.append(Message("user", _question(12)))
    with pytest.raises(EngineError) as caught:
        fit(engine, history, sampling, "drop-oldest", N_CTX, keep=set(range(1, len(history))))
    assert caught.value.kind == "context" and "with the system prompt and the pinned messages" in str(caught.value)
