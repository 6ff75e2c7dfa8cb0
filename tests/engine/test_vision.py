"""Images through the engine host: a vision model loaded with its projector answers an image, a text-only model
refuses one in a sentence (and its engine lives on), a wrong projector is refused before any engine work."""

from __future__ import annotations

import pytest

from app.engine.client import EngineClient
from app.errors import EngineError, ModelFileError
from app.images import to_base64
from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from tests.fixtures.models import write_test_png

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")


def _done(client, messages) -> Done:
    *_, done = client.generate(messages, SamplingSettings(max_tokens=6, seed=1))
    return done


def test_an_image_reaches_the_model_through_the_host(tiny_vision, tmp_path):
    picture = to_base64(write_test_png(tmp_path / "p.png").read_bytes())
    with EngineClient() as client:
        loaded = client.load(tiny_vision.text.gguf_q8_0, LoadSettings(n_ctx=512, threads=2,
                                                                      mmproj=str(tiny_vision.mmproj_f16)))
        assert loaded.details["vision"] == {"projector": tiny_vision.mmproj_f16.name, "projector_type": "mlp",
                                            "image_tokens": 16}
        asked = [Message("user", "What is this?", (picture,))]
        counted = client.count_tokens(asked)  # the image's positions counted as the generation counts them
        done = _done(client, asked)
        assert done.stats.generated_tokens == 6 and done.stats.prompt_tokens == counted > 16


def test_a_text_only_model_refuses_an_image_and_keeps_serving(tiny_vision, tmp_path):
    picture = to_base64(write_test_png(tmp_path / "p.png").read_bytes())
    with EngineClient() as client:
        loaded = client.load(tiny_vision.text.gguf_q8_0, LoadSettings(n_ctx=512, threads=2))
        assert "vision" not in loaded.details
        with pytest.raises(EngineError, match="does not see images") as caught:
            _done(client, [Message("user", "What is this?", (picture,))])
        assert caught.value.kind == "vision"
        assert _done(client, [Message("user", "hi")]).stats.generated_tokens == 6


def test_a_wrong_projector_is_refused_before_any_engine_starts(tiny_vision):
    client = EngineClient()
    try:
        with pytest.raises(ModelFileError, match="does not fit"):
            client.load(tiny_vision.text.gguf_q8_0, LoadSettings(n_ctx=512, mmproj=str(tiny_vision.mmproj_wide)))
        assert client._proc is None  # no host was started
    finally:
        client.close()


def test_an_mlx_vision_model_takes_an_image_through_mlx_vlm(tiny_mlx_vision, tmp_path):
    picture = to_base64(write_test_png(tmp_path / "p.png").read_bytes())
    with EngineClient() as client:
        loaded = client.load(tiny_mlx_vision, LoadSettings(n_ctx=512))
        assert loaded.backend == "mlx" and loaded.details["vision"] == {
            "projector": "mlx-vlm", "projector_type": "llava", "image_tokens": 16}
        with_image = _done(client, [Message("user", "What is this?", (picture,))])
        text_only = _done(client, [Message("user", "What is this?")])
        assert with_image.stats.generated_tokens == 6
        assert with_image.stats.prompt_tokens == text_only.stats.prompt_tokens + 16 + 1  # the image and its line
        with pytest.raises(EngineError, match="image 1: the PNG image is truncated"):
            _done(client, [Message("user", "x", (to_base64(b"\x89PNG\r\n\x1a\n" + bytes(30)),))])
