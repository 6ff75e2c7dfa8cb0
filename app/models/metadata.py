"""Model metadata: what the estimator needs to know about a model, read from its own files.

One ``ModelMetadata`` shape for every format:
- GGUF: the header's key/value pairs and tensor table (``read_gguf_file`` through the ``gguf``
  package; ``parse_gguf_header`` reads the same layout from a byte prefix, for remote headers);
- MLX / EXL2 / EXL3 / plain safetensors: ``config.json`` plus the safetensors headers (``read_model_folder``).

Malformed input raises ``ModelMetadataError`` with the reason, never a bare struct or JSON error.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.models.fields import MAX_LAYERS, U32_MAX, shown, whole_number
from app.models.fields import ModelMetadataError as ModelMetadataError  # re-exported: its readers' error
from app.models.quants import QuantInfo, parse_exl_config, parse_gguf_filename, parse_mlx_config, quant_method


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
            "nextn_layers": self.nextn_layers or None, "deepstack_layers": self.deepstack_layers or None,
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
# Items kept over the whole header: per-layer values and small vocabularies stay far below it; past it, arrays
# are kept as lengths, so a header of many short arrays cannot turn into millions of Python objects.
_KEEP_ITEMS_MAX = 1 << 16
# Real headers hold tens of keys; ggml's own reader allows more, but each key costs a dict entry here.
_MAX_KEYS = 1 << 16
_MAX_TENSORS = 1 << 24
_MAX_DIMS = 4  # GGML_MAX_DIMS
_INT64_MAX = (1 << 63) - 1


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
        self.kept_items = 0

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
            return self.array()
        raise ModelMetadataError(f"GGUF header has a value of unknown type {vtype}.")

    def array(self) -> list[Any] | ArrayLength:
        item_type, count = self.scalar("<I"), self.scalar("<Q")
        if item_type == _ARRAY:
            # ggml's reader refuses arrays of arrays (ggml/src/gguf.cpp). Reading them item by item recursed
            # once per level: a header nested a few thousand deep ended in a RecursionError.
            raise ModelMetadataError("GGUF header holds an array of arrays, which llama.cpp cannot read either.")
        if item_type != _STRING and item_type not in _SCALARS:
            raise ModelMetadataError(f"GGUF header has an array of unknown type {item_type}.")
        if count > 1 << 32:
            raise ModelMetadataError(f"GGUF header is corrupt: an array claims {count} items.")
        if count > _KEEP_ARRAY_MAX or self.kept_items + count > _KEEP_ITEMS_MAX:
            if item_type == _STRING:
                self.skip_strings(count)
            else:
                self.take(struct.calcsize(_SCALARS[item_type]) * count)
            return ArrayLength(count)
        self.kept_items += count
        if item_type == _STRING:
            return [self.string() for _ in range(count)]
        fmt = _SCALARS[item_type]
        return list(struct.unpack(f"<{count}{fmt[1]}", self.take(struct.calcsize(fmt) * count)))


def _ggml_type_name(type_id: int) -> tuple[str, int, int]:
    import gguf

    try:
        qtype = gguf.GGMLQuantizationType(type_id)
    except ValueError as exc:
        raise ModelMetadataError(f"GGUF tensor has unknown ggml type {type_id}.",
                                 "the file may need a newer llama.cpp") from exc
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    return qtype.name, block, size


def _tensor_bytes(name: str, shape: tuple[int, ...], type_id: int) -> tuple[str, int]:
    """The ggml type name and data size of a tensor, checked the way ggml checks it before loading."""
    type_name, block, size = _ggml_type_name(type_id)
    n = 1
    for d in shape:
        n *= d
    if any(d > _INT64_MAX for d in shape) or n > _INT64_MAX:
        raise ModelMetadataError(f"GGUF header is corrupt: tensor {shown(name)} has shape {shape}, more elements "
                                 "than llama.cpp can address.")
    if shape and shape[0] % block:
        raise ModelMetadataError(f"GGUF header is corrupt: tensor {shown(name)} has rows of {shape[0]} elements, "
                                 f"not a multiple of {type_name}'s block of {block}.")
    return type_name, n // block * size


def _alignment(kv: dict[str, Any]) -> int:
    alignment = kv.get("general.alignment", 32)
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 \
            or alignment & (alignment - 1) or alignment > U32_MAX:
        raise ModelMetadataError(f"GGUF header is corrupt: general.alignment is {shown(alignment)}, "
                                 "not a power of two.")
    return alignment


def parse_gguf_header(data: bytes | memoryview) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """Parse a GGUF header from a byte prefix: (key/values, tensors, offset where tensor data starts).

    Raises NeedMoreData when the prefix is too short, ModelMetadataError when it is not GGUF or breaks a rule
    ggml's own reader enforces (counts, duplicate names, nested arrays, shapes, alignment).
    """
    return _parse_gguf(data, None)


@dataclass(frozen=True)
class GgufHeaderBytes:
    """A GGUF header as raw bytes: each key's encoded value (type tag included, long arrays too) and the tensor
    table, so two headers can be compared byte for byte, key by key (what an update check needs)."""

    values: dict[str, bytes]
    tensor_table: bytes
    data_start: int

    def text(self, key: str) -> str | None:
        """A string value's text (``general.architecture``), None for a key that is absent or holds no string."""
        raw = self.values.get(key)
        if raw is None or len(raw) < 12 or int.from_bytes(raw[:4], "little") != _STRING:
            return None
        return raw[12:12 + int.from_bytes(raw[4:12], "little")].decode("utf-8", errors="replace")

    def changed_keys(self, other: GgufHeaderBytes) -> set[str]:
        """Keys added, removed or holding other bytes in ``other``."""
        return {k for k in self.values.keys() | other.values.keys() if self.values.get(k) != other.values.get(k)}

    def only_chat_template_differs(self, other: GgufHeaderBytes, size: int, other_size: int) -> bool:
        """Whether a file of ``size`` bytes with this header and one of ``other_size`` with ``other`` differ in
        their header only in the chat template (``tokenizer.chat_template`` and its named variants): same tensor
        table and the same length of tensor data after the header. (Whether the data bytes are the same too only
        a download tells; the file's sha256 then checks them.)"""
        keys = self.changed_keys(other)
        return (bool(keys) and all(k.startswith(CHAT_TEMPLATE_KEY) for k in keys)
                and self.tensor_table == other.tensor_table and size - self.data_start == other_size - other.data_start)


def parse_gguf_header_bytes(data: bytes | memoryview) -> GgufHeaderBytes:
    """The header of a GGUF prefix as raw bytes per key (see GgufHeaderBytes); raises as parse_gguf_header."""
    raw: dict[str, bytes] = {}
    _, _, data_start = _parse_gguf(data, raw)
    table = raw.pop(_TENSOR_TABLE)
    return GgufHeaderBytes(raw, table, data_start)


CHAT_TEMPLATE_KEY = "tokenizer.chat_template"
_TENSOR_TABLE = "\0tensor table"  # no GGUF key holds a NUL


def _parse_gguf(data: bytes | memoryview,
                raw: dict[str, bytes] | None) -> tuple[dict[str, Any], list[TensorInfo], int]:
    """parse_gguf_header; with ``raw``, also each key's value bytes and the tensor table's bytes, put there."""
    cur = _Cursor(data)
    magic = bytes(cur.take(4))
    if magic != GGUF_MAGIC:
        raise ModelMetadataError(f"Not a GGUF file (starts with {magic!r}, expected b'GGUF').")
    version = cur.scalar("<I")
    if version not in (2, 3):
        raise ModelMetadataError(f"Unsupported GGUF version {version}.", "QuantDesk reads GGUF v2 and v3")
    n_tensors, n_kv = cur.scalar("<Q"), cur.scalar("<Q")
    if n_tensors > _MAX_TENSORS or n_kv > _MAX_KEYS:
        raise ModelMetadataError("GGUF header is corrupt: implausible tensor or key count.")
    kv: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        if key in kv:
            raise ModelMetadataError(f"GGUF header is corrupt: the key {shown(key)} appears twice.")
        start = cur.pos
        kv[key] = cur.value(cur.scalar("<I"))
        if raw is not None:
            raw[key] = bytes(cur.data[start:cur.pos])
    alignment = _alignment(kv)
    table_start = cur.pos
    tensors = []
    names: set[str] = set()
    for _ in range(n_tensors):
        name = cur.string()
        if name in names:
            raise ModelMetadataError(f"GGUF header is corrupt: two tensors are named {shown(name)}.")
        names.add(name)
        n_dims = cur.scalar("<I")
        if n_dims > _MAX_DIMS:
            raise ModelMetadataError(f"GGUF header is corrupt: tensor {shown(name)} has {n_dims} dimensions.")
        shape = tuple(cur.scalar("<Q") for _ in range(n_dims))
        type_id = cur.scalar("<I")
        offset = cur.scalar("<Q")  # within the data section
        dtype, n_bytes = _tensor_bytes(name, shape, type_id)
        tensors.append(TensorInfo(name, shape, dtype, n_bytes, offset))
    if raw is not None:
        raw[_TENSOR_TABLE] = bytes(cur.data[table_start:cur.pos])
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

    The header of a file as it stands (its size, modification time and inode) is read once per process: the fit
    check, the load's file check and the projector's pair check of one ``quantdesk chat`` share it. Each caller
    gets its own dict and list.
    """
    try:
        st = os.stat(path)
        key: tuple[Any, ...] | None = (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        key = None  # the open below says what is wrong
    with _HEADERS_LOCK:
        header = _HEADERS.get(key) if key is not None else None
    if header is None:
        header = _read_local_header(path, parse_gguf_header)
        if key is not None:
            with _HEADERS_LOCK:
                _HEADERS[key] = header
                while len(_HEADERS) > _HEADERS_KEPT:
                    _HEADERS.pop(next(iter(_HEADERS)))
    kv, tensors, data_start = header
    return dict(kv), list(tensors), data_start


_HEADERS: dict[tuple[Any, ...], tuple[dict[str, Any], list[TensorInfo], int]] = {}
_HEADERS_KEPT = 32
_HEADERS_LOCK = threading.Lock()


def read_gguf_header_bytes(path: str | Path) -> GgufHeaderBytes:
    """A local GGUF's header as raw bytes per key (see GgufHeaderBytes)."""
    header: GgufHeaderBytes = _read_local_header(path, parse_gguf_header_bytes)
    return header


def _read_local_header(path: str | Path, parse: Callable[[bytes], Any]) -> Any:
    path = Path(path)
    with path.open("rb") as fh:
        magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise ModelMetadataError(f"{path.name} is not a GGUF file (starts with {magic!r}).")

        def read(start: int, end: int) -> bytes:
            fh.seek(start)
            return fh.read(end - start)

        return parse_growing(read, parse, path.name)


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


def _per_layer(value: Any, n_layers: int, what: str, default: int = 0) -> list[int]:
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


def _swa_layers(explicit: Any, arch: str, n_layers: int, window: int, notes: list[str]) -> list[bool]:
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


def _recurrent_shape(kv: dict[str, Any], arch: str, label: str, n_layers: int, n_trunk: int, n_embd: int,
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
        n_ff = _per_layer(raw("feed_forward_length"), n_layers, f"{label}: {arch}.feed_forward_length")
        layers = [il < n_trunk and heads_kv[il] == 0 and n_ff[il] == 0 for il in range(n_layers)]

    return RecurrentShape(
        layers=tuple(layers), conv_kernel=get("ssm.conv_kernel"), inner_size=get("ssm.inner_size"),
        state_size=get("ssm.state_size"), group_count=get("ssm.group_count"), wkv_head_size=get("wkv.head_size"),
        token_shift_count=get("token_shift_count", 2), shortconv_l_cache=get("shortconv.l_cache"),
        attention_too=arch == "falcon-h1", n_embd=n_embd)


def _token_id(value: Any) -> int | None:
    """A token id from GGUF or config.json (config.json may give a list of eos ids: the first counts);
    None for anything that is not one."""
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U32_MAX else None


def metadata_from_gguf(kv: dict[str, Any], tensors: list[TensorInfo], *, source: str,
                       file_name: str = "") -> ModelMetadata:
    label = file_name or source
    arch = kv.get("general.architecture")
    if not arch:
        raise ModelMetadataError(f"{label} has no general.architecture key.", "the GGUF header is incomplete")
    if not isinstance(arch, str):
        raise ModelMetadataError(f"{label}: general.architecture is {shown(arch)}, not a name.")

    def raw(key: str) -> Any:
        return kv.get(f"{arch}.{key}")

    def number(key: str, default: int = 0, high: int = U32_MAX) -> int:
        """An architecture key; as before, a missing key and a 0 both mean ``default``."""
        return whole_number(raw(key), f"{label}: {arch}.{key}", high=high) or default

    n_layers = number("block_count", high=MAX_LAYERS)
    notes: list[str] = []
    n_embd = number("embedding_length")
    heads = _per_layer(raw("attention.head_count"), n_layers, f"{label}: {arch}.attention.head_count")
    heads_kv = (_per_layer(raw("attention.head_count_kv"), n_layers, f"{label}: {arch}.attention.head_count_kv")
                if raw("attention.head_count_kv") is not None else list(heads))
    head_dim = n_embd // heads[0] if heads and heads[0] else 0
    key_len = number("attention.key_length", head_dim)
    value_len = number("attention.value_length", head_dim)
    window = number("attention.sliding_window")
    if arch in CHUNKED_WINDOWS and raw("attention.sliding_window") != 0:  # 0 turns the chunks off
        window = CHUNKED_WINDOWS[arch]
    tokens = kv.get("tokenizer.ggml.tokens")
    vocab = number("vocab_size") or (len(tokens) if isinstance(tokens, (list, ArrayLength)) else 0)
    tensor_names = {t.name for t in tensors}
    if not vocab:
        embd = next((t for t in tensors if t.name == "token_embd.weight"), None)
        vocab = int(embd.shape[1]) if embd and len(embd.shape) > 1 else 0
    file_type_id = kv.get("general.file_type")
    file_type = ""
    if file_type_id is not None:
        import gguf

        file_type_id = whole_number(file_type_id, f"{label}: general.file_type")
        try:
            file_type = gguf.LlamaFileType(file_type_id).name
        except ValueError:
            file_type = str(file_type_id)
    quant = parse_gguf_filename(file_name) if file_name else None
    if quant is None and file_type:
        from app.models.quants import gguf_bits_per_weight

        name = file_type.replace("MOSTLY_", "").replace("ALL_", "")
        quant = QuantInfo(format="gguf", quant=name, bits_per_weight=gguf_bits_per_weight(name))
    template = kv.get("tokenizer.chat_template")
    swa_layers = _swa_layers(raw("attention.sliding_window_pattern"), arch, n_layers, window, notes)
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
        recurrent=_recurrent_shape(kv, arch, label, n_layers, n_layers - nextn, n_embd, heads_kv), nextn_layers=nextn,
        deepstack_layers=number("n_deepstack_layers"),
        kv_lora_rank=number("attention.kv_lora_rank"),
        rope_dim_mla=number("rope.dimension_count"),
        tied_embeddings="output.weight" not in tensor_names and "token_embd.weight" in tensor_names,
        chat_template=template if isinstance(template, str) else None,
        bos_token_id=_token_id(kv.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=_token_id(kv.get("tokenizer.ggml.eos_token_id")),
        tensors=list(tensors), shard_count=shard_count, notes=notes,
    )
    return meta


# ------------------------------------------------------------------------------------------ safetensors

_SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                            "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


def parse_json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """JSON text that must hold an object (config.json, a safetensors header), or ModelMetadataError."""
    try:
        value = json.loads(raw)
    except RecursionError:  # json's own signal for nesting deeper than the interpreter's stack
        raise ModelMetadataError(f"{what} nests too deeply to be read.") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a number of more than 4,300 digits
        raise ModelMetadataError(f"{what} is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise ModelMetadataError(f"{what} does not hold a JSON object.")
    return value


def parse_safetensors_header(data: bytes, name: str = "") -> list[TensorInfo]:
    """Tensors of a safetensors file from its first bytes (8-byte length + JSON header)."""
    label = name or "safetensors file"
    if len(data) < 8:
        raise NeedMoreData(8)
    (length,) = struct.unpack("<Q", data[:8])
    if length > 100 << 20:
        raise ModelMetadataError(f"{label}: header claims {length} bytes; not safetensors.")
    if len(data) < 8 + length:
        raise NeedMoreData(8 + length)
    header = parse_json_object(bytes(data[8:8 + length]), f"the header of {label}")
    tensors = []
    for tname, info in header.items():
        if tname == "__metadata__":
            continue
        what = f"{label}: tensor {shown(tname)}"
        if not isinstance(info, dict) or not isinstance(info.get("dtype"), str) \
                or not isinstance(info.get("shape"), list) or not isinstance(info.get("data_offsets"), list) \
                or len(info["data_offsets"]) != 2:
            raise ModelMetadataError(f"{what} has a malformed entry.")
        shape = tuple(whole_number(d, f"{what}: a dimension", high=_INT64_MAX) for d in info["shape"])
        start, end = (whole_number(o, f"{what}: an offset", high=_INT64_MAX) for o in info["data_offsets"])
        if end < start:
            raise ModelMetadataError(f"{what} ends at {end}, before it starts at {start}.")
        tensors.append(TensorInfo(tname, shape, info["dtype"], end - start))
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
    label = f"{name or source}: config.json"

    def number(*keys: str, high: int = U32_MAX) -> int:
        """The first of ``keys`` that is set (and not 0), checked; 0 when none is."""
        key = next((k for k in keys if cfg.get(k)), keys[0])
        return whole_number(cfg.get(key), f"{label} {key}", high=high)

    archs = config.get("architectures")
    first_arch = archs[0] if isinstance(archs, list) and archs else ""
    arch = next((a for a in (cfg.get("model_type"), config.get("model_type"), first_arch) if a and isinstance(a, str)),
                "")
    n_layers = number("num_hidden_layers", "n_layer", high=MAX_LAYERS)
    n_embd = number("hidden_size")
    heads = number("num_attention_heads")
    heads_kv = heads if cfg.get("num_key_value_heads") is None else number("num_key_value_heads")
    head_dim = number("head_dim") or (n_embd // heads if heads else 0)
    window = number("sliding_window") if cfg.get("use_sliding_window", True) else 0
    layer_types = cfg.get("layer_types")
    notes: list[str] = []
    if isinstance(layer_types, list) and len(layer_types) == n_layers:
        swa = [t == "sliding_attention" for t in layer_types]
    else:
        swa = _swa_layers(None, arch, n_layers, window, notes) if window else [False] * n_layers
        pattern = cfg.get("sliding_window_pattern")
        if window and isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
            swa = [il % pattern < pattern - 1 for il in range(n_layers)]
    meta = ModelMetadata(
        format=fmt, source=source, architecture=arch, name=name, quant=quant, block_count=n_layers,
        context_length=number("max_position_embeddings"), embedding_length=n_embd,
        vocab_size=number("vocab_size"), head_count=[heads] * n_layers,
        head_count_kv=[heads_kv] * n_layers, key_length=head_dim, value_length=head_dim,
        sliding_window=window if any(swa) else 0, swa_layers=swa,
        expert_count=number("num_experts", "num_local_experts", "n_routed_experts"),
        expert_used_count=number("num_experts_per_tok"),
        kv_lora_rank=number("kv_lora_rank"),
        rope_dim_mla=number("qk_rope_head_dim"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        bos_token_id=_token_id(cfg.get("bos_token_id")), eos_token_id=_token_id(cfg.get("eos_token_id")),
        tensors=list(tensors), notes=notes,
    )
    return meta


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
