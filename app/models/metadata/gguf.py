"""The GGUF reader: a header's key/value pairs and tensor table from a byte prefix (``parse_gguf_header``; a local file
or an HTTP Range read grows the prefix while the parser needs more), or as raw bytes per key (``GgufHeaderBytes``, for
update checks). Long arrays (the vocabulary) are kept as their length. Malformed input raises ModelMetadataError,
never a bare struct error."""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.fields import INT64_MAX, U32_MAX, ModelMetadataError, shown
from app.models.metadata.model import TensorInfo

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
    if any(d > INT64_MAX for d in shape) or n > INT64_MAX:
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
                raise ModelMetadataError(f"{source}: header larger than {limit >> 20} MiB; "
                                         "not reading further.") from None


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
