"""The conformance runner compares messages as llama.cpp's test-chat does (assert_msg_equals with
ignore_whitespace_differences, renormalize_json)."""

from __future__ import annotations

from tests.backends.chat_format.llama_cpp_cases import _renormalized, same


def _message(content: str = "", reasoning: str = "", arguments: str = "{}") -> dict[str, object]:
    return {"content": content, "reasoning_content": reasoning,
            "tool_calls": [{"name": "f", "arguments": _renormalized(arguments), "id": ""}]}


def test_whitespace_around_content_and_reasoning_is_not_compared() -> None:
    assert same(_message("\nThe answer is 42.", "\nLet me think...\n"), _message("The answer is 42.", "Let me think..."))
    assert not same(_message("The answer\nis 42."), _message("The answer is 42."))


def test_arguments_compare_as_json_and_partial_ones_not_at_all() -> None:
    assert same(_message(arguments='{"a": 1}'), _message(arguments='{ "a":1 }'))
    assert not same(_message(arguments='{"a": 1}'), _message(arguments='{"a": 2}'))
    assert same(_message(arguments="{"), _message(arguments=""))  # not JSON yet: "" as renormalize_json makes it
