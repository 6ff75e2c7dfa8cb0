"""Images through the API: the official ``openai`` client sends one as a data: URL and the vision model answers;
hostile images (truncated, 20k x 20k, a URL to fetch, a data URL that is not an image, too many) are each a 400
with a sentence, before the engine, and the engine stays up."""

from __future__ import annotations

import base64
import struct
import zlib

import httpx
import openai
import pytest

from app.engine.client import EngineClient
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import LoadSettings
from tests.fixtures.models import write_test_png
from tests.server.conftest import openai_queue

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")


@pytest.fixture(scope="module")
def vision_engine(tiny_vision):
    with EngineClient() as client:
        client.load(tiny_vision.text.gguf_q8_0, LoadSettings(n_ctx=512, mmproj=str(tiny_vision.mmproj_f16)))
        yield client


@pytest.fixture
def server(vision_engine):
    server = ServerThread(create_app(vision_engine)).start()
    yield server
    server.stop()
    assert vision_engine.alive


@pytest.fixture(scope="module")
def png(tmp_path_factory) -> bytes:
    return write_test_png(tmp_path_factory.mktemp("img") / "p.png").read_bytes()


def _data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _ask(url: str, text: str = "What is in this picture?") -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": url}}]}


def _huge(png: bytes) -> bytes:
    """The same PNG claiming 20,000 x 20,000 pixels (1.2 GB decoded), its IHDR checksum made right."""
    ihdr = b"IHDR" + struct.pack(">II", 20_000, 20_000) + png[24:29]
    return png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]


def test_the_openai_client_sends_an_image_and_the_model_answers(server, vision_engine, png):
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as oai:
        name = model_id(vision_engine.loaded.model_path)
        assert oai.models.retrieve(name).meta["vision"] is True
        plain = oai.chat.completions.create(model=name, messages=[{"role": "user", "content": "What is in this picture?"}],
                                            temperature=0, max_tokens=8)
        seen = oai.chat.completions.create(model=name, messages=[_ask(_data_url(png))], temperature=0, max_tokens=8)
    assert seen.usage.completion_tokens == 8 and seen.choices[0].message.content
    assert seen.usage.prompt_tokens >= plain.usage.prompt_tokens + 16  # the image's 16 tokens


@pytest.mark.parametrize("case", ["truncated", "20k x 20k", "remote URL", "not an image", "not base64", "too many"])
def test_hostile_images_are_400_with_a_sentence_and_the_engine_stays_up(server, vision_engine, png, case):
    messages = {
        "truncated": [_ask(_data_url(png[:len(png) // 2]))],
        "20k x 20k": [_ask(_data_url(_huge(png)))],
        "remote URL": [_ask("https://example.com/cat.png")],
        "not an image": [_ask(_data_url(b"%PDF-1.7 not a picture", "image/png"))],
        "not base64": [_ask("data:image/png;base64,@@@@")],
        "too many": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": _data_url(png)}}] * 9}],
    }[case]
    reply = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": messages, "max_tokens": 4},
                       timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    expected = {"truncated": "cannot be decoded", "20k x 20k": "20,000 x 20,000 pixels",
                "remote URL": "does not fetch images", "not an image": "not a PNG, JPEG or WebP",
                "not base64": "not valid base64", "too many": "at most 8 images"}[case]
    assert expected in error["message"] and error["param"].startswith("messages[0].content")
    assert openai_queue(server).finished_count == 0  # refused before the engine
    ok = httpx.post(f"{server.url}/v1/chat/completions", json={"messages": [_ask(_data_url(png))], "max_tokens": 3},
                    timeout=60)
    assert ok.status_code == 200 and vision_engine.alive
