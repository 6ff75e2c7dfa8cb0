"""Numbers as people read them (no Qt here, so these are easy to test)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def capitalized(text: str) -> str:
    """The first letter upper-case: our error messages start lower-case to read inside other sentences."""
    return text[:1].upper() + text[1:]


def human_bytes(n: int | float | None) -> str:
    """File and disk sizes in decimal units, as disks and the Hub's download pages show them."""
    return _scaled(n, 1000, ("B", "KB", "MB", "GB", "TB"))


def human_memory(n: int | float | None) -> str:
    """RAM and VRAM in binary units: an "8 GB" card has 8 GiB, and shows as 8.0 GiB, not 8.6 GB."""
    return _scaled(n, 1024, ("B", "KiB", "MiB", "GiB", "TiB"))


def _scaled(n: int | float | None, base: int, units: tuple[str, ...]) -> str:
    if n is None:
        return "unknown"
    for unit in units[:-1]:
        if abs(n) < base:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= base
    return f"{n:.1f} {units[-1]}"


def human_ms(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def stats_summary(stats: Mapping[str, Any] | None) -> str:
    """One line for a finished reply, from GenerationStats.to_public_dict()."""
    if not stats:
        return ""
    parts = [f"{stats.get('generated_tokens', 0)} tokens"]
    if stats.get("decode_tps"):
        parts.append(f"{stats['decode_tps']:.1f} tok/s")
    server_tps = (stats.get("server") or {}).get("predicted_per_second")
    if server_tps:  # a remote engine: its server's own figure, beside the one measured here
        parts.append(f"server says {server_tps:.1f} tok/s")
    if stats.get("ttft_ms") is not None:
        parts.append(f"first token {human_ms(stats['ttft_ms'])}")
    if stats.get("prompt_tps"):
        parts.append(f"prompt {stats['prompt_tps']:.0f} tok/s")
    if stats.get("acceptance_rate") is not None:  # speculative decoding: the share of the draft's guesses kept
        parts.append(f"draft {stats['acceptance_rate']:.0%} accepted, {stats['tokens_per_pass']:.1f} tokens a pass")
    reason = {"cancelled": "stopped", "length": "hit max tokens", "stop": "", "eos": ""}.get(
        stats.get("stop_reason", ""), "")
    if reason:
        parts.append(reason)
    return " · ".join(parts)


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
                    re.MULTILINE | re.DOTALL)


def code_blocks(markdown: str) -> list[str]:
    """The bodies of the fenced code blocks, in order."""
    return [m.group("body").rstrip("\n") for m in _FENCE.finditer(markdown)]


def with_copy_links(markdown: str, scheme: str, first_index: int = 0) -> str:
    """Add a "Copy code" link after each fenced block; the link's target is ``scheme:<index>``,
    counting from ``first_index`` (a streamed reply is rendered a piece at a time)."""
    out, last = [], 0
    for index, match in enumerate(_FENCE.finditer(markdown), start=first_index):
        out.append(markdown[last:match.end()])
        out.append(f"\n\n[Copy code]({scheme}:{index})\n")
        last = match.end()
    out.append(markdown[last:])
    return "".join(out)


class SettledMarkdown:
    """How much of a growing Markdown text later tokens can no longer change: everything up to the
    last blank line outside a fenced code block. A streamed reply renders that part as Markdown and
    keeps only the paragraph still being written as plain text, so each update costs O(new text)
    and the end of a long reply needs no full re-render."""

    def __init__(self) -> None:
        self._scanned = 0  # index just past the last complete line looked at
        self._fence = ""  # the opening fence while inside a fenced block
        self.settled = 0

    def update(self, text: str) -> int:
        while (newline := text.find("\n", self._scanned)) >= 0:
            line = text[self._scanned:newline]
            self._scanned = newline + 1
            stripped = line.strip()
            if self._fence:
                if stripped.startswith(self._fence) and set(stripped) == {self._fence[0]}:
                    self._fence = ""
            elif match := _FENCE_OPEN.match(line):
                self._fence = match.group(1)
            elif not stripped:
                self.settled = self._scanned
        return self.settled


def layer_count(n: int) -> str:
    return "1 layer" if n == 1 else f"{n} layers"
