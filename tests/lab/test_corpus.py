"""The user's own text for the quant lab: a file, a folder, their chats rendered as the model reads them."""

from __future__ import annotations

import numpy as np
import pytest

from app.chats.store import ChatStore
from app.errors import QuantDeskError
from app.lab import corpus
from app.lab.results import BenchSettings
from app.lab.runner import run_bench
from backends.scoring import Reference


def test_a_folder_is_its_text_files_in_name_order(tmp_path):
    (tmp_path / "b.md").write_text("second", encoding="utf-8")
    (tmp_path / "a.txt").write_text("first", encoding="utf-8")
    (tmp_path / ".hidden").write_text("never", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.py").write_text("print('third')", encoding="utf-8")
    text = corpus.from_path(tmp_path)
    assert text.text == "first\n\nsecond\n\nprint('third')" and text.source == f"the 3 files of {tmp_path}"
    assert corpus.from_path(tmp_path / "a.txt").text == "first"


def test_what_cannot_be_scored_gets_a_sentence_and_stays_as_it_was(tmp_path):
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81 not text")
    with pytest.raises(QuantDeskError, match="weights.bin is not UTF-8 text"):
        corpus.from_path(binary)
    assert binary.read_bytes() == b"\xff\xfe\x00\x81 not text"
    with pytest.raises(QuantDeskError, match="no file or folder at"):
        corpus.from_path(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(QuantDeskError, match="holds no text to score"):
        corpus.from_path(tmp_path / "empty")


def test_chats_are_rendered_with_the_references_template_and_scored_with_their_special_tokens(tiny_models):
    with ChatStore() as store:
        first = store.create_conversation("Iceland", system_prompt="You are brief.")
        store.add_message(first.id, "user", "What should I pack for a week in Iceland in October?")
        store.add_message(first.id, "assistant", "Layers, a waterproof shell, boots and a hat. " * 20)
        second = store.create_conversation("Code")
        store.add_message(second.id, "user", "def main():\n    print('hello, world')\n    return 0\n" * 10)
        store.add_message(second.id, "assistant", "It prints a greeting and returns 0. " * 20)
    chats = corpus.from_chats(tiny_models.gguf_f16)
    assert chats.special and chats.name == "chats" and chats.source.startswith("2 chats, rendered with tiny-llama-F16")
    assert "<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nWhat should I pack" in chats.text
    assert "<|im_start|>assistant\nIt prints a greeting" in chats.text

    result = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m], BenchSettings(ctx=64, speed=False),
                       corpus_text=corpus.CHATS)
    assert result.corpus["name"] == "chats" and result.corpus["special_tokens"] is True
    q4 = result.variant("tiny-llama-Q4_K_M").quality
    assert q4.kld.value > 0 and q4.positions == result.reference_file["positions"]
    reference = Reference(result.reference_file["path"])
    vocabulary = reference.vocabulary
    tokens = np.asarray(reference.tokens)
    reference.close()
    assert vocabulary.index("<|im_start|>") in tokens  # the turn markers are the model's own special tokens


def test_no_chats_is_said_in_words(tiny_models):
    with pytest.raises(QuantDeskError, match="there are no chats to score"):
        corpus.from_chats(tiny_models.gguf_f16)
