"""llama.cpp's own chat tests, run through QuantDesk's chat-format layer.

``data/llama_cpp_chat_cases.json`` holds every case of llama.cpp's ``tests/test-chat.cpp`` (made by
``extract_llama_cpp_cases.py`` from llama-cpp-python's source distribution): a request, a raw model reply, and the
message llama.cpp expects to read out of it. ``check(case, templates)`` does what test-chat does: renders the request
with the real template through ``backends.chat_format.apply``, reads the reply growing one character at a time (each
read must extend the previous one: what a stream hands out is never taken back) and compares the whole reply's
message, and the message the stream built, with llama.cpp's expectation (as test-chat compares them: content and
reasoning up to the whitespace around them).

``python -m tests.backends.chat_format.llama_cpp_cases [--failures] [--template NAME]`` prints the pass rates.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from backends.chat_format import formats, stream
from backends.chat_format.builder import ParsedReply

DATA = Path(__file__).resolve().parent / "data" / "llama_cpp_chat_cases.json"


@lru_cache(maxsize=1)
def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def cases() -> list[dict[str, Any]]:
    cases_: list[dict[str, Any]] = load()["cases"]
    return cases_


def is_tool_case(case: dict[str, Any]) -> bool:
    return bool(case["expect"]["tool_calls"])


def is_reasoning_case(case: dict[str, Any]) -> bool:
    return bool(case["expect"]["reasoning_content"])


# The dates llama.cpp printed on the day the cases were made (its date_string and datetime variables): given back to
# QuantDesk's render, as a clock set to that day would.
_DATE_STRING = re.compile(r"\b\d\d (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}\b")
_DATETIME = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d\d \d{4}\b")


def request(case: dict[str, Any]) -> formats.Request:
    kwargs = {k: json.loads(v) for k, v in (case["chat_template_kwargs"] or {}).items()}
    for pattern, name in ((_DATE_STRING, "date_string"), (_DATETIME, "datetime")):
        if found := pattern.search(case["llama_cpp"]["prompt"]):
            kwargs.setdefault(name, found.group(0))
    return formats.Request(
        messages=case["messages"], tools=case["tools"], tool_choice=case["tool_choice"],
        json_schema=json.loads(case["json_schema"]) if case["json_schema"] else None,
        parallel_tool_calls=case["parallel_tool_calls"], reasoning_format=case["reasoning_format"],
        add_generation_prompt=case["add_generation_prompt"], continue_final_message=case["continue_final_message"],
        enable_thinking=case["enable_thinking"], extra_context=kwargs)


def _exact_arguments(arguments: str) -> Any:
    """Arguments as JSON where they are whole JSON, else as written."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _renormalized(arguments: str) -> Any:
    """Arguments as test-chat compares them with its expectation (renormalize_json): as JSON, and JSON cut short as
    "" — a partial case expects the arguments written so far, whose exact cut it does not compare ("{\"arg1\": " is
    expected where llama.cpp's own parse reads "{\"arg1\":")."""
    try:
        return json.loads(arguments)
    except ValueError:
        return ""


def as_expected(message: ParsedReply, renormalize: bool = False) -> dict[str, Any]:
    """A message in the shape of llama.cpp's expectation, arguments compared as JSON where they are JSON (and, with
    ``renormalize``, arguments cut short as test-chat compares them with the expectation)."""
    normal = _renormalized if renormalize else _exact_arguments
    return {"content": message.content, "reasoning_content": message.reasoning,
            "tool_calls": [{"name": c.name, "arguments": normal(c.arguments), "id": c.id}
                           for c in message.tool_calls]}


def expected(case: dict[str, Any], key: str = "expect") -> dict[str, Any]:
    """llama.cpp's expectation for the case (or, ``key`` "parsed", what llama.cpp itself read), as as_expected."""
    want = case[key] if key == "expect" else case["llama_cpp"][key]
    return {"content": want["content"], "reasoning_content": want["reasoning_content"],
            "tool_calls": [{"name": c["name"], "arguments": _renormalized(c["arguments"]), "id": c["id"]}
                           for c in want["tool_calls"]]}


def _stripped(message: dict[str, Any]) -> dict[str, Any]:
    """The message with the whitespace around its content and reasoning dropped (string_strip: C's isspace)."""
    return {**message, "content": message["content"].strip(" \t\n\v\f\r"),
            "reasoning_content": message["reasoning_content"].strip(" \t\n\v\f\r")}


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two messages agree as test-chat's assert_msg_equals(..., ignore_whitespace_differences=true) has them
    agree: content and reasoning up to the whitespace around them (llama.cpp's own parse keeps the newline before a
    closing </think>, which its cases do not write), tool calls exactly, their arguments as JSON."""
    return _stripped(a) == _stripped(b)


@dataclass
class Outcome:
    passed: bool
    stage: str = ""  # where it failed: render, prompt (not llama.cpp's), stream, parse
    detail: str = ""
    generation_prompt_matches: bool = True
    identical_to_llama_cpp: bool = False  # the message equals, character for character, what llama.cpp itself read


_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
# "26 Nov 2026", "November 26, 2026" and ISO "2026-11-26": templates that print today's date (gpt-oss, Granite,
# Apertus, ...) render the day they run, and llama.cpp's prompts were recorded on another
_DATE = re.compile(rf"\b(?:{_MONTH} \d{{1,2}},? \d{{4}}|\d{{1,2}} {_MONTH} \d{{4}}|\d{{4}}-\d{{2}}-\d{{2}})\b")


def without_dates(prompt: str) -> str:
    return _DATE.sub("DATE", prompt)


def check(case: dict[str, Any], templates: dict[str, str]) -> Outcome:
    template = formats.Template.of(templates[case["template"]])
    try:
        prepared = formats.apply(template, request(case))
    except Exception as exc:  # a case that cannot even be prepared is a failure to report, not a crash
        return Outcome(False, "render", f"{type(exc).__name__}: {exc}")
    gen_matches = prepared.generation_prompt == case["llama_cpp"]["generation_prompt"]
    if without_dates(prepared.prompt) != without_dates(case["llama_cpp"]["prompt"]):
        return Outcome(False, "prompt", f"rendered {prepared.prompt[-300:]!r}, llama.cpp {case['llama_cpp']['prompt'][-300:]!r}",
                       gen_matches)
    reply = case["input"]
    accumulated = ParsedReply()
    previous = ParsedReply()
    try:
        for i in range(1, len(reply) + 1):
            partial = i < len(reply) or case["is_partial"]
            current = prepared.parse(reply[:i], partial=partial)
            deltas = stream.diffs(previous, current)
            stream.accumulate(accumulated, deltas)
            if as_expected(accumulated) != as_expected(current):
                return Outcome(False, "stream", f"after {i} characters the stream built {as_expected(accumulated)}"
                                                f" but the reply reads {as_expected(current)}", gen_matches)
            previous = current
        final = prepared.parse(reply, partial=case["is_partial"])
    except Exception as exc:  # a parser that throws on a reply is a failure to report
        return Outcome(False, "parse", f"{type(exc).__name__}: {exc}", gen_matches)
    want = expected(case)
    if not same(as_expected(final, renormalize=True), want):
        return Outcome(False, "parse", f"read {as_expected(final)}, llama.cpp expects {want}", gen_matches)
    if not same(as_expected(accumulated, renormalize=True), want) and reply:
        return Outcome(False, "stream", f"the stream built {as_expected(accumulated)}, llama.cpp expects {want}",
                       gen_matches)
    parsed = case["llama_cpp"]["parsed"]
    identical = parsed is not None and as_expected(final, renormalize=True) == expected(case, "parsed")
    return Outcome(True, generation_prompt_matches=gen_matches, identical_to_llama_cpp=identical)


def templates_from_sdist(path: Path) -> dict[str, str]:
    from tests.fixtures.llama_cpp_sources import read_sources

    return read_sources(path).templates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", required=True, type=Path, help="llama-cpp-python's source archive")
    parser.add_argument("--failures", action="store_true", help="print every failing case")
    parser.add_argument("--template", default="", help="only templates whose name contains this")
    args = parser.parse_args(argv)
    templates = templates_from_sdist(args.sdist)
    totals: Counter[str] = Counter()
    by_template: dict[str, Counter[str]] = {}
    for case in cases():
        if args.template.lower() not in case["template"].lower():
            continue
        outcome = check(case, templates)
        kinds = ["all"] + (["tools"] if is_tool_case(case) else []) + (["reasoning"] if is_reasoning_case(case) else [])
        for kind in kinds:
            totals[kind] += 1
            totals[kind + " passed"] += outcome.passed
        totals["generation prompt equal"] += outcome.generation_prompt_matches
        totals["identical"] += outcome.identical_to_llama_cpp
        counter = by_template.setdefault(case["template"], Counter())
        counter["all"] += 1
        counter["passed"] += outcome.passed
        if args.failures and not outcome.passed:
            print(f"FAIL {case['id']} [{outcome.stage}] {outcome.detail[:400]}")
    for name, counter in sorted(by_template.items()):
        print(f"{counter['passed']:3}/{counter['all']:3} {name}")
    for kind in ("all", "tools", "reasoning"):
        if totals[kind]:
            print(f"{kind}: {totals[kind + ' passed']}/{totals[kind]} ({100 * totals[kind + ' passed'] / totals[kind]:.1f} %)")
    print(f"generation prompt as llama.cpp's: {totals['generation prompt equal']}/{totals['all']}")
    print(f"message identical to llama.cpp's own parse: {totals['identical']}/{totals['all']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
