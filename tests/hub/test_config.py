"""Hub settings and the online check, read at call time."""

from __future__ import annotations

import logging

import pytest

from app.hub.errors import OfflineError
from app.hub.search import search_models


def test_a_hub_that_cannot_be_found_fails_at_once_with_a_sentence(monkeypatch, caplog):
    # ".invalid" never resolves (RFC 6761): the answer a machine without a network gets for any name.
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.quantdesk.invalid")
    with caplog.at_level(logging.WARNING), pytest.raises(OfflineError) as refused:
        search_models("llama")
    assert str(refused.value).startswith("Cannot search the Hub: hub.quantdesk.invalid cannot be found, so this "
                                         "computer seems to be offline.")
    assert "HF_HUB_OFFLINE=1" in refused.value.hint
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]  # no backoff over a dead network


def test_a_hub_that_resolves_is_used(hub_server, hub_env):
    hub_server.add_repo("acme/tiny-GGUF", files={"tiny-Q4_K_M.gguf": b"GGUF" + bytes(60)}, tags=["gguf"])
    assert [m.repo_id for m in search_models("tiny")] == ["acme/tiny-GGUF"]


def test_a_hub_that_does_not_answer_fails_at_once_with_a_sentence(monkeypatch, caplog):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens here
    with caplog.at_level(logging.WARNING), pytest.raises(OfflineError) as refused:
        search_models("llama")
    assert str(refused.value).startswith("Cannot reach http://127.0.0.1:9 to search the Hub: Connection refused.")
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


def test_behind_a_proxy_the_hub_is_left_to_huggingface_hub(monkeypatch):
    from app.hub.config import require_online

    monkeypatch.setenv("HF_ENDPOINT", "http://hub.quantdesk.invalid")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    require_online("search the Hub")  # no local verdict: the proxy may well reach it


def test_offline_names_the_variable_that_set_it(monkeypatch):
    from app.hub.config import require_online

    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    with pytest.raises(OfflineError) as refused:
        require_online("search the Hub")
    assert "(TRANSFORMERS_OFFLINE is set)" in str(refused.value) and refused.value.hint.startswith(
        "unset TRANSFORMERS_OFFLINE to go online")
