"""QuantDesk at parity with llama.cpp itself on the real files: llama-cpp-python's own ``Llama`` in the test process
beside QuantDesk's engine host on the same file. The prompt a chat renders (compared with llama-cpp-python's
Jinja2ChatFormatter on the file's template), its token count (llama.cpp's tokenizer on that text, BOS as the
vocabulary asks), and the greedy reply (llama.cpp's own greedy tokens on the same prompt, ending on the model's end
token). Gemma 3's file has no template: its raw prompts are compared instead."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from app.datatypes import Done, LoadSettings, Message
from app.engine.client import EngineClient
from tests.real_models.conftest import ANSWER, GREEDY, N_CTX, QUESTION, THREADS

pytestmark = pytest.mark.real_model
llama_cpp = pytest.importorskip("llama_cpp")
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402 - after the skip

CONVERSATIONS = {
    "one question": [Message("user", QUESTION)],
    "a few turns": [Message("system", "You are a geography teacher."), Message("user", "Hello!"),
                    Message("assistant", "Hello! What would you like to learn today?"), Message("user", QUESTION)],
}
RAW = "Question: What is the capital of France?\nAnswer:"


def _llama(path) -> Iterator:
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=N_CTX, n_threads=THREADS, swa_full=False, verbose=False)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    yield from _llama(smollm2_gguf)


@pytest.fixture(scope="module")
def smollm2_backend(smollm2_gguf):
    """QuantDesk's llama.cpp backend in this process, for the rendered prompt's text (the engine host only answers
    with its tokens' count)."""
    from backends.llama_cpp import LlamaCppBackend

    backend = LlamaCppBackend()
    backend.load(str(smollm2_gguf), LoadSettings(n_ctx=N_CTX, threads=THREADS, gpu_layers=0))
    yield backend
    backend.unload()


def _rendered(llm, messages: list[Message]) -> str:
    """llama-cpp-python's rendering of ``messages`` by the file's own template (its create_chat_completion's)."""
    text = lambda tokens: llm.detokenize(tokens, special=True).decode()  # noqa: E731
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"], eos_token=text([llm.token_eos()]),
                                    bos_token=text([llm.token_bos()]))
    return formatter(messages=[{"role": m.role, "content": m.content} for m in messages]).prompt


def _greedy(llm, tokens: list[int], most: int) -> list[int]:
    """llama.cpp's greedy tokens after ``tokens`` up to and with the end token (or ``most``)."""
    out: list[int] = []
    for token in llm.generate(tokens, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(token)
        if llm.token_eos() == token or len(out) == most:
            return out
    return out


def _reply(engine: EngineClient, prompt) -> Done:
    return [e for e in engine.generate(prompt, GREEDY) if isinstance(e, Done)][-1]


@pytest.mark.parametrize("conversation", CONVERSATIONS)
def test_smollm2_renders_and_counts_a_chat_as_llama_cpp(smollm2, smollm2_backend, smollm2_engine, conversation):
    messages = CONVERSATIONS[conversation]
    rendered = _rendered(smollm2, messages)
    assert smollm2_backend.prepare(messages, GREEDY).prompt == rendered
    # llama.cpp's tokens of that text, a BOS only where the vocabulary adds one (SmolLM2's does not, and its BOS
    # text is the <|im_start|> the prompt opens with: it must stay)
    tokens = smollm2.tokenize(rendered.encode(), add_bos=True, special=True)
    assert tokens[0] == smollm2.tokenize(b"<|im_start|>", add_bos=False, special=True)[0]
    assert smollm2_engine.count_tokens(messages, GREEDY) == len(tokens)


@pytest.mark.parametrize("conversation", CONVERSATIONS)
def test_smollm2_greedy_reply_is_llama_cpps_and_ends_on_its_end_token(smollm2, smollm2_engine, conversation):
    messages = CONVERSATIONS[conversation]
    done = _reply(smollm2_engine, messages)
    tokens = smollm2.tokenize(_rendered(smollm2, messages).encode(), add_bos=True, special=True)
    theirs = _greedy(smollm2, tokens, GREEDY.max_tokens)
    assert theirs[-1] == smollm2.token_eos(), "llama.cpp's greedy reply did not end on the end token"
    assert done.text == smollm2.detokenize(theirs[:-1]).decode()
    assert ANSWER in done.text
    assert (done.stats.stop_reason, done.stats.prompt_tokens) == ("eos", len(tokens))
    assert done.stats.generated_tokens == len(theirs) - 1  # the end token ends the reply, it is not in it
    # and llama-cpp-python's own chat completion (the same template, its sampling at temperature 0) agrees
    completion = smollm2.create_chat_completion([{"role": m.role, "content": m.content} for m in messages],
                                                temperature=0.0, max_tokens=GREEDY.max_tokens)
    [choice] = completion["choices"]
    assert (choice["message"]["content"], choice["finish_reason"]) == (done.text, "stop")
    assert completion["usage"]["prompt_tokens"] == done.stats.prompt_tokens


@pytest.fixture(scope="module")
def gemma3(gemma3_gguf):
    yield from _llama(gemma3_gguf)


@pytest.fixture(scope="module")
def gemma3_engine(gemma3_gguf):
    with EngineClient() as client:
        client.load(gemma3_gguf, LoadSettings(n_ctx=N_CTX, threads=THREADS, gpu_layers=0))
        yield client


def test_gemma3_counts_and_continues_a_raw_prompt_as_llama_cpp(gemma3, gemma3_engine):
    tokens = gemma3.tokenize(RAW.encode(), add_bos=True, special=True)
    assert tokens[0] == gemma3.token_bos()  # Gemma's vocabulary adds its BOS
    assert gemma3_engine.count_tokens(RAW, GREEDY) == len(tokens)
    most = 12
    done = [e for e in gemma3_engine.generate(RAW, dataclasses.replace(GREEDY, max_tokens=most))
            if isinstance(e, Done)][-1]
    theirs = _greedy(gemma3, tokens, most)
    assert done.text == gemma3.detokenize(theirs).decode() and done.stats.prompt_tokens == len(tokens)
    assert done.text.lstrip().startswith(ANSWER)  # a base model completes the pattern it is given
    completion = gemma3.create_completion(RAW, temperature=0.0, max_tokens=most)
    assert completion["choices"][0]["text"] == done.text
