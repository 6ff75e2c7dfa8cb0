from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def llama_cpp_templates(llama_cpp_sources) -> dict[str, str]:
    """llama.cpp's real chat templates by file name (tests/fixtures/llama_cpp_sources.py)."""
    return llama_cpp_sources.templates


def pytest_terminal_summary(terminalreporter) -> None:
    """The reply corpus's pass rate per family (test_published_replies.py), where its cases ran."""
    import sys

    module = sys.modules.get("tests.backends.chat_format.test_published_replies")
    results = getattr(module, "RESULTS", None)
    if not results:
        return
    from tests.backends.chat_format.published_replies import format_rates

    terminalreporter.section("reply corpus: read as the published source expects, per family")
    for line in format_rates(results):
        terminalreporter.write_line(line)
