"""Session-wide test setup: offscreen Qt, and every test isolated from the user's real folders and tokens."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, settings

from app import settings as app_settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Property-based tests (hypothesis): a small fixed budget by default, so CI time stays the same run to run and
# a failure reproduces; HYPOTHESIS_PROFILE=fuzz for a long local hunt (README, "Tests and benchmarks").
# No deadline: these machines are shared and noisy; the readers bound their own work instead.
_SLOW_INPUTS = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=120, derandomize=True, database=None, deadline=None,
                          suppress_health_check=_SLOW_INPUTS)
settings.register_profile("fuzz", max_examples=20_000, deadline=None, suppress_health_check=_SLOW_INPUTS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

pytest_plugins = ["pytester", "tests.fixtures.first_use", "tests.fixtures.leaks", "tests.fixtures.models", "tests.fixtures.hub_server",
                  "tests.fixtures.openai_faults", "tests.fixtures.runtimes", "tests.fixtures.limits", "tests.fixtures.xvfb",
                  "tests.fixtures.llama_cpp_sources", "tests.fixtures.llama_perplexity",
                  "tests.fixtures.real_models", "tests.fixtures.portable_runtime"]


@pytest.fixture(autouse=True)
def isolated_user_state(tmp_path_factory, monkeypatch):
    """Point every platformdirs folder, the HF cache and the models folder into a fresh temp dir,
    and drop any Hub token, so no test reads or writes the real user's state."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"), ("HF_HOME", "hf")):
        monkeypatch.setenv(var, str(home / sub))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                "QUANTDESK_MODELS_DIR"):
        monkeypatch.delenv(var, raising=False)
    # Whether the app itself turned offline mode on is process state: a test whose settings said offline must not
    # make the next one's setting switch off a variable that test set itself.
    monkeypatch.setattr(app_settings, "_set_by_app", False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # This machine is probed once per process (app/machine.py): each test starts without the probe an earlier
    # test's isolated folders (its runtimes) made.
    from app import machine

    monkeypatch.setattr(machine, "_profile", None)
    monkeypatch.setattr(machine, "_probes", {})
    return home


# The `engine` marker: a test that starts an engine host (a child process holding a model). It is given here, by the
# fixtures a test uses: every fixture that makes or fetches a model (tests/fixtures/models.py's tiny_*, the real models)
# and the real window. `-m "not engine"` is the quick run (README); what it selects may not start a host, which
# `engine_marker_holds` enforces, so the marker cannot drift from the truth: a test starting a host without such a
# fixture fails there, saying to mark it.
ENGINE_FIXTURES = re.compile(r"^(tiny_(?!hub).*|smollm2_gguf|gemma3_gguf|real_window|portable_runtime|built_portable_runtime)$")


def pytest_collection_modifyitems(config, items):
    for item in items:
        # A fixture named by a parameter (request.getfixturevalue) counts as one the test uses.
        params = [v for v in getattr(getattr(item, "callspec", None), "params", {}).values() if isinstance(v, str)]
        if any(ENGINE_FIXTURES.match(name) for name in [*getattr(item, "fixturenames", ()), *params]):
            item.add_marker(pytest.mark.engine)


@pytest.fixture(autouse=True)
def engine_marker_holds(request, monkeypatch):
    if request.node.get_closest_marker("engine") is not None:
        return
    from app.engine.client import EngineClient

    def refuse(self):
        raise AssertionError(f"{request.node.nodeid} starts an engine host: mark it `engine` (pytestmark) or give it "
                             "a model fixture (tests/conftest.py ENGINE_FIXTURES)")

    monkeypatch.setattr(EngineClient, "start", refuse)
