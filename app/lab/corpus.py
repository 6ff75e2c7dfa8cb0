"""The texts the quant lab scores: the bundled public-domain passage (resources/lab), whose words also make the speed
runs' prompts, or the user's own text: a file, a folder of them, or their chats rendered as the model sees them."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from app.errors import QuantDeskError

PERPLEXITY_TEXT = "pride-and-prejudice-1-3.txt"
PERPLEXITY_SOURCE = "Jane Austen, Pride and Prejudice (1813), chapters 1-3; public domain"
MAX_CORPUS_BYTES = 64 * 2**20  # a text the lab reads whole: far more than any context, far less than RAM


def _read(name: str) -> str:
    return resources.files("resources").joinpath("lab", name).read_text(encoding="utf-8")


@functools.cache
def perplexity_text() -> str:
    return _read(PERPLEXITY_TEXT)


@dataclass(frozen=True)
class Corpus:
    """A text to score, with what names it in results and references."""

    text: str
    name: str
    source: str
    special: bool = False  # special-token text in it (a chat template's turn markers) is read as those tokens

    def describe(self) -> dict[str, object]:
        """Saved with each result and reference, so a later reader knows what the quality figures were measured on
        (the sha256 tells two texts of one name apart)."""
        return {"name": self.name, "source": self.source, "chars": len(self.text),
                "sha256": hashlib.sha256(self.text.encode("utf-8")).hexdigest(), "special_tokens": self.special}


def bundled() -> Corpus:
    return Corpus(perplexity_text(), PERPLEXITY_TEXT, PERPLEXITY_SOURCE)


def from_path(path: str | Path) -> Corpus:
    """A text file, or every text file in a folder (sorted by name, two newlines apart), as one text to score.
    QuantDeskError in words for what cannot be read as text."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        source = f"the {len(files)} files of {path}"
    elif path.is_file():
        files, source = [path], str(path)
    else:
        raise QuantDeskError(f"no file or folder at {path}", "name a text file, or a folder of them")
    if sum(f.stat().st_size for f in files) > MAX_CORPUS_BYTES:
        raise QuantDeskError(f"{path} holds more than {MAX_CORPUS_BYTES // 2**20} MiB of text",
                             "a few megabytes already give tens of thousands of windows")
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise QuantDeskError(f"{f} is not UTF-8 text", "the lab scores text files") from None
    text = "\n\n".join(t for t in texts if t.strip())
    if not text:
        raise QuantDeskError(f"{path} holds no text to score")
    return Corpus(text, path.name, source)


CHATS = "chats"  # --corpus chats: the user's chats


def from_chats(model_path: str | Path, store_path: str | Path | None = None) -> Corpus:
    """Every chat's branch on show (system prompt and turns, a reply's thinking with it), rendered through the chat
    format of ``model_path`` (the reference) as the model reads a conversation (backends/chat_format: the template
    decides what of the thinking it shows), chats two newlines apart; its turn markers are read as the special tokens
    they are. A chat the template cannot render is left out, and the source says how many and why."""
    from app.chats.store import ChatStore
    from app.models.metadata import read_model
    from backends.chat_format import formats
    from backends.chat_format.template import FALLBACK_TEMPLATE, TemplateError

    template = formats.Template.of(read_model(model_path).chat_template or FALLBACK_TEMPLATE)
    rendered, refused = [], []
    with ChatStore(store_path) as store:
        for conversation in store.conversations():
            messages = [{"role": "system", "content": conversation.system_prompt}] if conversation.system_prompt else []
            messages += [{"role": m.role, "content": m.content, **({"reasoning_content": m.reasoning}
                                                                    if m.reasoning else {})}
                         for m in store.messages(conversation.id) if m.content.strip() or m.reasoning]
            if not messages:
                continue
            try:
                rendered.append(formats.apply(template, formats.Request(messages=messages,
                                                                        add_generation_prompt=False)).prompt)
            except (TemplateError, ValueError) as exc:  # ValueError: a reply format the analysis cannot read
                refused.append(f"{conversation.title!r}: {exc}")
    if not rendered:
        raise QuantDeskError("there are no chats to score" + (f" ({len(refused)} could not be rendered: "
                                                              f"{refused[0]})" if refused else ""),
                             "chat with a model first, or score a text file with --corpus FILE")
    source = f"{len(rendered)} chats, rendered with {Path(model_path).name}'s chat template"
    if refused:
        source += f"; {len(refused)} left out that it could not render (the first: {refused[0]})"
    return Corpus("\n\n".join(rendered), CHATS, source, special=True)


def resolve(spec: str, reference_path: str | Path) -> Corpus:
    """--corpus: ``chats``, or a file or folder."""
    return from_chats(reference_path) if spec == CHATS else from_path(spec)


def prompt_text(chars: int, tag: str) -> str:
    """A user message of about ``chars`` characters from the bundled text, starting with ``tag``.

    Each measured run gets its own tag so the engine's prompt cache (llama.cpp reuses the longest
    common prefix) cannot serve it from the run before; only the chat template's first tokens match.
    """
    body = perplexity_text()
    while len(body) < chars:
        body += "\n\n" + perplexity_text()
    return f"[{tag}] " + body[:max(chars, 1)]
