"""Images through llama.cpp's multimodal path (libmtmd) on the tiny model and its projector, in this process:
the image is encoded and decoded into the prompt, changes the reply, and costs its tokens; bad pairs and bad
images are refused with a sentence and the backend goes on."""

from __future__ import annotations

import threading

import pytest

from app.images import to_base64
from app.datatypes import LoadSettings, Message, SamplingSettings
from backends.base import GenerationError
from tests.fixtures.models import TINY_PROJECTOR, write_test_png

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")

from backends.llama_cpp import LlamaCppBackend  # noqa: E402

GREEDY = SamplingSettings(temperature=0.0, max_tokens=12)


@pytest.fixture(scope="module")
def backend(tiny_vision):
    backend = LlamaCppBackend()
    backend.load(str(tiny_vision.text.gguf_q8_0), LoadSettings(n_ctx=512, threads=2, gpu_layers=0,
                                                               mmproj=str(tiny_vision.mmproj_f16)))
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def pictures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pictures")
    return [to_base64(write_test_png(folder / f"{w}.png", w, h).read_bytes()) for w, h in ((48, 40), (20, 64))]


def _done(backend, messages, sampling=GREEDY):
    *_, done = backend.generate("r", messages, sampling, threading.Event())
    return done


def test_an_image_goes_through_the_projector_and_the_model_answers(backend, pictures):
    text_only = _done(backend, [Message("user", "What is in the picture?")])
    with_image = _done(backend, [Message("user", "What is in the picture?", (pictures[0],))])
    other_image = _done(backend, [Message("user", "What is in the picture?", (pictures[1],))])
    assert with_image.stats.generated_tokens == 12 and with_image.text
    # the image's tokens are in the prompt (and a line break after them)
    assert with_image.stats.prompt_tokens >= text_only.stats.prompt_tokens + TINY_PROJECTOR.image_tokens
    assert len({text_only.text, with_image.text, other_image.text}) == 3  # the pixels reach the model
    assert backend.sees_images()


def test_two_images_and_a_following_text_turn(backend, pictures):
    two = _done(backend, [Message("user", "Compare them.", tuple(pictures))])
    one = _done(backend, [Message("user", "Compare them.", (pictures[0],))])
    assert two.stats.prompt_tokens == one.stats.prompt_tokens + TINY_PROJECTOR.image_tokens
    again = _done(backend, [Message("user", "Compare them.", (pictures[0],))])
    assert again.text == one.text  # nothing of the previous prompt leaks into the next one
    assert _done(backend, [Message("user", "hi")]).stats.generated_tokens == 12


def test_a_corrupt_image_is_refused_and_the_backend_goes_on(backend, pictures):
    from app.images import from_base64

    truncated = to_base64(from_base64(pictures[0])[:120])
    with pytest.raises(GenerationError, match="image 1: the PNG image cannot be decoded"):
        _done(backend, [Message("user", "look", (truncated,))])
    with pytest.raises(GenerationError, match="not a PNG, JPEG or WebP"):
        _done(backend, [Message("user", "look", (to_base64(b"GIF89a" + bytes(40)),))])
    assert _done(backend, [Message("user", "look", (pictures[0],))]).stats.generated_tokens == 12


def test_a_projector_of_another_width_is_refused_before_the_model_loads(tiny_vision):
    backend = LlamaCppBackend()
    with pytest.raises(GenerationError) as caught:
        backend.load(str(tiny_vision.text.gguf_q8_0), LoadSettings(n_ctx=512, mmproj=str(tiny_vision.mmproj_wide)))
    assert caught.value.kind == "projector"
    assert tiny_vision.mmproj_wide.name in caught.value.message and tiny_vision.text.gguf_q8_0.name in caught.value.message
    assert backend._llm is None  # nothing was loaded


def test_a_model_without_projector_says_it_does_not_see_images(tiny_vision, pictures):
    backend = LlamaCppBackend()
    backend.load(str(tiny_vision.text.gguf_q8_0), LoadSettings(n_ctx=512, threads=2, gpu_layers=0))
    try:
        assert not backend.sees_images()
        with pytest.raises(GenerationError, match="does not see images"):
            _done(backend, [Message("user", "look", (pictures[0],))])
    finally:
        backend.unload()


def test_the_next_turn_reuses_the_image_in_the_kv_cache_and_answers_as_from_scratch(backend, pictures):
    import llama_cpp

    first = [Message("user", "What is in the picture?", (pictures[0],))]
    reply = _done(backend, first)
    second = [*first, Message("assistant", reply.text), Message("user", "And its colours?")]
    again = _done(backend, second)
    evaluated = llama_cpp.llama_perf_context(backend._llm.ctx).n_p_eval  # this request's prompt work
    assert evaluated < again.stats.prompt_tokens - TINY_PROJECTOR.image_tokens  # the image was not decoded again
    backend._forget_kv(llama_cpp)
    assert _done(backend, second).text == again.text  # the same tokens as from an empty cache
    other = _done(backend, [Message("user", "What is in the picture?", (pictures[1],))])
    assert other.text == _done(backend, [Message("user", "What is in the picture?", (pictures[1],))]).text


def test_a_media_marker_typed_in_the_text_is_not_taken_for_an_image(backend, pictures):
    from llama_cpp import mtmd_cpp

    marker = mtmd_cpp.mtmd_default_marker().decode()
    done = _done(backend, [Message("user", f"what does {marker} mean?"),
                           Message("assistant", "a marker"), Message("user", f"and here {marker}?", (pictures[0],))])
    assert done.stats.generated_tokens == 12
