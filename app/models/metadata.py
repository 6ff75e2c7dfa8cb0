"""Model metadata: what the estimator needs to know about a model, read from its own files.

One ``ModelMetadata`` shape for every format:
- GGUF: the header's key/value pairs and tensor table (``read_gguf_file`` through the ``gguf``
  package; ``parse_gguf_header`` reads the same layout from a byte prefix, for remote headers);
- MLX / EXL2 / EXL3 / plain safetensors: ``config.json`` plus the safetensors headers (``read_model_folder``).

Malformed input raises ``ModelMetadataError`` with the reason, never a bare struct or JSON error.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import ModelFileError
from app.models.quants import QuantInfo, parse_exl_config, parse_gguf_filename, parse_mlx_config, quant_method


class ModelMetadataError(ModelFileError):
    """A model's header or config is missing, truncated or malformed."""


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
    kv_lora_rank: int = 0  # MLA (DeepSeek-V2/V3): the cache holds the compressed latent
    rope_dim_mla: int = 0  # MLA: rope part of the key, cached next to the latent
    tied_embeddings: bool = False
    chat_template: str | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    tensors: list[TensorInfo] = field(default_factory=list)
    shard_count: int = 1
    header_bytes: int = 0  # bytes before tensor data (GGUF)
    notes: list[str] = field(default_factory=list)
    # The vision projector that loads with it (app.models.vision.ProjectorInfo), where one was found: the
    # estimator counts its weights, its compute buffer and the context an image takes.
    projector: Any = None

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
            "nextn_layers": self.nextn_layers or None,
            "kv_lora_rank": self.kv_lora_rank or None, "tied_embeddings": self.tied_embeddings,
            "shard_count": self.shard_count, "tensor_count": len(self.tensors),
            "has_chat_template": bool(self.chat_template), "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id, "notes": list(self.notes),
            "sees_images": None if self.projector is None else {
                "projector": self.projector.file_name, "projector_type": self.projector.projector_type,
                "image_tokens": self.projector.image_tokens},
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _compact(values: list[int]) -> int | list[int] | None:
    if not values:
        return None
    return values[0] if len(set(values)) == 1 else list(values)


# ------------------------------------------------------------------------------------------ GGUF

GGUF_MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
# Arrays longer than this are kept as their length only (token lists, merges): the estimator needs
# the count, and a 150k-entry Python list per header read would cost memory for nothing.
_KEEP_ARRAY_MAX = 4096


class NeedMoreData(Exception):
    """The byte prefix ends inside the header; ``needed`` is a lower bound on the bytes required."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


@dataclass
class ArrayLength:
    """Stands in for a long GGUF array whose items we skipped."""

    length: int

    def __len__(self) -> int:
        return self.length


class _Cursor:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise NeedMoreData(end)
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > 1 << 30:
            raise ModelMetadataError(f"GGUF header is corrupt: a string claims {n} bytes.")
        return bytes(self.take(n)).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        """Skip ``count`` length-prefixed strings: a 150k-token vocabulary in about 50 ms."""
        data, pos, end, unpack = self.data, self.pos, len(self.data), _U64.unpack_from
        for _ in range(count):
            if pos + 8 > end:
                raise NeedMoreData(pos + 8)
            pos += 8 + unpack(data, pos)[0]
        if pos > end:
            raise NeedMoreData(pos)
        self.pos = pos

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type, count = self.scalar("<I"), self.scalar("<Q")
            if count > 1 << 32:
                raise ModelMetadataError(f"GGUF header is corrupt: an array claims {count} items.")
            if count > _KEEP_ARRAY_MAX:
                if item_type in _SCALARS:
                    self.take(struct.calcsize(_SCALARS[item_type]) * count)
                elif item_type == _STRING:
                    self.skip_strings(count)
                else:
                    raise ModelMetadataError(f"GGUF header has an array of unsupported type {item_type}.")
                return ArrayLength(count)
            return [self.value(item_type) for _ in range(count)]
        raise ModelMetadataError(f"GGUF header has a value of unknown type {vtype}.")


def _ggml_type_name(type_id: int) -> tuple[str, int, int]:
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType(type_id)
    except ValueError as exc:
        raise ModelMetadataError(f"GGUF tensor has unknown ggml type {type_id}.",
                                 "the file may need a newer llama.cpp") from exc
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return qtype.name, block, size


def _tensor_bytes(shape: tuple[int, ...], type_id: int) -> tuple[str, int]:
    name, block, size = _ggml_type_name(type_id)
    n = 1
    for d in shape:
        n *= d
    return name, n // block * size


def parse_gguf_header(data: bytes | memoryview) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """Parse a GGUF header from a byte prefix: (key/values, tensors, offset where tensor data starts).

    Raises NeedMoreData when the prefix is too short, ModelMetadataError when it is not GGUF.
    """
    cur = _Cursor(data)
    magic = bytes(cur.take(4))
    if magic != GGUF_MAGIC:
        raise ModelMetadataError(f"Not a GGUF file (starts with {magic!r}, expected b'GGUF').")
    version = cur.scalar("<I")
    if version not in (2, 3):
        raise ModelMetadataError(f"Unsupported GGUF version {version}.", "QuantDesk reads GGUF v2 and v3")
    n_tensors, n_kv = cur.scalar("<Q"), cur.scalar("<Q")
    if n_tensors > 1 << 24 or n_kv > 1 << 24:
        raise ModelMetadataError("GGUF header is corrupt: implausible tensor or key count.")
    kv: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        kv[key] = cur.value(cur.scalar("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.scalar("<I")
        if n_dims > 8:
            raise ModelMetadataError(f"GGUF header is corrupt: tensor {name} has {n_dims} dimensions.")
        shape = tuple(cur.scalar("<Q") for _ in range(n_dims))
        type_id = cur.scalar("<I")
        offset = cur.scalar("<Q")  # within the data section
        dtype, n_bytes = _tensor_bytes(shape, type_id)
        tensors.append(TensorInfo(name, shape, dtype, n_bytes, offset))
    alignment = int(kv.get("general.alignment", 32) or 32)
    data_start = (cur.pos + alignment - 1) // alignment * alignment
    return kv, tensors, data_start


def parse_growing(read: Callable[[int, int], bytes], parse: Callable[[bytes], Any], source: str, *,
                  first: int = 1 << 20, limit: int = 256 << 20) -> Any:
    """Read a prefix with ``read(start, end)`` (fewer bytes at the end of the file), parse it, and read more
    (at least double) while the parser needs more. For local files and HTTP Range reads alike."""
    data = b""
    want = first
    while True:
        if want > len(data):
            data += read(len(data), want)
            eof = len(data) < want
        else:
            eof = False
        try:
            return parse(data)
        except NeedMoreData as need:
            if eof:
                raise ModelMetadataError(f"{source} ends inside its header ({len(data):,} bytes).",
                                         "the file is truncated") from None
            want = max(need.needed, len(data) * 2)
            if want > limit:
                raise ModelMetadataError(f"{source}: header larger than {limit >> 20} MiB; not reading further.") from None


def read_gguf_header(path: str | Path) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """A local GGUF's header, read with the byte parser from a growing prefix of the file.

    Not gguf.GGUFReader: it builds a numpy view per token of the vocabulary, which took 7.5 s on a header
    with Qwen2.5's 151,936 tokens on this machine (tens of seconds on a slow disk), for every load,
    library listing and fit check; this skips long arrays and takes a fraction of a second.
    """
    path = Path(path)
    with path.open("rb") as fh:
        magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise ModelMetadataError(f"{path.name} is not a GGUF file (starts with {magic!r}).")

        def read(start: int, end: int) -> bytes:
            fh.seek(start)
            return fh.read(end - start)

        header: tuple[dict[str, Any], list[TensorInfo], int] = parse_growing(read, parse_gguf_header, path.name)
        return header


def read_gguf_file(path: str | Path) -> ModelMetadata:
    """Read a local GGUF (the first shard is enough: shards 2..n only add tensors, which we size from
    their own headers when they are next to it)."""
    path = Path(path)
    if not path.is_file():
        raise ModelMetadataError(f"No such model file: {path}.")
    kv, tensors, data_start = read_gguf_header(path)
    meta = metadata_from_gguf(kv, tensors, source=str(path), file_name=path.name)
    meta.header_bytes = data_start
    if meta.shard_count > 1:
        _add_local_shards(meta, path)
    return meta


def _add_local_shards(meta: ModelMetadata, first: Path) -> None:
    from app.models.quants import gguf_shard_names

    names = gguf_shard_names(first.name)
    missing = []
    for name in names[1:]:
        shard = first.with_name(name)
        if not shard.is_file():
            missing.append(name)
            continue
        _, tensors, _ = read_gguf_header(shard)
        meta.tensors.extend(tensors)
    if missing:
        meta.notes.append(f"shards not found next to the first one: {', '.join(missing)}; "
                          "weights counted from the first shard only")


def _arch_get(kv: dict[str, Any], arch: str, key: str, default: Any = None) -> Any:
    return kv.get(f"{arch}.{key}", default)


def _per_layer(value: Any, n_layers: int, default: int = 0) -> list[int]:
    if value is None:
        return [default] * n_layers
    if isinstance(value, list):
        values = [int(v) for v in value]
        if len(values) != n_layers:
            raise ModelMetadataError(f"GGUF per-layer value has {len(values)} entries for {n_layers} layers.")
        return values
    return [int(value)] * n_layers


# Sliding-window layer patterns llama.cpp hard-codes per architecture (src/llama-model.cpp,
# ``hparams.set_swa_pattern(n)``: layer il uses the window when il % n < n - 1).
SWA_PATTERNS = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "exaone4": 4}


def _swa_layers(kv: dict[str, Any], arch: str, n_layers: int, window: int, notes: list[str]) -> list[bool]:
    explicit = _arch_get(kv, arch, "attention.sliding_window_pattern")
    if isinstance(explicit, list) and len(explicit) == n_layers:
        return [bool(v) for v in explicit]
    if not window:
        return [False] * n_layers
    pattern = SWA_PATTERNS.get(arch)
    if isinstance(explicit, int) and explicit > 0:
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


def _recurrent_shape(kv: dict[str, Any], arch: str, n_layers: int, n_trunk: int, n_embd: int,
                     heads_kv: list[int]) -> RecurrentShape | None:
    if arch not in RECURRENT_ARCHS:
        return None

    def get(key: str, default: int = 0) -> int:
        value = _arch_get(kv, arch, key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ModelMetadataError(f"GGUF key {arch}.{key} is {value!r}, not a size.")
        return int(value) or default

    if arch in RECURRENT_ALL:
        layers = [True] * n_layers
    elif arch in RECURRENT_WHERE_NO_KV_HEADS:
        layers = [h == 0 for h in heads_kv]
    elif arch in RECURRENT_BY_INTERVAL:
        explicit = _arch_get(kv, arch, "attention.recurrent_layers")
        if isinstance(explicit, list) and len(explicit) == n_layers:
            layers = [bool(v) for v in explicit]
        else:
            interval = get("full_attention_interval", 4)
            layers = [il < n_trunk and (il + 1) % interval != 0 for il in range(n_layers)]
    elif arch == "falcon-h1":
        layers = [True] * n_layers
    else:  # nemotron_h: a Mamba-2 layer has neither attention heads nor an FFN (the MLP layers have no KV heads)
        n_ff = _per_layer(_arch_get(kv, arch, "feed_forward_length"), n_layers)
        layers = [il < n_trunk and heads_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layers)]

    return RecurrentShape(
        layers=tuple(layers), conv_kernel=get("ssm.conv_kernel"), inner_size=get("ssm.inner_size"),
        state_size=get("ssm.state_size"), group_count=get("ssm.group_count"), wkv_head_size=get("wkv.head_size"),
        token_shift_count=get("token_shift_count", 2), shortconv_l_cache=get("shortconv.l_cache"),
        attention_too=arch == "falcon-h1", n_embd=n_embd)


def _token_id(value: Any) -> int | None:
    """A token id from GGUF or config.json (config.json may give a list of eos ids: the first counts)."""
    if isinstance(value, list):
        value = value[0] if value else None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def metadata_from_gguf(kv: dict[str, Any], tensors: list[TensorInfo], *, source: str,
                       file_name: str = "") -> ModelMetadata:
    arch = str(kv.get("general.architecture") or "")
    if not arch:
        raise ModelMetadataError(f"{file_name or source} has no general.architecture key.",
                                 "the GGUF header is incomplete")
    n_layers = int(_arch_get(kv, arch, "block_count", 0) or 0)
    notes: list[str] = []
    n_embd = int(_arch_get(kv, arch, "embedding_length", 0) or 0)
    heads = _per_layer(_arch_get(kv, arch, "attention.head_count"), n_layers)
    heads_kv_raw = _arch_get(kv, arch, "attention.head_count_kv")
    heads_kv = _per_layer(heads_kv_raw, n_layers) if heads_kv_raw is not None else list(heads)
    head_dim = n_embd // heads[0] if heads and heads[0] else 0
    key_len = int(_arch_get(kv, arch, "attention.key_length", head_dim) or head_dim)
    value_len = int(_arch_get(kv, arch, "attention.value_length", head_dim) or head_dim)
    window = int(_arch_get(kv, arch, "attention.sliding_window", 0) or 0)
    tokens = kv.get("tokenizer.ggml.tokens")
    vocab = int(_arch_get(kv, arch, "vocab_size", 0) or (len(tokens) if tokens is not None else 0))
    tensor_names = {t.name for t in tensors}
    if not vocab:
        embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
        vocab = int(embd.shape[1]) if embd and len(embd.shape) > 1 else 0
    file_type_id = kv.get("general.file_type")
    file_type = ""
    if file_type_id is not None:
        import gguf

        try:
            file_type = gguf.LlamaFileType(int(file_type_id)).name
        except ValueError:
            file_type = str(file_type_id)
    quant = parse_gguf_filename(file_name) if file_name else None
    if quant is None and file_type:
        from app.models.quants import gguf_bits_per_weight

        name = file_type.replace("MOSTLY_", "").replace("ALL_", "")
        quant = QuantInfo(format="gguf", quant=name, bits_per_weight=gguf_bits_per_weight(name))
    template = kv.get("tokenizer.chat_template")
    swa_layers = _swa_layers(kv, arch, n_layers, window, notes)
    key_len_swa = int(_arch_get(kv, arch, "attention.key_length_swa", 0) or 0)
    value_len_swa = int(_arch_get(kv, arch, "attention.value_length_swa", 0) or 0)
    shared_kv = int(_arch_get(kv, arch, "attention.shared_kv_layers", 0) or 0)
    if not tensors and int(kv.get("split.count", 1) or 1) == 1:
        notes.append("the file holds no tensors (a vocab-only GGUF): hyperparameters and tokenizer only")
    if not 0 <= shared_kv <= n_layers:
        raise ModelMetadataError(f"{file_name or source}: {shared_kv} shared-KV layers for {n_layers} layers.")
    nextn = int(_arch_get(kv, arch, "nextn_predict_layers", 0) or 0)
    if not 0 <= nextn <= n_layers:
        raise ModelMetadataError(f"{file_name or source}: {nextn} multi-token-prediction layers for {n_layers} layers.")
    meta = ModelMetadata(
        format="gguf", source=source, architecture=arch, name=str(kv.get("general.name") or ""),
        quant=quant, file_type=file_type, block_count=n_layers,
        context_length=int(_arch_get(kv, arch, "context_length", 0) or 0),
        embedding_length=n_embd, vocab_size=vocab, head_count=heads, head_count_kv=heads_kv,
        key_length=key_len, value_length=value_len, key_length_swa=key_len_swa if key_len_swa != key_len else 0,
        value_length_swa=value_len_swa if value_len_swa != value_len else 0, shared_kv_layers=shared_kv,
        sliding_window=window, swa_layers=swa_layers,
        expert_count=int(_arch_get(kv, arch, "expert_count", 0) or 0),
        expert_used_count=int(_arch_get(kv, arch, "expert_used_count", 0) or 0),
        recurrent=_recurrent_shape(kv, arch, n_layers, n_layers - nextn, n_embd, heads_kv), nextn_layers=nextn,
        kv_lora_rank=int(_arch_get(kv, arch, "attention.kv_lora_rank", 0) or 0),
        rope_dim_mla=int(_arch_get(kv, arch, "rope.dimension_count", 0) or 0),
        tied_embeddings="output.weight" not in tensor_names and "token_embd.weight" in tensor_names,
        chat_template=template if isinstance(template, str) else None,
        bos_token_id=_token_id(kv.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=_token_id(kv.get("tokenizer.ggml.eos_token_id")),
        tensors=list(tensors), shard_count=int(kv.get("split.count", 1) or 1), notes=notes,
    )
    return meta


# ------------------------------------------------------------------------------------------ safetensors

_SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                            "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


def parse_safetensors_header(data: bytes, name: str = "") -> list[TensorInfo]:
    """Tensors of a safetensors file from its first bytes (8-byte length + JSON header)."""
    if len(data) < 8:
        raise NeedMoreData(8)
    (length,) = struct.unpack("<Q", data[:8])
    if length > 100 << 20:
        raise ModelMetadataError(f"{name or 'safetensors file'}: header claims {length} bytes; not safetensors.")
    if len(data) < 8 + length:
        raise NeedMoreData(8 + length)
    try:
        header = json.loads(bytes(data[8:8 + length]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelMetadataError(f"{name or 'safetensors file'} has a malformed header: {exc}.") from exc
    tensors = []
    for tname, info in header.items():
        if tname == "__metadata__":
            continue
        try:
            start, end = info["data_offsets"]
            tensors.append(TensorInfo(tname, tuple(info["shape"]), str(info["dtype"]), int(end) - int(start)))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelMetadataError(f"{name}: tensor {tname} has a malformed entry.") from exc
    return tensors


def read_safetensors_file(path: Path) -> list[TensorInfo]:
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ModelMetadataError(f"{path.name} is too short to be a safetensors file.")
        (length,) = struct.unpack("<Q", head)
        if length > 100 << 20:
            raise ModelMetadataError(f"{path.name} is not a safetensors file (header length {length}).")
        body = fh.read(length)
    try:
        return parse_safetensors_header(head + body, path.name)
    except NeedMoreData as exc:
        raise ModelMetadataError(f"{path.name} is truncated inside its header.") from exc


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs nest the language model's settings under ``text_config``."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def metadata_from_config(config: dict[str, Any], tensors: list[TensorInfo], *, source: str,
                         name: str = "") -> ModelMetadata:
    """config.json (+ safetensors tensor table) → ModelMetadata for MLX / EXL2 / EXL3 / plain weights."""
    method = quant_method(config)
    if method in ("exl2", "exl3"):
        fmt, quant = method, parse_exl_config(config, name)
    elif method == "mlx":
        fmt, quant = "mlx", parse_mlx_config(config, name)
    else:
        fmt, quant = "safetensors", parse_mlx_config(config, name) if not method else None
        if method:
            quant = QuantInfo(format="safetensors", quant=method, bits_per_weight=None)
    cfg = _text_config(config)
    archs = config.get("architectures") or []
    arch = str(cfg.get("model_type") or config.get("model_type") or (archs[0] if archs else ""))
    n_layers = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or 0)
    n_embd = int(cfg.get("hidden_size") or 0)
    heads = int(cfg.get("num_attention_heads") or 0)
    heads_kv = cfg.get("num_key_value_heads")
    heads_kv = int(heads if heads_kv is None else heads_kv)
    head_dim = int(cfg.get("head_dim") or (n_embd // heads if heads else 0))
    window = int(cfg.get("sliding_window") or 0) if cfg.get("use_sliding_window", True) else 0
    layer_types = cfg.get("layer_types")
    notes: list[str] = []
    if isinstance(layer_types, list) and len(layer_types) == n_layers:
        swa = [t == "sliding_attention" for t in layer_types]
    else:
        swa = _swa_layers({}, arch, n_layers, window, notes) if window else [False] * n_layers
        pattern = cfg.get("sliding_window_pattern")
        if window and isinstance(pattern, int) and pattern > 0:
            swa = [il % pattern < pattern - 1 for il in range(n_layers)]
    meta = ModelMetadata(
        format=fmt, source=source, architecture=arch, name=name, quant=quant, block_count=n_layers,
        context_length=int(cfg.get("max_position_embeddings") or 0), embedding_length=n_embd,
        vocab_size=int(cfg.get("vocab_size") or 0), head_count=[heads] * n_layers,
        head_count_kv=[heads_kv] * n_layers, key_length=head_dim, value_length=head_dim,
        sliding_window=window if any(swa) else 0, swa_layers=swa,
        expert_count=int(cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts") or 0),
        expert_used_count=int(cfg.get("num_experts_per_tok") or 0),
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
        rope_dim_mla=int(cfg.get("qk_rope_head_dim") or 0),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        bos_token_id=_token_id(cfg.get("bos_token_id")), eos_token_id=_token_id(cfg.get("eos_token_id")),
        tensors=list(tensors), notes=notes,
    )
    return meta


def parse_json_object(data: bytes, source: str) -> dict[str, Any]:
    """A config.json's bytes (from a file or an HTTP read) as a dict, or a sentence naming ``source``."""
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelMetadataError(f"{source} is not valid JSON: {exc}.") from exc
    if not isinstance(value, dict):
        raise ModelMetadataError(f"{source} does not hold a JSON object.")
    return value


def read_model_folder(folder: str | Path) -> ModelMetadata:
    """An MLX / EXL2 / EXL3 / safetensors model folder: config.json and every *.safetensors header."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelMetadataError(f"{folder} has no config.json.", "is this a model folder?")
    config = parse_json_object(config_path.read_bytes(), str(config_path))
    tensors: list[TensorInfo] = []
    for st in sorted(folder.glob("*.safetensors")):
        tensors.extend(read_safetensors_file(st))
    meta = metadata_from_config(config, tensors, source=str(folder), name=folder.name)
    if not tensors:
        meta.notes.append("no safetensors files found; weight size estimated from the config")
    return meta


def read_model(path: str | Path) -> ModelMetadata:
    """A local .gguf file or a model folder (a folder holding .gguf files reads the first one)."""
    path = Path(path)
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return read_gguf_file(path)
        raise ModelMetadataError(f"{path.name} is not a .gguf file or a model folder.")
    if path.is_dir():
        if (path / "config.json").is_file():
            return read_model_folder(path)
        ggufs = sorted(p for p in path.glob("*.gguf") if (parse_gguf_filename(p.name) or
                                                           QuantInfo("gguf", "", None)).is_first_shard)
        if ggufs:
            return read_gguf_file(ggufs[0])
        raise ModelMetadataError(f"{path} holds neither a config.json nor a .gguf file.")
    raise ModelMetadataError(f"No such model file or folder: {path}.")
