"""Writes random-weight GGUF files with the exact tensor layout llama.cpp expects for a few real
architectures (llama, qwen2, gemma2, gemma3, qwen3moe), so llama.cpp can load them and the metadata
readers see real headers. Used by the unit tests (tiny shapes) and by tests/bench/fit_accuracy.py
(real shapes, fewer layers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class ArchSpec:
    arch: str  # llama | qwen2 | gemma2 | gemma3 | qwen3moe
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    head_dim: int = 0  # 0: n_embd // n_head
    n_ctx_train: int = 8192
    tied: bool = False
    sliding_window: int = 0
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    name: str = "random"
    extra_kv: dict = field(default_factory=dict)

    @property
    def hd(self) -> int:
        return self.head_dim or self.n_embd // self.n_head


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += [f"tok{i}" for i in range(n_vocab - len(tokens))]
    types += [1] * (n_vocab - len(types))
    scores = [0.0] * n_vocab
    return tokens[:n_vocab], scores, types[:n_vocab]


def write_gguf(path: Path, spec: ArchSpec, *, seed: int = 0, dtype=np.float16,
               chat_template: str | None = None) -> Path:
    """Write ``spec`` as an F16 (or F32) GGUF with random weights; norms are ones."""
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), spec.arch)
    a = spec.arch
    writer.add_name(spec.name)
    writer.add_uint32(f"{a}.context_length", spec.n_ctx_train)
    writer.add_uint32(f"{a}.embedding_length", spec.n_embd)
    writer.add_uint32(f"{a}.block_count", spec.n_layer)
    writer.add_uint32(f"{a}.feed_forward_length", spec.n_ff)
    writer.add_uint32(f"{a}.attention.head_count", spec.n_head)
    writer.add_uint32(f"{a}.attention.head_count_kv", spec.n_head_kv)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_uint32(f"{a}.rope.dimension_count", spec.hd)
    writer.add_float32(f"{a}.rope.freq_base", 10000.0)
    if spec.head_dim:
        writer.add_uint32(f"{a}.attention.key_length", spec.hd)
        writer.add_uint32(f"{a}.attention.value_length", spec.hd)
    if spec.sliding_window:
        writer.add_uint32(f"{a}.attention.sliding_window", spec.sliding_window)
    if spec.n_expert:
        writer.add_uint32(f"{a}.expert_count", spec.n_expert)
        writer.add_uint32(f"{a}.expert_used_count", spec.n_expert_used)
        writer.add_uint32(f"{a}.expert_feed_forward_length", spec.n_ff_exp)
    for key, value in spec.extra_kv.items():
        if isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        else:
            writer.add_uint32(key, value)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == np.float16 else gguf.LlamaFileType.ALL_F32)
    tokens, scores, types = _vocab(spec.n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    if chat_template:
        writer.add_chat_template(chat_template)

    def mat(rows: int, cols: int, *lead: int) -> np.ndarray:
        return (rng.standard_normal((*lead, rows, cols), dtype=np.float32) * 0.02).astype(dtype)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    e, hd = spec.n_embd, spec.hd
    writer.add_tensor("token_embd.weight", mat(spec.n_vocab, e))
    writer.add_tensor("output_norm.weight", ones(e))
    if not spec.tied:
        writer.add_tensor("output.weight", mat(spec.n_vocab, e))
    for il in range(spec.n_layer):
        p = f"blk.{il}."
        writer.add_tensor(p + "attn_norm.weight", ones(e))
        writer.add_tensor(p + "attn_q.weight", mat(spec.n_head * hd, e))
        writer.add_tensor(p + "attn_k.weight", mat(spec.n_head_kv * hd, e))
        writer.add_tensor(p + "attn_v.weight", mat(spec.n_head_kv * hd, e))
        writer.add_tensor(p + "attn_output.weight", mat(e, spec.n_head * hd))
        if a == "qwen2":
            writer.add_tensor(p + "attn_q.bias", np.zeros(spec.n_head * hd, dtype=np.float32))
            writer.add_tensor(p + "attn_k.bias", np.zeros(spec.n_head_kv * hd, dtype=np.float32))
            writer.add_tensor(p + "attn_v.bias", np.zeros(spec.n_head_kv * hd, dtype=np.float32))
        if a in ("gemma3", "qwen3moe", "qwen3"):
            writer.add_tensor(p + "attn_q_norm.weight", ones(hd))
            writer.add_tensor(p + "attn_k_norm.weight", ones(hd))
        if a in ("gemma2", "gemma3"):
            writer.add_tensor(p + "post_attention_norm.weight", ones(e))
            writer.add_tensor(p + "post_ffw_norm.weight", ones(e))
        writer.add_tensor(p + "ffn_norm.weight", ones(e))
        if spec.n_expert:
            writer.add_tensor(p + "ffn_gate_inp.weight", mat(spec.n_expert, e).astype(np.float32))
            writer.add_tensor(p + "ffn_gate_exps.weight", mat(spec.n_ff_exp, e, spec.n_expert))
            writer.add_tensor(p + "ffn_up_exps.weight", mat(spec.n_ff_exp, e, spec.n_expert))
            writer.add_tensor(p + "ffn_down_exps.weight", mat(e, spec.n_ff_exp, spec.n_expert))
        else:
            writer.add_tensor(p + "ffn_gate.weight", mat(spec.n_ff, e))
            writer.add_tensor(p + "ffn_up.weight", mat(spec.n_ff, e))
            writer.add_tensor(p + "ffn_down.weight", mat(e, spec.n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


TINY_LLAMA = ArchSpec("llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=300,
                      n_ctx_train=2048, name="tiny-llama")
TINY_GEMMA3 = ArchSpec("gemma3", n_layer=7, n_embd=64, n_head=4, n_head_kv=1, n_ff=128, n_vocab=300,
                       head_dim=32, sliding_window=512, tied=True, n_ctx_train=4096, name="tiny-gemma3")
TINY_MOE = ArchSpec("qwen3moe", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=300,
                    head_dim=16, n_expert=8, n_expert_used=2, n_ff_exp=32, name="tiny-moe")
