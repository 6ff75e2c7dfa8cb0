"""One turn for every face (app/engine/turn.py, app/server/turns.py): each chat entry of the server (chat
completions, Anthropic's Messages, the Responses API, the MCP ``chat`` tool) takes the model's preset (its sampling
between the request's values and the model's, its system prompt where the request has none) and the overflow policy
(the request's, else the server's). On the real engine and server, with the official openai, anthropic and mcp
clients."""

from __future__ import annotations

import anyio
import httpx

from app.datatypes import Message, SamplingSettings
from app.server.app import model_id
from tests.server.conftest import openai_on
from tests.server.test_mcp import error_text, mcp_session, structured

ASK = [{"role": "user", "content": "Hi"}]
COOK = "You answer as a ship's cook."


class Recording:
    """The real engine, with each generation's messages and sampling written down."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self.sent: list[tuple[list[Message], SamplingSettings]] = []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def generate(self, messages, sampling=None, *args, **kwargs):
        self.sent.append((list(messages), sampling))
        return self._engine.generate(messages, sampling, *args, **kwargs)


def _knobs(sampling: SamplingSettings) -> tuple:
    return sampling.temperature, sampling.top_k


def _mcp_chat(url: str, arguments: dict) -> object:
    async def call():
        async with mcp_session(url) as session:
            return await session.call_tool("chat", arguments)

    return anyio.run(call)


def test_every_chat_entry_takes_the_models_preset_sampling_and_system_prompt(engine, serve):
    import anthropic as anthropic_sdk

    from app.hub import presets

    presets.update(engine.loaded.model_path, sampling={"temperature": 0.25, "top_k": 7}, system_prompt=COOK)
    recording = Recording(engine)
    server = serve(recording)
    oai = openai_on(server)
    name = model_id(engine.loaded.model_path)
    default_top_k = SamplingSettings().top_k
    assert default_top_k != 7

    def last() -> tuple[list[Message], SamplingSettings]:
        return recording.sent[-1]

    oai.chat.completions.create(model=name, messages=ASK, max_tokens=2)
    messages, sampling = last()
    assert messages == [Message("system", COOK), Message("user", "Hi")] and _knobs(sampling) == (0.25, 7)

    oai.responses.create(model=name, input="Hi", max_output_tokens=2)
    messages, sampling = last()
    assert messages == [Message("system", COOK), Message("user", "Hi")] and _knobs(sampling) == (0.25, 7)

    with anthropic_sdk.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as claude:
        claude.messages.create(model=name, max_tokens=2, messages=ASK)
    messages, sampling = last()
    assert messages == [Message("system", COOK), Message("user", "Hi")] and _knobs(sampling) == (0.25, 7)

    structured(_mcp_chat(server.url, {"model": name, "max_tokens": 2, "messages": ASK}))
    messages, sampling = last()
    assert messages == [Message("system", COOK), Message("user", "Hi")] and _knobs(sampling) == (0.25, 7)

    # The request's own system prompt and values win over the preset's, which fills only what they leave out
    oai.responses.create(model=name, input="Hi", instructions="Be brief.", temperature=1.3, max_output_tokens=2)
    messages, sampling = last()
    assert messages == [Message("system", "Be brief."), Message("user", "Hi")] and _knobs(sampling) == (1.3, 7)
    structured(_mcp_chat(server.url, {"model": name, "max_tokens": 2, "temperature": 0.5, "messages": [
        {"role": "system", "content": "Be brief."}, *ASK]}))
    messages, sampling = last()
    assert messages == [Message("system", "Be brief."), Message("user", "Hi")] and _knobs(sampling) == (0.5, 7)

    # Without a preset: the model's own and QuantDesk's, and no system prompt
    presets.remove(engine.loaded.model_path)
    oai.responses.create(model=name, input="Hi", max_output_tokens=2)
    messages, sampling = last()
    assert messages == [Message("user", "Hi")] and sampling.top_k == default_top_k


def _long_conversation(turns: int = 30) -> list[dict]:
    out = []
    for i in range(turns):
        out += [{"role": "user", "content": f"Question number {i}: what comes after {i} apples and {i + 1} pears?"},
                {"role": "assistant", "content": f"After {i} apples and {i + 1} pears come {i + 2} plums, surely."}]
    return out + [{"role": "user", "content": "And now?"}]


def test_mcp_chat_and_responses_apply_the_overflow_policy(engine, serve):
    conversation = _long_conversation()
    name = model_id(engine.loaded.model_path)
    server = serve(overflow="drop-oldest")  # the server's policy: a call that names none follows it
    said = structured(_mcp_chat(server.url, {"model": name, "max_tokens": 8, "messages": conversation}))
    assert said["overflow"] == "drop-oldest" and said["context_dropped"] > 0 and said["usage"]["prompt_tokens"] < 512
    assert said["usage"]["completion_tokens"] > 0

    stopping = serve()  # "stop": a conversation that does not fit is refused, unless the call names a policy
    refused = error_text(_mcp_chat(stopping.url, {"model": name, "max_tokens": 8, "messages": conversation}))
    assert "context" in refused
    said = structured(_mcp_chat(stopping.url, {"model": name, "max_tokens": 8, "messages": conversation,
                                                "overflow": "truncate-middle"}))
    assert said["overflow"] == "truncate-middle" and said["context_dropped"] > 0

    # The Responses API: OpenAI's truncation "auto" drops the oldest items; the quantdesk header names the policy
    body = {"model": name, "input": conversation, "max_output_tokens": 8, "store": False}
    with httpx.Client(base_url=stopping.url, timeout=120) as http:
        assert http.post("/v1/responses", json=body).status_code == 400
        answered = http.post("/v1/responses", json={**body, "truncation": "auto"})
        assert answered.status_code == 200, answered.text
        response = answered.json()
        assert response["truncation"] == "auto" and response["status"] in ("completed", "incomplete")
        dropped = response["quantdesk"]["context_dropped"]
        assert dropped > 0 and answered.headers["x-quantdesk-context-dropped"] == str(dropped)
        assert answered.headers["x-quantdesk-overflow"] == "drop-oldest"
        assert response["usage"]["input_tokens"] < 512
        asked = http.post("/v1/responses", json={**body, "quantdesk": {"overflow": "compact"}}).json()
        assert asked["quantdesk"]["overflow"] == "compact" and asked["quantdesk"]["context_dropped"] > 0
