"""Pixels of a PNG screenshot with numpy (no Pillow in the tests' dependencies).

Reads 8-bit RGB or RGBA, non-interlaced PNGs (what Chromium's screenshots are): the IDAT
chunks inflated, each row's filter undone (None, Sub and Up with numpy; Average and
Paeth, which depend on the byte to their left, byte by byte).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def _unfilter_row(kind: int, line: np.ndarray, up: np.ndarray, channels: int) -> np.ndarray:
    if kind == 0:
        return line
    if kind == 1:  # Sub: a running sum per channel
        return (line.reshape(-1, channels).cumsum(axis=0, dtype=np.int64) & 0xFF
                ).astype(np.uint8).reshape(-1)
    if kind == 2:  # Up
        return (line.astype(np.int64) + up) .astype(np.uint8)
    out = bytearray(line.tobytes())
    above = up.tobytes()
    for i in range(len(out)):
        left = out[i - channels] if i >= channels else 0
        b = above[i]
        if kind == 3:
            out[i] = (out[i] + (left + b) // 2) & 0xFF
            continue
        c = above[i - channels] if i >= channels else 0
        p = left + b - c
        pa, pb, pc = abs(p - left), abs(p - b), abs(p - c)
        pred = left if pa <= pb and pa <= pc else (b if pb <= pc else c)
        out[i] = (out[i] + pred) & 0xFF
    return np.frombuffer(bytes(out), dtype=np.uint8)


def read_png(path: Path) -> np.ndarray:
    """The image as an array ``(height, width, channels)`` of uint8."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and not interlace, "an unusual PNG"
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    image = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        previous = image[y] = _unfilter_row(int(rows[y, 0]), rows[y, 1:], previous, channels)
    return image.reshape(height, width, channels)


def count_colour(image: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 16) -> int:
    """How many pixels are within ``tolerance`` of ``rgb`` in every channel."""
    diff = np.abs(image[..., :3].astype(np.int16) - np.array(rgb, dtype=np.int16))
    return int(np.all(diff <= tolerance, axis=-1).sum())
