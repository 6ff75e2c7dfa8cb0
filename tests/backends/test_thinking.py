"""Thinking models on the real engines: the tiny model with a thinking model's real chat template (Qwen3.5's, whose
generation prompt opens ``<think>``) writes its reply inside the thinking block until something closes it. A random
model never writes ``</think>`` itself, so a thinking budget is what closes it here — the same path a real model's
overlong thinking takes — and everything after is the answer."""

from __future__ import annotations

import json
import threading

import jsonschema

import pytest

from app.datatypes import Done, Message, SamplingSettings, Token

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # mlx-lm's transformers import

ASK = [Message("user", "Why is the sky blue?")]


def _run(backend, messages, sampling):
    events = list(backend.generate("r", messages, sampling, threading.Event()))
    tokens = [e for e in events if isinstance(e, Token)]
    done = events[-1]
    assert isinstance(done, Done)
    return tokens, done


@pytest.fixture(scope="module")
def llama(tiny_thinking_model):
    from app.datatypes import LoadSettings
    from backends.llama_cpp import LlamaCppBackend

    backend = LlamaCppBackend()
    backend.load(str(tiny_thinking_model), LoadSettings(n_ctx=1024, threads=2, gpu_layers=0))
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def mlx(tiny_thinking_mlx):
    from app.datatypes import LoadSettings
    from backends.mlx import MlxBackend

    backend = MlxBackend()
    backend.load(str(tiny_thinking_mlx), LoadSettings(n_ctx=1024))
    yield backend
    backend.unload()


@pytest.fixture(params=["llama", "mlx"])
def engine(request):
    return request.getfixturevalue(request.param)


def test_a_budget_closes_the_thinking_and_the_answer_follows(engine):
    tokens, done = _run(engine, ASK, SamplingSettings(temperature=0.0, max_tokens=40, reasoning_budget=8))
    stats = done.stats
    assert done.reasoning and "</think>" not in done.reasoning and "<think>" not in done.reasoning
    assert "</think>" not in done.text
    # the budget's tokens, then the closing tag the engine wrote for the model (one token later on MLX, which
    # samples a token ahead)
    assert 8 <= stats.reasoning_tokens <= stats.generated_tokens - 1
    assert stats.first_answer_ms >= stats.ttft_ms and stats.reasoning_ms > 0
    # the stream hands out the thinking and the answer apart, and they add up to the Done's
    assert "".join(t.reasoning for t in tokens).strip() == done.reasoning.strip()
    assert "".join(t.text for t in tokens).strip() == done.text.strip()
    assert sum(t.count for t in tokens) == stats.generated_tokens
    # each token carries the thinking's figures so far, measured where the Done's are: they grow to the Done's
    figures = [(t.reasoning_tokens, t.reasoning_ms) for t in tokens]
    assert figures == sorted(figures) and figures[0][0] >= 1
    last = tokens[-1]
    assert (last.reasoning_tokens, last.reasoning_ms, last.first_answer_ms) == (
        stats.reasoning_tokens, stats.reasoning_ms, stats.first_answer_ms)


def test_a_budget_of_nothing_turns_thinking_off(engine):
    sampling = SamplingSettings(temperature=0.0, max_tokens=20, reasoning_budget=0)
    _, done = _run(engine, ASK, sampling)
    assert done.reasoning == "" and done.stats.reasoning_tokens == 0  # the template closed the block itself
    # (each reply prepares its prompt in a sequence of its own: the prompt is asked for again, as the reply made it)
    assert engine.prepare(ASK, sampling).generation_prompt.endswith("<think>\n\n</think>\n\n")


# DeepSeek R1's distilled models open the thinking block in their generation prompt whatever enable_thinking says:
# there a budget of nothing is the engine's to close, before the model's first token.
OPENING_TEMPLATE = "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"


@pytest.fixture(scope="module")
def opening_llama(tiny_models, llama_cpp_sources):
    from app.datatypes import LoadSettings
    from backends.llama_cpp import LlamaCppBackend
    from tests.fixtures.models import build_templated_model

    backend = LlamaCppBackend()
    model = build_templated_model(tiny_models, "r1", llama_cpp_sources.templates[OPENING_TEMPLATE])
    backend.load(str(model), LoadSettings(n_ctx=1024, threads=2, gpu_layers=0))
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def opening_mlx(tiny_models, llama_cpp_sources):
    from app.datatypes import LoadSettings
    from backends.mlx import MlxBackend
    from tests.fixtures.models import build_templated_mlx

    backend = MlxBackend()
    backend.load(str(build_templated_mlx(tiny_models, "r1", llama_cpp_sources.templates[OPENING_TEMPLATE])),
                 LoadSettings(n_ctx=1024))
    yield backend
    backend.unload()


@pytest.fixture(params=["opening_llama", "opening_mlx"])
def opening(request):
    return request.getfixturevalue(request.param)


def test_a_budget_of_nothing_closes_the_block_a_template_opened_itself(opening):
    sampling = SamplingSettings(temperature=0.0, max_tokens=20, reasoning_budget=0)
    assert opening.prepare(ASK, sampling).generation_prompt.endswith("<think>\n")  # opened, enable_thinking or not
    tokens, done = _run(opening, ASK, sampling)
    # the closing tag first, written for the model: no thinking, and the rest is the answer
    assert done.reasoning.strip() == "" and "</think>" not in done.text
    assert done.text.strip()
    # the thinking counted is the closing tag's tokens at most
    assert done.stats.reasoning_tokens <= len(opening.tokenize("</think>", special=True))
    assert "".join(t.text for t in tokens).strip() == done.text.strip()


def test_without_a_budget_the_model_thinks_until_the_reply_ends(engine):
    _, done = _run(engine, ASK, SamplingSettings(temperature=0.0, max_tokens=30))
    assert done.text == "" and done.reasoning
    assert done.stats.reasoning_tokens == done.stats.generated_tokens == 30


def test_reasoning_format_none_leaves_the_thinking_in_the_text(llama):
    _, done = _run(llama, ASK, SamplingSettings(temperature=0.0, max_tokens=30, reasoning_budget=8,
                                                 reasoning_format="none"))
    assert done.reasoning == ""
    assert done.text.startswith("<think>\n") and "</think>" in done.text  # as llama-server's reasoning_format none
    assert done.stats.reasoning_tokens >= 8  # still thinking, only not read apart


def test_the_thinking_goes_back_to_the_template_as_it_wants_it(llama):
    """Qwen3.5's template drops the thinking of earlier turns: the next prompt holds the answer only."""
    _, first = _run(llama, ASK, SamplingSettings(temperature=0.0, max_tokens=30, reasoning_budget=8))
    follow_up = [*ASK, Message("assistant", first.text, reasoning=first.reasoning), Message("user", "And at dusk?")]
    prepared = llama.prepare(follow_up, SamplingSettings())
    assert first.reasoning.strip() not in prepared.prompt
    assert first.text.strip() in prepared.prompt


# Qwen3.5 writes a string argument as free text up to its closing tag, which a random model never writes: the
# arguments here are of types the grammar can bring to an end.
WEATHER = ({"type": "function", "function": {"name": "get_weather", "description": "The weather where the user is",
                                               "parameters": {"type": "object",
                                                              "properties": {"days": {"type": "integer", "minimum": 1,
                                                                                      "maximum": 7},
                                                                             "metric": {"type": "boolean"}},
                                                              "required": ["days", "metric"]}}},)


def test_a_required_call_comes_after_the_thinking_in_the_models_own_syntax(engine):
    """The grammar (the chat format's parser as llguidance's grammar) lets the thinking run, then holds the reply to
    a call in Qwen3.5's XML syntax, which the engine reads back as the call."""
    tokens, done = _run(engine, ASK, SamplingSettings(seed=3, max_tokens=120, reasoning_budget=6, tools=WEATHER,
                                                      tool_choice="required"))
    assert done.reasoning and done.stats.reasoning_tokens >= 6
    assert len(done.tool_calls) >= 1 and done.tool_calls[0].name == "get_weather"
    arguments = json.loads(done.tool_calls[0].arguments)
    assert set(arguments) == {"days", "metric"} and 1 <= arguments["days"] <= 7 and isinstance(arguments["metric"], bool)
    assert done.text.strip() == ""  # no preamble: straight to the call, as OpenAI's "required"
    streamed = [d for t in tokens for d in t.tool_calls]
    assert streamed[0].name == "get_weather" and streamed[0].id == done.tool_calls[0].id
    assert json.loads("".join(d.arguments for d in streamed if d.index == 0)) == arguments


def test_a_response_format_comes_after_the_thinking(engine):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"],
              "additionalProperties": False}
    _, done = _run(engine, ASK, SamplingSettings(seed=5, max_tokens=80, reasoning_budget=6, json_schema=schema))
    assert done.reasoning and "</think>" not in done.text
    jsonschema.validate(json.loads(done.text), schema)
