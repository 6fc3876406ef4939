"""A PNG of a tuning database: per entry (configuration, chip, compiler,
shape bucket) one panel of horizontal bars, each candidate's time summed
over the bucket's measured shapes, fastest first; the winner green, the
baseline (the tile kda.ops picks without a database) blue, the others grey,
candidates measured wrong or failed listed as such. No third-party
libraries: the image is drawn into a byte raster with a 5 x 7 bitmap font
and written with zlib (``kda-tune plot`` calls :func:`write_png`)."""

from __future__ import annotations

import struct
import zlib
from typing import Any, Dict, List, Optional, Tuple

from . import bundles as _b
from . import tune as _tune

# 5 x 7 glyphs, one string of 7 rows of 5 bits per character (upper case;
# labels are upper-cased).
_FONT = {
    " ": "00000" * 7,
    "0": "01110100011001110101110011000101110", "1": "00100011000010000100001000010001110",
    "2": "01110100010000100010001000100011111", "3": "11111000100010000010000011000101110",
    "4": "00010001100101010010111110001000010", "5": "11111100001111000001000011000101110",
    "6": "00110010001000011110100011000101110", "7": "11111000010001000100010000100001000",
    "8": "01110100011000101110100011000101110", "9": "01110100011000101111000010001001100",
    "A": "01110100011000110001111111000110001", "B": "11110100011000111110100011000111110",
    "C": "01110100011000010000100001000101110", "D": "11100100101000110001100011001011100",
    "E": "11111100001000011110100001000011111", "F": "11111100001000011110100001000010000",
    "G": "01110100011000010111100011000101111", "H": "10001100011000111111100011000110001",
    "I": "01110001000010000100001000010001110", "J": "00111000100001000010000101001001100",
    "K": "10001100101010011000101001001010001", "L": "10000100001000010000100001000011111",
    "M": "10001110111010110101100011000110001", "N": "10001100011100110101100111000110001",
    "O": "01110100011000110001100011000101110", "P": "11110100011000111110100001000010000",
    "Q": "01110100011000110001101011001001101", "R": "11110100011000111110101001001010001",
    "S": "01111100001000001110000010000111110", "T": "11111001000010000100001000010000100",
    "U": "10001100011000110001100011000101110", "V": "10001100011000110001100010101000100",
    "W": "10001100011000110101101011010101010", "X": "10001100010101000100010101000110001",
    "Y": "10001100011000101010001000010000100", "Z": "11111000010001000100010001000011111",
    ".": "00000000000000000000000000110001100", "-": "00000000000000011111000000000000000",
    "=": "00000000001111100000111110000000000", "/": "00000000010001000100010001000000000",
    ":": "00000011000110000000011000110000000", "(": "00010001000100001000010000010000010",
    ")": "01000001000001000010000100010001000", "|": "00100001000010000100001000010000100",
    "_": "00000000000000000000000000000011111", "+": "00000001000010011111001000010000000",
    ",": "00000000000000000000001100010001000",
}
_SCALE = 2                      # pixels per font dot
_CW, _CH = 6 * _SCALE, 8 * _SCALE  # a character cell
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
GREEN, BLUE, GREY, RED = (40, 160, 60), (50, 90, 200), (170, 170, 170), (200, 60, 60)


class _Canvas:
    def __init__(self, width: int, height: int):
        self.w, self.h = width, height
        self.px = bytearray(WHITE * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, rgb: Tuple[int, int, int]) -> None:
        x0, x1 = max(0, x0), min(self.w, x1)
        y0, y1 = max(0, y0), min(self.h, y1)
        if x1 <= x0:
            return
        row = bytes(rgb) * (x1 - x0)
        for y in range(y0, y1):
            o = (y * self.w + x0) * 3
            self.px[o:o + len(row)] = row

    def text(self, x: int, y: int, s: str, rgb=BLACK) -> None:
        for i, ch in enumerate(s.upper()):
            glyph = _FONT.get(ch, _FONT[" "])
            for r in range(7):
                for c in range(5):
                    if glyph[r * 5 + c] == "1":
                        px, py = x + i * _CW + c * _SCALE, y + r * _SCALE
                        self.rect(px, py, px + _SCALE, py + _SCALE, rgb)

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _tile_label(t: Dict[str, Any]) -> str:
    return (f"C{t['chunk']} VB{t['v_block']} T{t['threads']}"
            + (f" S{t['state_stages']}" if t.get("state_stages", 2) != 2 else ""))


def _rows(e: Dict[str, Any]) -> List[Tuple[str, Optional[float], str]]:
    """(label, summed ms or None, kind) per candidate, fastest first; kind is
    winner / baseline / other / the status of a candidate not measured ok."""
    ids = [_tune.shape_id(s) for s in e.get("shapes", [])]
    w = e.get("winner")
    win = _b.normalise_tile(w["tile"]) if w else None
    bases = [_b.normalise_tile(t) for t in (e.get("baselines") or {}).values()]
    out = []
    for c in e["candidates"]:
        tile = _b.normalise_tile(c["tile"])
        times = _tune.shape_times(c, ids)
        ms = sum(times) if times else None
        if c.get("status") != "ok" or ms is None:
            kind = c.get("status") or "missing"
            ms = None
        else:
            kind = "winner" if tile == win else "baseline" if tile in bases else "other"
        out.append((_tile_label(tile), ms, kind))
    out.sort(key=lambda r: (r[1] is None, r[1] or 0.0, r[0]))
    return out


def write_png(entries: List[Dict[str, Any]], path: str, width: int = 960) -> Tuple[int, int]:
    """Draws every entry's panel into one PNG at path; returns (width, height)."""
    panels = [(e, _rows(e)) for e in entries]
    line = _CH + 4
    height = 8 + sum((3 + len(rows)) * line + 12 for _, rows in panels) + line
    cv = _Canvas(width, height)
    y = 8
    label_w = 22 * _CW
    value_w = 12 * _CW
    bar_w = width - label_w - value_w - 24
    for e, rows in panels:
        cfg = _b.describe(e["config"])
        cv.text(8, y, f"{e['chip']} {e['bucket']} ({len(e.get('shapes', []))} SHAPES)")
        y += line
        cv.text(8, y, cfg[:(width - 16) // _CW], GREY)
        y += line
        cv.text(8, y, "MS SUMMED OVER SHAPES. GREEN: WINNER, BLUE: BASELINE (NO DATABASE)", GREY)
        y += line
        top = max([ms for _, ms, _ in rows if ms is not None] + [1e-9])
        for label, ms, kind in rows:
            cv.text(8, y, label)
            x0 = 8 + label_w
            if ms is None:
                cv.text(x0, y, kind, RED)
            else:
                color = {"winner": GREEN, "baseline": BLUE}.get(kind, GREY)
                cv.rect(x0, y, x0 + max(1, int(bar_w * ms / top)), y + _CH - 2, color)
                cv.text(x0 + bar_w + 8, y, f"{ms:.3f}")
            y += line
        y += 12
    cv.text(8, y, "KDA-TUNE PLOT")
    with open(path, "wb") as f:
        f.write(cv.png())
    return width, height
