"""The quant lab's bundled texts (resources/lab): a public-domain passage for perplexity and prompts, and
a fixed prompt set for comparing next-token distributions."""

from __future__ import annotations

import functools
from importlib import resources

PERPLEXITY_TEXT = "pride-and-prejudice-1-3.txt"
PERPLEXITY_SOURCE = "Jane Austen, Pride and Prejudice (1813), chapters 1-3; public domain"
KL_PROMPTS = "kl-prompts.txt"


def _read(name: str) -> str:
    return resources.files("resources").joinpath("lab", name).read_text(encoding="utf-8")


@functools.cache
def perplexity_text() -> str:
    return _read(PERPLEXITY_TEXT)


@functools.cache
def kl_prompts() -> tuple[str, ...]:
    parts = (p.strip("\n") for p in _read(KL_PROMPTS).split("\n---\n"))
    return tuple(p for p in parts if p.strip())


def describe() -> dict[str, object]:
    """Saved with each result, so a later reader knows what the quality figures were measured on."""
    return {"perplexity_text": PERPLEXITY_TEXT, "perplexity_source": PERPLEXITY_SOURCE,
            "perplexity_chars": len(perplexity_text()), "kl_prompts": len(kl_prompts())}


def prompt_text(chars: int, tag: str) -> str:
    """A user message of about ``chars`` characters from the bundled text, starting with ``tag``.

    Each measured run gets its own tag so the engine's prompt cache (llama.cpp reuses the longest
    common prefix) cannot serve it from the run before; only the chat template's first tokens match.
    """
    body = perplexity_text()
    while len(body) < chars:
        body += "\n\n" + perplexity_text()
    return f"[{tag}] " + body[:max(chars, 1)]
