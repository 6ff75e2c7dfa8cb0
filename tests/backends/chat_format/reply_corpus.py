"""The replies the reader's properties run over (test_stream_is_whole.py, test_cut_replies.py): every reply the repo
carries, each with the request whose prepared format reads it.

``SOURCES`` lists where they come from; each source is a function returning ``Reply`` items, called once per session.
A corpus added later (model cards' and other engines' published replies) appends its own function to ``SOURCES``;
nothing else needs to change for every property to run over it. A reply names its template by llama.cpp's file name
(``llama_cpp_templates``), by ``bundled:NAME`` (resources/chat_templates), or gives the template's source itself.

- ``llama_cpp``: llama.cpp's own chat cases (data/llama_cpp_chat_cases.json, see llama_cpp_cases.py), as recorded;
- ``generic``: llama.cpp's generic JSON format (families/generic.py) on the bundled ChatML template;
- ``published``: QuantDesk's own corpus of published replies (published_replies.py, data/reply_corpus/);
- ``variations``: llama.cpp's replies changed the ways models and engines change them, whatever the format says:
  text before and after the calls, the reply twice, a thinking block closed that was never opened, and the reply
  ended early (the model's end-of-text token in the middle of anything). The properties hold for any text.

``python -m tests.backends.chat_format.reply_corpus [--family TEXT]`` prints, per family, the splits whose stream
differs from the whole reply and the cuts inside a call that yield a call (both 0 when the tests pass).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from backends.chat_format import bundled, formats
from tests.backends.chat_format import llama_cpp_cases


@dataclass(frozen=True)
class Reply:
    id: str  # unique among all sources
    family: str  # what the per-family results are counted by: the template's name
    template: str  # llama.cpp's template file name, "bundled:NAME", or "" with ``template_source``
    request: formats.Request
    text: str  # the model's raw reply
    cut: bool = False  # the reply was cut (max_tokens, a stop word): it did not end where the model ended it
    every_width: bool = True  # split at every width; False: one character at a time and by tokens only
    template_source: str = field(default="", repr=False)

    def prepared(self, templates: dict[str, str]) -> formats.Prepared:
        if self.template_source:
            source = self.template_source
        elif self.template.startswith("bundled:"):
            source = bundled.bundled_source(self.template.removeprefix("bundled:"))
        else:
            source = templates[self.template]
        return formats.apply(formats.Template.of(source), self.request)


def llama_cpp() -> list[Reply]:
    return [Reply(case["id"], case["template"].removesuffix(".jinja"), case["template"],
                  llama_cpp_cases.request(case), case["input"], cut=case["is_partial"])
            for case in llama_cpp_cases.cases()]


_GENERIC_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}}},
]
_ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def generic() -> list[Reply]:
    calls = [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "0"},
             {"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n\n\"quoted\" {braces}\n"},
              "id": "1"}]
    texts = {
        "call": json.dumps({"tool_call": calls[1]}, indent=2),
        "calls": json.dumps({"tool_calls": calls}, indent=2),
        "response": json.dumps({"response": "Sunny, 21 \u00b0C. \"Quoted\" \\ and {braces}."}, indent=2),
        "compact": json.dumps({"tool_calls": calls}, separators=(",", ":")),
        "text": "It is sunny in Paris.",
    }
    return [Reply(f"generic-{name}", "generic", "bundled:chatml", formats.Request(messages=_ASK, tools=_GENERIC_TOOLS),
                  text) for name, text in texts.items()]


def _variations(reply: Reply, rng: random.Random) -> dict[str, str]:
    text = reply.text
    out = {"text-before": "I'll check that first. " + text, "text-after": text + "\nDone, anything else?",
           "twice": text + text, "closed-thinking": "The user wants the weather.</think>" + text}
    for n in range(2):
        out[f"ended-{n}"] = text[:rng.randrange(len(text) + 1)] if text else ""
    return out


def variations() -> list[Reply]:
    rng = random.Random(39)  # the same variations every run
    out = []
    for reply in llama_cpp():
        if reply.cut:
            continue
        seen = {reply.text}
        for name, text in _variations(reply, rng).items():
            if text in seen:
                continue
            seen.add(text)
            out.append(Reply(f"{reply.id}-{name}", reply.family, reply.template, reply.request, text,
                             every_width=False))
    return out


def published() -> list[Reply]:
    from tests.backends.chat_format import published_replies

    replies: list[Reply] = published_replies.replies()
    return replies


SOURCES: list[Callable[[], list[Reply]]] = [llama_cpp, generic, variations, published]


@cache
def replies() -> tuple[Reply, ...]:
    out = tuple(reply for source in SOURCES for reply in source())
    ids = [reply.id for reply in out]
    assert len(set(ids)) == len(ids), "two replies of the corpus have the same id"
    return out


def families() -> list[str]:
    return sorted({reply.family for reply in replies()})


def of_family(family: str) -> list[Reply]:
    return [reply for reply in replies() if reply.family == family]


def message(content: str, reasoning: str, calls: Any) -> dict[str, Any]:
    """A message as the properties compare it: every character of content and reasoning, each call's name, id and
    arguments as written."""
    return {"content": content, "reasoning": reasoning,
            "tool_calls": [{"name": c.name, "id": c.id, "arguments": c.arguments} for c in calls]}


def main(argv: list[str] | None = None) -> int:
    import argparse
    from collections import Counter

    from tests.backends.chat_format.test_cut_replies import call_spans, read
    from tests.backends.chat_format.test_stream_is_whole import splits, streamed, whole
    from tests.fixtures.llama_cpp_sources import find_sdist, read_sources

    parser = argparse.ArgumentParser(description="the reader's two properties over the reply corpus, per family")
    parser.add_argument("--family", default="", help="only families whose name contains this")
    args = parser.parse_args(argv)
    sdist = find_sdist()
    if sdist is None:
        raise SystemExit("llama-cpp-python's source archive is needed: see tests/fixtures/llama_cpp_sources.py")
    templates = read_sources(sdist).templates
    count: dict[str, Counter[str]] = {}
    for reply in replies():
        if args.family.lower() not in reply.family.lower():
            continue
        tally = count.setdefault(reply.family, Counter())
        prepared = reply.prepared(templates)
        want = whole(prepared, reply)
        differ = [name for name, pieces in splits(reply).items() if streamed(prepared, reply, pieces)[0] != want]
        tally["replies"] += 1
        tally["splits"] += len(splits(reply))
        tally["splits differing"] += len(differ)
        calls = read(prepared, reply.text, cut=False)[2] if not reply.cut and reply.every_width else []
        for index, (start, end) in enumerate(call_spans(prepared, reply.text, len(calls))[:len(calls)] if calls else ()):
            for at in range(start + 1, end):
                tally["cuts"] += 1
                tally["cuts with the call"] += len(read(prepared, reply.text[:at], cut=True)[2]) > index
    total: Counter[str] = Counter()
    for family, tally in sorted(count.items()):
        total.update(tally)
        print(f"{family:55} {tally['replies']:5} replies  {tally['splits differing']:4} of {tally['splits']:5} splits "
              f"differ  {tally['cuts with the call']:5} of {tally['cuts']:5} cuts yield the call")
    print(f"{'all':55} {total['replies']:5} replies  {total['splits differing']:4} of {total['splits']:5} splits "
          f"differ  {total['cuts with the call']:5} of {total['cuts']:5} cuts yield the call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
