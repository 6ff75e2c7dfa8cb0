"""Every architecture the bundled llama.cpp knows is either sized by the estimator or named, with its reason, in
app.models.estimate.LLAMA_CPP_NOT_SIZED: asked of llama.cpp itself, never of a copied list, so a new llama.cpp that
adds an architecture makes this test name it.

llama.cpp has no API that lists its architectures (LLM_ARCH_NAMES in src/llama-arch.cpp is internal), but each name
is a string in libllama. The linker may merge a name into the tail of a longer string ("bert" into "nomic-bert"), so
every suffix of every word in the library is a candidate, and llama.cpp itself says which candidates it knows: a
GGUF naming an architecture it does not know fails with "unknown model architecture" (llama-model.cpp load_arch)
before anything else is read. About 50,000 candidates take 3 seconds, in a child process."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from app.models.estimate import (
    LLAMA_CPP_MODELLED,
    LLAMA_CPP_NOT_SIZED,
    LlamaCppSettings,
    UnknownModel,
    estimate_llama_cpp,
)
from app.models.metadata import RECURRENT_ARCHS, TensorInfo, metadata_from_gguf

NOT_AN_ARCHITECTURE = "not-an-architecture"

KNOWN_ARCHITECTURES = r"""
import ctypes, os, re, struct, sys, tempfile
from pathlib import Path
import llama_cpp

words = {sys.argv[1]}
for lib in (Path(llama_cpp.__file__).parent / "lib").glob("*llama.*"):
    for run in re.findall(rb"[a-z][a-z0-9_.-]+", lib.read_bytes()):
        text = run.decode()
        words.update(text[i:] for i in range(len(text)))
candidates = sorted(w for w in words if len(w) <= 40 and re.fullmatch(r"[a-z][a-z0-9_-]*[a-z0-9]", w))

def header(arch):
    def string(value):
        raw = value.encode()
        return struct.pack("<Q", len(raw)) + raw
    kv = string("general.architecture") + struct.pack("<I", 8) + string(arch)
    kv += string("tokenizer.ggml.model") + struct.pack("<I", 8) + string("none")
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv

unknown = []

@llama_cpp.llama_log_callback
def on_log(level, text, user_data):
    if b"unknown model architecture" in text:
        unknown.append(text)

llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
params = llama_cpp.llama_model_default_params()
params.vocab_only = True
fd, path = tempfile.mkstemp(suffix=".gguf")
os.close(fd)
try:
    for arch in candidates:
        Path(path).write_bytes(header(arch))
        before = len(unknown)
        model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        if model:
            llama_cpp.llama_model_free(model)
        if len(unknown) == before:
            print("KNOWN", arch)
finally:
    os.unlink(path)
"""


@pytest.fixture(scope="module")
def llama_cpp_architectures() -> set[str]:
    result = subprocess.run([sys.executable, "-c", KNOWN_ARCHITECTURES, NOT_AN_ARCHITECTURE],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(re.findall(r"^KNOWN (\S+)$", result.stdout, re.M))


def test_the_question_tells_known_from_unknown(llama_cpp_architectures):
    assert NOT_AN_ARCHITECTURE not in llama_cpp_architectures  # the check can fail
    # llama and qwen2 are merged into longer strings' tails in the library; rwkv7 into arwkv7's
    assert {"llama", "qwen2", "rwkv7", "bert", "gemma3", "qwen3moe", "lfm2"} <= llama_cpp_architectures
    assert len(llama_cpp_architectures) > 100


def test_every_architecture_llama_cpp_knows_is_sized_or_says_why_not(llama_cpp_architectures):
    sized = LLAMA_CPP_MODELLED | RECURRENT_ARCHS
    unexplained = llama_cpp_architectures - sized - LLAMA_CPP_NOT_SIZED.keys()
    assert not unexplained, (f"the bundled llama.cpp knows architectures the estimator neither sizes nor names in "
                             f"LLAMA_CPP_NOT_SIZED; read their src/models/<arch>.cpp: {sorted(unexplained)}")


def test_every_architecture_named_is_one_llama_cpp_knows(llama_cpp_architectures):
    named = LLAMA_CPP_MODELLED | RECURRENT_ARCHS | LLAMA_CPP_NOT_SIZED.keys()
    assert not named - llama_cpp_architectures, f"not in the bundled llama.cpp: {sorted(named - llama_cpp_architectures)}"
    assert not (LLAMA_CPP_MODELLED | RECURRENT_ARCHS) & LLAMA_CPP_NOT_SIZED.keys()


@pytest.mark.parametrize(("arch", "says"), [
    ("gemma3n", "per-layer embeddings"),
    ("nomic-bert", "an encoder (embeddings or reranking), not a chat model"),
    ("clip", "projector"),
    ("never-heard-of-it", "nor known to the bundled llama.cpp"),
])
def test_an_architecture_not_sized_gets_its_reason(arch, says):
    kv = {"general.architecture": arch, f"{arch}.block_count": 2, f"{arch}.embedding_length": 64,
          f"{arch}.attention.head_count": 4, "tokenizer.ggml.tokens": ["a", "b"]}
    meta = metadata_from_gguf(kv, [TensorInfo("token_embd.weight", (64, 2), "F16", 256)], source="mem")
    with pytest.raises(UnknownModel, match=re.escape(says)):
        estimate_llama_cpp(meta, LlamaCppSettings())
