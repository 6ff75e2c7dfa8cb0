from __future__ import annotations

import pytest

from app.models.quants import (
    gguf_shard_names,
    mlx_bits_per_weight,
    parse_exl_config,
    parse_exl_name,
    parse_gguf_filename,
    parse_mlx_config,
    parse_mlx_name,
)


@pytest.mark.parametrize("name, quant, prefix, shard, base", [
    ("Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M", "", (None, None), "Llama-3.2-1B-Instruct"),
    ("Qwen3-30B-A3B-UD-Q4_K_XL-00001-of-00003.gguf", "Q4_K_XL", "UD", (1, 3), "Qwen3-30B-A3B"),
    ("UD-Q4_K_XL/Qwen3-30B-A3B-UD-Q4_K_XL-00002-of-00003.gguf", "Q4_K_XL", "UD", (2, 3), "Qwen3-30B-A3B"),
    ("Meta-Llama-3-8B.i1-IQ3_XXS.gguf", "IQ3_XXS", "i1", (None, None), "Meta-Llama-3-8B"),
    ("gemma-3-4b-it-bf16.gguf", "BF16", "", (None, None), "gemma-3-4b-it"),
    ("model-fp16.gguf", "F16", "", (None, None), "model"),
    ("gpt-oss-20b-MXFP4.gguf", "MXFP4", "", (None, None), "gpt-oss-20b"),
    ("bitnet-TQ2_0.gguf", "TQ2_0", "", (None, None), "bitnet"),
    ("tiny-q8_0.gguf", "Q8_0", "", (None, None), "tiny"),
    ("x-IQ4_NL.gguf", "IQ4_NL", "", (None, None), "x"),
    ("x-Q4_K.gguf", "Q4_K_M", "", (None, None), "x"),  # llama.cpp's alias
])
def test_gguf_names(name, quant, prefix, shard, base):
    info = parse_gguf_filename(name)
    assert info is not None
    assert (info.quant, info.prefix, (info.shard_index, info.shard_count), info.base_name) == (quant, prefix, shard, base)
    assert info.format == "gguf"


def test_quant_in_the_model_name_is_not_taken_for_the_file_quant():
    # "Q8_0" inside a fine-tune's name comes before the real quant, which wins.
    assert parse_gguf_filename("Qwen-Q8_0-distill-Q4_K_S.gguf").quant == "Q4_K_S"


def test_names_without_a_quant_give_none():
    assert parse_gguf_filename("phi-2.gguf") is None
    assert parse_gguf_filename("QKV-model.gguf") is None


def test_bits_per_weight_are_ordered_like_the_quants():
    order = ["IQ1_S", "IQ2_XXS", "IQ3_XXS", "Q2_K", "Q3_K_M", "IQ4_XS", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "F16"]
    bpw = [parse_gguf_filename(f"m-{q}.gguf").bits_per_weight for q in order]
    assert bpw == sorted(bpw) and len(set(bpw)) == len(bpw)


def test_shard_names_and_first_shard():
    names = gguf_shard_names("dir/M-Q4_K_M-00003-of-00004.gguf")
    assert names == [f"dir/M-Q4_K_M-{i:05d}-of-00004.gguf" for i in range(1, 5)]
    assert parse_gguf_filename(names[0]).is_first_shard
    assert not parse_gguf_filename(names[2]).is_first_shard
    assert gguf_shard_names("single-Q8_0.gguf") == ["single-Q8_0.gguf"]


@pytest.mark.parametrize("name, quant, bpw, variant", [
    ("mlx-community/Qwen3-4B-4bit", "4bit", 4.5, ""),
    ("mlx-community/Qwen3-4B-4bit-DWQ", "4bit", 4.5, "DWQ"),
    ("Qwen3-8B-8bit", "8bit", 8.5, ""),
    ("Llama-3.2-1B-Instruct-bf16", "bf16", 16.0, ""),
    ("gpt-oss-20b-MXFP4", "mxfp4", 4.25, ""),
])
def test_mlx_names(name, quant, bpw, variant):
    info = parse_mlx_name(name)
    assert (info.quant, info.bits_per_weight, info.variant) == (quant, bpw, variant)


def test_mlx_config_wins_over_the_name():
    config = {"quantization": {"group_size": 32, "bits": 3, "mode": "affine"}}
    info = parse_mlx_config(config, "Model-4bit-DWQ")
    assert (info.quant, info.group_size, info.variant) == ("3bit", 32, "DWQ")
    assert info.bits_per_weight == pytest.approx(3 + 32 / 32)
    assert parse_mlx_config({"torch_dtype": "float16"}).quant == "f16"
    mixed = {"quantization": {"group_size": 64, "bits": 4, "model.layers.0.mlp.down_proj": {"bits": 6, "group_size": 64}}}
    assert parse_mlx_config(mixed).variant == "mixed"
    assert mlx_bits_per_weight(4, 32, "mxfp4") == 4.25


@pytest.mark.parametrize("name, fmt, bpw, head", [
    ("4.0bpw", "exl2", 4.0, None),
    ("Llama-3-8B-6_5bpw-h8-exl2", "exl2", 6.5, 8),
    ("turboderp/Qwen3-8B-exl3 3.5bpw", "exl3", 3.5, None),
    ("2.25bpw_H6", "exl2", 2.25, 6),
])
def test_exl_names(name, fmt, bpw, head):
    info = parse_exl_name(name)
    assert (info.format, info.bits_per_weight, info.head_bits) == (fmt, bpw, head)
    assert parse_exl_name("Qwen3-8B") is None


def test_exl_config():
    info = parse_exl_config({"quantization_config": {"quant_method": "exl3", "bits": 4.65, "head_bits": 6}})
    assert (info.format, info.quant, info.head_bits) == ("exl3", "4.65bpw", 6)
    assert parse_exl_config({"quantization_config": {"quant_method": "gptq", "bits": 4}}) is None
    branch_only = parse_exl_config({"quantization_config": {"quant_method": "exl2"}}, "5.0bpw")
    assert branch_only.bits_per_weight == 5.0
