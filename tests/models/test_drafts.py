"""Draft models: the vocabulary check from the files alone, and the library's draft suggestion, on real tiny
models (GGUF headers and MLX folders)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from app.cli import main
from app.models.drafts import Vocabulary, check_draft, suggest_draft, vocabulary_mismatch
from tests.fixtures.models import TINY, build_draft_pair


@pytest.fixture(scope="module")
def eight_layer_pair():
    """An 8-layer tiny model and its first layer as a draft: a fifth of its size."""
    return build_draft_pair(dataclasses.replace(TINY, n_layer=8), 1, quiet=0.0)


def test_the_same_tokenizer_matches_in_either_format(tiny_draft_pair):
    assert check_draft(tiny_draft_pair.target, tiny_draft_pair.draft) == ""
    assert check_draft(tiny_draft_pair.mlx_target, tiny_draft_pair.mlx_draft) == ""
    gguf, folder = Vocabulary.of(tiny_draft_pair.target), Vocabulary.of(tiny_draft_pair.mlx_target)
    assert gguf.n_tokens == folder.n_tokens == 1024


def test_each_difference_is_said(tiny_draft_pair, tiny_other_vocab_models, tmp_path):
    bigger, other_tokens = tiny_other_vocab_models
    target = Vocabulary.of(tiny_draft_pair.target)
    assert vocabulary_mismatch(target, Vocabulary.of(bigger)) == "its vocabulary has 1,100 tokens, the model's 1,024"
    assert vocabulary_mismatch(target, Vocabulary.of(other_tokens)) == ("its 1,024 tokens are not the model's (the "
                                                                        "token texts differ)")
    other_eos = dataclasses.replace(target, special={**target.special, "tokenizer.ggml.eos_token_id": b"\x04\0\0\0\1\0\0\0"})
    assert vocabulary_mismatch(target, other_eos) == "its end-of-text token is not the model's"
    assert "is not a model folder like" in check_draft(tiny_draft_pair.mlx_target, tiny_draft_pair.draft)
    (tmp_path / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert check_draft(tiny_draft_pair.target, tmp_path / "broken.gguf").startswith("the draft model broken.gguf "
                                                                                   "cannot be read: ")


def test_the_library_suggests_the_largest_small_model_of_the_same_vocabulary(eight_layer_pair, tiny_draft_pair,
                                                                              tiny_other_vocab_models):
    target = eight_layer_pair.target
    library = [("target", target), ("other vocabulary", tiny_other_vocab_models[0]),
               ("too big", tiny_draft_pair.target), ("first layer", eight_layer_pair.draft),
               ("a folder", tiny_draft_pair.mlx_draft)]
    suggestion = suggest_draft(target, library)
    assert suggestion is not None and suggestion.path == str(eight_layer_pair.draft)
    assert suggestion.reason.startswith(f"first layer shares {target.name}'s vocabulary (1,024 tokens, the same BOS "
                                        "and EOS) and is ")
    assert suggest_draft(target, [("target", target), ("other vocabulary", tiny_other_vocab_models[0])]) is None
    assert suggest_draft(eight_layer_pair.draft, library) is None  # nothing is a quarter of a 1-layer model


def test_recommend_names_the_draft_the_library_holds(eight_layer_pair, tmp_path, capsys):
    from app.hub.library import Library
    from tests.commands.test_models import _hardware_file

    entry, = Library().import_path(eight_layer_pair.draft, copy=False)
    hw = _hardware_file(tmp_path)
    assert main(["recommend", str(eight_layer_pair.target), "--hardware", hw, "--json"]) == 0
    drafts = json.loads(capsys.readouterr().out)["drafts"]
    assert drafts["gguf"]["path"] == str(eight_layer_pair.draft)
    assert main(["recommend", str(eight_layer_pair.target), "--hardware", hw]) == 0
    out = capsys.readouterr().out
    assert f"  Draft: {entry.name} — {entry.name} shares tiny-llama-F16.gguf's vocabulary" in out and f"(--draft {eight_layer_pair.draft})" in out
