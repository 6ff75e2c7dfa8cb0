"""Memory per device for a model at a context size, from metadata alone.

llama.cpp (GGUF) follows llama.cpp's own allocation (checked against llama-cpp-python 0.3.36's
log by tests/bench/fit_accuracy.py and, for MoE and recurrent models, tests/bench/fit_moe_hybrid.py):
- weights: ``-ngl k`` puts layers ``il >= n_layer + 1 - k`` on the GPU, where index ``n_layer`` is the
  output layer, so k = 1 offloads just the output layer; token embeddings always stay on the CPU;
- KV cache per layer on that layer's device: n_ctx is padded to 256; sliding-window layers (and Llama 4's
  chunked ones, n_swa 8192) hold ``min(n_ctx, pad(n_swa + n_ubatch, 256))`` cells (unless ``swa_full``);
  layers with no KV heads hold nothing; MLA caches the compressed latent; cache types f16 / q8_0 / q4_0 cost
  2, 34/32, 18/32 bytes per element;
- compute buffer: the peak of the ubatch graph (attention scores without flash attention, the FFN or
  expert intermediates, the logits of a full ubatch) plus the attention masks (and Qwen3-VL's input embedding,
  padded for its deepstack layers);
- output buffer: logits for one token per sequence on the host; fixed runtime overheads per device;
- several sequences (``n_seq``, a unified cache): the full layers' cells stay n_ctx; each sequence adds its window
  on sliding-window layers (``n_swa * n_seq + n_ubatch``), its recurrent state rows and its logits row;
- recurrent layers (Mamba, RWKV, LFM2's short convolutions, gated delta nets) keep one F32 r and s state row
  per layer and sequence instead of KV cells (src/llama-memory-recurrent.cpp), on the layer's device;
  hybrids give only their attention layers a KV cache (Falcon-H1: every layer both);
- MoE experts kept in RAM (``cpu_moe``: llama.cpp's --n-cpu-moe / --cpu-moe tensor overrides) are CPU weights of
  a GPU layer: read from RAM by the CPU for each decoded token; a prompt batch copies them to the GPU;
- multi-token-prediction blocks (nextn_predict_layers) are not loaded and hold no cache.
MLX: weights + KV (grows in steps of 256; sliding-window layers keep the window) + overhead.
EXL2/EXL3: bpw × parameters + cache at its bit width + a reserve.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.models.metadata import RECURRENT_ARCHS, ModelMetadata, TensorInfo
from app.datatypes import EXPERT_TENSORS_REGEX

MiB = 1 << 20
GiB = 1 << 30
KV_TYPE_BYTES = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                 "q5_0": 22 / 32, "q5_1": 24 / 32}
CTX_PAD = 256
# Process baseline of an engine host (Python + llama.cpp libraries), measured as peak RSS before the
# model loads on this stack (about 50 MiB) with room for the tokenizer and the loader's buffers.
CPU_RUNTIME_BYTES = 160 * MiB
# CUDA context + cuBLAS workspace per GPU: 300-500 MiB in NVML readings on consumer cards.
GPU_RUNTIME_BYTES = 450 * MiB
MLX_RUNTIME_BYTES = 300 * MiB
EXL_RESERVE_BYTES = 600 * MiB  # text-generation-webui users needed ~577 MiB of slack beyond weights + cache

# Architectures whose layers are all attention (or attention + FFN/MoE), i.e. that the math below
# describes, plus the recurrent and hybrid ones whose state is sized (metadata.RECURRENT_ARCHS). Anything
# else (other caches, encoder-decoder) gets "unknown" with the reason.
LLAMA_CPP_MODELLED = frozenset({
    "llama", "mistral3", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi2",
    "phi3", "starcoder2", "olmo", "olmo2", "olmoe", "granite", "granitemoe", "deepseek", "deepseek2",
    "cohere2", "command-r", "gpt-oss", "exaone", "internlm2", "stablelm", "glm4", "glm4moe", "ernie4_5",
    "ernie4_5-moe", "smollm3", "minicpm", "baichuan", "falcon", "gptneox", "gpt2", "bloom", "mpt",
    "starcoder", "qwen", "orion", "arcee", "dots1", "seed_oss", "hunyuan-moe", "exaone4", "apertus",
    "qwen3vl", "qwen3vlmoe", "llama4", "minimax-m2", "qwen2vl", "bailingmoe2", "afmoe",
})
# Every other architecture the bundled llama.cpp knows (src/llama-arch.cpp LLM_ARCH_NAMES), each with why it is
# not sized: what check_modelled tells the user. tests/models/test_architecture_coverage.py asks llama.cpp for its
# list and fails on a name found in none of these sets, so a new llama.cpp says which architecture to look at.
_ENCODER = "an encoder (embeddings or reranking), not a chat model"
_SPEECH = "a text-to-speech model, not a chat model"
_DIFFUSION = "a diffusion language model (non-causal), which llama.cpp runs with llama-diffusion-cli, not as a chat"
_DRAFT = "a draft model for speculative decoding, run beside its target model"
_PLAIN = ("attention and FFN layers like llama, but its buffers have not been checked against llama.cpp's "
          "log yet")
_WINDOW = "sliding-window attention layers whose layout QuantDesk has not checked for it yet"
_MLA = "compressed (MLA) attention whose cache layout QuantDesk has not checked for it yet"
_SPARSE = "compressed attention with sparse-attention indexer caches QuantDesk does not size yet"
_LINEAR = "it mixes linear attention with caches QuantDesk does not size yet"
LLAMA_CPP_NOT_SIZED: dict[str, str] = {
    **dict.fromkeys(("bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2", "jina-bert-v3",
                     "eurobert", "gemma-embedding", "llama-embed", "t5encoder"), _ENCODER),
    "t5": "an encoder-decoder (T5), not a decoder-only chat model",
    "clip": "a vision or audio projector (mmproj), loaded beside a model, never as one",
    "wavtokenizer-dec": "an audio codec's decoder (speech output), not a chat model",
    **dict.fromkeys(("pockettts", "qwen3tts"), _SPEECH),
    **dict.fromkeys(("dream", "llada", "llada-moe", "rnd1"), _DIFFUSION),
    **dict.fromkeys(("eagle3", "dflash", "gemma4-assistant"), _DRAFT),
    "gptj": "llama.cpp names it but has no implementation of it (its loader refuses the file)",
    **dict.fromkeys(("arctic", "bailingmoe", "bitnet", "chameleon", "chatglm", "codeshell", "cogvlm",
                     "dbrx", "deci", "grok", "grovemoe", "hunyuan-dense", "hunyuan_vl", "hy_v3", "jais", "jais2",
                     "maincoder", "nemotron", "openelm", "plamo", "refact", "xverse",
                     "talkie", "pangu-embedded", "graniteswitch", "hrm_text", "paddleocr", "deepseek2-ocr"), _PLAIN),
    **dict.fromkeys(("cohere2moe", "exaone-moe", "granite_swa", "laguna", "maple", "mellum", "mimo2",
                     "muse-glimmer", "plamo3", "smallthinker", "spark2_5", "step35", "phimoe", "nanbeige"), _WINDOW),
    "gemma3n": "per-layer embeddings and KV caches shared between layers, not sized yet",
    "gemma4": "per-layer embeddings and KV caches shared between layers beside its window layers, not sized yet",
    **dict.fromkeys(("mistral4", "minicpm3", "plm"), _MLA),
    **dict.fromkeys(("deepseek32", "glm-dsa", "dots3note", "minimax-m3", "hy_v4"), _SPARSE),
    **dict.fromkeys(("kimi-linear", "kimi-k3", "glm5-next", "qwen4exp", "deepseek4", "minimax-01", "bailingmoe3"),
                    _LINEAR),
}
# config.json model types with recurrent layers (MLX / safetensors are not sized).
CONFIG_RECURRENT = frozenset({"mamba", "mamba2", "jamba", "falcon_h1", "falcon-h1", "granitemoehybrid", "lfm2",
                              "lfm2_moe", "nemotron_h", "qwen3_next", "qwen3_5", "qwen3_5_moe", "rwkv6", "rwkv7",
                              "plamo2", "kimi_linear", "minimax"})


class UnknownModel(Exception):
    """The estimator does not model this model; ``str()`` is the reason for the user."""


@dataclass
class DeviceUse:
    name: str  # "CPU", "GPU0 (NVIDIA RTX 4090)", "unified"
    weights_bytes: int = 0
    kv_bytes: int = 0
    compute_bytes: int = 0
    other_bytes: int = 0  # runtime overheads no engine logs (process baseline, driver context)
    output_bytes: int = 0  # llama.cpp's output (logits) buffer
    state_bytes: int = 0  # recurrent layers' per-sequence state (llama.cpp's RS buffer)
    vision_bytes: int = 0  # a vision projector: its weights and its compute buffer for one image (libmtmd)

    @property
    def total_bytes(self) -> int:
        return self.buffer_bytes + self.other_bytes + self.vision_bytes

    @property
    def buffer_bytes(self) -> int:
        """What llama.cpp allocates and logs on this device: weights, KV, recurrent state, compute and output."""
        return self.weights_bytes + self.kv_bytes + self.state_bytes + self.compute_bytes + self.output_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "weights_bytes": self.weights_bytes, "kv_bytes": self.kv_bytes,
                "state_bytes": self.state_bytes, "compute_bytes": self.compute_bytes,
                "output_bytes": self.output_bytes, "other_bytes": self.other_bytes, "vision_bytes": self.vision_bytes,
                "total_bytes": self.total_bytes}


# A reranker (rank pooling) loads with its batch as large as its context, up to this (backends/llama_cpp/rerank.py):
# a non-causal model must read a question and its passage in one batch, and the compute buffer grows with the batch
# (without flash attention a batch's attention scores are batch x context x heads floats: 256 MiB for
# Qwen3-Reranker-0.6B's 16 heads at 2048), so a model with a 32k context does not get a 32k batch.
RERANK_UBATCH = 2048


def ubatch_for(meta: ModelMetadata, n_ctx: int) -> int:
    """The physical batch llama.cpp runs ``meta`` with at ``n_ctx``: a reranker's is its context (up to
    RERANK_UBATCH), any other model's llama-cpp-python's 512."""
    return min(n_ctx, RERANK_UBATCH) if meta.pooling == "rank" else 512


@dataclass
class LlamaCppSettings:
    n_ctx: int = 8192
    gpu_layers: int = 0  # llama.cpp -ngl; >= n_layer + 1 puts everything on the GPU
    kv_type: str = "f16"
    n_ubatch: int = 512
    flash_attn: bool = False
    swa_full: bool = False
    # Sequences decoded together (LoadSettings.parallel: llama.cpp's n_seq_max with a unified KV cache): the full
    # layers' cache stays the context's size, but each sequence keeps its own window on sliding-window layers, its own
    # recurrent state rows and its own row of logits (src/llama-kv-cache-iswa.cpp, llama-memory-recurrent.cpp,
    # llama_context's output_reserve(n_seq_max)).
    n_seq: int = 1
    # llama.cpp's CPU backend copies Q4_0 / Q4_K / IQ4_NL matrices into an interleaved layout
    # (the CPU_REPACK buffer) on AVX2/AVX-512 and ARM NEON CPUs; the mapped original stays mapped.
    cpu_repack: bool = True
    cpu_moe: int = 0  # MoE experts kept in RAM: those of the first N layers, -1 all (app.datatypes.LoadSettings)
    # A GPU runtime (Vulkan, CUDA, ROCm): llama.cpp offloads a prompt batch's matmuls to the GPU at any -ngl
    # (op offload), so the GPU holds a compute buffer even at -ngl 0, and the CPU's layers use the GPU's
    # pinned host buffer type instead of the repack (both measured on Vulkan).
    gpu_runtime: bool = False
    # The largest tensor the GPU can address (Vulkan: maxStorageBufferRange, 128 MiB on lavapipe, up to 4 GiB
    # on most GPUs): a bigger weight stays on the host, a bigger op runs there. None: no limit.
    gpu_max_tensor_bytes: int | None = None
    # ggml's largest single allocation for the GPU's compute buffer and for its pinned host one (Vulkan: 1 GiB
    # blocks). None: one block.
    gpu_chunk_bytes: int | None = None
    host_chunk_bytes: int | None = None


@dataclass
class Estimate:
    format: str
    n_ctx: int
    gpu_layers: int
    n_layers: int  # offloadable layers: blocks + the output layer
    devices: list[DeviceUse]
    kv_type: str = "f16"
    bytes_per_token_cpu: int = 0  # weights read per decoded token from each side
    bytes_per_token_gpu: int = 0
    notes: list[str] = field(default_factory=list)
    cpu_moe: int = 0  # how many (leading) layers' experts stay in RAM; 0 for none or a model without experts
    image_tokens: int = 0  # context tokens one image takes, with a vision projector (0: none)

    def device(self, prefix: str) -> DeviceUse | None:
        return next((d for d in self.devices if d.name.startswith(prefix)), None)


def pad(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def check_modelled(meta: ModelMetadata) -> None:
    arch = meta.architecture
    if meta.format == "gguf" and arch in LLAMA_CPP_NOT_SIZED:
        raise UnknownModel(f"the {arch} architecture is not modelled by QuantDesk's estimator: "
                           f"{LLAMA_CPP_NOT_SIZED[arch]}.")
    if meta.format != "gguf" and arch in CONFIG_RECURRENT:
        raise UnknownModel(f"{arch} has recurrent (state-space) layers; QuantDesk sizes them for llama.cpp "
                           f"(GGUF) only.")
    if meta.format == "gguf" and arch not in LLAMA_CPP_MODELLED and arch not in RECURRENT_ARCHS:
        raise UnknownModel(f"the {arch or 'unnamed'} architecture is not modelled by QuantDesk's estimator "
                           f"(nor known to the bundled llama.cpp).")
    attends = meta.head_count and any(meta.head_count)
    if not meta.block_count or not (attends or (meta.recurrent and all(meta.recurrent.layers))):
        raise UnknownModel("the model's metadata lacks layer or attention-head counts.")
    if meta.sliding_window and not any(meta.swa_layers) and meta.format != "gguf":
        raise UnknownModel(f"{arch} uses a sliding window whose layer pattern is not known here.")


def _layer_of(tensor_name: str, n_layer: int) -> int | None:
    """Block index of a GGUF tensor; n_layer for the output layer (and for a ``blk.`` name without a block
    number, which llama.cpp would not load either); None for the input layer."""
    if tensor_name.startswith("blk."):
        index = tensor_name.split(".", 2)[1]
        if index.isascii() and index.isdigit() and len(index) < 10:
            return int(index)
        return n_layer
    if tensor_name.startswith("token_embd") or tensor_name.startswith("token_types") \
            or tensor_name.startswith("position_embd") or tensor_name.startswith("per_layer_token_embd"):
        return None
    return n_layer  # output, output_norm, and other top-level tensors belong to the output layer


def recurrent_state_bytes(meta: ModelMetadata, il: int) -> int:
    """llama.cpp's r and s state of layer ``il`` for one sequence (llama-cpp-python runs one, without
    rollback snapshots: n_rs_seq 0)."""
    shape = meta.recurrent
    if shape is None or not shape.layers[il] or il >= meta.block_count - meta.nextn_layers:
        return 0
    return shape.layer_bytes


_EXPERT_TENSOR = re.compile(EXPERT_TENSORS_REGEX)


def expert_in_ram(tensor_name: str, layer: int | None, cpu_moe: int) -> bool:
    """Whether llama.cpp keeps this tensor in RAM under ``cpu_moe``: one compiled pattern and the block index,
    equivalent to the per-layer patterns the backend hands over (app.datatypes.expert_tensor_patterns; a
    test checks the two agree) and cheap enough for the recommender's many estimates."""
    if not cpu_moe or layer is None or (0 < cpu_moe <= layer):
        return False
    return _EXPERT_TENSOR.search(tensor_name) is not None


def kv_cells(meta: ModelMetadata, il: int, n_ctx: int, s: LlamaCppSettings) -> int:
    if meta.swa_layers and meta.swa_layers[il] and not s.swa_full:
        return min(n_ctx, pad(meta.sliding_window * s.n_seq + s.n_ubatch, CTX_PAD))
    return n_ctx


def kv_layer_bytes(meta: ModelMetadata, il: int, cells: int, kv_type: str) -> int:
    n_kv_heads = meta.layer_kv_heads(il)
    if n_kv_heads == 0:
        return 0
    per_elem = KV_TYPE_BYTES[kv_type]
    if meta.kv_lora_rank:  # MLA: K holds latent + rope part, V the latent
        k_dim, v_dim = meta.kv_lora_rank + meta.rope_dim_mla, meta.kv_lora_rank
    else:  # llama.cpp n_embd_k_gqa(il): window layers may have their own head size (Gemma 4)
        k_dim, v_dim = n_kv_heads * meta.layer_key_length(il), n_kv_heads * meta.layer_value_length(il)
    return int(cells * (k_dim + v_dim) * per_elem)


@dataclass(frozen=True)
class GraphParts:
    """The big tensors of llama.cpp's ubatch graph (f32 bytes), from which each device's compute buffer peaks."""

    scores: int  # attention scores of the longest layer (q·kᵀ over n_kv cells; 0 with flash attention)
    attention: int  # those scores + q, k, v and the attention output of one ubatch
    masks: int  # the attention masks (one per cache size)
    kv_views: int  # one layer's K and V cache, as copied to another device that runs its attention
    ffn: int
    moe: int
    logits: int  # the output layer's logits for a full ubatch
    residual: int  # the residual stream and norms
    embeddings: int  # the ubatch's input embeddings (looked up on the host)
    # Qwen3-VL: the input embedding padded to (1 + deepstack layers) x n_embd, live until the last deepstack layer
    # has added its slice (llama.cpp build_inp_embd's ggml_pad; zeros for text tokens)
    deepstack: int = 0


def graph_parts(meta: ModelMetadata, n_ctx: int, s: LlamaCppSettings) -> GraphParts:
    n_ub = min(s.n_ubatch, n_ctx)
    f32 = 4
    kinds = {kv_cells(meta, il, n_ctx, s) for il in range(meta.block_count) if meta.layer_kv_heads(il)}
    n_kv_max = max(kinds) if kinds else 0
    n_head = max(meta.head_count)
    mask_elem = 2 if s.flash_attn else f32
    masks = sum(k * pad(n_ub, 64) * mask_elem for k in kinds)
    q_width = n_head * max(max(meta.layer_key_length(il) for il in range(meta.block_count)), 1)
    scores = 0 if s.flash_attn else n_kv_max * n_ub * n_head * f32
    kv_views = max((kv_layer_bytes(meta, il, n_kv_max, s.kv_type) for il in range(meta.block_count)), default=0)
    ffn_lengths = [t.shape[1] for t in meta.tensors if t.name.endswith("ffn_gate.weight") and len(t.shape) > 1]
    experts = [t for t in meta.tensors if t.name.endswith("ffn_gate_exps.weight") and len(t.shape) > 2]
    moe = 0
    if experts and meta.expert_used_count:
        n_ff_exp = experts[0].shape[1]
        moe = n_ub * n_ff_exp * meta.expert_used_count * f32 * 3 + n_ub * meta.expert_count * f32 * 4
    embd_inp = n_ub * meta.embedding_length * (1 + meta.deepstack_layers) * f32  # llama.cpp n_embd_inp()
    return GraphParts(scores=scores, attention=scores + n_ub * q_width * f32 * 3, masks=masks, kv_views=kv_views,
                      ffn=n_ub * max(ffn_lengths, default=0) * f32 * 2, moe=moe, logits=n_ub * meta.vocab_size * f32,
                      residual=n_ub * meta.embedding_length * f32 * 4, embeddings=embd_inp,
                      deepstack=embd_inp if meta.deepstack_layers else 0)


def compute_buffer_bytes(meta: ModelMetadata, n_ctx: int, s: LlamaCppSettings) -> int:
    """Peak of llama.cpp's ubatch graph on the CPU alone (ggml-alloc reuses memory, so the largest stage counts)."""
    g = graph_parts(meta, n_ctx, s)
    # The masks are only live while attention runs; the logits of a full ubatch come after (the deepstack input
    # is gone by then: Qwen3-VL's deepstack layers are the first ones).
    return int(max(g.attention + g.masks + g.deepstack, g.ffn + g.deepstack, g.moe + g.deepstack, g.logits)
               + g.residual)


def split_compute_bytes(g: GraphParts, *, attention_on_gpu: bool, logits_on_gpu: bool, kv_on_both: bool,
                        kv_on_gpu: bool, output_copy: int = 0, block_copy: int = 0, gpu_chunk: int | None = None,
                        host_chunk: int | None = None) -> tuple[int, int]:
    """(GPU, host) compute buffers with a GPU runtime. llama.cpp offloads a prompt batch's matmuls to the
    GPU whatever -ngl says (op offload), and the scheduler runs the ops around them there too, so the GPU
    holds the graph's peak; an op whose tensor is larger than the GPU may address runs on the host
    (Vulkan: maxStorageBufferRange), as do the input embeddings. The device that runs attention gets a
    copy of the K and V of layers cached on the other, and an op offloaded for a weight kept on the host
    gets a copy of that weight (``output_copy``: the output layer's, ``block_copy``: a host block's
    largest). ggml allocates a compute buffer in blocks of at most ``*_chunk`` bytes, a tensor never
    straddling two; scores bigger than a block get a block of their own, and with layers on both devices
    (attention interleaved with the other device's work) the next layer found it taken and opened a
    second one (Llama-3.2-1B shapes at 32k on Vulkan: 4172 MiB of host compute at -ngl 8 for 2048 MiB of
    scores, 2186 at -ngl 0 and 17). Measured with the Vulkan runtime (tests/bench/fit_accuracy_vulkan.py)."""
    attention = g.attention + g.masks
    # Qwen3-VL's padded input embedding is host-side (``g.embeddings`` is that wide); the GPU's deepstack layers
    # read slices of it, taken here as one copy (not measured: the accuracy benchmarks ran on the CPU).
    gpu = max(attention + g.deepstack if attention_on_gpu else 0, g.ffn + block_copy, g.moe + block_copy,
              g.logits + output_copy if logits_on_gpu else 0) + g.residual
    if attention_on_gpu and (kv_on_both or not kv_on_gpu):
        gpu += g.kv_views
    host = g.embeddings
    if not attention_on_gpu:
        host += attention + (g.kv_views if kv_on_gpu or kv_on_both else 0)
    if not logits_on_gpu:
        host = max(host, g.logits + 2 * g.embeddings)
    chunk = gpu_chunk if attention_on_gpu else host_chunk
    if kv_on_both and chunk is not None and g.scores > chunk:
        if attention_on_gpu:
            gpu += g.scores
        else:
            host += g.scores
    return int(gpu), int(host)


REPACKED_TYPES = frozenset({"Q4_0", "Q4_K", "IQ4_NL"})


def repacked_bytes(tensor_name: str, dtype: str, n_dims: int, n_bytes: int) -> int:
    """Extra CPU memory for a tensor llama.cpp repacks (matrices and expert stacks; embeddings are looked up by row)."""
    if dtype in REPACKED_TYPES and n_dims in (2, 3) and not tensor_name.startswith("token_embd"):
        return n_bytes
    return 0


def estimate_llama_cpp(meta: ModelMetadata, settings: LlamaCppSettings, gpu_name: str = "GPU0") -> Estimate:
    check_modelled(meta)
    if not meta.tensors:
        # A header without a tensor table (llama.cpp's vocab-only test files, or the first shard of a
        # split whose other shards were not found) would size to 0 bytes of weights and "fit" anywhere.
        raise UnknownModel("the file holds no weight tensors (a vocab-only GGUF or a split model's "
                           "metadata-only first shard), so its weights cannot be sized.")
    if settings.kv_type not in KV_TYPE_BYTES:
        raise ValueError(f"unknown KV cache type {settings.kv_type}")
    n_layer = meta.block_count
    n_ctx = pad(max(settings.n_ctx, 1), CTX_PAD)
    ngl = max(0, min(settings.gpu_layers, n_layer + 1))
    first_gpu_layer = n_layer + 1 - ngl  # layers il >= this (incl. output at n_layer) live on the GPU
    uses_gpu = settings.gpu_runtime or ngl > 0
    limit = settings.gpu_max_tensor_bytes

    def fits_gpu(n_bytes: int) -> bool:  # a weight or op tensor the GPU can address; bigger ones stay on the host
        return limit is None or n_bytes <= limit

    # With a GPU runtime, the CPU's layers go through the GPU's pinned host buffer type, not the repack.
    repack = settings.cpu_repack and not uses_gpu
    cpu = DeviceUse("CPU")
    gpu = DeviceUse(gpu_name)
    read_cpu, read_gpu, host_block_tensor = _place_weights(meta, settings, cpu, gpu, first_gpu_layer, repack,
                                                           fits_gpu)
    embd = next((t for t in meta.tensors if t.name == "token_embd.weight"), None)
    output_weight = embd if meta.tied_embeddings else next((t for t in meta.tensors if t.name == "output.weight"), None)
    if meta.tied_embeddings and embd is not None:
        # The output layer reuses token_embd; llama.cpp duplicates it onto the output layer's device (one
        # the GPU cannot address stays the same mapped copy on the host).
        if n_layer >= first_gpu_layer and fits_gpu(embd.n_bytes):
            gpu.weights_bytes += embd.n_bytes
            read_gpu += embd.n_bytes
        else:
            read_cpu += embd.n_bytes
    for il in range(n_layer):
        kv = kv_layer_bytes(meta, il, kv_cells(meta, il, n_ctx, settings), settings.kv_type)
        (gpu if il >= first_gpu_layer else cpu).kv_bytes += kv
        (gpu if il >= first_gpu_layer else cpu).state_bytes += recurrent_state_bytes(meta, il) * settings.n_seq
    output = meta.vocab_size * 4 * settings.n_seq  # the last token's logits per sequence, on the host
    if uses_gpu:
        _place_compute(meta, settings, n_ctx, cpu, gpu, first_gpu_layer, output_weight, host_block_tensor, fits_gpu)
    else:
        cpu.compute_bytes = compute_buffer_bytes(meta, n_ctx, settings)
    cpu.output_bytes = output
    cpu.other_bytes = CPU_RUNTIME_BYTES + meta.header_bytes
    devices = [cpu, gpu] if uses_gpu else [cpu]
    image_tokens = 0
    if meta.projector is not None:
        # libmtmd puts the projector on the GPU whenever the model uses one (backends/llama_cpp/vision.py asks for the
        # GPU unless -ngl 0); its encoder's compute buffer sits beside its weights.
        (gpu if uses_gpu and ngl > 0 else cpu).vision_bytes = meta.projector.weights_bytes + \
            meta.projector.compute_bytes() + meta.projector.embeddings_bytes()
        image_tokens = meta.projector.image_tokens
    return Estimate("gguf", n_ctx, ngl, n_layer + 1, devices, settings.kv_type, read_cpu, read_gpu,
                    notes=list(meta.notes), cpu_moe=experts_in_ram_layers(meta, settings.cpu_moe),
                    image_tokens=image_tokens)


def _place_weights(meta: ModelMetadata, settings: LlamaCppSettings, cpu: DeviceUse, gpu: DeviceUse,
                   first_gpu_layer: int, repack: bool, fits_gpu: Callable[[int], bool]) -> tuple[int, int, int]:
    """Each weight on the device llama.cpp loads it to (its repacked copy beside it on the CPU): the bytes a token
    reads on the CPU and on the GPU, and the largest host weight of a block that a GPU prompt batch copies over."""
    n_layer = meta.block_count
    expert_share = (meta.expert_used_count / meta.expert_count) if meta.expert_count else 1.0
    read_cpu = read_gpu = 0
    host_block_tensor = 0  # the largest host weight of a block that a GPU prompt batch copies over (see below)
    for tensor in meta.tensors:
        layer = _layer_of(tensor.name, n_layer)
        if layer is not None and layer >= n_layer - meta.nextn_layers and layer != n_layer:
            continue  # a multi-token-prediction block: not loaded
        kept_in_ram = layer is not None and expert_in_ram(tensor.name, layer, settings.cpu_moe)
        on_gpu = layer is not None and layer >= first_gpu_layer and fits_gpu(tensor.n_bytes) and not kept_in_ram
        if layer is not None and (layer < first_gpu_layer or kept_in_ram) and layer < n_layer \
                and fits_gpu(tensor.n_bytes) and not (repack and repacked_bytes(tensor.name, tensor.dtype,
                                                                                 len(tensor.shape), 1)):
            # A prompt batch runs this host weight's matmul on the GPU all the same: ggml's scheduler copies it
            # into the GPU's compute buffer (op offload, ggml-backend.cpp pass 5); a CPU_REPACK layout is not
            # host memory and stays on the CPU.
            host_block_tensor = max(host_block_tensor, tensor.n_bytes)
        (gpu if on_gpu else cpu).weights_bytes += tensor.n_bytes
        if not on_gpu and repack:
            cpu.weights_bytes += repacked_bytes(tensor.name, tensor.dtype, len(tensor.shape), tensor.n_bytes)
        if layer is None:
            read = 0  # an embedding lookup reads one row
        elif "_exps." in tensor.name:
            read = int(tensor.n_bytes * expert_share)
        else:
            read = tensor.n_bytes
        if on_gpu:
            read_gpu += read
        else:
            read_cpu += read
    return read_cpu, read_gpu, host_block_tensor


def _place_compute(meta: ModelMetadata, settings: LlamaCppSettings, n_ctx: int, cpu: DeviceUse, gpu: DeviceUse,
                   first_gpu_layer: int, output_weight: TensorInfo | None, host_block_tensor: int,
                   fits_gpu: Callable[[int], bool]) -> None:
    """With a GPU runtime: the compute buffers split between the GPU and the host as ggml's scheduler splits them,
    and the GPU runtime's own memory."""
    n_layer = meta.block_count
    g = graph_parts(meta, n_ctx, settings)
    attention_fits = fits_gpu(g.kv_views // 2) if settings.flash_attn else fits_gpu(g.scores)
    logits_fit = fits_gpu(g.logits) and (output_weight is None or fits_gpu(output_weight.n_bytes))
    blocks_on_gpu = max(n_layer - first_gpu_layer, 0)
    output_on_host = n_layer < first_gpu_layer or (output_weight is not None
                                                   and not fits_gpu(output_weight.n_bytes))
    gpu.compute_bytes, cpu.compute_bytes = split_compute_bytes(
        g, attention_on_gpu=attention_fits, logits_on_gpu=logits_fit, kv_on_gpu=blocks_on_gpu > 0,
        kv_on_both=0 < blocks_on_gpu < n_layer,
        output_copy=output_weight.n_bytes if output_on_host and output_weight is not None else 0,
        block_copy=host_block_tensor, gpu_chunk=settings.gpu_chunk_bytes,
        host_chunk=settings.host_chunk_bytes)
    gpu.other_bytes = GPU_RUNTIME_BYTES


def experts_in_ram_layers(meta: ModelMetadata, cpu_moe: int) -> int:
    """How many layers' experts ``cpu_moe`` keeps in RAM (0 for a model without experts)."""
    if not meta.expert_count or not cpu_moe:
        return 0
    trunk = meta.block_count - meta.nextn_layers
    return trunk if cpu_moe < 0 else min(cpu_moe, trunk)


def _weights_bytes(meta: ModelMetadata) -> int:
    if meta.tensors:
        return meta.weights_bytes
    raise UnknownModel("the model's weight files are not available to size.")


def _kv_f16_bytes(meta: ModelMetadata, n_ctx: int, bits: float, window_cap: bool) -> int:
    total = 0
    for il in range(meta.block_count):
        cells = n_ctx
        if window_cap and meta.swa_layers and meta.swa_layers[il]:
            cells = min(n_ctx, meta.sliding_window)
        heads = meta.layer_kv_heads(il)
        total += int(cells * heads * (meta.layer_key_length(il) + meta.layer_value_length(il)) * bits / 8)
    return total


def estimate_mlx(meta: ModelMetadata, n_ctx: int, device_name: str = "unified", n_seq: int = 1) -> Estimate:
    """mlx-lm: KVCache grows in steps of 256 cells; RotatingKVCache keeps the window for SWA layers. ``n_seq``
    replies decoded together (backends/mlx_batch.py) each hold a cache of their own, up to the whole context: N
    caches at most (the free sequences' kept caches share one context's worth, and only while fewer run)."""
    check_modelled(meta)
    n_ctx = pad(max(n_ctx, 1), 256)
    weights = _weights_bytes(meta)
    kv = _kv_f16_bytes(meta, n_ctx, 16, window_cap=True) * n_seq
    prefill_chunk = min(2048, n_ctx)  # mlx-lm prefills in steps of 2048 tokens
    # Attention scores of one layer for the last prefill chunk. Where scaled_dot_product_attention has
    # no fused kernel (the CPU build; Metal head sizes without one) q·kᵀ and its softmax are both
    # materialized: 2 + 2 bytes per element in f16/bf16. tests/bench/fit_accuracy_mlx.py measured
    # 223 MiB of temporaries for a 2048-token prefill with 14 heads (2048² × 14 × 4 B = 224 MiB), where
    # 2 bytes per element under-predicted by 82 MiB. A fused Metal kernel needs less: the safe side.
    scores = prefill_chunk * n_ctx * max(meta.head_count) * 4
    # KVCache grows by concatenation (old buffer + new steps + the joined copy live together): the
    # same benchmark measured 42-44 % of the final cache as transient at 4k-32k contexts.
    kv_growth = kv // 2
    compute = scores + kv_growth + prefill_chunk * meta.embedding_length * 4 * 4 + meta.vocab_size * 4 * 2
    dev = DeviceUse(device_name, weights, kv, compute, MLX_RUNTIME_BYTES)
    return Estimate("mlx", n_ctx, meta.block_count + 1, meta.block_count + 1, [dev], "f16",
                    bytes_per_token_gpu=weights, notes=list(meta.notes))


# ExLlama cache element widths by cache type (ExLlama's names and llama.cpp's, as the backends accept).
EXL_CACHE_BITS = {"fp16": 16, "f16": 16, "q8": 8, "q8_0": 8, "q6": 6, "q4": 4, "q4_0": 4}
# A quantized ExLlama cache stores one fp16 scale per 32 elements beside the codes: 0.5 bit more per
# element (exllamav2/cache.py shape_s = head_dim // 32 in float16; exllamav3/cache/quant.py qshape_s =
# token_dim // 32 in half).
EXL_CACHE_SCALE_BITS = 0.5


def exl_cache_bits(kv_type: str) -> float:
    bits = EXL_CACHE_BITS.get(kv_type.lower(), 16)
    return bits if bits == 16 else bits + EXL_CACHE_SCALE_BITS


def estimate_exl(meta: ModelMetadata, n_ctx: int, kv_type: str = "f16", gpu_name: str = "GPU0") -> Estimate:
    """ExLlamaV2/V3 keep everything on the GPU: bpw x parameters + cache + reserve.

    Both page the cache in 256-token blocks and give every attention layer the full context. A
    quantized cache also needs one layer's K and V in fp16 at full context to attend over:
    exllamav2 keeps that buffer per device (cache.py ExLlamaV2Cache_Q.touch_device), exllamav3
    dequantizes into temporaries of that size (cache/quant.py get_kv)."""
    check_modelled(meta)
    if meta.tensors:
        weights = meta.weights_bytes
    elif meta.quant and meta.quant.bits_per_weight and meta.n_params:
        weights = int(meta.quant.bits_per_weight * meta.n_params / 8)
    else:
        raise UnknownModel("neither the weight files nor the parameter count are known.")
    n_ctx = pad(max(n_ctx, 1), 256)
    bits = exl_cache_bits(kv_type)
    kv = _kv_f16_bytes(meta, n_ctx, bits, window_cap=False)
    compute = min(n_ctx, 2048) * meta.vocab_size * 4 // 4 + 512 * meta.embedding_length * 4 * 8
    if bits < 16 and meta.head_count_kv:
        compute += n_ctx * max(meta.layer_kv_heads(il) * (meta.layer_key_length(il) + meta.layer_value_length(il))
                               for il in range(meta.block_count)) * 2
    dev = DeviceUse(gpu_name, weights, kv, compute, EXL_RESERVE_BYTES + GPU_RUNTIME_BYTES)
    return Estimate(meta.format, n_ctx, meta.block_count + 1, meta.block_count + 1, [dev], kv_type,
                    bytes_per_token_gpu=weights, notes=list(meta.notes))
