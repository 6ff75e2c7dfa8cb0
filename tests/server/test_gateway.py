"""The server as a gateway: one local address fronts the local model and the models of the user's remote
connections. The remote here is a real QuantDesk server (with its own API key) over the tiny model; the gateway
reaches it through a real engine host running the remote backend, and the official ``openai`` client talks to the
gateway."""

from __future__ import annotations

import httpx
import openai
import pytest

from app.remote.connections import Connection, Connections, model_ref
from app.server.thread import ServerThread
from app.datatypes import Done, Message, SamplingSettings
from tests.server.conftest import openai_on

REMOTE_KEY = "remote-only-key-0123456789"
GATEWAY_KEY = "gateway-key-0123456789ab"
CHAT = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture
def remote(serve, model_name) -> str:
    """A QuantDesk server standing in for the machine in the next room, saved as the connection 'box'; the
    reference of its model."""
    server = serve(api_key=REMOTE_KEY)
    Connections().save(Connection("box", f"{server.url}/v1"), api_key=REMOTE_KEY)
    return model_ref("box", model_name)


@pytest.fixture
def gateway(serve) -> ServerThread:
    return serve(api_key=GATEWAY_KEY, serve_remotes=True)


def client_of(server: ServerThread) -> openai.OpenAI:
    return openai_on(server, GATEWAY_KEY)


def test_models_lists_the_local_model_and_each_remote_one_without_any_key(gateway, remote, model_name):
    response = httpx.get(f"{gateway.url}/v1/models", headers={"Authorization": f"Bearer {GATEWAY_KEY}"})
    ids = [m["id"] for m in response.json()["data"]]
    assert ids == [model_name, remote]
    assert REMOTE_KEY not in response.text
    card = client_of(gateway).models.retrieve(remote)
    assert card.owned_by == "box" and card.id == remote


def test_a_request_naming_a_remote_model_is_answered_by_it_streamed_and_not(engine, gateway, remote):
    expected = next(e for e in engine.generate([Message("user", "Name three colours.")],
                                               SamplingSettings(temperature=0, max_tokens=16))
                    if isinstance(e, Done))
    api = client_of(gateway)
    whole = api.chat.completions.create(model=remote, messages=CHAT, temperature=0, max_tokens=16)
    assert whole.model == remote and whole.choices[0].message.content == expected.text  # greedy: the same text
    assert whole.usage.completion_tokens == expected.stats.generated_tokens
    pieces = [c.choices[0].delta.content or "" for c in api.chat.completions.create(
        model=remote, messages=CHAT, temperature=0, max_tokens=16, stream=True) if c.choices]
    assert "".join(pieces) == expected.text
    completion = api.completions.create(model=remote, prompt="Once upon a time", temperature=0, max_tokens=8)
    assert completion.choices[0].text
    # the remote's engine host is started once and kept for the next requests
    assert [e.served for e in gateway.app.state.openai.pool.loaded_engines()] == [remote]


def test_the_local_model_is_served_as_before(gateway, remote, model_name):
    answer = client_of(gateway).chat.completions.create(model=model_name, messages=CHAT, max_tokens=4)
    assert answer.model == model_name and answer.choices[0].message.content is not None
    assert gateway.app.state.openai.pool.loaded_engines() == []  # no remote engine was started for it


def test_a_model_no_connection_lists_is_a_404_in_words(gateway, remote):
    with pytest.raises(openai.NotFoundError) as caught:
        client_of(gateway).chat.completions.create(model=model_ref("box", "no-such-model"), messages=CHAT)
    assert "no remote connection lists it" in str(caught.value)


def test_an_unreachable_remote_is_a_502_in_words_and_the_local_model_serves_on(serve, gateway, model_name):
    gone = serve()
    Connections().save(Connection("gone", f"{gone.url}/v1"))
    gone.stop()
    response = httpx.get(f"{gateway.url}/v1/models", headers={"Authorization": f"Bearer {GATEWAY_KEY}"})
    assert [m["id"] for m in response.json()["data"]] == [model_name]  # left out, not an error
    with pytest.raises(openai.APIStatusError) as caught:
        client_of(gateway).chat.completions.create(model=model_ref("gone", model_name), messages=CHAT)
    assert caught.value.status_code == 502 and "'gone' cannot be used now" in str(caught.value)
    assert client_of(gateway).chat.completions.create(model=model_name, messages=CHAT, max_tokens=2).choices


def test_without_the_gateway_a_remote_reference_is_not_served(serve, remote, model_name):
    server = serve()
    assert [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]] == [model_name]
    response = httpx.post(f"{server.url}/v1/chat/completions", json={"model": remote, "messages": CHAT})
    assert response.status_code == 404 and "is not served here" in response.json()["error"]["message"]


def test_the_remote_engines_stop_with_the_gateway(serve, remote):
    gateway = serve(serve_remotes=True)
    client_of(gateway).chat.completions.create(model=remote, messages=CHAT, max_tokens=2)
    pool = gateway.app.state.openai.pool
    engine, = pool.loaded_engines()
    pid = engine.client.pid
    gateway.stop()
    assert not engine.client.alive and pid is not None and pool.loaded_engines() == []
