"""app/images: format and size from the header for PNG, JPEG and WebP, the limits before any decoding, and damaged
files that only ever give an ImageError with a sentence."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pytest
from PIL import Image

from app import images


def _encoded(fmt: str, size=(40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buffer, fmt)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt, media_type", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp")])
def test_format_and_size_come_from_the_header(fmt, media_type):
    data = _encoded(fmt, (48, 20))
    info = images.image_info(data)
    assert (info.width, info.height, info.media_type) == (48, 20, media_type)
    assert images.decode_rgb(data)[:2] == (48, 20)
    assert images.image_info(data[:400]).width == 48  # the size is known before the rest has arrived


def test_a_huge_image_is_refused_from_its_header_before_decoding():
    png = _encoded("PNG")
    ihdr = b"IHDR" + struct.pack(">II", 20_000, 20_000) + png[24:29]
    huge = png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]
    with pytest.raises(images.ImageError, match="20,000 x 20,000 pixels"):
        images.decode_rgb(huge)
    with pytest.raises(images.ImageError, match="up to 20 MiB"):
        images.image_info(b"\x89PNG\r\n\x1a\n" + bytes(images.MAX_IMAGE_BYTES))


@pytest.mark.parametrize("data, sentence", [(b"GIF89a" + bytes(20), "not a PNG, JPEG or WebP"),
                                            (b"\x89PNG\r\n\x1a\n", "truncated"),
                                            (b"\xff\xd8\xff\xe0\x00\x10JFIF", "truncated before its size"),
                                            (b"RIFF\x00\x00\x00\x00WEBPVP8X", "truncated")])
def test_what_is_not_an_image_is_named(data, sentence):
    with pytest.raises(images.ImageError, match=sentence):
        images.image_info(data)


def test_damaged_images_only_ever_give_an_image_error():
    rng = random.Random(7)
    originals = [_encoded(fmt) for fmt in ("PNG", "JPEG", "WEBP")]
    refused = 0
    for _ in range(3000):
        data = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.6 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            else:
                data = data[:rng.randrange(len(data) + 1)]
        try:
            images.decode_rgb(bytes(data))
        except images.ImageError as exc:
            assert exc.message and "\n" not in exc.message
            refused += 1
    assert refused > 1000  # most damage is caught (some flipped bytes land in pixels and decode fine)
