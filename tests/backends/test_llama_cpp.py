"""The llama.cpp backend's token loop on llama.cpp's low-level API, in this process on the tiny model:
it samples what ``Llama.generate`` samples, reuses the previous turn's KV prefix, stops at a full context,
and lets a cancel interrupt the prompt; and its tensor placement for mixture-of-experts models: what QuantDesk
asks for is what llama.cpp does, read back from llama.cpp's own log of the tensors it moved."""

from __future__ import annotations

import dataclasses
import re
import threading

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, expert_tensor_patterns

llama_cpp = pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")

from backends.llama_cpp import LlamaCppBackend  # noqa: E402
from backends.llama_cpp.sampling import sampler_chain  # noqa: E402

STORY = [Message("user", "Tell me a story about a fox.")]


@pytest.fixture(scope="module")
def backend(tiny_models):
    backend = LlamaCppBackend()
    backend.load(str(tiny_models.gguf_q4_k_m), LoadSettings(n_ctx=2048, threads=2, gpu_layers=0))
    yield backend
    backend.unload()


def _generate(backend, messages, sampling, cancelled=None):
    *_, done = backend.generate("r", messages, sampling, cancelled or threading.Event())
    return done


def _through_llama_generate(backend, sampling, *turns) -> list[str]:
    """Each prompt's reply from llama-cpp-python's own high-level loop, as the backend ran before it drove
    llama.cpp itself: one turn after the other, Llama.generate reusing the KV prefix as it goes."""
    llm = backend._llm
    llm.reset()
    replies = []
    for messages in turns:
        tokens = llm.tokenize(backend.prepare(messages, sampling).prompt.encode(), add_bos=True, special=True)
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)
        out = []
        for token in llm.generate(tokens, top_k=sampling.top_k, top_p=sampling.top_p, min_p=sampling.min_p,
                                  temp=sampling.temperature, repeat_penalty=sampling.repeat_penalty):
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token) or len(out) == sampling.max_tokens:
                break
            out.append(token)
        replies.append(llm.detokenize(out).decode("utf-8", "replace"))
    backend._forget_kv(llama_cpp)  # Llama.generate used the context behind the backend's back
    return replies


@pytest.mark.parametrize("params", [
    dict(temperature=0.0),
    dict(temperature=0.0, repeat_penalty=1.0),
    dict(seed=7),
    dict(seed=3, temperature=1.3, top_k=0, top_p=1.0, min_p=0.0),
    dict(seed=4, temperature=0.7, top_k=5, top_p=0.8, min_p=0.1, repeat_penalty=1.3),
], ids=["greedy", "greedy-no-penalty", "seeded-defaults", "seeded-hot", "seeded-narrow"])
def test_the_native_loop_samples_what_llama_generate_samples(backend, params):
    sampling = SamplingSettings(max_tokens=150, **params)
    done = _generate(backend, STORY, sampling)
    assert done.stats.generated_tokens > 20
    assert [done.text] == _through_llama_generate(backend, sampling, STORY)


def test_a_second_turn_evaluates_only_what_is_new_as_llama_generate_did(backend):
    greedy = SamplingSettings(temperature=0.0, max_tokens=60)
    first = _generate(backend, STORY, greedy)
    second_turn = [*STORY, Message("assistant", first.text), Message("user", "And then?")]
    llama_cpp.llama_perf_context_reset(backend._llm.ctx)
    second = _generate(backend, second_turn, greedy)
    evaluated = llama_cpp.llama_perf_context(backend._llm.ctx).n_p_eval
    assert evaluated < second.stats.prompt_tokens // 2, (evaluated, second.stats.prompt_tokens)
    # Llama.generate, given the same two turns, keeps the same prefix and so answers the same (a prefix
    # evaluated token by token is not bit-equal to one evaluated in a batch: from scratch may differ).
    assert _through_llama_generate(backend, greedy, STORY, second_turn) == [first.text, second.text]


def test_a_reply_ends_where_the_context_is_full(tiny_models):
    backend = LlamaCppBackend()
    backend.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=256, threads=2, gpu_layers=0))
    try:
        done = _generate(backend, STORY, SamplingSettings(temperature=0.0, max_tokens=1000))
        assert done.stats.generated_tokens == 256 - done.stats.prompt_tokens
        assert done.stats.stop_reason == "eos"
        again = _generate(backend, STORY, SamplingSettings(temperature=0.0, max_tokens=1000))
        assert again.text == done.text  # the full cache was cut back to the prompt, not left broken
    finally:
        backend.unload()


def test_a_cancel_interrupts_the_prompt_and_the_next_request_starts_clean(backend):
    greedy = SamplingSettings(temperature=0.0, max_tokens=20)
    long = [Message("user", "The quick brown fox jumps over the lazy dog. " * 120)]
    cancelled = threading.Event()
    cancelled.set()  # already set: llama.cpp's abort callback stops the prompt's evaluation at once
    done = _generate(backend, long, greedy, cancelled)
    assert done.stats.stop_reason == "cancelled" and done.stats.generated_tokens == 0
    assert backend._kv_tokens == []  # a half-evaluated prompt is not reused
    (expected,) = _through_llama_generate(backend, greedy, long)
    assert _generate(backend, long, greedy).text == expected


# --- mixture-of-experts tensor placement

OVERRIDDEN = re.compile(r"tensor blk\.(\d+)\.(ffn_\w+_exps)\.weight \(.*\) buffer type overridden to CPU")


def _load_and_chat(path, settings: LoadSettings):
    backend = LlamaCppBackend()
    info = backend.load(str(path), settings)
    try:
        events = list(backend.generate("r", [Message("user", "hi")], SamplingSettings(max_tokens=6, seed=3),
                                       threading.Event()))
    finally:
        backend.unload()
    assert isinstance(events[-1], Done) and events[-1].stats.generated_tokens == 6
    return info


@pytest.mark.parametrize(("cpu_moe", "layers"), [(-1, {0, 1, 2, 3}), (2, {0, 1}), (0, set())])
def test_experts_in_ram_reach_llama_cpp_as_its_own_tensor_overrides(tiny_moe, capfd, cpu_moe, layers):
    info = _load_and_chat(tiny_moe.gguf_q8_0, LoadSettings(n_ctx=512, cpu_moe=cpu_moe))
    moved = OVERRIDDEN.findall(capfd.readouterr().err)
    assert {int(il) for il, _ in moved} == layers
    assert len(moved) == 3 * len(layers)  # gate, up and down expert stacks of each of those layers
    assert info.details.get("experts_in_ram", 0) == len(layers)


def test_experts_in_ram_on_a_dense_model_changes_nothing_and_says_so(tiny_models, capfd):
    info = _load_and_chat(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512, cpu_moe=-1))
    assert not OVERRIDDEN.findall(capfd.readouterr().err)
    assert info.details["experts_in_ram"] == 0 and "not a mixture-of-experts" in info.details["experts_note"]


def test_the_patterns_are_llama_cpps_n_cpu_moe_and_cpu_moe():
    every = expert_tensor_patterns(-1)
    first_two = expert_tensor_patterns(2)
    names = ["blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_up_exps.weight", "blk.1.ffn_down_chexps.weight",
             "blk.10.ffn_gate_exps.weight", "blk.0.ffn_up_shexp.weight", "blk.0.ffn_up.weight",
             "blk.2.ffn_down_exps.bias"]
    hits = {n for n in names if any(re.search(p, n) for p in every)}
    assert hits == {"blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_up_exps.weight", "blk.1.ffn_down_chexps.weight",
                    "blk.10.ffn_gate_exps.weight", "blk.2.ffn_down_exps.bias"}
    assert {n for n in names if any(re.search(p, n) for p in first_two)} == {
        "blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_up_exps.weight", "blk.1.ffn_down_chexps.weight"}
    assert expert_tensor_patterns(0) == []
    with pytest.raises(ValueError):
        LoadSettings(cpu_moe=-2).validate()


@pytest.mark.real_model
@pytest.mark.parametrize("params", [
    dict(seed=11, temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1),
    dict(seed=3, temperature=1.0, top_k=5, top_p=1.0, min_p=0.0, repeat_penalty=2.0),
    dict(seed=2, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.5),
    dict(seed=5, temperature=0.5, top_k=8, top_p=0.9, min_p=0.0, repeat_penalty=0.8),
], ids=["defaults", "harsh", "no-top-k", "rewarding"])
def test_the_penalty_on_the_top_candidates_samples_what_llamas_chain_samples(smollm2_gguf, params):
    """Where top-k follows, the chain's penalty sees only the top ``top_k + 64`` candidates (sampling.sampler_chain);
    on trained weights, which repeat their tokens, every token is still the one Llama.generate's chain (the penalty
    over the whole vocabulary) draws for the seed, a penalty that rewards or no top-k the same as ever."""
    backend = LlamaCppBackend()
    backend.load(str(smollm2_gguf), LoadSettings(n_ctx=2048, threads=2, gpu_layers=0))
    try:
        sampling = SamplingSettings(max_tokens=200, **params)
        chain = sampler_chain(llama_cpp, backend._llm, sampling)
        first = llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, 0)).decode()
        llama_cpp.llama_sampler_free(chain)
        assert first == ("top-k" if params["top_k"] and params["repeat_penalty"] > 1 else "penalties")
        poem = [Message("user", "Write a long poem about the sea, the waves and the sea again.")]
        done = _generate(backend, poem, sampling)
        assert done.stats.generated_tokens > 20
        assert [done.text] == _through_llama_generate(backend, sampling, poem)
        # the penalty took part: without it the same seed draws another reply
        assert _generate(backend, poem, dataclasses.replace(sampling, repeat_penalty=1.0)).text != done.text
    finally:
        backend.unload()
