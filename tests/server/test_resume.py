"""The server resumes a stored conversation: a request that continues one restores the state saved after the reply it
continues (app/engine/states.py), even from a freshly started engine host, and a new conversation with the same
system prompt starts from that prompt's state. Real hosts on the tiny model, the official openai client."""

from __future__ import annotations

from app.datatypes import LoadSettings
from app.engine import states
from app.engine.client import EngineClient
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.server.conftest import openai_on

SYSTEM = {"role": "system", "content": "You keep a lighthouse and answer in short sentences. " * 8}


def _ask(model_path, messages):
    """One request on a server over a freshly started engine host (QuantDesk restarted for each)."""
    with EngineClient() as engine:
        engine.load(model_path, LoadSettings(n_ctx=1024))
        server = ServerThread(create_app(engine)).start()
        try:
            client = openai_on(server)
            reply = client.chat.completions.create(model=model_id(model_path), messages=messages, max_tokens=12,
                                                   temperature=0, seed=1)
            server.app.state.openai.queue.wait_finished(1, 30)  # its state saved behind it
        finally:
            server.stop()
    return reply


def test_a_request_continuing_a_stored_conversation_restores_its_state(tiny_models):
    model = str(tiny_models.gguf_q8_0)
    first = [SYSTEM, {"role": "user", "content": "What do you see tonight? " * 6}]
    one = _ask(model, first)
    assert states.default_cache().count() == 1
    follow = [*first, {"role": "assistant", "content": one.choices[0].message.content},
              {"role": "user", "content": "And the ships?"}]
    two = _ask(model, follow)
    cached = two.usage.prompt_tokens_details.cached_tokens
    assert cached >= one.usage.prompt_tokens + one.usage.completion_tokens - 2  # the whole first turn, from disk
    assert two.usage.prompt_tokens - cached < 40  # only the new message read

    other = [SYSTEM, {"role": "user", "content": "Good evening"}]  # another conversation, the same system prompt
    three = _ask(model, other)
    assert 100 < three.usage.prompt_tokens_details.cached_tokens < three.usage.prompt_tokens
