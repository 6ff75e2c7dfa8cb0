"""``quantdesk mcp serve``: a real child process driven by the official ``mcp`` SDK's stdio client, as Claude Desktop,
LM Studio or Cursor start it; the library, the Hub stand-in and the tiny llama.cpp models are real."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from tests.server.test_pool import library  # noqa: F401 - the fixture: three models in a fresh library

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/tiny-GGUF"


@contextlib.asynccontextmanager
async def stdio_session(*options: str) -> AsyncIterator:
    """``python -m app mcp serve OPTIONS`` as a child, with this test's environment (its isolated folders, library and
    Hub endpoint), and the SDK's client session on its stdin/stdout, initialized."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "app", "mcp", "serve", "--ctx", "512", *options],
                                   env=dict(os.environ), cwd=ROOT)
    with open(os.devnull, "w") as quiet:  # the child's stderr (log lines) is not the test's
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "quantdesk" and init.instructions
            yield session


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_an_agent_asks_the_machine_the_library_fit_recommend_and_chats_and_benches(library, tiny_models,  # noqa: F811
                                                                                   hub_env):
    hub_env.add_repo(REPO, {"tiny-Q8_0.gguf": tiny_models.gguf_q8_0, "tiny-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                     tags=["gguf"])

    async def agent() -> None:
        async with stdio_session() as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"hardware", "library", "fit", "recommend", "search_hub", "chat", "complete",
                                  "bench"}
            assert all(t.input_schema and t.output_schema for t in tools.values())

            assert structured(await session.call_tool("hardware", {}))["cpu"]
            listed = structured(await session.call_tool("library", {}))
            assert {m["model"] for m in listed["models"]} == set(library)

            fit = structured(await session.call_tool("fit", {"model": str(tiny_models.gguf_q8_0), "ctx": 512}))
            assert fit["quant"] == "Q8_0" and fit["n_ctx"] == 512 and fit["devices"]

            # A repo on the Hub stand-in: every quant a candidate, read by its headers (nothing downloaded)
            advice = structured(await session.call_tool("recommend", {"models": [REPO], "ctx": 512}))
            assert {c["quant"] for c in advice["candidates"]} == {"Q8_0", "Q4_K_M"}
            assert advice["best"]["quant"] == "Q8_0" and advice["best"]["reason"]
            assert structured(await session.call_tool("library", {}))["models"] == listed["models"]

            said = structured(await session.call_tool("chat", {
                "model": "tiny-llama-Q4_K_M", "max_tokens": 8,
                "messages": [{"role": "user", "content": "Name three colours."}]}))
            assert said["model"] == "tiny-llama-Q4_K_M" and said["text"]
            assert said["usage"]["completion_tokens"] > 0

            steps: list[tuple[float, float | None, str | None]] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                steps.append((done, total, message))

            bench = structured(await session.call_tool("bench", {"models": ["tiny-llama-Q4_K_M"], "gen_tokens": 4,
                                                                 "prompt_tokens": 16}, progress_callback=progress))
            assert steps and all(total and 0 <= done < total for done, total, _ in steps)
            assert all(message.startswith("tiny-llama-Q4_K_M") for *_, message in steps)
            row, = bench["variants"]
            assert row["model"] == "tiny-llama-Q4_K_M" and not row["error"]
            assert row["decode_tps"] > 0 and row["load_ms"] > 0

            refused = await session.call_tool("pull", {"repo": REPO})
            assert refused.is_error and "--allow-downloads" in refused.content[0].text

    anyio.run(agent)


def test_with_downloads_allowed_an_agent_pulls_a_model_and_chats_with_it(hub_env, tiny_models, tmp_path,
                                                                         monkeypatch):
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    hub_env.add_repo(REPO, {"tiny-Q8_0.gguf": tiny_models.gguf_q8_0, "tiny-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                     tags=["gguf"])

    async def agent() -> None:
        async with stdio_session("--allow-downloads") as session:
            assert "pull" in {t.name for t in (await session.list_tools()).tools}
            found = structured(await session.call_tool("search_hub", {"query": "tiny"}))
            assert [r["repo_id"] for r in found["results"]] == [REPO]
            heard: list[tuple[float, float | None, str | None]] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                heard.append((done, total, message))

            pulled = structured(await session.call_tool("pull", {"repo": REPO, "quant": "Q4_K_M"},
                                                        progress_callback=progress))
            assert pulled["model"] == "tiny-Q4_K_M" and pulled["files"] == ["tiny-Q4_K_M.gguf"]
            assert Path(pulled["path"]).is_file()
            size = Path(pulled["path"]).stat().st_size
            assert heard[0][0] == 0 and heard[-1][:2] == (size, size)  # from nothing to the whole file, forward
            assert [h[0] for h in heard] == sorted({h[0] for h in heard}) and heard[-1][2].startswith("done")
            said = structured(await session.call_tool("chat", {
                "model": pulled["model"], "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]}))
            assert said["model"] == "tiny-Q4_K_M" and said["usage"]["completion_tokens"] > 0

    anyio.run(agent)


def test_bad_settings_are_refused_in_words_before_serving(tmp_path):
    import subprocess

    run = subprocess.run([sys.executable, "-m", "app", "mcp", "serve", "--idle-ttl", "0"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode != 0 and run.stdout == ""
    assert "--idle-ttl must be more than 0 seconds, not 0" in run.stderr

