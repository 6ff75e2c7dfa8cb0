from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from app.models.metadata import (
    ArrayLength,
    ModelMetadataError,
    NeedMoreData,
    parse_gguf_header,
    read_gguf_file,
    read_gguf_header,
    read_model,
    read_model_folder,
)
from tests.models.gguf_builder import TINY_LLAMA

REAL_VOCAB = Path(__file__).parent / "data" / "real-vocab"


def test_local_gguf_header(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    assert (meta.architecture, meta.block_count, meta.embedding_length, meta.vocab_size) == ("llama", 2, 64, 300)
    assert meta.head_count == [4, 4] and meta.head_count_kv == [2, 2]
    assert (meta.key_length, meta.value_length) == (16, 16)
    assert meta.quant.quant == "F16" and meta.file_type == "MOSTLY_F16"
    assert meta.chat_template == "{{ messages }}"
    assert not meta.tied_embeddings
    # 2-D weights are F16, norms F32: bits per weight from the file itself, just above 16.
    assert 16.0 < meta.bits_per_weight < 16.2
    embd = next(t for t in meta.tensors if t.name == "token_embd.weight")
    assert embd.shape == (64, 300) and embd.n_bytes == 64 * 300 * 2


def test_sliding_window_pattern_and_tied_embeddings(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["gemma3"])
    # llama.cpp's gemma3 pattern: five sliding-window layers, then one global layer.
    assert meta.swa_layers == [True, True, True, True, True, False, True]
    assert meta.sliding_window == 512 and meta.tied_embeddings


def test_moe_counts(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["moe"])
    assert (meta.expert_count, meta.expert_used_count) == (8, 2)
    assert meta.quant.quant == "F32"


def _package_header(path):
    """What gguf.GGUFReader (llama.cpp's own Python reader) says, as plain values: the oracle."""
    import gguf

    reader = gguf.GGUFReader(path)
    kv = {}
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or not f.types:
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            kv[name] = len(f.data) if len(f.data) > 4096 else list(f.contents())
        else:
            kv[name] = f.contents()
    tensors = [(t.name, tuple(int(d) for d in t.shape), t.tensor_type.name, int(t.n_bytes),
                int(t.data_offset) - int(reader.data_offset)) for t in reader.tensors]
    return kv, tensors, int(reader.data_offset)


@pytest.mark.parametrize("real_vocab", [False, True])
def test_byte_parser_agrees_with_the_gguf_package(tiny_ggufs, real_vocab):
    # Real 32k-token vocabularies (vendored from llama.cpp) go through the path that skips long arrays.
    paths = [REAL_VOCAB / "ggml-vocab-llama-spm.gguf", REAL_VOCAB / "ggml-vocab-phi-3.gguf"] if real_vocab else \
        list(tiny_ggufs.values())
    assert paths
    for path in paths:
        data = path.read_bytes()
        kv, tensors, data_start = parse_gguf_header(data)
        assert (kv, tensors, data_start) == read_gguf_header(path)
        package_kv, package_tensors, package_start = _package_header(path)
        assert {k: len(v) if isinstance(v, ArrayLength) else v for k, v in kv.items()} == package_kv
        assert [(t.name, t.shape, t.dtype, t.n_bytes, t.offset) for t in tensors] == package_tensors
        assert data_start == package_start == read_gguf_file(path).header_bytes
        assert not tensors or data_start + sum(t.n_bytes for t in tensors) <= len(data)  # (vocab-only: none)
        with pytest.raises(NeedMoreData) as need:
            parse_gguf_header(data[: data_start // 2])
        assert need.value.needed > data_start // 2


def test_malformed_files_raise_our_error(tmp_path, tiny_ggufs):
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 definitely a zip")
    with pytest.raises(ModelMetadataError, match="not a GGUF"):
        read_gguf_file(not_gguf)
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(tiny_ggufs["llama"].read_bytes()[:3000])
    with pytest.raises(ModelMetadataError):
        read_gguf_file(truncated)
    bad_version = tmp_path / "v.gguf"
    bad_version.write_bytes(b"GGUF" + struct.pack("<I", 99) + b"\0" * 16)
    with pytest.raises(ModelMetadataError, match="version 99"):
        parse_gguf_header(bad_version.read_bytes())
    with pytest.raises(ModelMetadataError, match="No such"):
        read_model(tmp_path / "missing.gguf")


def _write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": {np.float16: "F16", np.uint32: "U32"}[arr.dtype.type], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def test_mlx_folder(tmp_path):
    folder = tmp_path / "Tiny-4bit"
    folder.mkdir()
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 2048,
              "tie_word_embeddings": True, "quantization": {"group_size": 64, "bits": 4}}
    (folder / "config.json").write_text(json.dumps(config))
    _write_safetensors(folder / "model.safetensors", {
        "model.embed_tokens.weight": np.zeros((300, 8), np.uint32),
        "model.embed_tokens.scales": np.zeros((300, 1), np.float16),
    })
    meta = read_model(folder)
    assert (meta.format, meta.quant.quant, meta.architecture) == ("mlx", "4bit", "llama")
    assert meta.head_count_kv == [2, 2] and meta.key_length == 16 and meta.tied_embeddings
    assert meta.weights_bytes == 300 * 8 * 4 + 300 * 2


def test_exl_folder_and_gemma_layer_types(tmp_path):
    folder = tmp_path / "exl3"
    folder.mkdir()
    config = {"model_type": "gemma3_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
              "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 512,
              "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
              "quantization_config": {"quant_method": "exl3", "bits": 4.0, "head_bits": 6}}
    (folder / "config.json").write_text(json.dumps(config))
    meta = read_model_folder(folder)
    assert (meta.format, meta.quant.bits_per_weight) == ("exl3", 4.0)
    assert meta.swa_layers == [True, True, True, False] and meta.key_length == 32


def test_bad_config_and_bad_safetensors(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ModelMetadataError, match="not valid JSON"):
        read_model_folder(folder)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 50) + b"{oops")
    with pytest.raises(ModelMetadataError):
        read_model_folder(folder)


def test_split_gguf_adds_the_other_shards(tmp_path):
    import gguf

    from tests.models.gguf_builder import write_gguf

    whole = write_gguf(tmp_path / "whole.gguf", TINY_LLAMA)
    reader = gguf.GGUFReader(whole)
    names = [t.name for t in reader.tensors]
    half = len(names) // 2
    for i, part in enumerate((names[:half], names[half:]), start=1):
        w = gguf.GGUFWriter(str(tmp_path / f"split-F16-{i:05d}-of-00002.gguf"), "llama")
        if i == 1:
            for field in reader.fields.values():
                if field.name.startswith(("GGUF.", "general.architecture")):
                    continue
                value = field.contents()
                w.add_key_value(field.name, value, field.types[0],
                                sub_type=field.types[-1] if len(field.types) > 1 else None)
        w.add_uint16("split.no", i - 1)
        w.add_uint16("split.count", 2)
        for t in reader.tensors:
            if t.name in part:
                w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    meta = read_gguf_file(tmp_path / "split-F16-00001-of-00002.gguf")
    assert meta.shard_count == 2
    assert sorted(t.name for t in meta.tensors) == sorted(names)
    assert meta.weights_bytes == read_gguf_file(whole).weights_bytes


def test_mlx_quantized_weights_count_as_the_parameters_they_pack(tiny_models):
    from app.models.metadata import read_model

    packed, plain = read_model(tiny_models.mlx_4bit), read_model(tiny_models.mlx_f16)
    assert packed.n_params == plain.n_params == read_model(tiny_models.hf).n_params
    # 4-bit codes plus a 16-bit scale and bias per group of 64: 4.5 bits, a little more for f16 norms.
    assert 4.5 <= packed.bits_per_weight < 4.7
    assert plain.bits_per_weight == 16.0
