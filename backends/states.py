"""A conversation's saved engine state in one file, behind a header QuantDesk writes and checks before a byte of it
reaches the engine: the container llama.cpp's states (backends/llama_cpp/states.py: sequence 0's KV cache) and
MLX's (mlx-lm's prompt cache, a safetensors file: backends/mlx.py) share.

The file: ``MAGIC``, the header's length (4 bytes, little-endian), the header (JSON: the format version, the
identity of what wrote it, the tokens the state holds, the state's length and CRC-32), then the engine's bytes.
Each engine names in the identity everything that makes a state another model's or another layout's. A state whose
identity is not the loaded model's, whose file is short or whose bytes do not add up to the CRC is never loaded:
``StateRejected`` says why (the parent logs it and drops the file).

The header and the state are replaced together in one atomic write (app/files), a crash cannot leave one without
the other, and the check sums exactly the bytes the engine gets.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app import files

MAGIC = b"QDSTATE\x00"
VERSION = 1
_LENGTH = struct.Struct("<I")
MAX_HEADER = 64 * 1024 * 1024  # a header longer than this is no header of ours (tokens are ~8 bytes each)
IDENTITY_BYTES = 64 * 1024  # a model file's first bytes hashed: its GGUF or safetensors header (names, shapes)


class StateRejected(Exception):
    """A saved state that must not be loaded, with the sentence the log gets."""


def file_identity(path: str) -> dict[str, Any]:
    """What names one model file: its path, size, modification time and the hash of its first bytes."""
    if not path:
        return {}
    stat = os.stat(path)
    with open(path, "rb") as fh:
        head = hashlib.sha256(fh.read(IDENTITY_BYTES)).hexdigest()
    return {"path": os.path.abspath(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head_sha256": head}


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` start with in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Header:
    identity: dict[str, Any]
    tokens: list[int]
    data_bytes: int
    crc32: int
    data_offset: int  # where the engine's bytes start in the file


def read_header(path: str) -> Header:
    """The header of a saved state; StateRejected for a file that is not one (or not whole)."""
    try:
        with open(path, "rb") as fh:
            start = fh.read(len(MAGIC) + _LENGTH.size)
            if len(start) < len(MAGIC) + _LENGTH.size or start[:len(MAGIC)] != MAGIC:
                raise StateRejected("it is not a QuantDesk saved state (no header)")
            (length,) = _LENGTH.unpack(start[len(MAGIC):])
            if length > MAX_HEADER:
                raise StateRejected(f"its header claims {length} bytes")
            raw = fh.read(length)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise StateRejected(f"it cannot be read: {exc.strerror or exc}") from None
    if len(raw) < length:
        raise StateRejected("the file is truncated (inside its header)")
    try:
        data = json.loads(raw)
        if data.get("version") != VERSION:
            raise StateRejected(f"it is format version {data.get('version')}, this QuantDesk reads {VERSION}")
        header = Header(dict(data["identity"]), [int(t) for t in data["tokens"]], int(data["data_bytes"]),
                        int(data["crc32"]), len(MAGIC) + _LENGTH.size + length)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateRejected(f"its header is unreadable ({type(exc).__name__})") from None
    if size != header.data_offset + header.data_bytes:
        raise StateRejected(f"the file is truncated or padded: {size} bytes where its header says "
                            f"{header.data_offset + header.data_bytes}")
    return header


def check_identity(header: Header, identity: dict[str, Any]) -> None:
    """StateRejected naming each thing that differs between the state's maker and the loaded model."""
    differs = [f"another {part.replace('_', ' ')} ({_short(header.identity.get(part))}; now "
               f"{_short(identity.get(part))})" for part in sorted(set(identity) | set(header.identity))
               if identity.get(part) != header.identity.get(part)]
    if differs:
        raise StateRejected("it was saved with " + " and ".join(differs))


def _short(value: Any) -> str:
    if isinstance(value, dict):  # a file's identity: its name and the field that differs is enough for a log line
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items() if k != "head_sha256")
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def write(path: str, identity: dict[str, Any], tokens: Sequence[int], data: bytes | memoryview) -> int:
    """The engine's ``data`` and ``tokens`` (what it holds) written to ``path`` atomically; the file's size."""
    header = json.dumps({"version": VERSION, "identity": identity, "tokens": list(tokens), "data_bytes": len(data),
                         "crc32": zlib.crc32(data)}, separators=(",", ":")).encode("utf-8")
    files.write_parts_atomic(Path(path), (MAGIC, _LENGTH.pack(len(header)), header, data))
    return len(MAGIC) + _LENGTH.size + len(header) + len(data)


def read_data(path: str, header: Header) -> bytearray:
    """The engine's bytes of a state whose header was read, checked against its CRC (StateRejected if not)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(header.data_offset)
            buffer = bytearray(header.data_bytes)
            got = fh.readinto(buffer)
    except OSError as exc:
        raise StateRejected(f"it cannot be read: {exc.strerror or exc}") from None
    if got != header.data_bytes:
        raise StateRejected("the file is truncated")
    if zlib.crc32(buffer) != header.crc32:
        raise StateRejected("its bytes do not match their checksum (the file is damaged)")
    return buffer


def best_state(paths: Sequence[str], identity: dict[str, Any], tokens: Sequence[int], have: int, cuttable: bool
               ) -> tuple[tuple[int, str, Header] | None, list[tuple[str, str]]]:
    """Of the saved states at ``paths``, the one that gives the prompt ``tokens`` the longest prefix beyond the
    ``have`` tokens the engine's cache already gives it (its tokens decide, never its file's name; one token is left
    to decode: its logits pick the reply's first): (reuse, path, header), or None; and the files refused, with why.
    ``cuttable`` False (a recurrent state): a state counts only where it is a whole prefix of the prompt."""
    discarded: list[tuple[str, str]] = []
    best: tuple[int, str, Header] | None = None
    for path in paths:
        try:
            header = read_header(path)
            check_identity(header, identity)
        except StateRejected as exc:
            discarded.append((path, str(exc)))
            continue
        reuse = min(shared_prefix(header.tokens, tokens), len(tokens) - 1)
        if not cuttable and reuse < len(header.tokens):
            reuse = 0  # a recurrent state cannot be cut back to the shared prefix
        if reuse > have and (best is None or reuse > best[0]):
            best = (reuse, path, header)
    return best, discarded
