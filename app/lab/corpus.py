"""The texts the quant lab scores: a bundled set (resources/lab: prose, whose words also make the speed runs' prompts;
QuantDesk's own code; conversations with tool calls and thinking, rendered through the reference's chat template; a
German text), or the user's own text: a file, a folder of them, or their chats rendered as the model sees them.

A KL divergence on one kind of text says little about another (a quant that keeps prose can lose code or a chat's
tool calls), so the sets differ in kind; resources/lab/README.md says where each comes from and why it may ship."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from app.errors import QuantDeskError

PERPLEXITY_TEXT = "pride-and-prejudice-1-3.txt"
PERPLEXITY_SOURCE = "Jane Austen, Pride and Prejudice (1813), chapters 1-3; public domain"
CONVERSATIONS = "conversations"  # the bundled set rendered through the reference's chat template
# The bundled sets by the name --corpus and the Lab page give them: (file in resources/lab, where it comes from).
BUNDLED: dict[str, tuple[str, str]] = {
    "prose": (PERPLEXITY_TEXT, PERPLEXITY_SOURCE),
    "code": ("quantdesk-code.txt", "six of QuantDesk's own Python modules (Apache-2.0)"),
    CONVERSATIONS: ("conversations.json", "QuantDesk's bundled conversations, written for the lab: questions, "
                                          "answers, tool calls and their results, thinking"),
    "german": ("german.txt", "a German text written for QuantDesk's lab (Apache-2.0)"),
}
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


def bundled(name: str = "prose", reference_path: str | Path | None = None) -> Corpus:
    """A bundled set by name (BUNDLED); the conversations need the reference model, whose chat template renders
    them."""
    if name not in BUNDLED:
        raise QuantDeskError(f"there is no bundled text {name!r}", f"the bundled ones: {', '.join(BUNDLED)}")
    file, source = BUNDLED[name]
    if name == CONVERSATIONS:
        if reference_path is None:
            raise QuantDeskError("the bundled conversations are rendered with the reference's chat template",
                                 "name a reference model, not a reference file, to score them")
        return _bundled_conversations(file, source, reference_path)
    return Corpus(perplexity_text() if file == PERPLEXITY_TEXT else _read(file), file, source)


def _bundled_conversations(file: str, source: str, reference_path: str | Path) -> Corpus:
    data = json.loads(_read(file))
    template = chat_template(reference_path)
    rendered = [render_conversation(template, c["messages"], c.get("tools")) for c in data["conversations"]]
    return Corpus("\n\n".join(rendered), CONVERSATIONS,
                  f"{source}; {len(rendered)} conversations, rendered with {Path(reference_path).name}'s chat template",
                  special=True)


def chat_template(model_path: str | Path) -> Any:
    """The chat template of ``model_path`` as the engine uses it (its own, else a GGUF's base model's or family's as
    backends/chat_format/bundled.py chooses it, else the engines' fallback)."""
    from pathlib import Path

    from app.models.metadata import read_gguf_header, read_model
    from backends.chat_format import bundled
    from backends.chat_format.formats import Template
    from backends.chat_format.template import FALLBACK_TEMPLATE

    path = Path(model_path)
    if path.suffix.lower() == ".gguf" and path.is_file():
        return Template.of(bundled.for_model(path, read_gguf_header(path)[0]).source)
    return Template.of(read_model(model_path).chat_template or FALLBACK_TEMPLATE)


def render_conversation(template: Any, messages: Sequence[dict[str, Any]],
                        tools: Sequence[dict[str, Any]] | None = None) -> str:
    """One conversation as the engine renders it for the model (backends/chat_format: the template's own tool-call
    and thinking syntax), without a generation prompt. TemplateError where the template cannot render it."""
    from backends.chat_format import formats

    request = formats.Request(messages=[dict(m) for m in messages], tools=list(tools) if tools else None,
                              add_generation_prompt=False)
    try:
        return formats.apply(template, request).prompt
    except ValueError:  # a reply format no analysis reads: the engine renders such a template as plain content too
        return formats.content_only(template, request).prompt


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
    """Every chat's branch on show (system prompt and turns, a reply's thinking with it), rendered with the chat
    template of ``model_path`` (the reference) as the model reads a conversation, chats two newlines apart; its turn
    markers are read as the special tokens they are. A chat the template cannot render is left out, and the source
    says how many and why."""
    from app.chats.store import ChatStore
    from backends.chat_format.template import TemplateError

    template = chat_template(model_path)
    rendered, refused = [], []
    with ChatStore(store_path) as store:
        for conversation in store.conversations():
            messages = [{"role": "system", "content": conversation.system_prompt}] if conversation.system_prompt else []
            messages += [{"role": m.role, "content": m.content} | ({"reasoning_content": m.reasoning} if m.reasoning
                                                                   else {})
                         for m in store.messages(conversation.id) if m.content.strip() or m.reasoning]
            if not messages:
                continue
            try:
                rendered.append(render_conversation(template, messages))
            except TemplateError as exc:
                refused.append(f"{conversation.title!r}: {exc}")
    if not rendered:
        raise QuantDeskError("there are no chats to score" + (f" ({len(refused)} could not be rendered: "
                                                              f"{refused[0]})" if refused else ""),
                             "chat with a model first, or score a text file with --corpus FILE")
    source = f"{len(rendered)} chats, rendered with {Path(model_path).name}'s chat template"
    if refused:
        source += f"; {len(refused)} left out that it could not render (the first: {refused[0]})"
    return Corpus("\n\n".join(rendered), CHATS, source, special=True)


def resolve(spec: str, reference_path: str | Path | None) -> Corpus:
    """--corpus: a bundled set's name (BUNDLED), ``chats``, or a file or folder (``./code`` for a folder named like a
    set). ``reference_path`` is the reference model, whose chat template renders conversations (None: a reference
    file, which has none)."""
    if spec in BUNDLED:
        return bundled(spec, reference_path)
    if spec == CHATS:
        if reference_path is None:
            raise QuantDeskError("your chats are rendered with the reference's chat template",
                                 "name a reference model, not a reference file, to score them")
        return from_chats(reference_path)
    return from_path(spec)


def prompt_text(chars: int, tag: str) -> str:
    """A user message of about ``chars`` characters from the bundled text, starting with ``tag``.

    Each measured run gets its own tag so the engine's prompt cache (llama.cpp reuses the longest
    common prefix) cannot serve it from the run before; only the chat template's first tokens match.
    """
    body = perplexity_text()
    while len(body) < chars:
        body += "\n\n" + perplexity_text()
    return f"[{tag}] " + body[:max(chars, 1)]
