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


def test_claude_codes_follow_up_with_a_new_billing_line_is_read_from_the_cache_and_fingerprinted(server):
    """Claude Code's second turn, its billing line's cch changed, reuses the first turn's whole prompt from the KV
    cache on SmolLM2 (the line is left out of the prompt: app/server/anthropic.py); the chat API's replies carry the
    engine's llama.cpp build as system_fingerprint."""
    started, name = server
    coder = "You are a careful coding agent. Answer briefly. " * 12
    ask = [{"role": "user", "content": QUESTION}]
    with anthropic.Anthropic(base_url=started.url, api_key="unused", max_retries=0, timeout=120) as claude:
        def turn(cch: str, messages: list) -> anthropic.types.Message:
            system = [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.177.01c; "
                                               f"cc_entrypoint=cli; cch={cch};"}, {"type": "text", "text": coder}]
            return claude.messages.create(model=name, max_tokens=MOST, system=system, messages=messages,
                                          extra_body={"temperature": 0})

        first = turn("36ee5", ask)
        prompt = first.usage.input_tokens + (first.usage.cache_read_input_tokens or 0)
        second = turn("0aaa9", [*ask, {"role": "assistant", "content": first.content[0].text},
                                {"role": "user", "content": "And in one word?"}])
    assert (second.usage.cache_read_input_tokens or 0) >= prompt - 1
    with openai.OpenAI(base_url=f"{started.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
        reply = client.chat.completions.create(model=name, messages=ask, temperature=0, max_tokens=4)
    assert reply.system_fingerprint and reply.system_fingerprint.startswith("b")
