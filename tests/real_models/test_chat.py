"""A question with one right answer, asked greedily through ``quantdesk chat`` (a real process) and through the Chat
(the real engine host, offscreen): SmolLM2 answers it and stops on its own end token. Gemma 3's file carries no chat
template, so its chat is checked for the prompt the engine reads."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from app.datatypes import LoadSettings
from tests.commands.test_engine import quantdesk
from tests.real_models.conftest import ANSWER, N_CTX, QUESTION, THREADS

pytestmark = pytest.mark.real_model
# Gemma 3's own turns, as its instruct models' template renders one user message (llama.cpp reads it for a template
# it recognises as Gemma's, llm_chat_apply_template's LLM_CHAT_TEMPLATE_GEMMA).
GEMMA_TURNS = "<bos><start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"


def _chat_json(model, *args: str) -> dict:
    result = quantdesk("chat", str(model), "--prompt", QUESTION, "--temperature", "0", "--ctx", str(N_CTX),
                       "--threads", str(THREADS), "--json", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_smollm2_answers_through_the_cli_and_stops_on_its_end_token(smollm2_gguf):
    out = _chat_json(smollm2_gguf, "--max-tokens", "64")
    assert ANSWER in out["text"], out["text"]
    assert out["stop_reason"] == "eos" and out["completion_tokens"] < 64


def test_gemma3_chat_is_rendered_in_gemma_turns(gemma3_gguf):
    """The file is Gemma 3 270M's base model (its package's README: google/gemma-3-270m, not -it), so no answer is
    asserted: at temperature 0 it repeats the question in either format. What a right template changes is the
    prompt: the CLI's prompt tokens are llama.cpp's count of Gemma's turns (BOS once)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gemma3_gguf), n_ctx=256, vocab_only=True, verbose=False)
    gemma = llm.tokenize(GEMMA_TURNS.format(QUESTION).removeprefix("<bos>").encode(), add_bos=True, special=True)
    out = _chat_json(gemma3_gguf, "--max-tokens", "4")
    assert out["prompt_tokens"] == len(gemma)
    assert out["chat_template_origin"].startswith("bundled")  # the file has none: Gemma's own, bundled, not ChatML
    assert "likely a pre-trained model, not tuned to chat" in out["chat_template_origin"]  # and the user is told


def test_smollm2_answers_in_the_chat(qtbot, real_window, smollm2_gguf):
    window = real_window()
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        chat.load_model(str(smollm2_gguf), LoadSettings(n_ctx=N_CTX, threads=THREADS, gpu_layers=0))
    assert loaded.args[0].backend == "llama.cpp" and smollm2_gguf.name in chat.model_label.text()
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling={"temperature": 0.0, "max_tokens": 64})
    with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
        qtbot.keyClicks(chat.composer, QUESTION)
        qtbot.keyClick(chat.composer, Qt.Key.Key_Return)
    reply = done.args[0]
    assert ANSWER in reply.text and reply.stats.stop_reason == "eos"
    user, answer = chat.store.messages(chat.current.id)
    assert (user.content, answer.content, answer.state) == (QUESTION, reply.text, "complete")
    qtbot.waitUntil(lambda: chat.view.bubbles[-1].markdown == reply.text, timeout=10_000)
