from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

# Read at import, before the autouse fixture points the user folders into a temp dir: the source archive the app's
# runtime builds fetch (app/runtimes/build.py), or the one named by QUANTDESK_TEST_LLAMA_SDIST.
_SDIST_CACHE = Path(platformdirs.user_cache_dir("QuantDesk", appauthor=False)) / "runtimes" / "sdist"


def find_sdist() -> Path | None:
    named = os.environ.get("QUANTDESK_TEST_LLAMA_SDIST")
    if named:
        return Path(named)
    from importlib.metadata import PackageNotFoundError, version

    try:
        wanted = version("llama_cpp_python")
    except PackageNotFoundError:
        return None
    found = _SDIST_CACHE / f"llama_cpp_python-{wanted}.tar.gz"
    return found if found.is_file() else None


@pytest.fixture(scope="session")
def llama_cpp_templates() -> dict[str, str]:
    from tests.backends.chat_format.llama_cpp_cases import templates_from_sdist

    sdist = find_sdist()
    if sdist is None:
        pytest.skip("llama-cpp-python's source archive is not in the runtime cache: pip download --no-deps "
                    "--no-binary :all: llama-cpp-python==VERSION -d ~/.cache/QuantDesk/runtimes/sdist (or name it "
                    "with QUANTDESK_TEST_LLAMA_SDIST)")
    return templates_from_sdist(sdist)
