"""Which chat template a model is served with, and where it came from.

Many GGUFs converted in 2024–25 carry no ``tokenizer.chat_template``. llama.cpp then falls back to ChatML, and a
model trained on other turns (Gemma's ``<start_of_turn>``) writes past its answer into made-up turns. Here the
template is chosen in this order, and the choice says where it came from, for the Chat, ``quantdesk chat``,
``quantdesk inspect`` and ``/v1/models``:

1. the user's: a bundled template by name, or a file (a ``.jinja``, or a ``tokenizer_config.json`` with its
   ``chat_template``) — ``LoadSettings.chat_template``, set by ``quantdesk chat --chat-template``, the chat settings
   and the model's preset;
2. the model file's own;
3. the template of the model it was made from, read from the Hub by the parent process (``app/hub/chat_templates``)
   and kept beside the model file (``kept_path``): the engine host reads files, never the Hub;
4. the template bundled for its architecture (``resources/chat_templates``, see its README for each file's source),
   where the family's template is known (the architecture decides); the ``llama`` architecture is many families,
   told apart by the marker tokens its vocabulary holds (Llama 3's ``<|start_header_id|>``, Mistral's ``[INST]``,
   ChatML's ``<|im_start|>``);
5. ChatML, the last resort.

Pure Python and Qt-free: the llama.cpp backend's load calls ``choose``, the parent calls it to say what a load would
get (``quantdesk inspect``).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

# The file beside a model that keeps the template read from the Hub for it (``<file name>.chat_template.json``):
# {"chat_template": source, "repo": "owner/name", "file": "tokenizer_config.json"}, or {"chat_template": "",
# "tried": [...]} when none of the repos it names had one (so the Hub is not asked at every load).
KEPT_SUFFIX = ".chat_template.json"
MAX_TEMPLATE_CHARS = 1 << 20  # a template file larger than this is no template


@dataclass(frozen=True)
class Family:
    """A bundled template: its name (``--chat-template NAME``), the words for it, its file under
    resources/chat_templates, the architectures it is for, and the tokens its turns are written with."""

    name: str
    title: str
    file: str
    architectures: tuple[str, ...]
    markers: tuple[str, ...]  # special tokens its turns use: in a template's source, or in a vocabulary


FAMILIES: tuple[Family, ...] = (
    Family("gemma", "Gemma", "gemma.jinja", ("gemma", "gemma2", "gemma3", "gemma3n", "gemma-embedding"),
           ("<start_of_turn>",)),
    Family("llama3", "Llama 3", "llama3.jinja", (), ("<|start_header_id|>", "<|eot_id|>")),
    Family("qwen3", "Qwen3", "qwen3.jinja", ("qwen3", "qwen3moe"), ("<|im_start|>", "<think>")),
    Family("qwen2", "Qwen2.5", "qwen2.jinja", ("qwen2", "qwen2moe"), ("<|im_start|>",)),
    Family("phi3", "Phi-3", "phi3.jinja", ("phi3",), ("<|assistant|>", "<|end|>")),
    Family("mistral", "Mistral", "mistral.jinja", (), ("[INST]", "[/INST]")),
    Family("chatml", "ChatML", "chatml.jinja", (), ("<|im_start|>", "<|im_end|>")),
)
# llama.cpp's names for the same templates (src/llama-chat.cpp LLM_CHAT_TEMPLATES), accepted by --chat-template
ALIASES = {"llama-3": "llama3", "llama3.1": "llama3", "phi-3": "phi3", "phi3.5": "phi3", "qwen": "qwen2",
           "qwen2.5": "qwen2", "mistral-v3-tekken": "mistral", "mistral-nemo": "mistral", "gemma3": "gemma",
           "gemma2": "gemma"}
# The ``llama`` architecture (and others shared by many families): the vocabulary's markers name the family, in
# this order.
BY_VOCABULARY = ("llama3", "gemma", "phi3", "mistral", "chatml")
FALLBACK = "chatml"


@dataclass(frozen=True)
class TemplateChoice:
    """The template a model is served with: its source, a short name (a family's, or "model" / "hub" / "file"),
    the words for it and where it came from ("bundled for the gemma3 architecture: the file has none")."""

    source: str
    name: str
    title: str
    origin: str

    @property
    def line(self) -> str:
        """The sentence the CLI prints: "chat template: Gemma (bundled for the gemma3 architecture: …)"."""
        return f"chat template: {self.title} ({self.origin})"

    def details(self) -> dict[str, str]:
        """What ``Loaded.details`` carries of it."""
        return {"chat_template": self.name, "chat_template_title": self.title, "chat_template_origin": self.origin}


class TemplateChoiceError(ValueError):
    """The user's choice names no bundled template and no readable template file."""


def names() -> list[str]:
    """The bundled templates' names (``--chat-template NAME``)."""
    return [f.name for f in FAMILIES]


def family(name: str) -> Family | None:
    name = ALIASES.get(name.lower(), name.lower())
    return next((f for f in FAMILIES if f.name == name), None)


@cache
def bundled_source(name: str) -> str:
    """A bundled template's source by its name."""
    found = family(name)
    if found is None:
        raise KeyError(name)
    return resources.files("resources").joinpath("chat_templates", found.file).read_text(encoding="utf-8")


def kept_path(model_path: str | Path) -> Path:
    """Where the template read from the Hub for ``model_path`` is kept."""
    path = Path(model_path)
    return path.with_name(path.name + KEPT_SUFFIX)


def read_kept(model_path: str | Path) -> dict[str, Any] | None:
    """The record kept beside the model (see KEPT_SUFFIX), or None where there is none or it cannot be read."""
    path = kept_path(model_path)
    try:
        if path.stat().st_size > MAX_TEMPLATE_CHARS * 2:
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("chat_template", ""), str) else None


def read_template_file(path: str | Path) -> str:
    """A template from a file the user names: a ``.jinja`` (any text), or a JSON file whose ``chat_template`` is
    the template (a ``tokenizer_config.json``; a list of named templates gives its "default")."""
    path = Path(path).expanduser()
    try:
        if path.stat().st_size > MAX_TEMPLATE_CHARS:
            raise TemplateChoiceError(f"{path.name} is larger than a chat template can be")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateChoiceError(f"the chat template file {path} cannot be read: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            value = json.loads(text).get("chat_template")
        except (ValueError, AttributeError):
            raise TemplateChoiceError(f"{path.name} is not a JSON object with a chat_template") from None
        if isinstance(value, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
            value = next((t.get("template") for t in value if isinstance(t, dict) and t.get("name") == "default"),
                         None)
        if not isinstance(value, str) or not value:
            raise TemplateChoiceError(f"{path.name} holds no chat_template")
        return value
    return text


def vocabulary_of(model_path: str | Path) -> Callable[[str], bool] | None:
    """Whether a GGUF's vocabulary holds a token, read from its header's raw token list (each token a u64 length and
    its bytes); None where the list cannot be read."""
    from app.models.metadata import read_gguf_header_bytes

    try:
        raw = read_gguf_header_bytes(model_path).values.get("tokenizer.ggml.tokens")
    except Exception:  # noqa: BLE001 - a header we cannot read only leaves the vocabulary unknown
        return None
    if not raw:
        return None

    def has(token: str) -> bool:
        data = token.encode("utf-8")
        return struct.pack("<Q", len(data)) + data in raw

    return has


def choose(*, own: str, architecture: str, model_path: str | Path | None = None, chosen: str = "",
           has_token: Callable[[str], bool] | None = None) -> TemplateChoice:
    """The template for a model whose file carries ``own`` ("" for none), of ``architecture``, at ``model_path``
    (where a template read from the Hub is kept); ``chosen`` is the user's choice (a name or a file), and
    ``has_token`` tells whether the vocabulary holds a token (None: unknown)."""
    if chosen:
        return _chosen(chosen)
    if own:
        return TemplateChoice(own, "model", "the model's own", "in the model file")
    kept = read_kept(model_path) if model_path else None
    if kept and kept.get("chat_template"):
        source = kept["chat_template"]
        where = f"{kept.get('repo', 'the base model')}'s {kept.get('file', 'tokenizer_config.json')}"
        return TemplateChoice(source, "hub", f"{kept.get('repo') or 'the base model'}'s",
                              f"read from {where} on the Hub: the file has none")
    for f in FAMILIES:
        if architecture in f.architectures:
            return TemplateChoice(bundled_source(f.name), f.name, f.title,
                                  f"bundled for the {architecture} architecture: the file has none")
    if has_token is not None:
        for name in BY_VOCABULARY:
            known = family(name)
            if known is not None and all(has_token(m) for m in known.markers):
                return TemplateChoice(bundled_source(known.name), known.name, known.title,
                                      f"bundled; the vocabulary holds {known.markers[0]}: the file has none")
    return TemplateChoice(bundled_source(FALLBACK), FALLBACK, "ChatML",
                          f"the last resort: the file has none and no template is known for the "
                          f"{architecture or 'unknown'} architecture")


def _chosen(chosen: str) -> TemplateChoice:
    f = family(chosen)
    if f is not None:
        return TemplateChoice(bundled_source(f.name), f.name, f.title, "your choice, bundled")
    path = Path(chosen).expanduser()
    if path.is_file():
        source = read_template_file(path)
        return TemplateChoice(source, "file", path.name, f"your choice: {path}")
    raise TemplateChoiceError(f"{chosen!r} is no bundled chat template ({', '.join(names())}) and no file")


# A fine-tune for chat or instructions, as model names write it ("Gemma 3 270m It", "Qwen2.5 7B Instruct").
TUNED_NAME = re.compile(r"(?i)(?:^|[\s_.-])(?:it|instruct|chat|sft|dpo|rlhf|assistant)(?:$|[\s_.-])")


def pretrained_name(metadata: dict[str, Any]) -> str:
    """The model's name where its header, as llama.cpp's converter writes one (``general.basename``, and
    ``general.finetune`` from the repo's name: "it" for google/gemma-3-270m-it), names no fine-tune, nor does its
    ``general.name`` ("It", "Instruct", "Chat"...): a pre-trained base model's file; "" otherwise."""
    name = metadata.get("general.name")
    if (not isinstance(name, str) or not name.strip() or not metadata.get("general.basename")
            or metadata.get("general.finetune")):
        return ""
    return "" if TUNED_NAME.search(name) else name.strip()


def for_model(model_path: str | Path, metadata: dict[str, Any], chosen: str = "") -> TemplateChoice:
    """``choose`` for a local GGUF from its header's ``metadata`` (the key/value pairs). A file without a template
    whose header names no fine-tune is likely a pre-trained model, which no chat template makes answer (Gemma 3
    270M's file on PyPI is google/gemma-3-270m, not -it): its origin says so, rather than let a served family's
    template promise a chat."""
    own = metadata.get("tokenizer.chat_template")
    architecture = str(metadata.get("general.architecture") or "")
    needs_vocabulary = not chosen and not own and not (read_kept(model_path) or {}).get("chat_template")
    choice = choose(own=own if isinstance(own, str) else "", architecture=architecture, model_path=model_path,
                    chosen=chosen, has_token=vocabulary_of(model_path) if needs_vocabulary else None)
    base = pretrained_name(metadata) if not own else ""
    if base:
        choice = TemplateChoice(choice.source, choice.name, choice.title,
                                f"{choice.origin}; its header names no fine-tune ({base}): likely a pre-trained "
                                "model, not tuned to chat, which may only continue the text")
    return choice


def chosen_for_load(model_path: str | Path, metadata: dict[str, Any], chosen: str = "") -> TemplateChoice:
    """``for_model`` for an engine's load: a choice that names nothing usable is the load's error, in words."""
    from backends.base import GenerationError

    try:
        return for_model(model_path, metadata, chosen)
    except TemplateChoiceError as exc:
        raise GenerationError("template", str(exc), f"name one of {', '.join(names())}, or a .jinja file") from None
