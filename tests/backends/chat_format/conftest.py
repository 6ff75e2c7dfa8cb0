from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def llama_cpp_templates(llama_cpp_sources) -> dict[str, str]:
    """llama.cpp's real chat templates by file name (tests/fixtures/llama_cpp_sources.py)."""
    return llama_cpp_sources.templates
