"""Draft models for speculative decoding: whether a GGUF can draft for another (the same vocabulary), read from the
two headers before either loads, and which model of the library to suggest as a draft.

A draft's guesses are token ids the model verifies, so the two must mean the same text by every id: the same token
list (compared as the header's raw bytes, so every token text of the whole vocabulary), the same size, and the same
BOS and EOS tokens. Qt-free and free of inference imports: the engine host, the CLI and the GUI ask it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from app.errors import ModelFileError
from app.models.metadata import read_gguf_header_bytes

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
        """The vocabulary a GGUF's header declares; ModelFileError (ModelMetadataError) for a file that is not one."""
        values = read_gguf_header_bytes(path).values
        tokens = values.get(TOKENS_KEY)
        if tokens is None:
            raise ModelFileError(f"{Path(path).name} holds no token list (tokenizer.ggml.tokens)")
        # the value's raw bytes: its type tag (array), the items' type tag (string), the count, then each token
        n_tokens = int.from_bytes(tokens[8:16], "little") if len(tokens) >= 16 else 0
        return cls(hashlib.sha256(tokens).hexdigest(), n_tokens,
                   {k: values[k] for k in _SPECIAL_KEYS if k in values})


def vocabulary_mismatch(target: Vocabulary, draft: Vocabulary) -> str:
    """Why ``draft`` cannot draft for ``target``, in words; "" when their vocabularies are the same."""
    if target.n_tokens != draft.n_tokens:
        return f"its vocabulary has {draft.n_tokens:,} tokens, the model's {target.n_tokens:,}"
    if target.tokens_sha256 != draft.tokens_sha256:
        return f"its {draft.n_tokens:,} tokens are not the model's (the token texts differ)"
    for key, name in _SPECIAL_KEYS.items():
        if target.special.get(key) != draft.special.get(key):
            return f"its {name} token is not the model's"
    return ""


def check_draft(model_path: str | Path, draft_path: str | Path) -> str:
    """The sentence refusing ``draft_path`` as a draft for ``model_path``, or "" when it can draft for it."""
    draft_name = Path(draft_path).name
    if not Path(draft_path).is_file():
        return f"the draft model {draft_path} is not a file"
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
