# Ported from ggml-org/llama.cpp tools/server/tests/unit/test_basic.py at
# 0c1e57098bba43ac29e6e3b677cdceebdd22334f (vendored by llama-cpp-python 0.3.36); MIT License, Copyright (c) 2023-2026
# The ggml authors. Test names kept. See README.md for what was left out and why (/props, /slots, the web UI,
# downloads, several addresses, tags).
from __future__ import annotations

import pytest

from tests.server.llama_server_suite.utils import ServerPreset, ServerProcess

server: ServerProcess


@pytest.fixture(autouse=True)
def create_server():
    global server
    server = ServerPreset.tinyllama2()


def test_server_start_simple():
    global server
    server.start()
    res = server.make_request("GET", "/health")
    assert res.status_code == 200


def test_server_models():
    global server
    server.start()
    res = server.make_request("GET", "/models")
    assert res.status_code == 200
    # upstream: one card, its id the alias; QuantDesk lists the model under its own id and each alias as a card of its
    # own that says whose alias it is (tests/server/test_agent_clients.py)
    ids = [card["id"] for card in res.body["data"]]
    assert len(ids) == 2 and ids[1] == server.model_alias
    assert res.body["data"][1]["meta"]["alias_of"] == ids[0]
