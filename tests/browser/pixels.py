"""Just enough PNG decoding to read a screenshot's pixels (8-bit RGB or RGBA, not
interlaced: what chromium writes), without an imaging library."""

from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
Pixel = tuple[int, int, int]


def decode_png(data: bytes) -> list[list[Pixel]]:
    """The rows of RGB pixels of a PNG screenshot."""
    assert data.startswith(SIGNATURE), "not a PNG"
    offset, header, compressed = len(SIGNATURE), b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed += body
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0) and color in (2, 6), (depth, color, interlace)
    channels = 4 if color == 6 else 3
    raw = zlib.decompress(compressed)
    stride = width * channels
    rows: list[list[Pixel]] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, channels)])  # type: ignore[misc]
        previous = line
    return rows


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def filled_fraction(png: bytes, track: Pixel) -> float:
    """The share of the middle row of a bar's screenshot that is not its track's colour."""
    rows = decode_png(png)
    row = rows[len(rows) // 2]
    filled = [p for p in row if max(abs(a - b) for a, b in zip(p, track, strict=True)) > 24]
    return len(filled) / len(row)
