"""Numbers, sizes and dates as people read them, in the user's language: digits through the default QLocale
(set at start-up by app.ui.common.translations.install: "12,5 Tok./s" and "1,2 GiB" in German), words through Qt's
translations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from PySide6.QtCore import QCoreApplication, QDateTime, QLocale

ISO_SHORT = "yyyy-MM-dd HH:mm"  # where the locale has no usable format of its own (the C/POSIX locale)


def capitalized(text: str) -> str:
    """The first letter upper-case: our error messages start lower-case to read inside other sentences."""
    return text[:1].upper() + text[1:]


def number(value: float, decimals: int | None = 0) -> str:
    """A figure with the locale's decimal sign: 12.5 → "12,5" in German; ``decimals=None``: as many as it has
    (up to 6 significant digits, like Python's ``:g``)."""
    if decimals is None:
        return QLocale().toString(float(value), "g", 6)
    return QLocale().toString(float(value), "f", decimals)


def grouped(count: int) -> str:
    """A large count with the locale's digit grouping: 1234567 → "1,234,567" ("1.234.567" in German)."""
    locale = QLocale()
    locale.setNumberOptions(locale.numberOptions() & ~QLocale.NumberOption.OmitGroupSeparator)
    return locale.toString(int(count))


def compact_count(count: int) -> str:
    """A token count short, for a meter: 950 → "950", 1234 → "1.2k", 4096 → "4.1k", 32768 → "33k"."""
    if count < 1000:
        return number(count)
    thousands = round(count / 1000, 1)
    value = number(thousands, 1 if thousands < 10 and thousands != int(thousands) else 0)
    return QCoreApplication.translate("formatting", "{value}k").format(value=value)


def percent(fraction: float, decimals: int = 0) -> str:
    """0.125 → "12.5%" ("12,5 %" in German, with the space German typography puts before %)."""
    return QCoreApplication.translate("formatting", "{value}%").format(value=number(fraction * 100, decimals))


def tokens_per_second(value: float, decimals: int = 1) -> str:
    return QCoreApplication.translate("formatting", "{value} tok/s").format(value=number(value, decimals))


def tokens_per_second_unknown() -> str:
    """The speed field before there is a figure."""
    return QCoreApplication.translate("formatting", "— tok/s")


def human_bytes(n: int | float | None) -> str:
    """File and disk sizes in decimal units, as disks and the Hub's download pages show them."""
    return _scaled(n, 1000, ("B", "KB", "MB", "GB", "TB"))


def human_memory(n: int | float | None) -> str:
    """RAM and VRAM in binary units: an "8 GB" card has 8 GiB, and shows as 8.0 GiB, not 8.6 GB."""
    return _scaled(n, 1024, ("B", "KiB", "MiB", "GiB", "TiB"))


def _scaled(n: int | float | None, base: int, units: tuple[str, ...]) -> str:
    if n is None:
        return QCoreApplication.translate("formatting", "unknown")
    for unit in units[:-1]:
        if abs(n) < base:
            return f"{number(n, 0 if unit == 'B' else 1)} {unit}"
        n /= base
    return f"{number(n, 1)} {units[-1]}"


def human_ms(ms: float) -> str:
    return f"{number(ms, 0)} ms" if ms < 1000 else f"{number(ms / 1000, 2)} s"


def human_seconds(ms: float) -> str:
    """A span people count in seconds (how long a model thought): "0.4 s", "4.5 s", "12 s", "2 min 5 s"."""
    if 0 < ms < 50:  # not "0.0 s": it took some time
        return f"< {number(0.1, 1)} s"
    if ms < 9950:  # what rounds to less than 10.0 s
        return f"{number(ms / 1000, 1)} s"
    seconds = round(ms / 1000)
    if seconds < 60:
        return f"{number(seconds)} s"
    return QCoreApplication.translate("formatting", "{minutes} min {seconds} s").format(
        minutes=number(seconds // 60), seconds=number(seconds % 60))


def short_date_time(when: datetime | float) -> str:
    """A date and time in the locale's short format ("24.11.26 16:00" in German), from a datetime (naive ones
    are local time) or seconds since the epoch."""
    seconds = when if isinstance(when, int | float) else when.timestamp()
    moment = QDateTime.fromMSecsSinceEpoch(round(seconds * 1000))
    locale = QLocale()
    if locale.language() == QLocale.Language.C:
        return moment.toString(ISO_SHORT)
    return locale.toString(moment, QLocale.FormatType.ShortFormat)


def stats_summary(stats: Mapping[str, Any] | None) -> str:
    """One line for a finished reply, from GenerationStats.to_public_dict()."""
    if not stats:
        return ""
    parts = [QCoreApplication.translate("formatting", "{count} tokens").format(count=stats.get("generated_tokens", 0))]
    if stats.get("decode_tps"):
        parts.append(tokens_per_second(stats["decode_tps"]))
    server_tps = (stats.get("server") or {}).get("predicted_per_second")
    if server_tps:  # a remote engine: its server's own figure, beside the one measured here
        parts.append(QCoreApplication.translate("formatting", "server says {speed}").format(
            speed=tokens_per_second(server_tps)))
    if stats.get("ttft_ms") is not None:
        parts.append(QCoreApplication.translate("formatting", "first token {time}").format(
            time=human_ms(stats["ttft_ms"])))
    if stats.get("prompt_tps"):
        parts.append(QCoreApplication.translate("formatting", "prompt {speed}").format(
            speed=tokens_per_second(stats["prompt_tps"], 0)))
    if stats.get("acceptance_rate") is not None:  # speculative decoding: the share of the draft's guesses kept
        parts.append(QCoreApplication.translate("formatting", "draft {rate} accepted, {tokens} tokens a pass").format(
            rate=percent(stats["acceptance_rate"]), tokens=number(stats["tokens_per_pass"], 1)))
    reason = {"cancelled": QCoreApplication.translate("formatting", "stopped"),
              "length": QCoreApplication.translate("formatting", "hit max tokens")}.get(stats.get("stop_reason", ""))
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
    copy = QCoreApplication.translate("formatting", "Copy code")
    for index, match in enumerate(_FENCE.finditer(markdown), start=first_index):
        out.append(markdown[last:match.end()])
        out.append(f"\n\n[{copy}]({scheme}:{index})\n")
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
    # Two forms, as English and German have; a language with more would need self.tr's %n plurals here.
    if n == 1:
        return QCoreApplication.translate("formatting", "1 layer")
    return QCoreApplication.translate("formatting", "{count} layers").format(count=n)
