"""The part of llama-server's ``tools/server/tests/utils.py`` the ported tests use, over ``quantdesk serve``.

Upstream: ggml-org/llama.cpp at 0c1e57098bba43ac29e6e3b677cdceebdd22334f (the llama.cpp vendored by
llama-cpp-python 0.3.36), ``tools/server/tests/utils.py``. Its ``ServerProcess`` starts the ``llama-server`` binary
on a model downloaded from the Hub; here ``start()`` builds the server ``quantdesk serve`` runs (its argument parser
and ``serve_app``, on a thread, as tests/server/test_agent_clients.py does) over an engine host the suite's conftest
loaded once with a tiny test model. llama-server serves its one model under any name a request gives, so the
server runs with ``--serve-any-model``; its other settings that have a ``quantdesk serve`` twin (``api_key``,
``model_alias``, ``cors_origins``) are passed on, the rest (slots, batch sizes, a server-wide ``n_predict``) have
none and are kept only so the tests' assignments stay as upstream wrote them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from re import RegexFlag
from typing import Any

import httpx

from app.cli import build_parser
from app.commands.server import serve_app
from app.datatypes import LoadSettings
from app.server.thread import ServerThread

DEFAULT_REQUEST_TIMEOUT = 600
# The engine hosts the suite's conftest loads: "chat" (the tiny model with Qwen 2.5's tool-declaring template),
# "embedding" (the same weights declaring mean pooling) and "rerank" (a tiny Qwen3-Reranker: rank pooling).
ENGINES: dict[str, Any] = {}


class ServerResponse:
    headers: httpx.Headers
    status_code: int
    body: dict | Any


class ServerError(Exception):
    def __init__(self, code, body):
        self.code = code
        self.body = body


class ServerProcess:
    # as upstream's defaults; only those with a quantdesk serve twin take effect
    debug: bool = False
    server_host: str = "127.0.0.1"
    server_port: int = 0
    model_alias: str | None = None
    temperature: float = 0.8
    seed: int = 42
    api_key: str | None = None
    cors_origins: str | None = None
    n_ctx: int | None = None
    n_batch: int | None = None
    n_slots: int | None = None
    n_predict: int | None = None
    jinja: bool | None = None
    chat_template: str | None = None
    offline: bool = True

    def __init__(self, engine: str = "chat") -> None:
        self.engine = engine
        self._thread: ServerThread | None = None

    def start(self) -> None:
        client = ENGINES[self.engine]
        argv = ["serve", "--model", client.loaded.model_path, "--serve-any-model"]
        if self.model_alias:
            argv += ["--alias", self.model_alias]
        for origin in (self.cors_origins or "").split(","):
            if origin.strip():
                argv += ["--allow-origin", origin.strip()]
        args = build_parser().parse_args(argv)
        self._thread = ServerThread(serve_app(args, client, self.api_key, LoadSettings())).start()
        self.server_port = int(self._thread.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def make_url(self, path: str) -> str:
        return f"http://{self.server_host}:{self.server_port}{path}"

    def make_request(self, method: str, path: str, data: dict | Any | None = None, headers: dict | None = None,
                     timeout: float | None = DEFAULT_REQUEST_TIMEOUT) -> ServerResponse:
        headers = {k: v for k, v in (headers or {}).items() if v is not None}
        response = httpx.request(method, self.make_url(path), headers=headers, timeout=timeout,
                                 json=data if method == "POST" else None)
        result = ServerResponse()
        result.headers = response.headers  # case-insensitive, as requests' are
        result.status_code = response.status_code
        result.body = response.json() if method != "OPTIONS" and response.content else None
        return result

    def make_stream_request(self, method: str, path: str, data: dict | None = None,
                            headers: dict | None = None) -> Iterator[dict]:
        if method != "POST":
            raise ValueError(f"Unimplemented method: {method}")
        headers = {k: v for k, v in (headers or {}).items() if v is not None}
        with httpx.stream(method, self.make_url(path), json=data, headers=headers,
                          timeout=DEFAULT_REQUEST_TIMEOUT) as response:
            if response.status_code != 200:
                response.read()
                raise ServerError(response.status_code, response.json())
            for line in response.iter_lines():
                if "[DONE]" in line:
                    break
                if line.startswith("data: "):
                    yield json.loads(line[6:])

    def make_any_request(self, method: str, path: str, data: dict | None = None, headers: dict | None = None,
                         timeout: float | None = DEFAULT_REQUEST_TIMEOUT) -> dict:
        """A chat completion whole, or streamed and put back together as upstream's helper does (its checks kept: a
        tool call's first delta has its id, type and name; no empty text deltas, but for the opening chunk, whose
        ``content`` is OpenAI's "" here where llama-server sends null)."""
        data = data or {}
        if not data.get("stream", False):
            response = self.make_request(method, path, data, headers, timeout=timeout)
            assert response.status_code == 200, f"Server returned error: {response.status_code}"
            return response.body
        content: list[str] = []
        reasoning_content: list[str] = []
        tool_calls: list[dict] = []
        finish_reason = None
        for i, chunk in enumerate(self.make_stream_request(method, path, data, headers)):
            if chunk["choices"]:
                assert len(chunk["choices"]) == 1, f'Expected 1 choice, got {len(chunk["choices"])}'
                choice = chunk["choices"][0]
                if choice["delta"].get("content") is not None and not (i == 0 and "role" in choice["delta"]):
                    assert len(choice["delta"]["content"]) > 0, "Expected non empty content delta!"
                    content.append(choice["delta"]["content"])
                if choice["delta"].get("reasoning_content") is not None:
                    assert len(choice["delta"]["reasoning_content"]) > 0, "Expected non empty reasoning_content delta!"
                    reasoning_content.append(choice["delta"]["reasoning_content"])
                if choice.get("finish_reason") is not None:
                    finish_reason = choice["finish_reason"]
                for tc in choice["delta"].get("tool_calls", []):
                    if "function" not in tc:
                        raise ValueError(f"Expected function type, got {tc['type']}")
                    if tc["index"] >= len(tool_calls):
                        assert "id" in tc
                        assert tc.get("type") == "function"
                        assert "function" in tc and "name" in tc["function"] and len(tc["function"]["name"]) > 0
                        tool_calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                    tool_call = tool_calls[tc["index"]]
                    if tc.get("id") is not None:
                        tool_call["id"] = tc["id"]
                    fct = tc["function"]
                    assert "id" not in fct, f"Function call should not have id: {fct}"
                    if fct.get("name") is not None:
                        tool_call["function"]["name"] += fct["name"]
                    if fct.get("arguments") is not None:
                        tool_call["function"]["arguments"] += fct["arguments"]
            else:
                assert "usage" in chunk and "timings" in chunk, chunk
        return {"choices": [{"index": 0, "finish_reason": finish_reason,
                             "message": {"role": "assistant", "content": "".join(content) if content else None,
                                         "reasoning_content": "".join(reasoning_content) if reasoning_content
                                         else None,
                                         "tool_calls": tool_calls or None}}]}


_started: list[ServerProcess] = []


class ServerPreset:
    @staticmethod
    def tinyllama2() -> ServerProcess:
        server = _track(ServerProcess("chat"))
        server.model_alias = "tinyllama-2"
        server.n_ctx = 512
        server.n_batch = 32
        server.n_slots = 2
        server.n_predict = 64
        server.seed = 42
        return server

    @staticmethod
    def bert_bge_small() -> ServerProcess:
        server = _track(ServerProcess("embedding"))
        server.model_alias = "bert-bge-small"
        server.n_ctx = 512
        server.n_slots = 2
        server.seed = 42
        return server

    @staticmethod
    def jina_reranker_tiny() -> ServerProcess:
        server = _track(ServerProcess("rerank"))
        server.model_alias = "jina-reranker"
        server.n_ctx = 512
        server.n_slots = 1
        return server


def _track(server: ServerProcess) -> ServerProcess:
    _started.append(server)
    return server


def stop_all() -> None:
    """Every server the test made, stopped (the suite's conftest calls it after each test)."""
    while _started:
        _started.pop().stop()


def match_regex(regex: str, text: str) -> bool:
    return re.compile(regex, flags=RegexFlag.IGNORECASE | RegexFlag.MULTILINE | RegexFlag.DOTALL
                      ).search(text) is not None


def parallel_function_calls(function_list: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    results: list[Any] = [None] * len(function_list)
    with ThreadPoolExecutor() as executor:
        futures = {executor.submit(func, *args): i for i, (func, args) in enumerate(function_list)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
    return results


__all__ = ["ServerError", "ServerPreset", "ServerProcess", "ServerResponse", "match_regex",
           "parallel_function_calls"]
