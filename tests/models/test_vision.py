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
