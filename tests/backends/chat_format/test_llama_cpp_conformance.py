"""QuantDesk's chat-format layer against llama.cpp's own chat tests (see llama_cpp_cases.py): every case is a pytest
case; the ones where QuantDesk reads a reply otherwise than llama.cpp are listed with the reason, and fail the run
the day they start passing (strict xfail)."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from tests.backends.chat_format import llama_cpp_cases

# case id -> why QuantDesk differs from llama.cpp there
KNOWN_DIFFERENCES: dict[str, str] = {}


def _params() -> list:
    out = []
    for case in llama_cpp_cases.cases():
        marks = ([pytest.mark.xfail(reason=KNOWN_DIFFERENCES[case["id"]], strict=True)]
                 if case["id"] in KNOWN_DIFFERENCES else [])
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_reads_the_reply_as_llama_cpp_does(case, llama_cpp_templates):
    outcome = llama_cpp_cases.check(case, llama_cpp_templates)
    assert outcome.passed, f"[{outcome.stage}] {outcome.detail}"


def test_the_cases_come_from_the_installed_llama_cpp_python():
    made_from = llama_cpp_cases.load()["llama_cpp_python"]
    assert made_from == version("llama_cpp_python"), (
        f"the cases were made from llama-cpp-python {made_from}; run "
        "python -m tests.backends.chat_format.extract_llama_cpp_cases to refresh them for the installed one")
