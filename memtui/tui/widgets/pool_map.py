"""The pool map: one row per live segment, its blocks drawn in proportion (Line API).

Each row is a label (address, size, kind and stream; at 110 columns and more also the
private pool, free bytes and largest free gap) and a bar of half cells
(``▌``: two pixels a cell) over the segment's address range: allocated blocks in
memory_viz's colours by block id (warm for blocks never freed, as in the block map),
pending frees red, free space dark.  The selected block is white and is always at least
one pixel wide; at an OOM the gaps as large as the largest usable one are green.  Bars
fill the width (``proportional`` off) or share one scale, the largest segment's.  A
heading stays on the first line; only the visible rows are drawn, each cached until the
state changes.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memtui.analysis.layout.pool_state import PoolState
from memtui.analysis.timeline.intervals import INT64_MAX
from memtui.analysis.timeline.live import DeviceIndex
from memtui.tui.widgets import paint

_N = len(paint.PALETTE)
# colour ids: 0 free, 1 pending, 2 selected, 3 largest gap, then the cool and warm colours
_COLOURS = paint.colour_table(
    [paint.FREE, paint.PENDING, paint.SELECTED, paint.LARGEST_GAP, *paint.PALETTE, *paint.WARM])
WIDE = 110
_GLYPHS = np.array([paint.GLYPH_FREE, paint.GLYPH_PENDING, paint.GLYPH_SELECTED,
                    paint.GLYPH_GAP] + [paint.GLYPH_BLOCK] * _N
                   + [paint.GLYPH_NEVER_FREED] * _N, dtype=object)


def legend_rows() -> list[tuple[str, str]]:
    """(Rich markup sample, meaning) of every colour and mark of the pool map; each sample
    has the shape the map uses without colour (``NO_COLOR``)."""
    return [
        (paint.swatches(paint.PALETTE, paint.GLYPH_BLOCK), "allocated block (cool colours)"),
        (paint.swatches(paint.WARM, paint.GLYPH_NEVER_FREED), "allocated block never freed "
         "(warm colours)"),
        (f"[{paint.PENDING}]{paint.GLYPH_PENDING * 3}[/]", "pending free: freed, the stream "
         "has not finished with it (red)"),
        (f"[{paint.FREE}]{paint.GLYPH_FREE * 3}[/]", "free space in the segment"),
        (f"[{paint.LARGEST_GAP}]{paint.GLYPH_GAP * 3}[/]", "at an OOM: free gaps as large as "
         "the largest usable one (green)"),
        (f"[{paint.SELECTED}]{paint.GLYPH_SELECTED * 3}[/]", "the selected block"),
        ("*", "after a segment's address: it existed before the trace began"),
        ("k", "segment kind: S small, L large, E expandable"),
        ("st", "stream, numbered 0, 1, 2 in order as memory_viz does"),
    ]


class PoolMap(ScrollView, can_focus=True, inherit_bindings=False):
    """Segments of a :class:`PoolState` (see the module docstring)."""

    DEFAULT_CSS = """
    PoolMap { height: 1fr; min-height: 3; overflow-x: hidden; }
    """

    class Picked(Message):
        """The user clicked a segment (``block_row``: the block under the pointer)."""

        def __init__(self, segment: int, block_row: int | None) -> None:
            super().__init__()
            self.segment = segment
            self.block_row = block_row

    def __init__(self, index: DeviceIndex, *, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.index = index
        self.state: PoolState | None = None
        self.selected_segment: int | None = None
        self.selected_block: int | None = None  # block row of the DeviceIndex
        self.gap_floor: int | None = None  # gaps at least this large are highlighted
        self.proportional = False
        self.stream_names = _stream_names(index)
        self._lines: LRUCache[tuple, Strip] = LRUCache(512)
        self._generation = 0

    # -- state -----------------------------------------------------------------------------

    def show(self, state: PoolState, selected_segment: int | None,
             selected_block: int | None, gap_floor: int | None = None) -> None:
        self.state = state
        self.selected_segment = selected_segment
        self.selected_block = selected_block
        self.gap_floor = gap_floor
        self._generation += 1
        self.virtual_size = Size(self.size.width, state.seg_id.size + 1)
        self.call_after_refresh(self.scroll_to_segment, selected_segment)
        self.refresh()

    def scroll_to_segment(self, segment: int | None) -> None:
        """Scroll so that ``segment``'s row shows below the heading."""
        if segment is None or self.size.height < 2:
            return
        top = int(self.scroll_offset.y)
        visible = self.size.height - 1
        if segment < top:
            self.scroll_to(y=segment, animate=False, immediate=True)
        elif segment >= top + visible:
            self.scroll_to(y=segment - visible + 1, animate=False, immediate=True)

    def set_proportional(self, on: bool) -> None:
        self.proportional = on
        self._generation += 1
        self.refresh()

    def label_width(self) -> int:
        return 48 if self.size.width >= WIDE else 24

    # -- drawing ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        state = self.state
        width = self.size.width
        if y == 0:
            return self._heading(width)
        row = y - 1 + int(self.scroll_offset.y)
        if state is None or row >= state.seg_id.size:
            return Strip.blank(width, paint.PLAIN)
        key = (self._generation, row, width)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._draw_row(state, row, width)
            self._lines[key] = strip
        return strip

    def _heading(self, width: int) -> Strip:
        text = "address".rjust(12) + "  size k st"
        if self.label_width() > 24:
            text += "  pool  free   gap"
        heading = Text(text.ljust(self.label_width()), style="bold #8a8a8a")
        heading.append_text(Text.from_markup(
            f"{paint.swatches(paint.PALETTE, paint.GLYPH_BLOCK, 2)} allocated "
            f"[{paint.PENDING}]{paint.GLYPH_PENDING}[/] pending free "
            f"[{paint.FREE}]{paint.GLYPH_FREE}[/] free  * before the trace"))
        heading.truncate(width)
        segments = [Segment(s.text, s.style or paint.style(None, None))
                    for s in heading.render(self.app.console)]
        return Strip(segments).adjust_cell_length(width, paint.PLAIN)

    def _label(self, state: PoolState, i: int) -> str:
        row = int(state.seg_row[i])
        kind = self.index.segments["kind"][row]
        kind_letter = {"small": "S", "large": "L", "expandable": "E"}.get(kind or "", "-")
        stream = self.stream_names.get(int(self.index.seg_stream[row]), "?")
        ghost = "*" if self.index.seg_ghost[row] else " "
        text = (f"{int(state.seg_addr[i]):x}".rjust(12) + ghost
                + f"{paint.short_bytes(int(state.seg_size[i])):>5} {kind_letter} s{stream}")
        if self.label_width() > 24:
            pool = self.index.segments["pool_id"][row]
            pool = "-" if pool in (None, "0,0") else pool
            text += (f" {pool[:5]:>5} {paint.short_bytes(int(state.seg_free[i])):>5}"
                     f" {paint.short_bytes(int(state.seg_largest_gap[i])):>5}")
        return text[: self.label_width() - 1].ljust(self.label_width() - 1) + " "

    def _draw_row(self, state: PoolState, i: int, width: int) -> Strip:
        label = self._label(state, i)
        selected = i == self.selected_segment
        label_style = paint.style("#ffffff" if selected else "#b0b0b0",
                                  "#3a4a6a" if selected else None, bold=selected)
        cells = max(width - len(label), 1)
        ids = self.pixel_ids(state, i, cells * 2)
        left, right = ids[0::2], ids[1::2]
        chars, fgs, bgs = [], [], []
        for a, b in zip(left.tolist(), right.tolist(), strict=True):
            if a < 0 and b < 0:  # beyond the segment (proportional scale)
                chars.append(" ")
                fgs.append(None)
                bgs.append(None)
            elif b < 0:
                chars.append("▌")
                fgs.append(_COLOURS[a])
                bgs.append(None)
            else:
                chars.append("▌")
                fgs.append(_COLOURS[a])
                bgs.append(_COLOURS[b])
        if self.app.no_color:  # one shape per kind of cell (the legend's)
            chars = [" " if a < 0 else _GLYPHS[a] for a in left.tolist()]
        strip = paint.cells_to_strip(chars, fgs, bgs, [Segment(label, label_style)])
        return strip.adjust_cell_length(width, paint.PLAIN)

    def bytes_per_pixel(self, state: PoolState, i: int, pixels: int) -> float:
        size = float(state.seg_size.max()) if self.proportional else float(state.seg_size[i])
        return max(size, 1.0) / pixels

    def pixel_ids(self, state: PoolState, i: int, pixels: int) -> np.ndarray:
        """Colour id of each pixel of segment ``i``'s bar (-1 past its end): the block
        under the pixel's centre, or free space."""
        start, size = int(state.seg_addr[i]), int(state.seg_size[i])
        bpp = self.bytes_per_pixel(state, i, pixels)
        centres = start + (np.arange(pixels) + 0.5) * bpp
        ids = np.zeros(pixels, dtype=np.int64)
        members = state.blocks_of_segment(i)
        if members.size:
            at = np.clip(np.searchsorted(state.blk_addr[members], centres, "right") - 1, 0, None)
            member = members[at]
            hit = (state.blk_addr[member] <= centres) & (
                centres < state.blk_addr[member] + state.blk_size[member])
            warm = np.where(self.index.t_free[state.blk_row[member]] == INT64_MAX, _N, 0)
            ids = np.where(hit, 4 + state.blk_id[member] % _N + warm, ids)
            ids = np.where(hit & state.blk_pending[member], 1, ids)
        if self.gap_floor is not None:
            gaps = state.gaps_of_segment(i)
            for g in gaps[state.gap_size[gaps] >= self.gap_floor].tolist():
                a, b = state.gap_addr[g], state.gap_addr[g] + state.gap_size[g]
                ids[(centres >= a) & (centres < b)] = 3
        chosen = members[state.blk_row[members] == self.selected_block] if (
            self.selected_block is not None and members.size) else members[:0]
        if chosen.size:
            a, b = state.blk_addr[chosen[0]], state.blk_addr[chosen[0]] + state.blk_size[
                chosen[0]]
            ids[(centres >= a) & (centres < b)] = 2
            ids[min(int((a - start) / bpp), pixels - 1)] = 2  # at least one pixel
        ids[centres >= start + size] = -1
        return ids

    # -- the mouse -------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        state = self.state
        if state is None:
            return
        i = event.y - 1 + int(self.scroll_offset.y)
        if event.y == 0 or not 0 <= i < state.seg_id.size:
            return
        block_row = None
        column = event.x - self.label_width()
        if column >= 0:
            pixels = max(self.size.width - self.label_width(), 1) * 2
            bpp = self.bytes_per_pixel(state, i, pixels)
            address = int(state.seg_addr[i] + (2 * column + 0.5) * bpp)
            members = state.blocks_of_segment(i)
            inside = members[(state.blk_addr[members] <= address)
                             & (address < state.blk_addr[members] + state.blk_size[members])]
            block_row = int(state.blk_row[inside[0]]) if inside.size else None
        self.post_message(self.Picked(i, block_row))

    def on_resize(self) -> None:
        self._generation += 1
        if self.state is not None:
            self.virtual_size = Size(self.size.width, self.state.seg_id.size + 1)


def _stream_names(index: DeviceIndex) -> dict[int, str]:
    """Streams numbered 0, 1, 2... in order of value, as memory_viz renumbers them."""
    streams = sorted(set(index.seg_stream.tolist()))
    if 0 in streams:
        streams.remove(0)
        streams.insert(0, 0)
    return {s: str(k) for k, s in enumerate(streams)}
