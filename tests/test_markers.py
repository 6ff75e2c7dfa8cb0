"""The `engine` marker holds what it says (tests/conftest.py): the quick run, `-m "not engine"`, starts no engine host,
and a test that would start one unmarked fails saying how to mark it."""

from __future__ import annotations

import pytest

from app.engine.client import EngineClient


def test_an_unmarked_test_cannot_start_an_engine_host(request):
    assert request.node.get_closest_marker("engine") is None
    with pytest.raises(AssertionError, match=r"starts an engine host: mark it `engine`"):
        EngineClient().start()


def test_a_test_with_a_model_fixture_is_marked_engine(request, tiny_models):
    assert request.node.get_closest_marker("engine") is not None
