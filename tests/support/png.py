"""Just enough of PNG, in pure Python (zlib + the five scanline filters), to ask a screenshot
which colours it shows. 8-bit RGB and RGBA only: what Chromium writes."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise ValueError("not a PNG file")
    at = len(SIGNATURE)
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        yield kind, data[at + 8 : at + 8 + length]
        at += 12 + length


def rows(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(bytes per pixel, unfiltered scanline)`` from the top; stop early to decode less."""
    header, idat = None, []
    for kind, body in _chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None:
        raise ValueError("no IHDR chunk")
    width, _height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(
            f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})"
        )
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    previous = bytearray(stride)
    for start in range(0, len(raw), stride + 1):
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif kind != 0:
            raise ValueError(f"unknown filter type {kind}")
        yield bpp, bytes(line)
        previous = line


def colour_counts(
    data: bytes, wanted: Iterable[tuple[int, int, int]], *, enough: int = 200
) -> dict[tuple[int, int, int], int]:
    """How many pixels of each ``wanted`` colour the image has, counting each up to ``enough``
    (decoding stops once every colour has that many: the grid is near the top of the page)."""
    counts = dict.fromkeys(wanted, 0)
    keys = {bytes(c): c for c in counts}
    for bpp, line in rows(data):
        for x in range(0, len(line), bpp):
            colour = keys.get(line[x : x + 3])
            if colour is not None:
                counts[colour] += 1
        if all(n >= enough for n in counts.values()):
            break
    return counts


def hex_colour(text: str) -> tuple[int, int, int]:
    text = text.lstrip("#")
    return int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16)
