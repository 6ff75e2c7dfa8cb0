"""Render resources/icons/quantdesk.svg into the raster icons the installers need.

    python packaging/make_icons.py                      # PNGs (hicolor sizes) + quantdesk.ico into resources/icons
    python packaging/make_icons.py --icns OUT.icns      # also a macOS .icns (build_macos.sh calls this)

Qt does the drawing (QSvgRenderer) and the writing (its ico and icns image plugins), so no extra
dependency is needed: PySide6 is already one of the app's own. The .ico and .icns containers are
written here (PNG entries), as Qt's writers store one image per file.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parents[1] / "resources" / "icons"
SVG = ICONS / "quantdesk.svg"
# The hicolor theme sizes a .deb installs; the largest doubles as the window/about icon.
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256)
ICO_SIZES = (16, 24, 32, 48, 64, 256)  # what Windows Explorer and the taskbar pick from
ICNS_SIZES = (16, 32, 64, 128, 256, 512, 1024)


def render(size: int):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        raise SystemExit(f"cannot read {SVG}")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def png_bytes(size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    render(size).save(buffer, "PNG")
    buffer.close()
    return bytes(data)


def ico(sizes: tuple[int, ...]) -> bytes:
    """A multi-size .ico with PNG entries (read by Windows Vista and later). Written by hand because
    Qt's ico writer stores one image per file."""
    images = [png_bytes(size) for size in sizes]
    header = struct.pack("<HHH", 0, 1, len(images))
    offset = len(header) + 16 * len(images)
    directory, payload = b"", b""
    for size, data in zip(sizes, images, strict=True):
        side = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        directory += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(data), offset + len(payload))
        payload += data
    return header + directory + payload


# icns element types holding PNG data, by pixel size (Apple's "icns" format as iconutil writes it).
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09", 1024: b"ic10"}


def icns(sizes: tuple[int, ...]) -> bytes:
    body = b"".join(ICNS_TYPES[size] + struct.pack(">I", 8 + len(data)) + data
                    for size, data in ((size, png_bytes(size)) for size in sizes))
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--icns", type=Path, help="also write a macOS .icns here")
    parser.add_argument("--no-png", action="store_true", help="skip the PNGs and the .ico (used with --icns)")
    args = parser.parse_args(argv)

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # runs on build machines without a display
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication(sys.argv[:1])  # image plugins load through the application
    if not args.no_png:
        for size in PNG_SIZES:
            out = ICONS / f"quantdesk-{size}.png"
            if not render(size).save(str(out), "PNG"):
                raise SystemExit(f"cannot write {out}")
        (ICONS / "quantdesk.ico").write_bytes(ico(ICO_SIZES))
    if args.icns:
        args.icns.write_bytes(icns(ICNS_SIZES))
    del app
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
