"""Images a user attaches or a client sends: checked from their header before anything decodes them.

A 20,000 x 20,000 PNG is a few kilobytes of compressed zeros and 1.2 GB once decoded: the format and dimensions
are read from the first bytes (PNG IHDR, JPEG SOF, WebP VP8/VP8L/VP8X) and refused above the limits before any
decoder runs. Only then does Pillow decode it (``decode_rgb``), which also catches a truncated or corrupt file.
PNG, JPEG and WebP only: what OpenAI's API takes, minus GIF.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
from dataclasses import dataclass

from app.errors import QuantDeskError

MAX_IMAGE_BYTES = 20 * 1024 * 1024  # one file, as sent
MAX_IMAGE_SIDE = 8192  # pixels, either side
MAX_IMAGE_PIXELS = 40_000_000  # ~160 MB as RGBA while decoding
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


class ImageError(QuantDeskError):
    """An image QuantDesk will not decode: unknown format, corrupt, truncated or too large."""


@dataclass(frozen=True)
class ImageInfo:
    format: str  # png | jpeg | webp
    width: int
    height: int

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.format]


def _png(data: bytes) -> tuple[int, int]:
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise ImageError("the PNG image is truncated before its header ends")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[int, int]:
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise ImageError("the JPEG image is corrupt (no marker where one should be)")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            pos += 2
            continue
        length = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        if marker in _JPEG_SOF:
            if pos + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[pos + 5:pos + 9])
            return width, height
        pos += 2 + length
    raise ImageError("the JPEG image is truncated before its size")


def _webp(data: bytes) -> tuple[int, int]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    raise ImageError("the WebP image is truncated or of an unknown kind")


def image_info(data: bytes) -> ImageInfo:
    """Format and size from the header; ImageError for anything else, or for an image over the limits."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"the image is {len(data) / 2**20:.1f} MiB; QuantDesk takes images up to "
                         f"{MAX_IMAGE_BYTES >> 20} MiB")
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        fmt, (width, height) = "png", _png(data)
    elif data.startswith(b"\xff\xd8\xff"):
        fmt, (width, height) = "jpeg", _jpeg(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        fmt, (width, height) = "webp", _webp(data)
    else:
        raise ImageError("this is not a PNG, JPEG or WebP image")
    if not width or not height:
        raise ImageError(f"the {fmt.upper()} image says it is {width} x {height} pixels")
    if width > MAX_IMAGE_SIDE or height > MAX_IMAGE_SIDE or width * height > MAX_IMAGE_PIXELS:
        raise ImageError(f"the {fmt.upper()} image is {width:,} x {height:,} pixels; QuantDesk takes images up to "
                         f"{MAX_IMAGE_SIDE:,} pixels a side and {MAX_IMAGE_PIXELS // 1_000_000} megapixels")
    return ImageInfo(fmt, width, height)


def decode_rgb(data: bytes) -> tuple[int, int, bytes]:
    """(width, height, RGB bytes) of a checked image; ImageError for a corrupt or truncated one."""
    info = image_info(data)
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=[info.format.upper()]) as image:
            image.load()
            rgb = image.convert("RGB")
    except Exception as exc:  # noqa: BLE001 - Pillow's decoders answer damaged input with OSError, SyntaxError,
        # EOFError, struct.error, IndexError…: each means the file cannot be decoded, which is the sentence
        if isinstance(exc, UnidentifiedImageError | Image.DecompressionBombError | OSError | ValueError):
            reason = str(exc)
        else:
            reason = f"{type(exc).__name__}: {exc}"
        raise ImageError(f"the {info.format.upper()} image cannot be decoded: {reason}") from None
    return rgb.width, rgb.height, rgb.tobytes()


def from_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image data is not valid base64") from None


def to_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
