"""The packaged Linux app, built from a clean clone and run in a clean, offline environment.

Slow (a PyInstaller build, a tar.gz and a .deb: minutes), so it runs only when asked:

    QUANTDESK_PACKAGING=1 .venv/bin/python -m pytest -m slow tests/packaging -s

QUANTDESK_BUILD_PYTHON=/path/to/python reuses a build interpreter that has ".[llama,packaging]"
instead of making a fresh build venv. The work is packaging/smoke_test.sh; this test runs it on
the tiny test model and keeps its report in the test output, which includes a chat through the bundled
Vulkan runtime on Mesa's lavapipe.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "smoke_test.sh"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("QUANTDESK_PACKAGING") != "1",
                       reason="packaging smoke check: set QUANTDESK_PACKAGING=1 to build and run the bundle"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the smoke check builds the Linux packages"),
]


@pytest.mark.timeout(3600)
def test_bundle_built_from_clean_clone_runs_offline(tiny_models, built_vulkan_runtime) -> None:
    missing = [tool for tool in ("git", "dpkg-deb", "tar") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    # The test's own interpreter checks the JSON the bundle prints (python3 in the script).
    env = {**os.environ, "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))}
    # The isolation fixture moved XDG_CACHE_HOME, and with it pip's cache: the build venv would then
    # compile llama-cpp-python from source again (minutes). pip's real cache is a build cache, not
    # user state, so the build may use it.
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    # The package carries the Vulkan runtime `quantdesk runtime build vulkan` made for this machine (a fresh
    # compile would take 15+ minutes); its chat runs on Mesa's lavapipe.
    env["QUANTDESK_VULKAN_RUNTIME"] = str(built_vulkan_runtime)
    result = subprocess.run(["bash", str(SCRIPT), "--model", str(tiny_models.gguf_q4_k_m)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3500)
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "SMOKE OK" in result.stdout
    assert "quantdesk chat through the Vulkan runtime, lavapipe as the GPU" in result.stdout
    assert "Vulkan runtime on lavapipe skipped" not in result.stdout
