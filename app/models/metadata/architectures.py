"""A GGUF header's keys read into ``ModelMetadata`` (``metadata_from_gguf``), with the per-architecture rules
llama.cpp hard-codes: sliding-window layer patterns, chunked attention, which layers of which architectures keep a
recurrent state."""

from __future__ import annotations

from typing import Any

from app.models.fields import MAX_LAYERS, U32_MAX, ModelMetadataError, shown, whole_number
from app.models.metadata.gguf import ArrayLength
from app.models.metadata.model import ModelMetadata, RecurrentShape, TensorInfo, token_id
from app.models.metadata.sampling import sampling_from_gguf
from app.models.quants import QuantInfo, parse_gguf_filename

# llama.h's enum llama_pooling_type, as a GGUF declares it ({arch}.pooling_type): an embedding model pools its tokens
# into one vector (mean, cls, last); a reranker (rank) puts the pooled token through a classifier head, one score.
POOLING_NAMES = {1: "mean", 2: "cls", 3: "last", 4: "rank"}


def pooling_name(kv: dict[str, Any]) -> str:
    """The pooling a GGUF's header declares, by name; "" where it declares none (a chat model) or one unknown."""
    value = kv.get(f"{kv.get('general.architecture')}.pooling_type")
    return POOLING_NAMES.get(value, "") if isinstance(value, int) and not isinstance(value, bool) else ""


def per_layer(value: Any, n_layers: int, what: str, default: int = 0) -> list[int]:
    if value is None:
        return [default] * n_layers
    if isinstance(value, (list, ArrayLength)):
        if len(value) != n_layers:
            raise ModelMetadataError(f"{what} has {len(value)} entries for {n_layers} layers.")
        if isinstance(value, ArrayLength):  # kept as a length only: the header spent its budget of kept items
            raise ModelMetadataError(f"{what} comes after more array items than a model header holds; not read.")
        return [whole_number(v, what) for v in value]
    return [whole_number(value, what)] * n_layers


# Sliding-window layer patterns llama.cpp hard-codes per architecture (src/llama-model.cpp,
# ``hparams.set_swa_pattern(n)``: layer il uses the window when il % n < n - 1).
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "exaone4": 4, "llama4": 4, "afmoe": 4}
# Chunked attention (src/models/llama4.cpp): llama.cpp fixes the chunk whatever the GGUF says, unless the GGUF's
# sliding_window is 0 (then every layer attends to all). A chunked layer's cache holds what a window layer's would.
CHUNKED_WINDOWS = {"llama4": 8192}


def sliding_window_layers(explicit: Any, arch: str, n_layers: int, window: int, notes: list[str]) -> list[bool]:
    if isinstance(explicit, list) and len(explicit) == n_layers:
        return [bool(v) for v in explicit]
    if not window:
        return [False] * n_layers
    pattern = SWA_PATTERNS.get(arch)
    if isinstance(explicit, int) and not isinstance(explicit, bool) and explicit > 0:
        pattern = explicit
    if pattern is None:
        notes.append(f"{arch} declares a sliding window of {window} but llama.cpp's layer pattern for it "
                     "is not known here; every layer is sized as full attention (an over-estimate)")
        return [False] * n_layers
    return [il % pattern < pattern - 1 for il in range(n_layers)]


# Architectures with recurrent layers that llama.cpp runs (src/llama-arch.cpp llm_arch_is_recurrent /
# llm_arch_is_hybrid), and how each marks its recurrent layers (src/models/<arch>.cpp load_arch_hparams).
RECURRENT_ALL = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
RECURRENT_WHERE_NO_KV_HEADS = frozenset({"jamba", "granitehybrid", "lfm2", "lfm2moe", "plamo2"})
RECURRENT_BY_INTERVAL = frozenset({"qwen3next", "qwen35", "qwen35moe"})  # gated delta net; every Nth layer attends
RECURRENT_ARCHS = RECURRENT_ALL | RECURRENT_WHERE_NO_KV_HEADS | RECURRENT_BY_INTERVAL | {"falcon-h1", "nemotron_h",
                                                                                         "nemotron_h_moe"}


def recurrent_shape(kv: dict[str, Any], arch: str, label: str, n_layers: int, n_trunk: int, n_embd: int,
                     heads_kv: list[int]) -> RecurrentShape | None:
    if arch not in RECURRENT_ARCHS:
        return None

    def raw(key: str) -> Any:
        return kv.get(f"{arch}.{key}")

    def get(key: str, default: int = 0) -> int:
        return whole_number(raw(key), f"{label}: {arch}.{key}") or default

    if arch in RECURRENT_ALL:
        layers = [True] * n_layers
    elif arch in RECURRENT_WHERE_NO_KV_HEADS:
        layers = [h == 0 for h in heads_kv]
    elif arch in RECURRENT_BY_INTERVAL:
        explicit = raw("attention.recurrent_layers")
        if isinstance(explicit, list) and len(explicit) == n_layers:
            layers = [bool(v) for v in explicit]
        else:
            interval = get("full_attention_interval", 4)
            layers = [il < n_trunk and (il + 1) % interval != 0 for il in range(n_layers)]
    elif arch == "falcon-h1":
        layers = [True] * n_layers
    else:  # nemotron_h: a Mamba-2 layer has neither attention heads nor an FFN (the MLP layers have no KV heads)
        n_ff = per_layer(raw("feed_forward_length"), n_layers, f"{label}: {arch}.feed_forward_length")
        layers = [il < n_trunk and heads_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layers)]

    return RecurrentShape(
        layers=tuple(layers), conv_kernel=get("ssm.conv_kernel"), inner_size=get("ssm.inner_size"),
        state_size=get("ssm.state_size"), group_count=get("ssm.group_count"), wkv_head_size=get("wkv.head_size"),
        token_shift_count=get("token_shift_count", 2), shortconv_l_cache=get("shortconv.l_cache"),
        attention_too=arch == "falcon-h1", n_embd=n_embd)


def metadata_from_gguf(kv: dict[str, Any], tensors: list[TensorInfo], *, source: str,
                       file_name: str = "") -> ModelMetadata:
    label = file_name or source
    arch = _architecture(kv, label)

    def raw(key: str) -> Any:
        return kv.get(f"{arch}.{key}")

    def number(key: str, default: int = 0, high: int = U32_MAX) -> int:
        """An architecture key; as before, a missing key and a 0 both mean ``default``."""
        return whole_number(raw(key), f"{label}: {arch}.{key}", high=high) or default

    n_layers = number("block_count", high=MAX_LAYERS)
    notes: list[str] = []
    n_embd = number("embedding_length")
    heads = per_layer(raw("attention.head_count"), n_layers, f"{label}: {arch}.attention.head_count")
    heads_kv = (per_layer(raw("attention.head_count_kv"), n_layers, f"{label}: {arch}.attention.head_count_kv")
                if raw("attention.head_count_kv") is not None else list(heads))
    head_dim = n_embd // heads[0] if heads and heads[0] else 0
    key_len = number("attention.key_length", head_dim)
    value_len = number("attention.value_length", head_dim)
    window = number("attention.sliding_window")
    if arch in CHUNKED_WINDOWS and raw("attention.sliding_window") != 0:  # 0 turns the chunks off
        window = CHUNKED_WINDOWS[arch]
    vocab = _vocab_size(kv, tensors, number("vocab_size"))
    tensor_names = {t.name for t in tensors}
    file_type = _file_type(kv, label)
    quant = _quant(file_name, file_type)
    template = kv.get("tokenizer.chat_template")
    swa_layers = sliding_window_layers(raw("attention.sliding_window_pattern"), arch, n_layers, window, notes)
    key_len_swa = number("attention.key_length_swa")
    value_len_swa = number("attention.value_length_swa")
    shared_kv = number("attention.shared_kv_layers")
    shard_count = whole_number(kv.get("split.count"), f"{label}: split.count", high=99_999) or 1  # NNNNN-of-NNNNN
    if not tensors and shard_count == 1:
        notes.append("the file holds no tensors (a vocab-only GGUF): hyperparameters and tokenizer only")
    if not 0 <= shared_kv <= n_layers:
        raise ModelMetadataError(f"{label}: {shared_kv} shared-KV layers for {n_layers} layers.")
    nextn = number("nextn_predict_layers")
    if not 0 <= nextn <= n_layers:
        raise ModelMetadataError(f"{label}: {nextn} multi-token-prediction layers for {n_layers} layers.")
    meta = ModelMetadata(
        format="gguf", source=source, architecture=arch, name=str(kv.get("general.name") or ""),
        quant=quant, file_type=file_type, block_count=n_layers,
        context_length=number("context_length"),
        embedding_length=n_embd, vocab_size=vocab, head_count=heads, head_count_kv=heads_kv,
        key_length=key_len, value_length=value_len, key_length_swa=key_len_swa if key_len_swa != key_len else 0,
        value_length_swa=value_len_swa if value_len_swa != value_len else 0, shared_kv_layers=shared_kv,
        sliding_window=window, swa_layers=swa_layers,
        expert_count=number("expert_count"),
        expert_used_count=number("expert_used_count"),
        recurrent=recurrent_shape(kv, arch, label, n_layers, n_layers - nextn, n_embd, heads_kv), nextn_layers=nextn,
        deepstack_layers=number("n_deepstack_layers"),
        kv_lora_rank=number("attention.kv_lora_rank"),
        rope_dim_mla=number("rope.dimension_count"),
        tied_embeddings="output.weight" not in tensor_names and "token_embd.weight" in tensor_names,
        chat_template=template if isinstance(template, str) else None, pooling=pooling_name(kv),
        bos_token_id=token_id(kv.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=token_id(kv.get("tokenizer.ggml.eos_token_id")),
        tensors=list(tensors), shard_count=shard_count, notes=notes, sampling=sampling_from_gguf(kv),
    )
    meta.notes.extend(f"recommended sampling ignored: {reason}" for reason in meta.sampling.ignored)
    return meta


def _architecture(kv: dict[str, Any], label: str) -> str:
    arch = kv.get("general.architecture")
    if not arch:
        raise ModelMetadataError(f"{label} has no general.architecture key.", "the GGUF header is incomplete")
    if not isinstance(arch, str):
        raise ModelMetadataError(f"{label}: general.architecture is {shown(arch)}, not a name.")
    return arch


def _vocab_size(kv: dict[str, Any], tensors: list[TensorInfo], declared: int) -> int:
    """The vocabulary's size: the architecture's key, else the tokenizer's token count, else the token embedding's
    rows."""
    tokens = kv.get("tokenizer.ggml.tokens")
    vocab = declared or (len(tokens) if isinstance(tokens, (list, ArrayLength)) else 0)
    if not vocab:
        embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
        vocab = int(embd.shape[1]) if embd and len(embd.shape) > 1 else 0
    return vocab


def _file_type(kv: dict[str, Any], label: str) -> str:
    """``general.file_type`` by its llama.cpp name (MOSTLY_Q4_K_M), its number where it has none, "" where absent."""
    file_type_id = kv.get("general.file_type")
    if file_type_id is None:
        return ""
    import gguf

    file_type_id = whole_number(file_type_id, f"{label}: general.file_type")
    try:
        return str(gguf.LlamaFileType(file_type_id).name)
    except ValueError:
        return str(file_type_id)


def _quant(file_name: str, file_type: str) -> QuantInfo | None:
    """The quant a file's name says, else the one its file type says."""
    quant = parse_gguf_filename(file_name) if file_name else None
    if quant is None and file_type:
        from app.models.quants import gguf_bits_per_weight

        name = file_type.replace("MOSTLY_", "").replace("ALL_", "")
        quant = QuantInfo(format="gguf", quant=name, bits_per_weight=gguf_bits_per_weight(name))
    return quant
