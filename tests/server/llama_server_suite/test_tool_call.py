# Ported from ggml-org/llama.cpp tools/server/tests/unit/test_tool_call.py at
# 0c1e57098bba43ac29e6e3b677cdceebdd22334f (vendored by llama-cpp-python 0.3.36); MIT License, Copyright (c) 2023-2026
# The ggml authors. Test names kept. Upstream runs these on stories260K with one of llama.cpp's template files
# (--chat-template-file); QuantDesk renders the model's own template, so they run on the tiny model with Qwen 2.5's
# tool-declaring template (tests/fixtures/models.build_tool_model). The real-model tests (test_weather,
# test_calc_result, test_thoughts, test_hello_world, *_real_model, *_slow) download 1-8B models: left out, see
# README.md; tests/server/test_tools.py and tests/backends/chat_format cover the syntaxes. Upstream's
# test_completion_with_required_tool_tiny_* are commented out there (PR #22654) and stay out here: see README.md for
# what they show on the tiny model.
from __future__ import annotations

from enum import Enum

import pytest

from tests.server.llama_server_suite.utils import ServerPreset, ServerProcess

server: ServerProcess

TIMEOUT_HTTP_REQUEST = 60


@pytest.fixture(autouse=True)
def create_server():
    global server
    server = ServerPreset.tinyllama2()
    server.model_alias = "tinyllama-2-tool-call"
    server.n_slots = 1
    server.n_ctx = 8192
    server.n_batch = 2048


class CompletionMode(Enum):
    NORMAL = "normal"
    STREAMED = "streamed"


TEST_TOOL = {
    "type": "function",
    "function": {
        "name": "test",
        "description": "",
        "parameters": {
            "type": "object",
            "properties": {"success": {"type": "boolean", "const": True}},
            "required": ["success"],
        },
    },
}

PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Runs code in an ipython interpreter and returns the result of the execution after 60 seconds.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to run in the ipython interpreter."}},
            "required": ["code"],
        },
    },
}


def do_test_completion_without_tool_call(server: ServerProcess, n_predict: int, tools: list[dict],
                                         tool_choice: str | None, **kwargs):
    body = server.make_any_request("POST", "/v1/chat/completions", data={
        "max_tokens": n_predict,
        "messages": [
            {"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": "say hello world with python"},
        ],
        "tools": tools if tools else None,
        "tool_choice": tool_choice,
        **kwargs,
    }, timeout=TIMEOUT_HTTP_REQUEST)
    choice = body["choices"][0]
    assert choice["message"].get("tool_calls") is None, f'Expected no tool call in {choice["message"]}'


@pytest.mark.parametrize("stream", [CompletionMode.NORMAL, CompletionMode.STREAMED])
@pytest.mark.parametrize("template_name,n_predict,tools,tool_choice", [
    ("Qwen2.5", 128, [], None),
    ("Qwen2.5", 128, [TEST_TOOL], None),
    ("Qwen2.5", 128, [PYTHON_TOOL], 'none'),
])
def test_completion_without_tool_call_fast(template_name: str, n_predict: int, tools: list[dict],
                                           tool_choice: str | None, stream: CompletionMode):
    global server
    server.n_predict = n_predict
    server.jinja = True
    server.start()
    # (include_usage: upstream's server sends the usage chunk unasked, its helper checks it)
    extra = {"stream_options": {"include_usage": True}} if stream == CompletionMode.STREAMED else {}
    do_test_completion_without_tool_call(server, n_predict, tools, tool_choice,
                                         stream=stream == CompletionMode.STREAMED, **extra)
