"""Vision projectors read from their headers: the width they output, what an image costs, and the pair check
that refuses a projector of another width or family before anything loads."""

from __future__ import annotations

import shutil

import pytest

from app.models import vision
from app.models.metadata import ModelMetadata, TensorInfo, read_model
from tests.fixtures.models import TINY, TINY_PROJECTOR


def test_the_tiny_projector_reads_as_llama_cpp_sees_it(tiny_vision):
    info = vision.read_projector(tiny_vision.mmproj_f16)
    assert (info.projector_type, info.output_width, info.n_embd) == ("mlp", TINY.n_embd, TINY_PROJECTOR.n_embd)
    assert info.image_tokens == TINY_PROJECTOR.image_tokens == 16  # (32 / 8)^2 patches, one token each
    assert info.precision == "F16" and vision.read_projector(tiny_vision.mmproj_f32).precision == "F32"
    assert info.weights_bytes < vision.read_projector(tiny_vision.mmproj_f32).weights_bytes


def test_a_projector_of_another_width_is_refused_naming_both_files(tiny_vision):
    model = read_model(tiny_vision.text.gguf_q8_0)
    vision.check_pair(model, vision.read_projector(tiny_vision.mmproj_f16))
    with pytest.raises(vision.ProjectorError) as caught:
        vision.check_pair(model, vision.read_projector(tiny_vision.mmproj_wide))
    assert tiny_vision.mmproj_wide.name in caught.value.message
    assert tiny_vision.text.gguf_q8_0.name in caught.value.message
    assert "512" in caught.value.message and "256" in caught.value.message


def _header(projector_type: str, width: int, **kv):
    tensors = [TensorInfo("mm.input_projection.weight", (width, 1152), "F16", width * 1152 * 2)]
    return {"general.architecture": "clip", "clip.projector_type": projector_type, "clip.has_vision_encoder": True,
            "clip.vision.image_size": 896, "clip.vision.patch_size": 14, **kv}, tensors


def test_a_projector_of_another_family_is_refused_even_at_the_same_width():
    kv, tensors = _header("gemma3", 2560)
    gemma_projector = vision.projector_from_header(kv, tensors, "mmproj-gemma-3-4b-f16.gguf")
    assert gemma_projector.output_width == 2560
    assert gemma_projector.image_tokens == 256  # 64 x 64 patches pooled 4 x 4: Gemma 3's 256 tokens an image
    vision.check_pair(ModelMetadata("gguf", "gemma-3-4b-Q4_K_M.gguf", "gemma3", embedding_length=2560),
                      gemma_projector)
    with pytest.raises(vision.ProjectorError, match=r"gemma3 projector.*qwen2 model"):
        vision.check_pair(ModelMetadata("gguf", "qwen2.5-3b-Q4_K_M.gguf", "qwen2", embedding_length=2560),
                          gemma_projector)


def test_a_file_that_is_not_a_projector_is_named_as_such(tiny_vision):
    with pytest.raises(vision.ProjectorError, match="is not a vision projector"):
        vision.read_projector(tiny_vision.text.gguf_q8_0)


def test_the_projector_beside_a_model_is_found_f16_first_and_a_wrong_one_skipped(tiny_vision, tmp_path):
    model = tmp_path / tiny_vision.text.gguf_q8_0.name
    shutil.copy(tiny_vision.text.gguf_q8_0, model)
    assert vision.find_projector(model) is None
    shutil.copy(tiny_vision.mmproj_wide, tmp_path)
    assert vision.find_projector(model) is None  # the only one does not pair
    for projector in (tiny_vision.mmproj_f32, tiny_vision.mmproj_f16):
        shutil.copy(projector, tmp_path)
    assert vision.find_projector(model) == tmp_path / tiny_vision.mmproj_f16.name


def test_the_estimate_counts_the_projector_where_libmtmd_puts_it(tiny_vision):
    from app.models.estimate import LlamaCppSettings, estimate_llama_cpp

    plain = read_model(tiny_vision.text.gguf_q8_0)
    seeing = vision.with_projector(read_model(tiny_vision.text.gguf_q8_0), tiny_vision.mmproj_f16)
    projector = seeing.projector
    expected = projector.weights_bytes + projector.compute_bytes() + projector.embeddings_bytes()
    on_cpu = estimate_llama_cpp(seeing, LlamaCppSettings(n_ctx=512))
    assert on_cpu.devices[0].vision_bytes == expected and on_cpu.image_tokens == 16
    assert sum(d.total_bytes for d in on_cpu.devices) == \
        sum(d.total_bytes for d in estimate_llama_cpp(plain, LlamaCppSettings(n_ctx=512)).devices) + expected
    offloaded = estimate_llama_cpp(seeing, LlamaCppSettings(n_ctx=512, gpu_layers=99, gpu_runtime=True))
    assert [d.vision_bytes for d in offloaded.devices] == [0, expected]  # the GPU, with the layers


def test_fit_says_sees_images_and_counts_the_projector_beside_the_model(tiny_vision, tmp_path, capsys):
    import json

    from app.cli import main

    model = tmp_path / tiny_vision.text.gguf_q8_0.name
    shutil.copy(tiny_vision.text.gguf_q8_0, model)
    assert main(["fit", str(model), "--ctx", "512", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["image_tokens"] == 0
    shutil.copy(tiny_vision.mmproj_f16, tmp_path)
    assert main(["fit", str(model), "--ctx", "512", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["image_tokens"] == 16 and sum(d["vision_bytes"] for d in fit["devices"]) > 332_000
    assert main(["inspect", str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sees_images"] == {
        "projector": tiny_vision.mmproj_f16.name, "projector_type": "mlp", "image_tokens": 16}
    assert main(["fit", str(model), "--ctx", "512"]) == 0
    assert "sees images: vision projector mmproj-tiny-llava-mmproj-F16.gguf (mlp), 16 context tokens an image" \
        in capsys.readouterr().out
    assert main(["fit", str(model), "--mmproj", str(tiny_vision.mmproj_wide)]) == 1
    assert "mmproj-wide-llava-mmproj-F16.gguf does not fit tiny-llama-Q8_0.gguf" in capsys.readouterr().err
