"""llama.cpp's chat-test cases held to the grammars QuantDesk builds from the reply parsers (backends/chat_format
/grammar.py's ``to_lark``), fed to llguidance.

Two checks per case:

- **as llama.cpp checks it** (test-chat.cpp, "Test grammar if present in params"): the grammar the request gets —
  lazy for ``tool_choice: auto``, started where the first grammar trigger matches (outside a thinking block when the
  triggers are words), eager for a response format, fed the generation prompt first — must take the reply whole;
- **forced**: the same request with ``tool_choice: required``: the eager grammar must take a reply that calls a
  tool (every one the required parser itself reads) and refuse one without a call — the cases' content-only replies,
  and each call's reply cut where its call starts.

The text goes in through a byte tokenizer, with the family's markers either spelled out as text or as special
tokens (llguidance then matches them only as tokens, as with a real model's vocabulary; see special_tokens).

``python -m tests.backends.chat_format.grammar_cases --sdist PATH [--template NAME]`` prints each case's verdicts.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from backends.chat_format import builder, formats, grammar, peg
from tests.backends.chat_format import llama_cpp_cases

EOS = b"<eos>"


class _ByteVocabulary:
    """A vocabulary of the 256 bytes, an end token and the given special tokens (llguidance's TokenizerWrapper)."""

    def __init__(self, special: Sequence[str]) -> None:
        self.tokens = [bytes([i]) for i in range(256)] + [EOS] + [s.encode() for s in special]
        self.eos_token_id = 256
        self.bos_token_id = None
        self.special_token_ids = list(range(256, 257 + len(special)))

    def __call__(self, text: str | bytes) -> list[int]:
        return list(text.encode() if isinstance(text, str) else text)


@lru_cache(maxsize=32)
def tokenizer(special: tuple[str, ...] = ()) -> Any:
    import llguidance

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteVocabulary(special)))


def encode(text: str, special: tuple[str, ...] = ()) -> list[int]:
    """``text`` as token ids: each special token as itself, everything else byte by byte."""
    ids: list[int] = []
    by_length = sorted(range(len(special)), key=lambda i: -len(special[i]))
    i = start = 0
    while i < len(text):
        found = next((k for k in by_length if special[k] and text.startswith(special[k], i)), None)
        if found is None:
            i += 1
            continue
        ids += list(text[start:i].encode())
        ids.append(257 + found)
        i = start = i + len(special[found])
    return ids + list(text[start:].encode())


@dataclass
class Verdict:
    accepted: bool
    detail: str = ""


def feed(lark: str, text: str, special: tuple[str, ...] = ()) -> Verdict:
    """Whether the grammar takes ``text`` whole and may end there."""
    import llguidance

    matcher = llguidance.LLMatcher(tokenizer(special), lark, log_level=0)
    if matcher.is_error():
        return Verdict(False, f"the grammar does not compile: {matcher.get_error()}")
    ids = encode(text, special)
    taken = matcher.validate_tokens(ids)
    if taken < len(ids):
        done = tokenizer(special).decode_str(ids[:taken])
        return Verdict(False, f"refused after {done[-40:]!r}, at {text[len(done):len(done) + 40]!r}")
    matcher.consume_tokens(ids)
    if not matcher.is_accepting():
        return Verdict(False, "took it all but wants more")
    return Verdict(True)


def trigger_position(prepared: formats.Prepared, full: str, expects_calls: bool) -> int | None:
    """Where the lazy grammar starts in generation prompt + reply, as test-chat finds it: the first trigger outside a
    thinking block when every trigger is a word (the reasoning-budget path), else the first match of any."""
    words_only = all(kind == "word" for kind, _ in prepared.grammar_triggers)
    if prepared.grammar_lazy and prepared.thinking_end_tags and words_only:
        thinking, i = False, 0
        while i < len(full):
            start = prepared.thinking_start_tag
            if not thinking and start and full.startswith(start, i):
                thinking, i = True, i + len(start)
                continue
            if thinking:
                end = next((e for e in prepared.thinking_end_tags if full.startswith(e, i)), "")
                thinking, i = (False, i + len(end)) if end else (True, i + 1)
                continue
            if any(full.startswith(value, i) for _, value in prepared.grammar_triggers):
                return i
            i += 1
        if not expects_calls:
            return None
        # none outside thinking, but a call is expected: the calls are inside (Kimi); test-chat looks again plainly
    found: int | None = None
    for kind, value in prepared.grammar_triggers:
        at: int | None = None
        if kind == "word":
            at = full.find(value) if value in full else None
        elif kind == "pattern":
            match = re.search(value, full)
            at = match.start(match.re.groups) if match else None
        elif kind == "pattern_full":
            anchored = ("^" if not value.startswith("^") else "") + value + ("$" if not value.endswith("$") else "")
            for end in range(len(prepared.generation_prompt), len(full) + 1):
                match = re.match(anchored, full[:end])
                if match:
                    groups = [g for g in range(1, (match.re.groups or 0) + 1) if match.group(g)]
                    at = match.start(groups[0]) if groups else match.start()
                    break
        if at is not None and (found is None or at < found):
            found = at
    return found


_MARKER = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")


def special_tokens(prepared: formats.Prepared, as_tokens: bool) -> tuple[str, ...]:
    """The markers among (and inside) the family's preserved tokens, as a model's vocabulary has them for special
    tokens: ``<|start|>``, ``[TOOL_CALLS]``, DeepSeek's ``<｜tool▁sep｜>`` out of ``function<｜tool▁sep｜>``; not
    ``<function`` or ``>>>all``, which are text."""
    if not as_tokens:
        return ()
    return tuple(dict.fromkeys(m for token in prepared.preserved_tokens for m in _MARKER.findall(token)))


FREE_TEXT = (builder.CONTENT, builder.REASONING, builder.TOOL_ARGS, builder.TOOL_ARG_VALUE,
             builder.TOOL_ARG_STRING_VALUE)


def tokens_in_free_text(prepared: formats.Prepared, text: str) -> list[str]:
    """The special tokens (see special_tokens) that the parser reads inside free text of ``text`` (content, reasoning, argument values):
    where they are special tokens, llguidance cannot take them there — a special token is never part of text, and
    the grammar names it only where the format puts it."""
    if prepared.parser is None:
        return []
    result, _ctx = prepared.parser.parse(text)
    found = {token for node in peg.walk(result.nodes)
             if node.tag in FREE_TEXT and not any(n.tag for n in peg.walk(node.children))  # its own text only
             for token in special_tokens(prepared, True) if token in node.text}
    return sorted(found)


def token_ids(special: tuple[str, ...]) -> dict[str, int]:
    """The special tokens' ids in the byte vocabulary (after the 256 bytes and the end token)."""
    return {text: 257 + i for i, text in enumerate(special)}


def prepare(case: dict[str, Any], templates: dict[str, str], tool_choice: str = "") -> formats.Prepared:
    request = llama_cpp_cases.request(case)
    if tool_choice:
        request.tool_choice = tool_choice  # type: ignore[assignment]
    return formats.apply(formats.Template.of(templates[case["template"]]), request)


def check_as_llama_cpp(case: dict[str, Any], templates: dict[str, str], as_tokens: bool = False) -> Verdict | None:
    """The case's own grammar against its reply, as test-chat checks it; None where it checks nothing (no grammar,
    a lazy grammar not triggered, a partial reply)."""
    prepared = prepare(case, templates)
    if not prepared.grammar or prepared.parser is None or case["is_partial"]:
        return None
    full = prepared.generation_prompt + case["input"]
    position = trigger_position(prepared, full, bool(case["expect"]["tool_calls"]))
    if position is not None:
        # a trigger inside the generation prompt: the grammar was on from the start of the reply
        constrained = full[max(position, len(prepared.generation_prompt)):]
    elif not prepared.grammar_lazy:
        constrained = full
    else:
        return None
    special = special_tokens(prepared, as_tokens)
    return feed(grammar.to_lark(prepared.parser, prepared.grammar_lazy, token_ids(special)), constrained, special)


@dataclass
class Forced:
    """What the forced-call grammar makes of a case's reply (and of the reply cut before its call)."""

    reply: Verdict
    required_parser_reads_it: bool  # the tool_choice: required parser itself takes the whole reply
    without_call: Verdict | None = None  # the reply cut where its first call starts (a reply without a call)


def check_forced(case: dict[str, Any], templates: dict[str, str], as_tokens: bool = False) -> Forced | None:
    """The ``tool_choice: required`` grammar against the case's reply; None for a case without tools or whose
    family has no grammar, or a partial reply."""
    if not case["tools"] or case["is_partial"]:
        return None
    prepared = prepare(case, templates, "required")
    if not prepared.grammar or prepared.parser is None:
        return None
    special = special_tokens(prepared, as_tokens)
    lark = grammar.to_lark(prepared.parser, False, token_ids(special))
    full = prepared.generation_prompt + case["input"]
    result, _ctx = prepared.parser.parse(full, lenient=False)
    reads = result.success and result.end == len(full)
    forced = Forced(feed(lark, full, special), reads)
    if case["expect"]["tool_calls"]:
        auto = prepare(case, templates, "auto")
        position = trigger_position(auto, full, True)
        if position is not None and position > len(prepared.generation_prompt):
            forced.without_call = feed(lark, full[:position], special)
    return forced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", required=True, type=Path, help="llama-cpp-python's source archive")
    parser.add_argument("--template", default="", help="only templates whose name contains this")
    parser.add_argument("--special-tokens", action="store_true", help="the preserved tokens as special tokens")
    args = parser.parse_args(argv)
    templates = llama_cpp_cases.templates_from_sdist(args.sdist)
    for case in llama_cpp_cases.cases():
        if args.template.lower() not in case["template"].lower():
            continue
        try:
            as_llama_cpp = check_as_llama_cpp(case, templates, args.special_tokens)
            forced = check_forced(case, templates, args.special_tokens)
        except Exception as exc:  # a case that cannot be prepared (the renderer) is reported, not a crash
            print(f"{case['id']}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if as_llama_cpp is None and forced is None:
            continue
        line = f"{case['id']}:"
        if as_llama_cpp is not None:
            line += f" as llama.cpp checks it {'accepted' if as_llama_cpp.accepted else 'REFUSED ' + as_llama_cpp.detail};"
        if forced is not None:
            kind = "call" if case["expect"]["tool_calls"] else "no call"
            line += (f" forced, reply ({kind}) {'accepted' if forced.reply.accepted else 'refused'}"
                     f" (required parser {'reads' if forced.required_parser_reads_it else 'refuses'} it)")
            if forced.without_call is not None:
                line += f", cut before its call {'ACCEPTED' if forced.without_call.accepted else 'refused'}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
