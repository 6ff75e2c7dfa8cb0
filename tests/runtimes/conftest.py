"""Runtime folders for the tests: copies of a real runtime laid out as `quantdesk runtime build` lays
them out, in the test's own (isolated) user data folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app.runtimes import catalog


def install_copy(source_site: Path, name: str, backend: str, *, link: bool = True) -> Path:
    """A runtime folder NAME in the user's runtimes folder whose site/ holds the llama_cpp package from
    ``source_site``. Files are hard links where the file system allows (deleting one in the copy leaves
    the original alone), else copies."""
    folder = catalog.user_dir() / name
    target = folder / "site" / "llama_cpp"
    copy = shutil.copy2
    if link:
        def copy(src, dst):  # noqa: F811 - hard link, or a real copy across file systems
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    shutil.copytree(source_site / "llama_cpp", target, copy_function=copy, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / catalog.MANIFEST).write_text(json.dumps({"backend": backend, "llama_cpp_python": catalog.app_version(),
                                                       "cmake_args": "", "built_at": "2026-11-24T00:00:00+00:00"}))
    return folder


@pytest.fixture
def environment_site() -> Path:
    """The folder holding the app environment's own llama_cpp package."""
    runtime = catalog.environment_runtime()
    if runtime is None:
        pytest.skip("llama-cpp-python is not installed in this environment: pip install -e '.[llama]'")
    return runtime.lib_dir.parent.parent
