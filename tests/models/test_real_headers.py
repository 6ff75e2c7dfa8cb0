"""Real GGUF headers: llama.cpp's vocab-only files of real models (tests/models/data/real-vocab/README.md).

Each is read three ways — the gguf package's reader, our byte-prefix parser, and the remote Range reader
against the local Hub stand-in — and the figures below were checked once by hand with gguf.GGUFReader.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import pytest

from app.cli import main
from app.hub.remote import read_remote_gguf
from app.models.estimate import (
    LlamaCppSettings,
    UnknownModel,
    estimate_llama_cpp,
    estimate_mlx,
    kv_layer_bytes,
)
from app.models.metadata import NeedMoreData, metadata_from_gguf, parse_gguf_header, read_gguf_file
from app.models.recommend import recommend

DATA = Path(__file__).parent / "data" / "real-vocab"
MiB = 1 << 20

# file -> figures read from its header with gguf.GGUFReader (see the README for the real model)
REAL = {
    "ggml-vocab-llama-spm.gguf": dict(  # Llama-2-7B
        architecture="llama", block_count=32, context_length=4096, embedding_length=4096, head_count=32,
        head_count_kv=32, key_length=128, vocab_size=32000, has_chat_template=False, bos_token_id=1,
        eos_token_id=2, file_type="MOSTLY_F16"),
    "ggml-vocab-phi-3.gguf": dict(  # Phi-3-mini-4k-instruct
        architecture="phi3", block_count=32, context_length=4096, embedding_length=3072, head_count=32,
        head_count_kv=32, key_length=96, vocab_size=32064, has_chat_template=True, bos_token_id=1,
        eos_token_id=32000, file_type="MOSTLY_F16"),
    "ggml-vocab-deepseek-coder.gguf": dict(  # deepseek-coder-6.7b-base (linear RoPE scaling x4)
        architecture="llama", block_count=32, context_length=16384, embedding_length=4096, head_count=32,
        head_count_kv=32, key_length=128, vocab_size=32256, has_chat_template=False, bos_token_id=32013,
        eos_token_id=32014, file_type="MOSTLY_F16"),
    "ggml-vocab-starcoder.gguf": dict(  # starcoder2-3b (GQA 24:2)
        architecture="starcoder2", block_count=30, context_length=16384, embedding_length=3072, head_count=24,
        head_count_kv=2, key_length=128, vocab_size=49152, has_chat_template=False, bos_token_id=0,
        eos_token_id=0, file_type="MOSTLY_F16"),
    "ggml-vocab-bert-bge.gguf": dict(  # bge-small-en-v1.5: no head_count_kv key, no bos/eos ids
        architecture="bert", block_count=12, context_length=512, embedding_length=384, head_count=12,
        head_count_kv=12, key_length=32, vocab_size=30522, has_chat_template=False, bos_token_id=None,
        eos_token_id=None, file_type="MOSTLY_F16"),
}
FILES = sorted(REAL)


def _comparable(meta) -> dict:
    summary = meta.summary()
    summary.pop("source")
    return summary | {"header_bytes": meta.header_bytes, "chat_template": meta.chat_template}


def _from_prefix(path: Path) -> tuple:
    """Parse the header the way the remote reader does: a short prefix, grown while the parser asks."""
    data = path.read_bytes()
    size, asks = 4096, 0
    while True:
        try:
            kv, tensors, data_start = parse_gguf_header(data[:size])
            break
        except NeedMoreData as need:
            assert size < need.needed <= len(data), (size, need.needed)
            size, asks = max(need.needed, size * 2), asks + 1  # grow as remote.py does
    meta = metadata_from_gguf(kv, tensors, source=str(path), file_name=path.name)
    meta.header_bytes = data_start
    return meta, asks


@pytest.mark.parametrize("name", FILES)
def test_figures_match_the_real_model(name):
    meta = read_gguf_file(DATA / name)
    summary = meta.summary()
    for key, value in REAL[name].items():
        assert summary[key] == value, (key, summary[key], value)
    assert meta.tensors == [] and meta.weights_bytes == 0
    assert any("vocab-only" in note for note in meta.notes)
    # the reader's vocabulary count is the token list's length, cross-checked with gguf itself
    reader = gguf.GGUFReader(DATA / name)
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == meta.vocab_size


@pytest.mark.parametrize("name", FILES)
def test_local_prefix_and_remote_readers_agree(name, hub_env):
    path = DATA / name
    local = read_gguf_file(path)
    prefix, asks = _from_prefix(path)
    assert asks >= 1, "a 4 KiB prefix cannot hold a real tokenizer: the parser must ask for more"
    hub_env.add_repo("llama.cpp/real-vocab", files={name: path})
    remote = read_remote_gguf("llama.cpp/real-vocab", name)
    assert _comparable(prefix) == _comparable(local)
    assert _comparable(remote) == _comparable(local)
    assert remote.source == f"llama.cpp/real-vocab/{name}"
    gets = hub_env.requests_for(name)
    assert gets and all(r.headers.get("range", "").startswith("bytes=") for r in gets)
    # one byte short of the header is "need more", never a wrong answer
    data = path.read_bytes()
    end = len(data)  # vocab-only: the header is the whole file
    with pytest.raises(NeedMoreData):
        parse_gguf_header(data[:end - 1])


def test_phi3_chat_template_is_the_real_one():
    meta = read_gguf_file(DATA / "ggml-vocab-phi-3.gguf")
    assert meta.chat_template.startswith("{{ bos_token }}{% for message in messages %}")
    assert "<|assistant|>" in meta.chat_template and len(meta.chat_template) == 269


def test_kv_cache_from_real_hyperparameters():
    """KV per token from the real hparams: Llama-2-7B 512 KiB (llama.cpp logs 2048 MiB at n_ctx 4096),
    StarCoder2-3B with 2 KV heads 30 KiB, Phi-3-mini 384 KiB."""
    llama2 = read_gguf_file(DATA / "ggml-vocab-llama-spm.gguf")
    assert sum(kv_layer_bytes(llama2, il, 4096, "f16") for il in range(32)) == 2048 * MiB
    starcoder2 = read_gguf_file(DATA / "ggml-vocab-starcoder.gguf")
    assert sum(kv_layer_bytes(starcoder2, il, 1, "f16") for il in range(30)) == 30 * 1024
    assert sum(kv_layer_bytes(starcoder2, il, 16384, "q8_0") for il in range(30)) == 255 * MiB
    phi3 = read_gguf_file(DATA / "ggml-vocab-phi-3.gguf")
    assert sum(kv_layer_bytes(phi3, il, 1, "f16") for il in range(32)) == 384 * 1024


@pytest.mark.parametrize("name", [n for n in FILES if REAL[n]["architecture"] != "bert"])
def test_a_vocab_only_file_is_never_sized_to_zero(name):
    meta = read_gguf_file(DATA / name)
    with pytest.raises(UnknownModel, match="no weight tensors"):
        estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=4096))


def test_unmodelled_architecture_says_so():
    meta = read_gguf_file(DATA / "ggml-vocab-bert-bge.gguf")
    with pytest.raises(UnknownModel, match="bert architecture is not modelled"):
        estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=512))


def _hardware():
    from app.hardware.profile import CpuInfo, HardwareProfile

    return HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=64 << 30,
                           ram_available_bytes=64 << 30, gpus=[])


def _hardware_file(tmp_path) -> str:
    path = tmp_path / "hw.json"
    path.write_text(_hardware().to_json())
    return str(path)


def test_cli_inspect_and_fit(tmp_path, capsys):
    assert main(["inspect", str(DATA / "ggml-vocab-starcoder.gguf"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["architecture"], data["block_count"], data["head_count_kv"], data["tensor_count"]) == \
        ("starcoder2", 30, 2, 0)
    assert main(["inspect", str(DATA / "ggml-vocab-phi-3.gguf")]) == 0
    out = capsys.readouterr().out
    assert "phi3" in out and "has_chat_template  True" in out and "vocab-only" in out
    hw = _hardware_file(tmp_path)
    assert main(["fit", str(DATA / "ggml-vocab-llama-spm.gguf"), "--hardware", hw, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["verdict"] == "unknown" and "no weight tensors" in fit["reason"] and fit["devices"] == []
    assert main(["fit", str(DATA / "ggml-vocab-bert-bge.gguf"), "--hardware", hw, "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["verdict"] == "unknown" and "bert architecture is not modelled" in fit["reason"]


def test_recommend_never_picks_a_vocab_only_file():
    candidates = [(name, read_gguf_file(DATA / name)) for name in FILES]
    report = recommend(candidates, _hardware(), 4096)
    assert {c.verdict for c in report.candidates} == {"unknown"}
    assert not report.best_per_format and report.best is None


# ------------------------------------------------------------------ Gemma 4: per-layer header layout

# Recorded from llama.cpp's ggml-vocab-gemma-4.gguf (15.8 MB, not copied): every hyperparameter key
# with its GGUF type as written there; the tokenizer is replaced by a small one.
GEMMA4_SWA = [il % 6 != 5 for il in range(30)]
GEMMA4_KV_HEADS = [8 if swa else 2 for swa in GEMMA4_SWA]
GEMMA4_KEYS = {
    "gemma4.block_count": 30, "gemma4.context_length": 262144, "gemma4.embedding_length": 2816,
    "gemma4.feed_forward_length": 2112, "gemma4.attention.head_count": 16,
    "gemma4.attention.head_count_kv": GEMMA4_KV_HEADS, "gemma4.rope.freq_base": 1000000.0,
    "gemma4.rope.freq_base_swa": 10000.0, "gemma4.attention.layer_norm_rms_epsilon": 1e-6,
    "gemma4.expert_count": 128, "gemma4.expert_used_count": 8, "gemma4.attention.key_length": 512,
    "gemma4.attention.value_length": 512, "general.file_type": 1, "gemma4.final_logit_softcapping": 30.0,
    "gemma4.attention.sliding_window": 1024, "gemma4.attention.shared_kv_layers": 0,
    "gemma4.embedding_length_per_layer_input": 0, "gemma4.attention.sliding_window_pattern": GEMMA4_SWA,
    "gemma4.attention.key_length_swa": 256, "gemma4.attention.value_length_swa": 256,
    "gemma4.expert_feed_forward_length": 704, "gemma4.rope.dimension_count": 512,
    "gemma4.rope.dimension_count_swa": 256,
}


def _write_gemma4_header(path: Path, shared_kv_layers: int = 0) -> Path:
    writer = gguf.GGUFWriter(str(path), "gemma4")
    u32 = {k for k, v in GEMMA4_KEYS.items() if isinstance(v, int)}
    for key, value in GEMMA4_KEYS.items():
        if key == "gemma4.attention.shared_kv_layers":
            value = shared_kv_layers
        if isinstance(value, list):
            writer.add_array(key, value)
        elif key in u32:
            writer.add_uint32(key, value)
        else:
            writer.add_float32(key, value)
    writer.add_tokenizer_model("gemma4")
    writer.add_token_list([f"<t{i}>" for i in range(300)])
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_chat_template("{{ messages }}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gemma4_per_layer_layout(tmp_path, hub_env):
    path = _write_gemma4_header(tmp_path / "gemma-4-26b-a4b-vocab.gguf")
    local = read_gguf_file(path)
    prefix, _ = _from_prefix(path)
    hub_env.add_repo("google/gemma-4-header", files={path.name: path})
    remote = read_remote_gguf("google/gemma-4-header", path.name)
    assert _comparable(prefix) == _comparable(local) == _comparable(remote)
    assert local.head_count_kv == GEMMA4_KV_HEADS and local.swa_layers == GEMMA4_SWA
    assert (local.key_length, local.key_length_swa, local.value_length_swa) == (512, 256, 256)
    assert (local.sliding_window, local.expert_count, local.expert_used_count) == (1024, 128, 8)
    # llama.cpp n_embd_k_gqa(il): window layers 8 heads x 256, full layers 2 heads x 512 (K and V, f16)
    assert kv_layer_bytes(local, 0, 1, "f16") == 8 * (256 + 256) * 2
    assert kv_layer_bytes(local, 5, 1, "f16") == 2 * (512 + 512) * 2
    with pytest.raises(UnknownModel, match="gemma4 architecture is not modelled"):
        estimate_llama_cpp(local, LlamaCppSettings())


def test_shared_kv_layers_hold_no_cache(tmp_path):
    meta = read_gguf_file(_write_gemma4_header(tmp_path / "g4-shared.gguf", shared_kv_layers=10))
    assert meta.shared_kv_layers == 10 and meta.summary()["shared_kv_layers"] == 10
    assert [bool(kv_layer_bytes(meta, il, 1, "f16")) for il in range(30)] == [True] * 20 + [False] * 10


def test_window_head_size_reaches_the_estimators():
    """A modelled architecture carrying key_length_swa: llama.cpp reads that key for every architecture
    (llama-model.cpp, "head size and n_rot for SWA layers"), so the window layers' KV uses it."""
    from app.models.metadata import TensorInfo

    kv = {"general.architecture": "gemma3", "gemma3.block_count": 6, "gemma3.embedding_length": 1024,
          "gemma3.attention.head_count": 8, "gemma3.attention.head_count_kv": 4,
          "gemma3.attention.key_length": 256, "gemma3.attention.value_length": 256,
          "gemma3.attention.key_length_swa": 128, "gemma3.attention.value_length_swa": 128,
          "gemma3.attention.sliding_window": 512, "tokenizer.ggml.tokens": [f"t{i}" for i in range(64)]}
    tensors = [TensorInfo("token_embd.weight", (1024, 64), "F16", 1024 * 64 * 2)]
    meta = metadata_from_gguf(kv, tensors, source="mem")
    assert meta.swa_layers == [True] * 5 + [False]
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=8192))
    swa_cells, full_cells = 1024, 8192  # pad(512 + 512, 256) and n_ctx
    assert est.devices[0].kv_bytes == 5 * swa_cells * 4 * 256 * 2 + full_cells * 4 * 512 * 2
    meta.format = "mlx"  # MLX keeps the window on window layers and the same per-layer head sizes
    mlx = estimate_mlx(meta, 8192)
    assert mlx.devices[0].kv_bytes == 5 * 512 * 4 * 256 * 2 + 8192 * 4 * 512 * 2
