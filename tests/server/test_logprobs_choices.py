"""Log-probabilities (``logprobs`` / ``top_logprobs``) and several choices (``n``) through the official ``openai``
client against the real server on the tiny model: OpenAI's shapes whole and streamed, the figures checked against
the model's own logits, the choices' indices and summed usage; and the engines that cannot say them refuse in words."""

from __future__ import annotations

import math

import httpx
import numpy as np
import openai
import pytest

from app.datatypes import LoadSettings, Message, SamplingSettings
from app.engine.client import EngineClient
from tests.server.conftest import openai_on, openai_queue

BOOK = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
# greedy without the repetition penalty: the chosen token is then the likeliest under the model
PLAIN = {"temperature": 0.0, "extra_body": {"repeat_penalty": 1.0}}


@pytest.fixture
def oai(server) -> openai.OpenAI:
    return openai_on(server)


def test_chat_logprobs_whole_are_the_models_and_spell_the_reply(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=6, logprobs=True, top_logprobs=5,
                                        **PLAIN)
    choice = reply.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == reply.usage.completion_tokens == 6
    assert "".join(e.token for e in entries) == choice.message.content
    for entry in entries:
        assert entry.logprob <= 0 and bytes(entry.bytes).decode("utf-8", "replace").startswith(entry.token[:1])
        tops = entry.top_logprobs
        assert len(tops) == 5
        assert [t.logprob for t in tops] == sorted((t.logprob for t in tops), reverse=True)
        # greedy without penalty: the chosen token is the likeliest alternative, with the same figure
        assert tops[0].token == entry.token and tops[0].logprob == pytest.approx(entry.logprob)
        assert sum(math.exp(t.logprob) for t in tops) < 1
    assert choice.logprobs.refusal is None


def test_logprobs_are_the_lab_scorings_figures(engine):
    """A chosen token's figure is log-softmax of the logits row it was chosen on: the same as the quant lab's scoring
    of the prompt followed by that token (``Backend.score``, another path to the same logits)."""
    prompt = "I believe the meaning of life is"
    events = list(engine.generate(prompt, SamplingSettings(temperature=0, repeat_penalty=1.0, max_tokens=1,
                                                           logprobs=2)))
    entry = next(x for e in events for x in getattr(e, "logprobs", ()))
    prompt_ids = engine.score(text=prompt).tokens
    scored = engine.score(tokens=[*prompt_ids, entry.id])
    assert entry.logprob == pytest.approx(scored.token_logprobs[-1], abs=1e-4)
    assert entry.top[0].id == entry.id and entry.top[1].logprob <= entry.logprob


def test_completion_logprobs_take_openais_legacy_shape(oai, model_name):
    reply = oai.completions.create(model=model_name, prompt="Book", max_tokens=2, logprobs=3, **PLAIN)
    lp = reply.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 2
    assert "".join(lp.tokens) == reply.choices[0].text and lp.text_offset == [0, len(lp.tokens[0])]
    assert all(len(top) == 3 and max(top.values()) == pytest.approx(v)
               for top, v in zip(lp.top_logprobs, lp.token_logprobs, strict=True))
    assert 0 < sum(math.exp(v) for v in lp.top_logprobs[0].values()) < 1
    # llama-server's list beside it, for its clients
    assert [e["token"] for e in lp.model_extra["content"]] == lp.tokens


def test_chat_top_logprobs_default_to_none(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=1, logprobs=True, **PLAIN)
    assert reply.choices[0].logprobs.content[0].top_logprobs == []  # top_logprobs 0 unless asked, as OpenAI's


def test_streamed_logprobs_come_with_their_chunks(oai, model_name):
    whole = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=8, logprobs=True, top_logprobs=2,
                                        **PLAIN)
    text = spelled = ""
    entries = []
    for chunk in oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=8, logprobs=True,
                                             top_logprobs=2, stream=True, **PLAIN):
        choice = chunk.choices[0]
        text += choice.delta.content or ""
        if choice.delta.content:
            assert choice.logprobs is not None  # a chunk's text comes with its tokens' figures
        if choice.logprobs is not None:
            entries += choice.logprobs.content
            spelled += "".join(e.token for e in choice.logprobs.content)
    assert text == spelled == whole.choices[0].message.content
    assert [(e.token, e.logprob) for e in entries] == [(e.token, e.logprob) for e in whole.choices[0].logprobs.content]


def test_completion_logprobs_streamed_offsets_run_on(oai, model_name):
    offsets, tokens = [], []
    for chunk in oai.completions.create(model=model_name, prompt="I believe the meaning of life is", max_tokens=6,
                                        logprobs=1, stream=True, **PLAIN):
        if chunk.choices[0].logprobs is not None:
            offsets += chunk.choices[0].logprobs.text_offset
            tokens += chunk.choices[0].logprobs.tokens
    assert len(tokens) == 6
    assert offsets == [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]


def test_without_logprobs_nothing_is_computed_or_sent(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=4, **PLAIN)
    assert reply.choices[0].logprobs is None
    for chunk in oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=4, stream=True, **PLAIN):
        assert not chunk.choices or chunk.choices[0].logprobs is None


def test_engine_events_carry_logprobs_only_when_asked(engine):
    hello = [Message("user", "Hello")]
    plain = list(engine.generate(hello, SamplingSettings(temperature=0, max_tokens=5)))
    asked = list(engine.generate(hello, SamplingSettings(temperature=0, max_tokens=5, logprobs=3)))
    assert all(not getattr(e, "logprobs", ()) for e in plain)
    entries = [x for e in asked for x in getattr(e, "logprobs", ())]
    assert len(entries) == 5 and all(len(x.top) == 3 and x.id >= 0 for x in entries)
    assert "".join(x.token for x in entries) == asked[-1].text
    assert np.all(np.diff([t.logprob for t in entries[0].top]) <= 0)


def test_n_choices_whole_have_their_indices_and_summed_usage(oai, model_name):
    reply = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=5, n=3, seed=7, temperature=1.0)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert all(c.finish_reason == "length" and c.message.role == "assistant" for c in reply.choices)
    assert len({c.message.content for c in reply.choices}) > 1  # each its own draw
    assert reply.usage.completion_tokens == 15
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 15
    again = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=5, n=3, seed=7, temperature=1.0)
    assert [c.message.content for c in again.choices] == [c.message.content for c in reply.choices]  # reproducible
    single = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=5, seed=7, temperature=1.0)
    assert single.choices[0].message.content == reply.choices[0].message.content


def test_n_choices_streamed_one_after_the_other(oai, model_name):
    whole = oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=4, n=2, seed=3, temperature=1.0)
    texts: dict[int, str] = {}
    finished, order, usage = [], [], None
    for chunk in oai.chat.completions.create(model=model_name, messages=BOOK, max_tokens=4, n=2, seed=3,
                                             temperature=1.0, stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            order.append(choice.index)
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finished.append(choice.index)
    assert finished == [0, 1] and order == sorted(order)
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]
    assert usage.completion_tokens == 8


def test_n_completions_with_logprobs(oai, model_name):
    reply = oai.completions.create(model=model_name, prompt="Once upon a time", max_tokens=3, n=2, logprobs=0,
                                   seed=1, temperature=1.0)
    assert [c.index for c in reply.choices] == [0, 1]
    for choice in reply.choices:
        assert "".join(choice.logprobs.tokens) == choice.text and choice.logprobs.top_logprobs == [{}, {}, {}]


def test_bad_n_and_logprobs_are_400_before_the_engine(server, model_name):
    for body, param in (({"n": 0}, "n"), ({"n": 9}, "n"), ({"top_logprobs": 2}, "top_logprobs"),
                        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs")):
        reply = httpx.post(f"{server.url}/v1/chat/completions", timeout=60,
                           json={"model": model_name, "messages": BOOK, **body})
        assert reply.status_code == 400 and reply.json()["error"]["param"] == param, reply.text
    reply = httpx.post(f"{server.url}/v1/completions", timeout=60,
                       json={"model": model_name, "prompt": "x", "logprobs": 21})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "logprobs"
    assert openai_queue(server).finished_count == 0


def test_mlx_reports_logprobs_too(tiny_models):
    """mlx-lm's generate_step hands each token's log-probabilities over: the same events, the same shape."""
    pytest.importorskip("mlx_lm")
    with EngineClient() as client:
        client.load(tiny_models.mlx_f16, LoadSettings(n_ctx=256))
        events = list(client.generate([Message("user", "Hi")], SamplingSettings(temperature=0, repeat_penalty=1.0,
                                                                               max_tokens=4, logprobs=2)))
        entries = [x for e in events for x in getattr(e, "logprobs", ())]
        assert len(entries) == 4 and "".join(x.token for x in entries) == events[-1].text
        for entry in entries:
            assert entry.logprob <= 0 and len(entry.top) == 2
            assert entry.top[0].id == entry.id and entry.top[0].logprob == pytest.approx(entry.logprob)
        # a request that does not ask gets none
        assert all(not getattr(e, "logprobs", ()) for e in client.generate([Message("user", "Hi")],
                                                                           SamplingSettings(max_tokens=2)))


def test_an_engine_without_logprobs_refuses_in_words():
    """An engine that cannot say them (ExLlama here) refuses the request before any work; the server answers 400."""
    from backends.base import GenerationError
    from backends.exllamav3 import ExLlamaV3Backend

    with pytest.raises(GenerationError) as caught:
        ExLlamaV3Backend().check_request(SamplingSettings(logprobs=0))
    assert caught.value.kind == "request" and "log-probabilities" in caught.value.message
    ExLlamaV3Backend().check_request(SamplingSettings())
