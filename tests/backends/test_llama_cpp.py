"""llama.cpp's tensor placement for mixture-of-experts models: what QuantDesk asks for is what llama.cpp does,
read back from llama.cpp's own log of the tensors it moved."""

from __future__ import annotations

import re
import threading

import pytest

from backends.base import Done, LoadSettings, Message, SamplingSettings, expert_tensor_patterns

OVERRIDDEN = re.compile(r"tensor blk\.(\d+)\.(ffn_\w+_exps)\.weight \(.*\) buffer type overridden to CPU")


def _load_and_chat(path, settings: LoadSettings):
    from backends.llama_cpp import LlamaCppBackend

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
