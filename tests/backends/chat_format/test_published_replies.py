"""The reply corpus of QuantDesk's own (published_replies.py, data/reply_corpus/): every published reply read by the
engine host's reader with its family's template gives the message its source expects; the ones QuantDesk does not
read so yet are strict xfails saying why. The pass rate per family is printed in the terminal summary."""

from __future__ import annotations

import pytest

from tests.backends.chat_format import published_replies

RESULTS: dict[str, tuple[int, int]] = {}  # family -> (read as expected, cases): the terminal summary prints it


def _params() -> list:
    out = []
    for case in published_replies.cases():
        marks = ([pytest.mark.xfail(reason=case["known_failure"], strict=True)] if case.get("known_failure") else [])
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_reads_the_published_reply_as_its_source_expects(case, llama_cpp_templates):
    message = published_replies.read(case, llama_cpp_templates)
    agrees = published_replies.agrees(case, message)
    passed, total = RESULTS.get(case["family"], (0, 0))
    RESULTS[case["family"]] = (passed + agrees, total + 1)
    assert agrees, f"read {message}, {case['source']} expects {case['expected']}"


def test_every_case_cites_its_source_and_its_template_is_llama_cpps(llama_cpp_templates):
    for case in published_replies.cases():
        assert case["source"].strip(), case["id"]
        assert case["template"] in llama_cpp_templates, case["id"]
        assert set(case["expected"]) == {"content", "reasoning", "tool_calls"}, case["id"]
