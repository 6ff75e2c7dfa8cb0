"""Fixtures the CLI tests share with the tests of the homes they face."""

from tests.models.conftest import tiny_ggufs  # noqa: F401 - a fixture: `inspect` / `fit` / `recommend` read them
from tests.server.conftest import engine, serve  # noqa: F401 - fixtures: `serve` over an engine that dies
from tests.hub.conftest import fast, fixed_template, gguf_repo  # noqa: F401 - fixtures: `ls --check-updates`, `update`
