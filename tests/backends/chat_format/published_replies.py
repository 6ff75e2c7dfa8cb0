"""A reply corpus of QuantDesk's own, beyond llama.cpp's chat cases: model replies in the shapes other engines'
parser tests, model cards and encoders publish (vLLM's tests/tool_parsers, SGLang's function-call tests, DeepSeek's
encoder, …), one file per family under data/reply_corpus/, each case citing its source.

A file names the template it is read with (llama.cpp's file name, from llama-cpp-python's source archive: see
tests/fixtures/llama_cpp_sources.py), the tools of the request, whether thinking is on, and per case the raw reply and
the message expected from it: content, reasoning, and each call's name, arguments (as JSON) and, where the syntax
carries one, id. A case QuantDesk does not read as expected yet says why in ``known_failure`` (the test is a strict
xfail: it fails the day the case passes).

``cases()`` gives every case; ``read(case, templates)`` reads it as the engine host reads a reply
(backends/chat_format/reply.ReplyReader, whole); ``agrees(case, message)`` compares. ``replies()`` gives the cases as
the reply properties' corpus (reply_corpus.Reply) takes them, for its ``SOURCES``.

``python -m tests.backends.chat_format.published_replies`` prints the pass rate per family.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from backends.chat_format import formats
from backends.chat_format.reply import ReplyReader

DATA = Path(__file__).parent / "data" / "reply_corpus"
ASK = [{"role": "user", "content": "What is the weather like?"}]
WHITESPACE = " \n\r\t"


@cache
def _files() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(path.read_text(encoding="utf-8")) for path in sorted(DATA.glob("*.json")))


def cases() -> list[dict[str, Any]]:
    """Every case, with its file's family, template, tools and thinking switch (a case may name its own tools)."""
    out = []
    for data in _files():
        for case in data["cases"]:
            out.append({"family": data["family"], "template": data["template"], "tools": data.get("tools"),
                        "enable_thinking": data.get("enable_thinking", True), **case})
    ids = [case["id"] for case in out]
    assert len(set(ids)) == len(ids), "two cases of the reply corpus have the same id"
    return out


def request(case: dict[str, Any]) -> formats.Request:
    return formats.Request(messages=list(ASK), tools=case.get("tools"), enable_thinking=case["enable_thinking"])


def prepared(case: dict[str, Any], templates: dict[str, str]) -> formats.Prepared:
    return formats.apply(formats.Template.of(templates[case["template"]]), request(case))


def read(case: dict[str, Any], templates: dict[str, str]) -> dict[str, Any]:
    """The reply read whole by the engine host's reader: content, reasoning and calls (arguments parsed)."""
    reader = ReplyReader(prepared(case, templates))
    reader.feed(case["text"])
    content, reasoning, calls = reader.finish()
    out_calls = []
    for call in calls:
        try:
            arguments: Any = json.loads(call.arguments)
        except ValueError:
            arguments = call.arguments  # not JSON: compared as written, and so never equal to an expected object
        out_calls.append({"name": call.name, "arguments": arguments, "id": call.id})
    return {"content": content, "reasoning": reasoning, "tool_calls": out_calls}


def agrees(case: dict[str, Any], message: dict[str, Any]) -> bool:
    """Whether ``message`` is the case's expected one: content and reasoning up to the whitespace at their ends (the
    formats trim what separates text from markup, engines differ there), each call's name and arguments, and its id
    where the case gives one (the model's own)."""
    want = case["expected"]
    if message["content"].strip(WHITESPACE) != want["content"].strip(WHITESPACE):
        return False
    if message["reasoning"].strip(WHITESPACE) != want["reasoning"].strip(WHITESPACE):
        return False
    if len(message["tool_calls"]) != len(want["tool_calls"]):
        return False
    for got, expected in zip(message["tool_calls"], want["tool_calls"], strict=True):
        if got["name"] != expected["name"] or got["arguments"] != expected["arguments"]:
            return False
        if "id" in expected and got["id"] != expected["id"]:
            return False
    return True


def pass_rates(templates: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Per family: (cases read as expected, cases)."""
    rates: dict[str, tuple[int, int]] = {}
    for case in cases():
        passed, total = rates.get(case["family"], (0, 0))
        rates[case["family"]] = (passed + agrees(case, read(case, templates)), total + 1)
    return rates


def format_rates(rates: dict[str, tuple[int, int]]) -> list[str]:
    lines = [f"{family:20} {passed:3} / {total:3}  {100 * passed / total:5.1f} %"
             for family, (passed, total) in sorted(rates.items())]
    passed, total = sum(p for p, _ in rates.values()), sum(t for _, t in rates.values())
    if total:
        lines.append(f"{'all':20} {passed:3} / {total:3}  {100 * passed / total:5.1f} %")
    return lines


def replies() -> list[Any]:
    """The cases as the reply properties' corpus takes them (tests/backends/chat_format/reply_corpus.Reply): append
    this function to its ``SOURCES``."""
    from tests.backends.chat_format.reply_corpus import Reply  # type: ignore[import-not-found,unused-ignore]

    return [Reply(case["id"], case["family"], case["template"], request(case), case["text"]) for case in cases()]


def main() -> int:
    from tests.fixtures.llama_cpp_sources import find_sdist, read_sources

    sdist = find_sdist()
    if sdist is None:
        raise SystemExit("llama-cpp-python's source archive is needed: see tests/fixtures/llama_cpp_sources.py")
    for line in format_rates(pass_rates(read_sources(sdist).templates)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
