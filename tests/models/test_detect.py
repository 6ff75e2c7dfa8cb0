from __future__ import annotations

import json
import shutil

import pytest

from app.errors import ModelFileError
from app.models.detect import detect_model


def test_formats_are_recognised(tiny_models, tmp_path):
    assert detect_model(tiny_models.gguf_q4_k_m).format == "gguf"
    assert detect_model(tiny_models.mlx_4bit).format == "mlx"
    assert detect_model(tiny_models.hf).format == "safetensors"
    folder = tmp_path / "gguf-folder"
    folder.mkdir()
    shutil.copy(tiny_models.gguf_q8_0, folder / "m-00001-of-00002.gguf")
    shutil.copy(tiny_models.gguf_q8_0, folder / "m-00002-of-00002.gguf")
    assert detect_model(folder).path.name == "m-00001-of-00002.gguf"
    exl = shutil.copytree(tiny_models.hf, tmp_path / "exl3")
    config = json.loads((exl / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "exl3", "bits": 4.0}
    (exl / "config.json").write_text(json.dumps(config))
    assert detect_model(exl).format == "exl3"


def test_problems_are_named(tiny_models, tmp_path):
    lone = tmp_path / "model.safetensors"
    lone.write_bytes(b"{}")
    with pytest.raises(ModelFileError, match="lone weights file"):
        detect_model(lone)
    two = tmp_path / "two"
    two.mkdir()
    shutil.copy(tiny_models.gguf_q8_0, two / "a.gguf")
    shutil.copy(tiny_models.gguf_q8_0, two / "b.gguf")
    with pytest.raises(ModelFileError, match="several GGUF models"):
        detect_model(two)
    broken = shutil.copytree(tiny_models.hf, tmp_path / "broken")
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ModelFileError, match="config.json cannot be read"):
        detect_model(broken)
    data = tiny_models.gguf_q8_0.read_bytes()
    for cut in (10, 200, len(data) - 1):
        short = tmp_path / f"short-{cut}.gguf"
        short.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match=rf"short-{cut}\.gguf is truncated"):
            detect_model(short)
