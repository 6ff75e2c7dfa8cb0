"""Fixtures the CLI tests share with the tests of the homes they face."""

from tests.models.conftest import tiny_ggufs  # noqa: F401 - a fixture: `inspect` / `fit` / `recommend` read them
from tests.server.conftest import engine, serve  # noqa: F401 - fixtures: `serve` over an engine that dies
