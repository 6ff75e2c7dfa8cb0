"""A GGUF without a chat template is served its family's on the real llama.cpp engine, and says so
(backends/chat_format/bundled.py, called by the llama.cpp backend's load)."""

from __future__ import annotations

import pytest

from app.datatypes import LoadSettings, Message, SamplingSettings
from backends.chat_format import bundled
from backends.base import GenerationError
from tests.fixtures.models import TINY_LFM2, TINY_MOE, build_templated_model, write_gguf_arch

pytest.importorskip("llama_cpp", reason="pip install 'quantdesk[llama]'")

from backends.llama_cpp.backend import LlamaCppBackend  # noqa: E402


def loaded(path, **settings):
    backend = LlamaCppBackend()
    details = backend.load(str(path), LoadSettings(**{"n_ctx": 256, **settings})).details
    return backend, details


@pytest.fixture(scope="module")
def untemplated(tmp_path_factory):
    """Generated GGUFs of three architectures, none with a chat template."""
    root = tmp_path_factory.mktemp("untemplated")
    return {spec.arch: write_gguf_arch(spec, root / f"{spec.name}-none.gguf", chat_template="")
            for spec in (TINY_MOE, TINY_LFM2)}


def test_a_qwen3_architecture_without_a_template_gets_qwen3_s(untemplated):
    backend, details = loaded(untemplated["qwen3moe"])
    try:
        assert details["chat_template"] == "qwen3"
        assert details["chat_template_origin"] == "bundled for the qwen3moe architecture: the file has none"
        assert backend.chat_template is not None
        assert backend.chat_template.source == bundled.bundled_source("qwen3")
        assert details["tool_format"]  # Qwen3's template shows the model its tools
        prompt = backend.prepare([Message("user", "hi")], SamplingSettings()).prompt
        assert prompt.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    finally:
        backend.unload()


def test_an_architecture_of_no_known_family_is_read_by_its_vocabulary(untemplated, tiny_models):
    for path in (untemplated["lfm2"], build_templated_model(tiny_models, "none", "")):
        backend, details = loaded(path)
        try:
            assert details["chat_template"] == "chatml"
            assert details["chat_template_origin"] == "bundled; the vocabulary holds <|im_start|>: the file has none"
        finally:
            backend.unload()


def test_the_user_s_choice_is_what_the_model_is_served_and_a_bad_one_is_refused(tiny_models):
    backend, details = loaded(tiny_models.gguf_f16, chat_template="gemma")
    try:
        assert (details["chat_template"], details["chat_template_origin"]) == ("gemma", "your choice, bundled")
        assert "<start_of_turn>user\nhi<end_of_turn>" in backend.prepare([Message("user", "hi")],
                                                                         SamplingSettings()).prompt
    finally:
        backend.unload()
    with pytest.raises(GenerationError, match="no bundled chat template"):
        loaded(tiny_models.gguf_f16, chat_template="no-such-template")


def test_a_file_with_its_own_template_keeps_it(tiny_models):
    backend, details = loaded(tiny_models.gguf_f16)
    try:
        assert (details["chat_template"], details["chat_template_origin"]) == ("model", "in the model file")
    finally:
        backend.unload()


@pytest.mark.real_model
def test_gemma_3_without_a_template_is_served_gemma_s_turns(gemma3_gguf):
    backend, details = loaded(gemma3_gguf, n_ctx=512)
    try:
        assert details["chat_template"] == "gemma"
        assert details["chat_template_origin"] == (
            "bundled for the gemma3 architecture: the file has none; its header names no fine-tune (Gemma 3 270m): "
            "likely a pre-trained model, not tuned to chat, which may only continue the text")
        prompt = backend.prepare([Message("user", "What is the capital of France?")], SamplingSettings()).prompt
        assert prompt == "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
        # the turn markers are the vocabulary's own tokens, not text: what Gemma was trained on
        assert backend.count_prompt_tokens([Message("user", "What is the capital of France?")],
                                           SamplingSettings()) == 16
    finally:
        backend.unload()
