"""Draft models for speculative decoding: whether a model can draft for another (the same vocabulary), read from
their files before either loads, and which model of the library to suggest as a draft.

A draft's guesses are token ids the model verifies, so the two must mean the same text by every id: the same token
list (a GGUF's as the header's raw bytes, an MLX or safetensors folder's from its tokenizer.json: every token text of
the whole vocabulary), the same size, and the same BOS and EOS tokens. Qt-free and free of inference imports: the
engine host, the CLI and the GUI ask it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelFileError
from app.models.metadata import read_gguf_header_bytes
from app.datatypes import PROMPT_LOOKUP

TOKENS_KEY = "tokenizer.ggml.tokens"
_SPECIAL_KEYS = {"tokenizer.ggml.bos_token_id": "beginning-of-text", "tokenizer.ggml.eos_token_id": "end-of-text"}


@dataclass(frozen=True)
class Vocabulary:
    """What of a GGUF's tokenizer a draft must share: a hash of its token list, its size, its BOS and EOS."""

    tokens_sha256: str
    n_tokens: int
    special: dict[str, bytes]  # header key -> the raw value bytes (absent keys are absent)

    @classmethod
    def of(cls, path: str | Path) -> Vocabulary:
        """The vocabulary a GGUF's header or a model folder's tokenizer declares; ModelFileError (ModelMetadataError
        for a GGUF) when there is none to read."""
        if Path(path).is_dir():
            return cls._of_folder(Path(path))
        return cls.of_header(read_gguf_header_bytes(path).values, Path(path).name)

    @classmethod
    def of_header(cls, values: dict[str, bytes], name: str) -> Vocabulary:
        """The vocabulary a GGUF header declares, from its raw bytes per key (a local file's, or one read on the Hub
        by Range); ModelFileError when it has no token list."""
        tokens = values.get(TOKENS_KEY)
        if tokens is None:
            raise ModelFileError(f"{name} holds no token list (tokenizer.ggml.tokens)")
        # the value's raw bytes: its type tag (array), the items' type tag (string), the count, then each token
        n_tokens = int.from_bytes(tokens[8:16], "little") if len(tokens) >= 16 else 0
        return cls(hashlib.sha256(tokens).hexdigest(), n_tokens,
                   {k: values[k] for k in _SPECIAL_KEYS if k in values})

    @classmethod
    def _of_folder(cls, folder: Path) -> Vocabulary:
        """A Hugging Face-style folder's (MLX, safetensors): tokenizer.json's tokens with their ids, BOS and EOS as
        config.json declares them."""
        try:
            tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            by_id = dict((i, t) for t, i in tokenizer["model"]["vocab"].items())
            by_id.update((t["id"], t["content"]) for t in tokenizer.get("added_tokens") or ())
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelFileError(f"{folder.name} has no readable tokenizer.json and config.json ({exc})") from None
        listed = json.dumps(sorted(by_id.items()), ensure_ascii=False).encode()
        special = {key: json.dumps(config.get(name)).encode() for key, name in
                   (("tokenizer.ggml.bos_token_id", "bos_token_id"), ("tokenizer.ggml.eos_token_id", "eos_token_id"))
                   if name in config}
        return cls(hashlib.sha256(listed).hexdigest(), len(by_id), special)


def vocabulary_mismatch(target: Vocabulary, draft: Vocabulary, whose: str = "the model's") -> str:
    """Why ``draft`` cannot draft for ``target`` (or be compared with it: ``whose`` names it), in words; "" when their
    vocabularies are the same."""
    if target.n_tokens != draft.n_tokens:
        return f"its vocabulary has {draft.n_tokens:,} tokens, {whose} {target.n_tokens:,}"
    if target.tokens_sha256 != draft.tokens_sha256:
        return f"its {draft.n_tokens:,} tokens are not {whose} (the token texts differ)"
    for key, name in _SPECIAL_KEYS.items():
        if target.special.get(key) != draft.special.get(key):
            return f"its {name} token is not {whose}"
    return ""


def check_draft(model_path: str | Path, draft_path: str | Path) -> str:
    """The sentence refusing ``draft_path`` as a draft for ``model_path``, or "" when it can draft for it."""
    draft_name = Path(draft_path).name
    if not Path(draft_path).exists():
        return f"the draft model {draft_path} does not exist"
    if Path(draft_path).is_dir() != Path(model_path).is_dir():
        kind = "a model folder" if Path(model_path).is_dir() else "a GGUF file"
        return f"the draft model {draft_path} is not {kind} like {Path(model_path).name}"
    try:
        draft = Vocabulary.of(draft_path)
    except (OSError, ModelFileError) as exc:
        return f"the draft model {draft_name} cannot be read: {getattr(exc, 'message', None) or exc}"
    try:
        target = Vocabulary.of(model_path)
    except (OSError, ModelFileError) as exc:
        return f"{Path(model_path).name}'s tokenizer cannot be read: {getattr(exc, 'message', None) or exc}"
    problem = vocabulary_mismatch(target, draft)
    return f"{draft_name} cannot draft for {Path(model_path).name}: {problem}" if problem else ""


# A draft pays off when it costs the model's passes little: at most this share of the model's size. (llama.cpp's
# examples pair models about ten times apart, e.g. Qwen2.5 7B with 0.5B.)
MAX_DRAFT_SHARE = 0.25


@dataclass(frozen=True)
class DraftSuggestion:
    """A model of the library to load as ``model``'s draft, and why, in words."""

    path: str
    name: str
    reason: str


def model_size(path: str | Path) -> int:
    """A model's bytes on disk: the GGUF file, or a folder's safetensors weights."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


def draft_candidates(model_path: str | Path, candidates: list[tuple[str, str | Path]]) -> list[tuple[int, str, Path]]:
    """(size, name, path) of those of ``candidates`` ((name, path): the library's models) that can draft for
    ``model_path``: of the same kind (a GGUF for a GGUF, a folder for a folder), at most a quarter of its size, and
    with its vocabulary — the same family. Largest first."""
    model = Path(model_path)
    try:
        vocabulary, size = Vocabulary.of(model), model_size(model)
    except (OSError, ModelFileError):
        return []
    return _candidates(model, vocabulary, size, candidates)


def _candidates(model: Path, vocabulary: Vocabulary, size: int,
                candidates: list[tuple[str, str | Path]]) -> list[tuple[int, str, Path]]:
    found = []
    for name, path in candidates:
        path = Path(path)
        if path.resolve() == model.resolve() or path.is_dir() != model.is_dir():
            continue
        try:
            draft_size = model_size(path)
            if not 0 < draft_size <= size * MAX_DRAFT_SHARE or vocabulary_mismatch(vocabulary, Vocabulary.of(path)):
                continue
        except (OSError, ModelFileError):
            continue  # an unreadable file is no suggestion; the library says what is wrong with it elsewhere
        found.append((draft_size, name, path))
    return sorted(found, key=lambda c: -c[0])


def usable_draft(model_path: str | Path, draft: str) -> str:
    """``draft`` (LoadSettings.draft) if it can run with ``model_path``, else "": a chat keeps its draft while the
    user loads other models, and only a model it fits drafts with it (prompt lookup: a GGUF)."""
    if not draft:
        return ""
    if draft == PROMPT_LOOKUP:
        return draft if Path(model_path).suffix.lower() == ".gguf" else ""
    return draft if not check_draft(model_path, draft) else ""


def suggest_draft(model_path: str | Path, candidates: list[tuple[str, str | Path]]) -> DraftSuggestion | None:
    """The draft to suggest for ``model_path`` among ``candidates`` ((name, path): the library's models): the largest
    of draft_candidates (a larger draft guesses better); None when the library has none."""
    model = Path(model_path)
    try:
        vocabulary, size = Vocabulary.of(model), model_size(model)
    except (OSError, ModelFileError):
        return None
    found = _candidates(model, vocabulary, size, candidates)
    if not found:
        return None
    draft_size, name, path = found[0]
    return DraftSuggestion(str(path), name, (
        f"{name} shares {model.name}'s vocabulary ({vocabulary.n_tokens:,} tokens, the same BOS and EOS) and is "
        f"{size / draft_size:.0f}x smaller: as its draft it guesses tokens {model.name} checks several at a time, "
        f"which speeds replies up where the guesses are right; the replies stay {model.name}'s"))
