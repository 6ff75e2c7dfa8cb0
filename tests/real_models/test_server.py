"""The question asked through QuantDesk's server with the official clients: OpenAI's chat completions (whole and
streamed) and Responses, Anthropic's Messages, greedy, on SmolLM2; each answers it and ends on the model's end
token, reported in the API's own words, with the prompt's tokens as the engine counts them."""

from __future__ import annotations

import anthropic
import openai
import pytest

from app.datatypes import Message
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.real_models.conftest import ANSWER, GREEDY, QUESTION

pytestmark = pytest.mark.real_model
MOST = 64


@pytest.fixture
def server(smollm2_engine):
    """A server per test over the session's engine: what a server starts (its loop's threads) ends with the test."""
    started = ServerThread(create_app(smollm2_engine)).start()
    yield started, model_id(smollm2_engine.loaded.model_path)
    started.stop()


@pytest.fixture(scope="module")
def prompt_tokens(smollm2_engine) -> int:
    return smollm2_engine.count_tokens([Message("user", QUESTION)], GREEDY)


@pytest.fixture
def gpt(server):
    started, name = server
    with openai.OpenAI(base_url=f"{started.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        yield client, name


def test_chat_completions_answer_whole_and_streamed(gpt, prompt_tokens):
    client, name = gpt
    ask = dict(model=name, messages=[{"role": "user", "content": QUESTION}], temperature=0, max_tokens=MOST)
    whole = client.chat.completions.create(**ask)
    [choice] = whole.choices
    assert ANSWER in choice.message.content and choice.finish_reason == "stop"
    assert whole.usage.prompt_tokens == prompt_tokens and whole.usage.completion_tokens < MOST
    chunks = list(client.chat.completions.create(**ask, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_responses_answer(gpt, prompt_tokens):
    client, name = gpt
    response = client.responses.create(model=name, input=QUESTION, temperature=0, max_output_tokens=MOST)
    assert response.status == "completed" and ANSWER in response.output_text
    assert response.usage.input_tokens == prompt_tokens


def test_anthropic_messages_answer(server, prompt_tokens):
    started, name = server
    with anthropic.Anthropic(base_url=started.url, api_key="unused", max_retries=0, timeout=120) as claude:
        # temperature in the body: this client's create() no longer takes it (tests/server/test_anthropic.py)
        message = claude.messages.create(model=name, max_tokens=MOST, extra_body={"temperature": 0},
                                         messages=[{"role": "user", "content": QUESTION}])
        counted = claude.messages.count_tokens(model=name, messages=[{"role": "user", "content": QUESTION}])
    [block] = message.content
    assert block.type == "text" and ANSWER in block.text and message.stop_reason == "end_turn"
    assert counted.input_tokens == prompt_tokens
