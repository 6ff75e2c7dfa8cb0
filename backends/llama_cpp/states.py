"""A conversation's saved llama.cpp state: the KV cache of one sequence (``llama_state_seq_get_data``) in the container
of backends/states.py (magic, JSON header, CRC), checked before a byte of it reaches llama.cpp.

The identity names everything that makes a state another model's or another layout's: the model file (path, size,
modification time, a hash of its first 64 KiB), the vision projector's, the runtime (llama-cpp-python's version,
the folder it was imported from, llama.cpp's system info: its ggml backend and CPU features), the context length,
the KV cache's types, flash attention (llama.cpp lays out V transposed without it) and the sliding-window size
choice. A state whose identity is not the loaded model's, whose tokens the prompt does not start with, whose file
is short or whose bytes do not add up to the CRC is never loaded: ``StateRejected`` says why (the parent logs it
and drops the file).

One file rather than ``llama_state_seq_save_file`` with a header beside it: the header and the state are
replaced together in one atomic write (app/files), a crash cannot leave one without the other, and the check
sums exactly the bytes llama.cpp gets.
"""

from __future__ import annotations

import ctypes
import os
from types import ModuleType
from typing import Any

from backends.states import (Header, StateRejected, best_state, check_identity, file_identity, read_data, read_header,
                             write)

__all__ = ["Header", "StateRejected", "best_state", "check_identity", "copy", "file_identity", "load", "read_header",
           "runtime_identity", "write"]


def runtime_identity(llama_cpp: ModuleType) -> dict[str, Any]:
    """The llama.cpp build a state was made with: another version or ggml backend may lay its cache out otherwise."""
    return {"llama_cpp_python": getattr(llama_cpp, "__version__", ""),
            "runtime": os.path.dirname(os.path.abspath(str(llama_cpp.__file__))),
            "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()}


def copy(llama_cpp: ModuleType, ctx: Any, seq: int) -> memoryview:
    """Sequence ``seq``'s state copied out of llama.cpp (no decode may run meanwhile; the file can be written after,
    while others do: ``write``). OSError where llama.cpp cannot copy it."""
    size = int(llama_cpp.llama_state_seq_get_size(ctx, seq))
    buffer = (ctypes.c_uint8 * size)()
    written = int(llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq))
    if written == 0 and size:
        raise OSError("llama.cpp could not copy the state")
    return memoryview(buffer).cast("B")[:written]


def load(llama_cpp: ModuleType, ctx: Any, path: str, header: Header, seq: int = 0) -> None:
    """Read the state's bytes, check them against the header's CRC and give them to llama.cpp as sequence ``seq``
    (the caller cleared it; a state saved from any sequence loads into any). StateRejected if anything does not add
    up; llama.cpp refusing them is one too."""
    buffer = read_data(path, header)
    array = (ctypes.c_uint8 * len(buffer)).from_buffer(buffer)
    if not int(llama_cpp.llama_state_seq_set_data(ctx, array, len(buffer), seq)):
        raise StateRejected("llama.cpp refused it (see the engine log for its reason)")
