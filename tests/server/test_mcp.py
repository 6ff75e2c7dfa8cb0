"""QuantDesk as an MCP server at ``/mcp`` on the local server (app/server/mcp.py), driven by the official ``mcp`` SDK's
client over streamable HTTP against a real server on the tiny model; the guard checked with raw HTTP.

The stdio face (``quantdesk mcp serve``) is tests/commands/test_mcp_serve.py."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from app.datatypes import LoadSettings
from app.server.router import ServeSettings
from tests.server.conftest import N_CTX
from tests.server.test_pool import library  # noqa: F401 - the fixture: three models in a fresh library

TOOLS = {"hardware", "library", "fit", "recommend", "search_hub", "chat", "complete", "bench"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextlib.asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator:
    """The official SDK's client session on ``url``/mcp, initialized."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers or {}, timeout=httpx2.Timeout(120)) as http, \
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def structured(result) -> dict:
    """A successful call's structured result; its text block says the same."""
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error
    assert result.structured_content is None
    return result.content[0].text


def test_an_agent_lists_the_tools_reads_the_machine_and_library_fits_and_chats_with_a_library_model(
        serve, library, model_name):  # noqa: F811
    server = serve(pool=ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX)))
    router = server.app.state.openai.pool

    async def agent() -> None:
        async with mcp_session(server.url) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS  # no pull: the server was not started with downloads allowed
            for tool in tools.values():
                assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
                assert tool.description
            assert tools["chat"].input_schema["required"] == ["model", "messages"]

            machine = structured(await session.call_tool("hardware", {}))
            assert machine["cpu"] and isinstance(machine["ram_total_bytes"], int)

            listed = structured(await session.call_tool("library", {}))
            assert {m["model"] for m in listed["models"]} == set(library)
            assert listed["disk"]["models"] == len(library)

            fit = structured(await session.call_tool("fit", {"model": "tiny-llama-Q4_K_M", "ctx": 256}))
            assert fit["quant"] == "Q4_K_M" and fit["n_ctx"] == 256 and fit["verdict"] and fit["reason"]

            # A library model: loaded into the server's pool on this first call, within its budget
            said = structured(await session.call_tool("chat", {
                "model": "tiny-llama-Q4_K_M", "max_tokens": 8, "temperature": 0,
                "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]}))
            assert said["model"] == "tiny-llama-Q4_K_M" and isinstance(said["text"], str)
            assert 0 < said["usage"]["completion_tokens"] <= 8 and said["usage"]["prompt_tokens"] > 0
            assert router.loads == 1 and [m.served for m in router.loaded_engines()] == ["tiny-llama-Q4_K_M"]

            # The primary answers by its id too, and the loaded model is not loaded again
            again = structured(await session.call_tool("complete", {"model": model_name, "prompt": "Once upon",
                                                                    "max_tokens": 4}))
            assert again["model"] == model_name and again["finish_reason"] in ("stop", "length")
            structured(await session.call_tool("chat", {"model": "tiny-llama-Q4_K_M", "max_tokens": 2,
                                                        "messages": [{"role": "user", "content": "Hi"}]}))
            assert router.loads == 1

    anyio.run(agent)


def test_bad_calls_are_tool_errors_in_sentences_and_the_session_goes_on(serve, library):  # noqa: F811
    server = serve(pool=ServeSettings(load_on_demand=True, load=LoadSettings(n_ctx=N_CTX)))

    async def agent() -> None:
        async with mcp_session(server.url) as session:
            said = error_text(await session.call_tool("chat", {"model": "tiny-llama-Q4_K_M", "messages": "hi"}))
            assert said == "The arguments do not fit chat's input schema: messages: 'hi' is not of type 'array'."
            said = error_text(await session.call_tool("fit", {"model": "tiny-llama-Q4_K_M", "ctx": 0}))
            assert said.startswith("The arguments do not fit fit's input schema: ctx: 0 is less than the minimum")
            said = error_text(await session.call_tool("fit", {"model": "x", "colour": "red"}))
            assert "'colour' was unexpected" in said
            said = error_text(await session.call_tool("chat", {"model": "no-such-model",
                                                               "messages": [{"role": "user", "content": "Hi"}]}))
            assert said == ("the model 'no-such-model' is not served here: it is neither loaded nor in the library "
                            "(quantdesk ls)")
            said = error_text(await session.call_tool("fit", {"model": "./no/such/file.gguf"}))
            assert said.startswith("No such model file or folder: ./no/such/file.gguf.")
            said = error_text(await session.call_tool("pull", {"repo": "acme/tiny-GGUF"}))
            assert "--allow-downloads" in said
            said = error_text(await session.call_tool("hw", {}))
            assert said == "There is no tool named 'hw' here; tools/list names the tools this server has."
            said = error_text(await session.call_tool("bench", {"models": ["no-such-model"]}))
            assert said == "'no-such-model' is not in the library; `library` lists the models bench can run."
            # A prompt longer than the model's context: the engine's refusal, as the API words it
            said = error_text(await session.call_tool("complete", {"model": "tiny-llama-Q4_K_M",
                                                                   "prompt": "word " * 4000, "max_tokens": 4}))
            assert "context" in said
            assert structured(await session.call_tool("hardware", {}))["os"]  # still serving

    anyio.run(agent)


def test_the_guard_stands_before_mcp(serve):
    """/mcp is refused as every route is: a Host that is not the server's (DNS rebinding), a web page of another
    origin, a missing or wrong key; with the key, the official client works."""
    server = serve(api_key="k" * 20)
    port = server.url.rsplit(":", 1)[1]
    keyed = {**MCP_HEADERS, "Authorization": "Bearer " + "k" * 20}

    with httpx.Client(base_url=server.url, timeout=30) as http:
        answer = http.post("/mcp", json=INITIALIZE, headers={**keyed, "Host": f"evil.example:{port}"})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "host_not_allowed"
        answer = http.post("/mcp", json=INITIALIZE, headers={**keyed, "Origin": "http://evil.example"})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "origin_not_allowed"
        answer = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"
        answer = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer wrong"})
        assert answer.status_code == 401
        answer = http.get("/mcp", headers=MCP_HEADERS)
        assert answer.status_code == 401
        answer = http.post("/mcp", json=INITIALIZE, headers=keyed)  # the same request with the key passes
        assert answer.status_code == 200, answer.text

    async def agent() -> None:
        async with mcp_session(server.url, {"Authorization": "Bearer " + "k" * 20}) as session:
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS

    anyio.run(agent)

    async def keyless() -> None:
        async with mcp_session(server.url) as session:
            await session.list_tools()

    from mcp.shared.exceptions import MCPError

    with pytest.raises(ExceptionGroup) as refused:  # the SDK's client, told 401, gives up on initialize
        anyio.run(keyless)
    assert refused.group_contains(MCPError, match="Server returned an error response")


def test_pull_over_http_with_quantdesk_serve_allow_downloads(engine, hub_env, tiny_models, tmp_path, monkeypatch):
    from app.cli import build_parser
    from app.commands.server import serve_app
    from app.server.thread import ServerThread

    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    hub_env.add_repo("acme/tiny-GGUF", {"tiny-Q8_0.gguf": tiny_models.gguf_q8_0}, tags=["gguf"])
    args = build_parser().parse_args(["serve", "--model", engine.loaded.model_path, "--allow-downloads"])
    server = ServerThread(serve_app(args, engine, None, LoadSettings())).start()  # as quantdesk serve builds it

    async def agent() -> None:
        async with mcp_session(server.url) as session:
            assert "pull" in {t.name for t in (await session.list_tools()).tools}
            pulled = structured(await session.call_tool("pull", {"repo": "acme/tiny-GGUF", "quant": "Q8_0"}))
            assert pulled["model"] == "tiny-Q8_0" and pulled["files"] == ["tiny-Q8_0.gguf"]
            listed = structured(await session.call_tool("library", {}))
            assert [m["model"] for m in listed["models"]] == ["tiny-Q8_0"]
            said = error_text(await session.call_tool("pull", {"repo": "acme/no-such-repo"}))
            assert "acme/no-such-repo" in said

    try:
        anyio.run(agent)
    finally:
        server.stop()


def test_a_chat_the_agent_cancels_is_stopped_in_the_engine_and_the_session_goes_on(serve, gated, model_name):
    """The SDK's client cancels a call it gives up on (notifications/cancelled): the server stops the handler, and
    the generation it queued ends unrun instead of running on for nobody."""
    from tests.server.conftest import openai_queue, wait_until

    server = serve(gated)  # generations wait at the test's gate
    queue = openai_queue(server)
    chat = {"model": model_name, "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}

    async def agent() -> None:
        async with mcp_session(server.url) as session:
            async with anyio.create_task_group() as calls:
                calls.start_soon(session.call_tool, "chat", chat)
                await wait_until(lambda: queue.pending == 1)  # queued, held at the gate
                calls.cancel_scope.cancel()  # the agent gives up on it
            job = queue.running or queue.waiting()[0]
            await wait_until(job.cancelled.is_set)  # the server stopped the handler, and with it the job
            gated.gate.set()  # the engine, told before it ran it, skips it
            await wait_until(lambda: queue.pending == 0)
            assert [o.stop_reason for o in queue.outcomes()] == ["skipped"]
            assert structured(await session.call_tool("chat", chat))["usage"]["completion_tokens"] > 0

    anyio.run(agent)


def test_chat_and_bench_keep_to_the_memory_budget(serve, library):  # noqa: F811
    """A library model that does not fit beside what the server holds is refused with the estimate and the budget, for
    a chat (the router's refusal) and for a bench (its fresh engine would sit beside them)."""
    server = serve(pool=ServeSettings(load_on_demand=True, memory_budget_bytes=1 << 20, load=LoadSettings(n_ctx=N_CTX)))

    async def agent() -> None:
        async with mcp_session(server.url) as session:
            said = error_text(await session.call_tool("chat", {"model": "tiny-llama-F16", "max_tokens": 2,
                                                               "messages": [{"role": "user", "content": "Hi"}]}))
            assert "tiny-llama-F16.gguf needs about" in said and "the memory budget is 0.00 GiB" in said
            said = error_text(await session.call_tool("bench", {"models": ["tiny-llama-F16"]}))
            assert said.startswith("tiny-llama-F16.gguf needs about") and "is not benched now" in said

    anyio.run(agent)
