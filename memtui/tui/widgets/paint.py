"""Colours and cell painting shared by the map widgets (block map, pool map, flames).

The maps are drawn as rows of cells, each with a character and a foreground and
background colour (half blocks put two pixels in one cell).  :func:`cells_to_strip`
turns such a row, given as parallel arrays, into a :class:`~textual.strip.Strip`,
merging runs of equal cells so a row is a handful of segments; styles are cached.

Also the short formats the maps print in narrow gutters (``5.4G``, ``+0.314 s``).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from memtui.errors import printable
from memtui.model import MemoryTrace

#: Block colours, from Tableau 10 and 20 as memory_viz: cool ones for blocks that are freed
#: in the trace, warm ones (oranges and yellows only) for blocks never freed; red (pending
#: free, OOM), gold (cursor), green (largest gap) and grey (summed) mean other things and
#: appear in neither list.
PALETTE = ("#4e79a7", "#76b7b2", "#59a14f", "#af7aa1", "#9c755f", "#a0cbe8", "#8cd17d")
WARM = ("#f28e2c", "#ffbe7d", "#b6992d", "#f1ce63", "#e49444", "#d4a017", "#c8a464")
SUMMARIZED = "#7f7f7f"
SELECTED = "#ffffff"
CURSOR = "#ffd700"
PENDING = "#e15759"
FREE = "#3a3a3a"
LARGEST_GAP = "#2e7d32"
SHADE = "#1d2a3a"
WINDOW = "#262b33"
TREND = "#4e79a7"
TREND_IN_VIEW = "#9ec5ee"
MATCH = "#ffd700"


#: The style of padding and blank cells: a real Style, never None (Textual's NO_COLOR
#: filter reads every segment's style).
PLAIN = Style()

#: Without colour (``NO_COLOR``) the maps draw each kind of cell with its own shape.
GLYPH_BLOCK, GLYPH_NEVER_FREED, GLYPH_GHOST, GLYPH_SUMMED = "█", "▓", "░", "▒"
GLYPH_SELECTED, GLYPH_PENDING, GLYPH_FREE, GLYPH_GAP = "▚", "╳", "·", "="


def swatches(colours, glyph: str = "█", n: int = 3) -> str:
    """Rich markup: ``n`` cells of ``glyph`` in the first ``n`` of ``colours``."""
    return "".join(f"[{c}]{glyph}[/]" for c in list(colours)[:n])


def darken(colour: str, factor: float) -> str:
    """``colour`` (``#rrggbb``) scaled towards black by ``factor`` (0: black, 1: same)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(int(c * factor) for c in (r, g, b)))


@lru_cache(maxsize=1024)
def blend(colour: str | None, other: str, weight: float = 0.5) -> str:
    """``colour`` mixed with ``other`` (``weight`` of ``other``); None counts as black."""
    a = colour or "#000000"
    mixed = [
        int(int(a[i:i + 2], 16) * (1 - weight) + int(other[i:i + 2], 16) * weight)
        for i in (1, 3, 5)
    ]
    return "#{:02x}{:02x}{:02x}".format(*mixed)


@lru_cache(maxsize=4096)
def style(fg: str | None, bg: str | None, bold: bool = False, reverse: bool = False) -> Style:
    return Style(color=fg, bgcolor=bg, bold=bold or None, reverse=reverse or None)


def cells_to_strip(chars: list[str], fgs: list[str | None], bgs: list[str | None],
                   prefix: list[Segment] | None = None) -> Strip:
    """One row of cells as a Strip, runs of equal cells merged."""
    segments = list(prefix or [])
    n = len(chars)
    i = 0
    while i < n:
        j = i + 1
        while j < n and fgs[j] == fgs[i] and bgs[j] == bgs[i]:
            j += 1
        segments.append(Segment("".join(chars[i:j]), style(fgs[i], bgs[i])))
        i = j
    return Strip(segments)


def half_block_row(top: list[str | None], bottom: list[str | None]) -> tuple[list, list, list]:
    """Cells showing two pixels each (``None``: nothing there), upper with ``▀``."""
    chars, fgs, bgs = [], [], []
    for up, down in zip(top, bottom, strict=True):
        if up is None and down is None:
            chars.append(" ")
            fgs.append(None)
            bgs.append(None)
        elif up is None:
            chars.append("▄")
            fgs.append(down)
            bgs.append(None)
        else:
            chars.append("▀")
            fgs.append(up)
            bgs.append(down)
    return chars, fgs, bgs


def plain(value: object) -> str:
    """Text that came from a file (a device, a frame, an owner) made safe inside Rich
    markup (Rich's and Textual's): every ``[`` escaped, not only those that look like a tag
    (Textual reads ``[31m ... [b]`` as one tag), control characters shown as escapes."""
    text = printable(str(value)).replace("[", "\\[")
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def short_bytes(n: float) -> str:
    """Bytes in at most 5 characters: ``512``, ``1.5K``, ``20M``, ``5.4G``."""
    value = float(n)
    for unit in ("", "K", "M", "G", "T"):
        if abs(value) < 1024 or unit == "T":
            if unit == "":
                return f"{int(value)}"
            return f"{value:.1f}{unit}" if abs(value) < 10 else f"{value:.0f}{unit}"
        value /= 1024
    return f"{n}"


def format_time(trace: MemoryTrace, t: int | None, origin: int | None = None,
                digits: int = 6) -> str:
    """A time as the screens print it: seconds from ``origin``, or ``#N`` (event numbers),
    as ``analysis.table_views.format_time`` does, with fewer digits where asked."""
    if t is None:
        return "-"
    if trace.meta.time_unit == "event":
        return f"#{t}"
    return f"+{(t - (origin or 0)) / 1e9:.{digits}f} s"


def format_span(trace: MemoryTrace, t0: int, t1: int) -> str:
    if trace.meta.time_unit == "event":
        return f"{t1 - t0} ev"
    seconds = (t1 - t0) / 1e9
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.3f} s"


def colour_table(colours: list[str]) -> np.ndarray:
    """Colours as an object array, for fancy indexing with colour ids."""
    table = np.empty(len(colours), dtype=object)
    table[:] = colours
    return table
