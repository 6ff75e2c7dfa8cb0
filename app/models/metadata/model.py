"""The one shape of a model's metadata, whatever its format: ``ModelMetadata`` and its tensors and recurrent state,
as app/models/estimate.py and the pages read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.datatypes import ModelSampling
from app.models.fields import U32_MAX
from app.models.quants import QuantInfo


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order for GGUF (ne0 first), row-major for safetensors
    dtype: str  # ggml type name ("Q4_K", "F16") or safetensors dtype ("BF16", "U32")
    n_bytes: int
    offset: int = 0  # GGUF: where its data starts, from the start of the data section

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n


@dataclass(frozen=True)
class RecurrentShape:
    """The per-sequence state of a model's recurrent layers, as llama.cpp sizes it (src/llama-hparams.cpp
    n_embd_r / n_embd_s: one row of each per layer and sequence, in F32)."""

    layers: tuple[bool, ...]  # per layer: keeps a recurrent state
    conv_kernel: int = 0  # ssm.conv_kernel (Mamba, gated delta net)
    inner_size: int = 0  # ssm.inner_size
    state_size: int = 0  # ssm.state_size
    group_count: int = 0  # ssm.group_count
    wkv_head_size: int = 0  # RWKV
    token_shift_count: int = 2  # RWKV (llama.cpp's default)
    shortconv_l_cache: int = 0  # LFM2
    attention_too: bool = False  # Falcon-H1: every layer has both a state and an attention cache
    n_embd: int = 0

    @property
    def r_elements(self) -> int:
        """Rolling (convolution or token-shift) state per layer and sequence."""
        if self.wkv_head_size:
            return self.token_shift_count * self.n_embd
        if self.shortconv_l_cache:
            return self.n_embd * (self.shortconv_l_cache - 1)
        return max(self.conv_kernel - 1, 0) * (self.inner_size + 2 * self.group_count * self.state_size)

    @property
    def s_elements(self) -> int:
        """Recurrent (SSM / WKV) state per layer and sequence."""
        if self.wkv_head_size:
            return self.n_embd * self.wkv_head_size
        return self.state_size * self.inner_size

    @property
    def layer_bytes(self) -> int:
        return (self.r_elements + self.s_elements) * 4  # llama.cpp keeps both in F32


@dataclass
class ModelMetadata:
    format: str  # gguf | mlx | exl2 | exl3 | safetensors
    source: str
    architecture: str = ""
    name: str = ""
    quant: QuantInfo | None = None
    file_type: str = ""  # GGUF general.file_type as a name ("MOSTLY_Q4_K_M")
    block_count: int = 0
    context_length: int = 0
    embedding_length: int = 0
    vocab_size: int = 0
    head_count: list[int] = field(default_factory=list)  # per layer
    head_count_kv: list[int] = field(default_factory=list)  # per layer; 0 = no KV in that layer
    key_length: int = 0
    value_length: int = 0
    # Head sizes of the sliding-window layers where they differ (GGUF attention.key_length_swa /
    # value_length_swa, e.g. Gemma 4: 256 on window layers, 512 on full ones); 0 = same as above.
    key_length_swa: int = 0
    value_length_swa: int = 0
    # The last N layers reuse an earlier layer's KV and keep none of their own (GGUF
    # attention.shared_kv_layers; llama.cpp hparams.n_layer_kv_from_start = n_layer - N).
    shared_kv_layers: int = 0
    sliding_window: int = 0
    swa_layers: list[bool] = field(default_factory=list)  # per layer; True = sliding-window layer
    expert_count: int = 0
    expert_used_count: int = 0
    # Recurrent layers (state-space, RWKV, short convolution, gated delta net): which layers keep a per-sequence
    # state instead of (or, in Falcon-H1, beside) a KV cache, and its size; None for attention-only models.
    recurrent: RecurrentShape | None = None
    # Multi-token-prediction blocks at the end (GGUF nextn_predict_layers): llama.cpp neither loads them nor
    # gives them a cache unless asked to (llama_model_params.load_mtp, off by default).
    nextn_layers: int = 0
    # Qwen3-VL: the first N layers add a slice of the input embedding (image features) to their output, so the
    # input embedding is (1 + N) x embedding_length wide (GGUF n_deepstack_layers; llama.cpp n_embd_inp()).
    deepstack_layers: int = 0
    kv_lora_rank: int = 0  # MLA (DeepSeek-V2/V3): the cache holds the compressed latent
    rope_dim_mla: int = 0  # MLA: rope part of the key, cached next to the latent
    tied_embeddings: bool = False
    chat_template: str | None = None
    # The pooling a GGUF declares (architectures.POOLING_NAMES): "" a chat model, mean | cls | last an embedding
    # model, rank a reranker (scores a passage for a question).
    pooling: str = ""
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    tensors: list[TensorInfo] = field(default_factory=list)
    shard_count: int = 1
    header_bytes: int = 0  # bytes before tensor data (GGUF)
    notes: list[str] = field(default_factory=list)
    # The vision projector that loads with it (app.models.vision.ProjectorInfo), where one was found: the
    # estimator counts its weights, its compute buffer and the context an image takes.
    projector: Any = None
    # The sampling the model recommends (GGUF general.sampling.*, generation_config.json): app/models/metadata/
    # sampling.py reads it; app.datatypes.choose_sampling applies it where the user set nothing.
    sampling: ModelSampling = field(default_factory=ModelSampling)

    @property
    def weights_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)

    def is_swa_layer(self, il: int) -> bool:
        return bool(self.swa_layers) and self.swa_layers[il]

    def layer_key_length(self, il: int) -> int:
        return self.key_length_swa if self.key_length_swa and self.is_swa_layer(il) else self.key_length

    def layer_value_length(self, il: int) -> int:
        return self.value_length_swa if self.value_length_swa and self.is_swa_layer(il) else self.value_length

    def layer_kv_heads(self, il: int) -> int:
        """KV heads that layer ``il`` caches itself: 0 for a layer without attention (a recurrent layer, an
        unloaded multi-token-prediction block) or one that shares an earlier layer's cache."""
        if il >= self.block_count - self.shared_kv_layers or not self.head_count_kv:
            return 0
        if il >= self.block_count - self.nextn_layers:
            return 0
        if self.recurrent and self.recurrent.layers[il] and not self.recurrent.attention_too:
            return 0
        return self.head_count_kv[il]

    @property
    def n_params(self) -> int:
        """Logical weights. MLX packs a quantized matrix into uint32 words and keeps its scales (and
        biases) beside it: the matrix holds scales × group_size weights, and the scales and biases are
        overhead that counts in bytes, not in parameters."""
        group = self.quant.group_size if self.format == "mlx" and self.quant and self.quant.group_size else 0
        by_name = {t.name: t for t in self.tensors} if group else {}
        total = 0
        for t in self.tensors:
            stem, _, kind = t.name.rpartition(".")
            if group and kind in ("scales", "biases") and f"{stem}.weight" in by_name:
                continue
            scales = by_name.get(f"{stem}.scales") if kind == "weight" else None
            total += scales.n_elements * group if scales is not None else t.n_elements
        return total

    @property
    def bits_per_weight(self) -> float | None:
        n = self.n_params
        if not n:
            return self.quant.bits_per_weight if self.quant else None
        return self.weights_bytes * 8 / n

    def summary(self) -> dict[str, Any]:
        """The JSON shape of ``quantdesk inspect``."""
        return {
            "format": self.format, "source": self.source, "architecture": self.architecture,
            "name": self.name, "quant": self.quant.quant if self.quant else None,
            "quant_info": self.quant.to_dict() if self.quant else None,
            "file_type": self.file_type, "bits_per_weight": _round(self.bits_per_weight, 3),
            "params": self.n_params, "weights_bytes": self.weights_bytes,
            "block_count": self.block_count, "context_length": self.context_length,
            "embedding_length": self.embedding_length, "vocab_size": self.vocab_size,
            "head_count": _compact(self.head_count), "head_count_kv": _compact(self.head_count_kv),
            "key_length": self.key_length, "value_length": self.value_length,
            "key_length_swa": self.key_length_swa or None, "value_length_swa": self.value_length_swa or None,
            "shared_kv_layers": self.shared_kv_layers or None,
            "sliding_window": self.sliding_window or None,
            "swa_layers": sum(self.swa_layers) if self.swa_layers else 0,
            "expert_count": self.expert_count, "expert_used_count": self.expert_used_count,
            "recurrent_layers": sum(self.recurrent.layers) if self.recurrent else 0,
            "nextn_layers": self.nextn_layers or None, "deepstack_layers": self.deepstack_layers or None,
            "kv_lora_rank": self.kv_lora_rank or None, "tied_embeddings": self.tied_embeddings,
            "shard_count": self.shard_count, "tensor_count": len(self.tensors),
            "has_chat_template": bool(self.chat_template), "pooling": self.pooling or None,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id, "notes": list(self.notes),
            "sees_images": None if self.projector is None else {
                "projector": self.projector.file_name, "projector_type": self.projector.projector_type,
                "image_tokens": self.projector.image_tokens},
            "recommended_sampling": self.sampling.values() or None,
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _compact(values: list[int]) -> int | list[int] | None:
    if not values:
        return None
    return values[0] if len(set(values)) == 1 else list(values)


def token_id(value: Any) -> int | None:
    """A token id from GGUF or config.json (config.json may give a list of eos ids: the first counts);
    None for anything that is not one."""
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U32_MAX else None
