"""The server's sampling: a value a request leaves out is the served model's recommendation (GGUF
general.sampling.*), else QuantDesk's default; a value it gives wins. On the real engine and server, and at the
parser."""

from __future__ import annotations

import pytest

from app.datatypes import ModelSampling, SamplingSettings
from app.engine.client import EngineClient
from app.server import anthropic
from app.server.app import model_id
from app.server.params import parse_chat, parse_completion
from tests.server.conftest import loaded_engine, openai_on

ASK = [{"role": "user", "content": "Hi"}]
RECOMMENDED = ModelSampling(temperature=0.6, top_p=0.9, top_k=20, origin="general.sampling.*")


def _knobs(sampling: SamplingSettings) -> tuple:
    return sampling.temperature, sampling.top_p, sampling.top_k, sampling.min_p, sampling.repeat_penalty


def test_a_request_without_a_value_gets_the_models_and_one_with_it_its_own():
    body = {"messages": ASK}
    defaults = SamplingSettings()
    chat = parse_chat(body, served_id="m", n_ctx=512, recommended=RECOMMENDED).sampling
    assert _knobs(chat) == (0.6, 0.9, 20, defaults.min_p, defaults.repeat_penalty)
    chat = parse_chat({**body, "temperature": 0.0, "top_k": 5}, served_id="m", n_ctx=512,
                      recommended=RECOMMENDED).sampling
    assert (chat.temperature, chat.top_p, chat.top_k) == (0.0, 0.9, 5)
    assert _knobs(parse_chat(body, served_id="m", n_ctx=512).sampling) == _knobs(defaults)
    completion = parse_completion({"prompt": "Hi"}, served_id="m", n_ctx=512, recommended=RECOMMENDED).sampling
    assert _knobs(completion)[:3] == (0.6, 0.9, 20)
    messages = anthropic.parse_messages({"messages": ASK, "max_tokens": 8}, served_id="m", n_ctx=512,
                                        takes_tools=False, recommended=RECOMMENDED).sampling
    assert _knobs(messages)[:3] == (0.6, 0.9, 20)


class RecordingEngine:
    """The real engine, with the sampling of each generation it is asked for written down."""

    def __init__(self, engine: EngineClient) -> None:
        self._engine = engine
        self.samplings: list[SamplingSettings] = []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def generate(self, messages, sampling=None, *args, **kwargs):
        self.samplings.append(sampling)
        return self._engine.generate(messages, sampling, *args, **kwargs)


@pytest.fixture(scope="module")
def sampling_engine(tiny_sampling_model):
    yield from loaded_engine(tiny_sampling_model)


def test_the_server_uses_the_served_models_recommendation(sampling_engine, serve):
    recording = RecordingEngine(sampling_engine)
    client = openai_on(serve(recording))
    name = model_id(sampling_engine.loaded.model_path)
    client.chat.completions.create(model=name, messages=ASK, max_tokens=3)
    assert _knobs(recording.samplings[-1]) == (0.6, 0.9, 20, 0.0, 1.05)  # tests/fixtures/models.py's values
    client.chat.completions.create(model=name, messages=ASK, max_tokens=3, temperature=1.3)
    assert _knobs(recording.samplings[-1]) == (1.3, 0.9, 20, 0.0, 1.05)


def test_the_models_preset_comes_between_the_request_and_the_models_recommendation(sampling_engine, serve):
    from app.hub import presets

    presets.update(sampling_engine.loaded.model_path, sampling={"temperature": 0.25, "top_k": 7})
    chat = parse_chat({"messages": ASK}, served_id="m", n_ctx=512, recommended=RECOMMENDED,
                      preset={"temperature": 0.25}).sampling
    assert (chat.temperature, chat.top_p, chat.top_k) == (0.25, 0.9, 20)
    recording = RecordingEngine(sampling_engine)
    server = serve(recording)
    client = openai_on(server)
    name = model_id(sampling_engine.loaded.model_path)
    client.chat.completions.create(model=name, messages=ASK, max_tokens=3)
    assert _knobs(recording.samplings[-1]) == (0.25, 0.9, 7, 0.0, 1.05)  # the preset's, then the model's
    client.chat.completions.create(model=name, messages=ASK, max_tokens=3, temperature=1.3)
    assert _knobs(recording.samplings[-1])[:3] == (1.3, 0.9, 7)  # the request's own value wins
    import anthropic as anthropic_sdk

    with anthropic_sdk.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as messages:
        messages.messages.create(model=name, max_tokens=3, messages=ASK)
    assert _knobs(recording.samplings[-1])[:3] == (0.25, 0.9, 7)
