"""Trial before a runtime becomes the default (app/runtimes/trials.py): a rebuilt runtime keeps the build it replaced,
and a model loads on the new build only once its trial load and warm-up there succeeded; a build that crashes fails
the trial, the model loads on the previous build with a sentence, and `quantdesk runtime rollback` puts it back. Real
runtime folders (copies of the environment's llama_cpp), real engine hosts, a real crash (a build whose llama_cpp
aborts when imported)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.datatypes import LoadSettings
from app.engine.client import EngineClient
from app.runtimes import catalog, trials
from tests.fixtures.runtimes import install_copy

pytestmark = pytest.mark.engine
ROOT = Path(__file__).resolve().parents[2]
NAME = "cpu-next"
SETTINGS = LoadSettings(n_ctx=256, gpu_layers=0)


def rebuilt(environment_site: Path, *, crashing: bool) -> Path:
    """NAME built once, then built again: the first build is kept as the previous one. ``crashing``: the new build's
    llama_cpp aborts the process when imported, as a build for the wrong CPU dies of SIGILL."""
    trials.keep_previous(install_copy(environment_site, NAME, "cpu"))
    folder = install_copy(environment_site, NAME, "cpu", link=False)
    if crashing:
        init = folder / "site" / "llama_cpp" / "__init__.py"
        init.write_text("import os\nos.abort()\n" + init.read_text())
    return folder


def test_a_new_build_that_crashes_fails_its_trial_and_the_model_loads_on_the_previous_one(environment_site,
                                                                                         tiny_models):
    folder = rebuilt(environment_site, crashing=True)
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q8_0, SETTINGS, runtime=NAME)
        assert "failed its trial with this model" in loaded.notice and "crashed (SIGABRT)" in loaded.notice
        assert "quantdesk runtime rollback cpu-next" in loaded.notice
        assert loaded.details["llama_cpp_path"].startswith(str(catalog.previous_folder(NAME)))
    [record] = json.loads((folder / trials.TRIALS).read_text()).values()
    assert record["ok"] is False and "SIGABRT" in record["reason"]
    # The next load does not try the failed build again: straight to the previous one, saying so.
    with EngineClient() as client:
        again = client.load(tiny_models.gguf_q8_0, SETTINGS, runtime=NAME)
        assert again.notice.startswith("This model loads on the cpu-next runtime's previous build")
        assert again.details["llama_cpp_path"].startswith(str(catalog.previous_folder(NAME)))

    # Rollback, as a command: the previous build is the runtime again, the crashing one kept as the previous.
    done = subprocess.run([sys.executable, "-m", "app", "runtime", "rollback", NAME], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0 and "previous build again" in done.stdout, done.stderr
    assert "os.abort()" in (catalog.previous_folder(NAME) / "site" / "llama_cpp" / "__init__.py").read_text()
    assert "os.abort()" not in (folder / "site" / "llama_cpp" / "__init__.py").read_text()


def test_a_new_build_that_works_passes_its_trial_once(environment_site, tiny_models):
    folder = rebuilt(environment_site, crashing=False)
    assert trials.on_trial(NAME, tiny_models.gguf_q8_0) is not None
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q8_0, SETTINGS, runtime=NAME)
        assert loaded.notice == "" and loaded.details["llama_cpp_path"].startswith(str(folder))
    assert trials.on_trial(NAME, tiny_models.gguf_q8_0) is None  # passed: the new build is this model's now
    assert trials.on_trial(NAME, tiny_models.gguf_q4_k_m) is not None  # another model has its own trial


def test_a_build_of_another_llama_cpp_python_version_is_usable_only_with_a_previous_build(environment_site):
    folder = install_copy(environment_site, NAME, "cpu")
    manifest = json.loads((folder / catalog.MANIFEST).read_text())
    (folder / catalog.MANIFEST).write_text(json.dumps({**manifest, "llama_cpp_python": "9.9.9"}))
    assert "rebuild it" in catalog.find(NAME).problem  # nothing to fall back on
    trials.keep_previous(folder)
    install_copy(environment_site, NAME, "cpu")
    newer = catalog.user_dir() / NAME / catalog.MANIFEST
    newer.write_text(json.dumps({**manifest, "llama_cpp_python": "9.9.9"}))
    assert catalog.find(NAME).problem == ""  # on trial, with the build before it to fall back on


def test_rollback_without_a_previous_build_is_a_sentence(environment_site):
    install_copy(environment_site, NAME, "cpu")
    with pytest.raises(trials.RollbackError, match="has no previous build"):
        trials.rollback(NAME)
