"""A GGUF writer that can lie: every count, length and type code is written exactly as given, so a test can
build a file that is well formed up to one hostile field (an array claiming 2**60 items, a string longer than
the file, an array of arrays 5,000 deep). ``gguf.GGUFWriter`` writes only honest files; this one exists for the
fuzz tests (tests/models/test_metadata_fuzz.py) and their regression files (tests/models/data/fuzz/)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

# GGUF value type codes (gguf spec; ggml/include/gguf.h).
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR_FORMATS = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
                  BOOL: "<B", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}


@dataclass
class Value:
    """One GGUF value. ``payload``: a number (scalars), bytes (strings) or a list of Values (arrays).
    ``claimed``: the length or item count written, when it should differ from the real one.
    ``item_type``: the item type written in an array's header (default: the first item's type, else UINT8)."""

    type: int
    payload: object
    claimed: int | None = None
    item_type: int | None = None


@dataclass
class Tensor:
    name: bytes
    dims: list[int]
    ggml_type: int = 0  # F32
    offset: int = 0
    claimed_dims: int | None = None


@dataclass
class Header:
    kv: list[tuple[bytes, Value]] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    version: int = 3
    claimed_kv: int | None = None
    claimed_tensors: int | None = None


def u32(n: int) -> bytes:
    return struct.pack("<I", n & 0xFFFF_FFFF)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n & 0xFFFF_FFFF_FFFF_FFFF)


def string(raw: bytes, claimed: int | None = None) -> bytes:
    return u64(len(raw) if claimed is None else claimed) + raw


def value_body(v: Value) -> bytes:
    """The value without its leading type code (the form array items take)."""
    if v.type == STRING:
        return string(v.payload, v.claimed)  # type: ignore[arg-type]
    if v.type == ARRAY and isinstance(v.payload, bytes):  # already encoded (nested_array)
        return v.payload
    if v.type == ARRAY:
        items: list[Value] = v.payload  # type: ignore[assignment]
        item_type = v.item_type if v.item_type is not None else (items[0].type if items else UINT8)
        count = len(items) if v.claimed is None else v.claimed
        return u32(item_type) + u64(count) + b"".join(value_body(item) for item in items)
    fmt = SCALAR_FORMATS.get(v.type)
    if fmt is None:  # an unknown type code: a few arbitrary bytes stand in for its value
        return bytes(v.payload) if isinstance(v.payload, (bytes, bytearray)) else u32(int(v.payload))  # type: ignore[arg-type]
    number = v.payload
    if fmt[-1] in "BHIQbhiq":
        bits = struct.calcsize(fmt) * 8
        number = int(number) & ((1 << bits) - 1)  # type: ignore[call-overload]
        if fmt[-1] in "bhiq" and number >= 1 << (bits - 1):
            number -= 1 << bits
    return struct.pack(fmt, number)


def nested_array(depth: int) -> Value:
    """An array holding an array holding an array ... ``depth`` levels, one item each, a u8 at the bottom
    (encoded here, without recursion, so any depth can be written)."""
    body = u32(UINT8) + u64(1) + bytes([7])
    for _ in range(depth - 1):
        body = u32(ARRAY) + u64(1) + body
    return Value(ARRAY, body)


def header_bytes(h: Header) -> bytes:
    out = [b"GGUF", u32(h.version), u64(len(h.tensors) if h.claimed_tensors is None else h.claimed_tensors),
           u64(len(h.kv) if h.claimed_kv is None else h.claimed_kv)]
    for key, v in h.kv:
        out += [string(key), u32(v.type), value_body(v)]
    for t in h.tensors:
        out += [string(t.name), u32(len(t.dims) if t.claimed_dims is None else t.claimed_dims)]
        out += [u64(d) for d in t.dims]
        out += [u32(t.ggml_type), u64(t.offset)]
    return b"".join(out)


def minimal_model(arch: bytes = b"llama", *, block_count: int = 2, extra: list[tuple[bytes, Value]] = ()) -> Header:
    """An honest two-layer header with one F32 tensor: the base the hostile fields are added to."""
    kv = [(b"general.architecture", Value(STRING, arch)),
          (arch + b".block_count", Value(UINT32, block_count)),
          (arch + b".embedding_length", Value(UINT32, 64)),
          (arch + b".attention.head_count", Value(UINT32, 4)),
          (arch + b".context_length", Value(UINT32, 2048)), *extra]
    return Header(kv=kv, tensors=[Tensor(b"token_embd.weight", [64, 300])])
