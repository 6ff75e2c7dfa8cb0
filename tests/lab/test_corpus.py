"""The texts the quant lab scores: the bundled sets (prose, code, conversations through the model's own chat template,
German), and the user's own: a file, a folder, their chats rendered as the model reads them."""

from __future__ import annotations

import numpy as np
import pytest

from app.chats.store import ChatStore
from app.errors import QuantDeskError
from app.lab import corpus
from app.lab.results import BenchSettings
from app.lab.runner import run_bench
from backends.scoring import Reference
from tests.fixtures.models import build_tool_model


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
        store.add_message(first.id, "assistant", "Layers, a waterproof shell, boots and a hat. " * 20,
                          reasoning="October: wet and windy.")
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


def test_the_bundled_sets_are_different_kinds_of_text():
    prose, code, german = (corpus.resolve(name, None) for name in ("prose", "code", "german"))
    assert prose.text == corpus.perplexity_text() and "Bennet" in prose.text
    assert code.name == "quantdesk-code.txt" and "# ===== app/lab/metrics.py =====" in code.text
    assert "def percentile(" in code.text and "Apache-2.0" in code.source
    assert german.name == "german.txt" and "Brücke" in german.text and "ß" in german.text
    assert len({prose.describe()["sha256"], code.describe()["sha256"], german.describe()["sha256"]}) == 3
    assert not (prose.special or code.special or german.special)
    with pytest.raises(QuantDeskError, match="the bundled conversations are rendered with the reference's chat "):
        corpus.resolve("conversations", None)  # a reference file has no template to render them with
    with pytest.raises(QuantDeskError, match="there is no bundled text 'poetry'"):
        corpus.bundled("poetry")


def test_the_bundled_conversations_are_rendered_through_the_models_own_chat_format(tiny_models):
    # A template that declares tools writes the calls, the tool results and the tools in its own syntax.
    tools_model = build_tool_model(tiny_models)
    rendered = corpus.resolve("conversations", tools_model)
    assert rendered.special and rendered.name == "conversations" and "13 conversations, rendered with " \
        "tiny-llama-tools-F16.gguf's chat template" in rendered.source
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"place": "Lisbon, Portugal", "units": "metric"}}' \
        in rendered.text
    assert "<tool_response>\n{\"place\": \"Lisbon, Portugal\"" in rendered.text
    assert '"name": "create_event"' in rendered.text and "# Tools" in rendered.text
    # The plain ChatML template of the tiny model shows neither: the same conversations read as the model reads them.
    plain = corpus.resolve("conversations", tiny_models.gguf_f16)
    assert "<tool_call>" not in plain.text and "<|im_start|>tool\n[\"09:00-10:00\"" in plain.text
    assert plain.describe()["sha256"] != rendered.describe()["sha256"]


def test_a_bench_scores_a_bundled_set_and_keeps_its_name(tiny_models):
    result = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m], BenchSettings(ctx=64, chunks=3, speed=False),
                       corpus_text="code")
    assert result.corpus["name"] == "quantdesk-code.txt" and "QuantDesk's own Python modules" in \
        result.corpus["source"]
    assert result.variant("tiny-llama-Q4_K_M").quality.kld.value > 0
    reference = result.reference_file["path"]
    with pytest.raises(QuantDeskError, match="a reference file decides the text"):
        run_bench([tiny_models.gguf_q4_k_m], BenchSettings(ctx=64, speed=False), reference_file=reference,
                  corpus_text="german")
