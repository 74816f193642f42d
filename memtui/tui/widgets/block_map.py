"""The block-lifetime map and the trend slider above it (Line API widgets).

:class:`BlockMap` draws :func:`memtui.analysis.layout.block_map.rasterise` of the cursor's
view: time across, bytes up, two pixels a cell. Blocks take memory_viz's colours by
block id: cool ones, warm ones for blocks never freed, dimmed for ghosts (alive before
the trace); the summed small blocks are grey; the selected block is white; the cursor's
column is tinted gold. The raster is recomputed only when the view, the size or the
detail changes, and each line is cached, so a cursor move repaints two columns' worth of
work.

:class:`TrendSlider` is the whole run's level (the bytes of live blocks, highest per
column) in eighth blocks, with the view shaded: drag the shade to pan, drag elsewhere to
choose a new view, click to centre the view there; OOM events are red marks. In the map,
a click selects the band under the pointer and moves the cursor there, a drag selects a
window (shaded), the wheel zooms. Both post :class:`CursorRequest`.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from textual import events
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from memtui.analysis.layout.block_map import (
    KIND_GHOST,
    KIND_NEVER_FREED,
    SUMMARIZED,
    BlockMapData,
    BlockRaster,
    PeakFinder,
    rasterise,
)
from memtui.tui.cursor import CursorState
from memtui.tui.widgets import paint
from memtui.tui.widgets.requests import CursorRequest

GUTTER = 7  # y-axis labels

# colour ids: 0 nothing, 1 summarized, 2 selected, then the normal, ghost and warm colours
_N = len(paint.PALETTE)
_NORMAL, _GHOST, _WARM = 3, 3 + _N, 3 + 2 * _N
_COLOURS = paint.colour_table(
    [None, paint.SUMMARIZED, paint.SELECTED]  # type: ignore[list-item]
    + list(paint.PALETTE)
    + [paint.darken(c, 0.45) for c in paint.PALETTE]
    + list(paint.WARM)
)


def pixel_colours(raster: BlockRaster, data: BlockMapData, selected: int | None) -> np.ndarray:
    """Colour id of every pixel of ``raster`` (see ``_COLOURS``)."""
    pixels = raster.pixels
    if data.index.block_id.size == 0:
        return np.zeros(pixels.shape, dtype=np.int64)
    block = pixels >= 0
    rows = np.where(block, pixels, 0)
    base = (data.index.block_id[rows] % _N).astype(np.int64)
    kind = data.kinds[rows]
    ids = np.where(kind == KIND_GHOST, _GHOST,
                   np.where(kind == KIND_NEVER_FREED, _WARM, _NORMAL)) + base
    ids = np.where(block, ids, np.where(pixels == SUMMARIZED, 1, 0))
    if selected is not None:
        ids = np.where(pixels == selected, 2, ids)
    return ids


_GLYPHS = np.array([" ", paint.GLYPH_SUMMED, paint.GLYPH_SELECTED]
                   + [paint.GLYPH_BLOCK] * _N + [paint.GLYPH_GHOST] * _N
                   + [paint.GLYPH_NEVER_FREED] * _N, dtype=object)


def legend_rows() -> list[tuple[str, str]]:
    """(Rich markup sample, meaning) of every colour and mark of the map and its slider;
    each sample has the shape the map uses without colour (``NO_COLOR``)."""
    ghost = [paint.darken(c, 0.45) for c in paint.PALETTE]
    return [
        (paint.swatches(paint.PALETTE, paint.GLYPH_BLOCK), "block freed in the trace "
         "(cool colours, by block id)"),
        (paint.swatches(paint.WARM, paint.GLYPH_NEVER_FREED), "block never freed "
         "(warm colours)"),
        (paint.swatches(ghost, paint.GLYPH_GHOST), "ghost: alive before the trace began"),
        (f"[{paint.SUMMARIZED}]{paint.GLYPH_SUMMED * 3}[/]", "small blocks summed (+ draws "
         "more on their own)"),
        (f"[{paint.SELECTED}]{paint.GLYPH_SELECTED * 3}[/]", "the selected block"),
        (f"[{paint.CURSOR}]│[/]", "the cursor's column (gold)"),
        (f"[{paint.PENDING}]▼[/]", "slider: an out-of-memory event"),
        (f"[{paint.TREND_IN_VIEW} on {paint.SHADE}]▆▆▆[/]", "slider: the part of the run "
         "in view"),
    ]


def legend() -> str:
    """Rich markup naming the map's colours in one line (the header at 120 columns)."""
    ghost = [paint.darken(c, 0.45) for c in paint.PALETTE]
    return (f"{paint.swatches(paint.PALETTE, paint.GLYPH_BLOCK, 2)} freed "
            f"{paint.swatches(paint.WARM, paint.GLYPH_NEVER_FREED, 2)} never freed "
            f"{paint.swatches(ghost, paint.GLYPH_GHOST, 2)} ghost "
            f"[{paint.SUMMARIZED}]{paint.GLYPH_SUMMED * 2}[/] summed "
            f"[{paint.SELECTED}]{paint.GLYPH_SELECTED * 2}[/] selected")


def axis_labels(ymax: float, height: int) -> dict[int, str]:
    """Labels of the byte axis by row: ``0`` on the bottom row, then every ``step`` rows
    up (evenly spaced, at least three rows apart), each the bytes at its row's bottom
    edge; a label that reads like the one below it is left out."""
    if height <= 0:
        return {}
    step = max((height - 1) // 4, 3)
    labels: dict[int, str] = {}
    last = None
    for y in range(height - 1, -1, -step):
        text = "0" if y == height - 1 else paint.short_bytes(ymax * (height - 1 - y) / height)
        if text != last:
            labels[y] = text
        last = text
    return labels


def view_request(cursor: CursorState, a: int, b: int) -> CursorRequest:
    """Show ``[a, b]``, bringing the cursor inside it (the app keeps the cursor in view)."""
    return CursorRequest(view=(int(a), int(b)), t=int(min(max(cursor.t, a), b)))


class BlockMap(Widget, can_focus=True):
    """The block-lifetime map of one device (see the module docstring)."""

    DEFAULT_CSS = """
    BlockMap { height: 1fr; min-height: 4; }
    """

    def __init__(self, data: BlockMapData, peaks: PeakFinder, *, detail: int = 256,
                 name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.data = data
        self.peaks = peaks
        self.detail = detail
        self.cursor: CursorState | None = None
        self.selected_row: int | None = None
        self._raster: BlockRaster | None = None
        self._raster_key: tuple | None = None
        self._colours: np.ndarray | None = None
        self._colours_key: tuple | None = None
        self._lines: LRUCache[tuple, Strip] = LRUCache(1024)

    # -- state -----------------------------------------------------------------------------

    def show(self, cursor: CursorState) -> None:
        """Follow ``cursor``: its view, time and selected block."""
        self.cursor = cursor
        self.selected_row = self.data.index.row_of_block(cursor.block_id)
        self.refresh()

    def set_detail(self, detail: int) -> None:
        self.detail = max(1, int(detail))
        self.refresh()

    @property
    def map_width(self) -> int:
        return max(self.size.width - GUTTER, 1)

    @property
    def raster(self) -> BlockRaster | None:
        """The raster of the current view and size (recomputed when they change)."""
        if self.cursor is None or self.size.height == 0:
            return None
        t0, t1 = self.cursor.view
        key = (t0, t1, self.map_width, self.size.height, self.detail)
        if key != self._raster_key:
            self._raster = rasterise(self.data, self.peaks, t0, t1, self.map_width,
                                     self.size.height, self.detail)
            self._raster_key = key
        return self._raster

    def _pixel_colours(self) -> np.ndarray:
        raster = self.raster
        key = (self._raster_key, self.selected_row)
        if key != self._colours_key:
            self._colours = pixel_colours(raster, self.data, self.selected_row)
            self._colours_key = key
        return self._colours

    # -- drawing ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        raster = self.raster
        if raster is None:
            return Strip.blank(self.size.width, paint.PLAIN)
        window = self.cursor.window if self.cursor else None
        key = (self._raster_key, self.selected_row, window, y)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._draw_line(raster, y)
            self._lines[key] = strip
        cursor_x = raster.column_of(self.cursor.t) if self.cursor else None
        if cursor_x is None:
            return strip
        return self._with_cursor(strip, y, cursor_x)

    def _draw_line(self, raster: BlockRaster, y: int) -> Strip:
        top, bottom = self._pixel_row_colours(y)
        chars, fgs, bgs = paint.half_block_row(top, bottom)
        if self.app.no_color:  # one shape per kind of band (the legend's)
            ids = self._pixel_colours()
            cell = np.where(ids[2 * y] != 0, ids[2 * y], ids[2 * y + 1])
            chars = _GLYPHS[cell].tolist()
        label = self._axis_label(raster, y)
        prefix = [Segment(label.rjust(GUTTER - 1) + " ", paint.style("#9a9a9a", None))]
        strip = paint.cells_to_strip(chars, fgs, bgs, prefix)
        return strip.adjust_cell_length(self.size.width, paint.PLAIN)

    def _pixel_row_colours(self, y: int) -> tuple[list, list]:
        ids = self._pixel_colours()
        top, bottom = _COLOURS[ids[2 * y]].tolist(), _COLOURS[ids[2 * y + 1]].tolist()
        window = self._window_columns()
        if window is not None:  # the selected window: empty space faintly shaded
            for x in range(*window):
                top[x] = top[x] or paint.WINDOW
                bottom[x] = bottom[x] or paint.WINDOW
        return top, bottom

    def _window_columns(self) -> tuple[int, int] | None:
        raster = self.raster
        if self.cursor is None or self.cursor.window is None or raster is None:
            return None
        w0, w1 = self.cursor.window
        if w1 < raster.t0 or w0 > raster.t1:
            return None
        a = raster.column_of(max(w0, raster.t0))
        b = raster.column_of(min(w1, raster.t1))
        return (a, b + 1) if a is not None and b is not None else None

    def _with_cursor(self, strip: Strip, y: int, x: int) -> Strip:
        """``strip`` with the cursor's cell: its two pixels tinted gold."""
        ids = self._pixel_colours()
        top, bottom = _COLOURS[ids[2 * y, x]], _COLOURS[ids[2 * y + 1, x]]
        glyph = "┃" if self.app.no_color else "▀"
        cell = Segment(glyph, paint.style(paint.blend(top, paint.CURSOR, 0.35),
                                          paint.blend(bottom, paint.CURSOR, 0.35)))
        at = GUTTER + x
        return Strip.join([strip.crop(0, at), Strip([cell], 1), strip.crop(at + 1)])

    def _axis_label(self, raster: BlockRaster, y: int) -> str:
        return axis_labels(raster.ymax, self.size.height).get(y, "")

    # -- the mouse -------------------------------------------------------------------------

    def block_at(self, x: int, y: int) -> tuple[int | None, int | None]:
        """(column, block row) under the cell at widget coordinates ``x, y``."""
        raster = self.raster
        column = x - GUTTER
        if raster is None or not 0 <= column < raster.width:
            return None, None
        for pixel in (2 * y, 2 * y + 1):
            band = raster.band_at(column, pixel)
            if band >= 0:
                return column, band
        return column, None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        column, _ = self.block_at(event.x, event.y)
        self._press = column
        if column is not None:
            self.capture_mouse()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        start, self._press = getattr(self, "_press", None), None
        self.release_mouse()
        column, row = self.block_at(min(max(event.x, GUTTER), self.size.width - 1), event.y)
        if start is None or column is None:
            return
        raster = self.raster
        if column != start:  # a drag: select the window it spans
            a, b = sorted((start, column))
            span = (raster.t1 - raster.t0) / raster.width
            self.post_message(CursorRequest(window=(int(raster.t0 + a * span),
                                                    int(raster.t0 + (b + 1) * span))))
            return
        t = int(raster.times[column])
        block_id = int(self.data.index.block_id[row]) if row is not None else None
        self.post_message(CursorRequest(t=t, block_id=block_id))

    def _zoom(self, x: int, factor: float) -> None:
        if self.cursor is None:
            return
        t0, t1 = self.cursor.view
        column = min(max(x - GUTTER, 0), self.map_width - 1)
        pivot = t0 + (t1 - t0) * (column + 0.5) / self.map_width
        ix = self.data.index
        span = max((t1 - t0) * factor, min(self.map_width, max(ix.t_end - ix.t_start, 1)))
        a = int(max(ix.t_start, pivot - (pivot - t0) * span / max(t1 - t0, 1)))
        b = int(min(ix.t_end, a + span))
        if b > a:
            self.post_message(view_request(self.cursor, a, b))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self._zoom(event.x, 0.5)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self._zoom(event.x, 2.0)

    def on_resize(self) -> None:
        self._lines.clear()


class TrendSlider(Widget):
    """The whole run's allocated level with the view shaded: the block map's zoom slider."""

    DEFAULT_CSS = """
    TrendSlider { height: 3; }
    """

    def __init__(self, peaks: PeakFinder, t_start: int, t_end: int, *,
                 marks: list[int] | None = None, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.peaks = peaks
        self.marks = marks or []  # times of OOM events
        self.t_start, self.t_end = t_start, max(t_end, t_start + 1)
        self.cursor: CursorState | None = None
        self._levels: np.ndarray | None = None
        self._levels_width = -1
        self._drag: tuple[str, int, tuple[int, int]] | None = None
        self._brush: tuple[int, int] | None = None

    def show(self, cursor: CursorState) -> None:
        self.cursor = cursor
        self.refresh()

    @property
    def plot_width(self) -> int:
        return max(self.size.width - GUTTER, 1)

    def levels(self) -> np.ndarray:
        """Highest level of each column over the whole run."""
        width = self.plot_width
        if width != self._levels_width:
            level = self.peaks.level
            times = self.peaks.column_times(self.t_start, self.t_end, width)
            at = np.clip(np.searchsorted(level.t, times, side="right") - 1, 0, None)
            self._levels = level.values[at] if level.values.size else np.zeros(width)
            self._levels_width = width
        return self._levels

    def column_time(self, column: int) -> int:
        span = (self.t_end - self.t_start) / self.plot_width
        return int(self.t_start + (column + 0.5) * span)

    def column_of(self, t: int) -> int:
        span = (self.t_end - self.t_start) / self.plot_width
        return int(min(max((t - self.t_start) / span, 0), self.plot_width - 1))

    def render_line(self, y: int) -> Strip:
        levels = self.levels()
        rows = self.size.height
        top = max(float(levels.max()) if levels.size else 0.0, 1.0)
        eighths = np.rint(levels / top * rows * 8).astype(np.int64)
        fill = np.clip(eighths - (rows - 1 - y) * 8, 0, 8)
        chars = [" ▁▂▃▄▅▆▇█"[f] for f in fill.tolist()]
        fgs: list[str | None] = [paint.TREND] * len(chars)
        bgs: list[str | None] = [None] * len(chars)
        if self.cursor is not None:
            a, b = self._brush or self.cursor.view
            if self._brush or (a, b) != (self.t_start, self.t_end):  # shade a zoomed view
                lo, hi = self.column_of(min(a, b)), self.column_of(max(a, b))
                for x in range(lo, hi + 1):
                    fgs[x], bgs[x] = paint.TREND_IN_VIEW, paint.SHADE
            if self.cursor.window is not None:
                w0, w1 = self.cursor.window
                for x in range(self.column_of(w0), self.column_of(w1) + 1):
                    bgs[x] = paint.WINDOW if bgs[x] is None else bgs[x]
            for t in self.marks:
                x = self.column_of(t)
                chars[x], fgs[x] = ("▼" if y == 0 else chars[x]), paint.PENDING
            x = self.column_of(self.cursor.t)
            fgs[x] = paint.CURSOR
            if chars[x] == " ":
                chars[x] = "│"
        label = "run" if y == 0 else ""  # the whole run, scaled to its own peak
        prefix = [Segment(label.rjust(GUTTER - 1) + " ", paint.style("#9a9a9a", None))]
        strip = paint.cells_to_strip(chars, fgs, bgs, prefix)
        return strip.adjust_cell_length(self.size.width, paint.PLAIN)

    # -- the mouse: pan by dragging the shade, brush a new view elsewhere -------------------

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if self.cursor is None or event.x < GUTTER:
            return
        column = event.x - GUTTER
        a, b = self.cursor.view
        inside = self.column_of(a) <= column <= self.column_of(b)
        self._drag = ("pan" if inside else "brush", column, (a, b))
        self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._drag is None:
            return
        kind, start, (a, b) = self._drag
        column = min(max(event.x - GUTTER, 0), self.plot_width - 1)
        if kind == "pan":
            shift = self.column_time(column) - self.column_time(start)
            shift = min(max(shift, self.t_start - a), self.t_end - b)
            self.post_message(view_request(self.cursor, a + shift, b + shift))
        else:
            self._brush = (self.column_time(start), self.column_time(column))
            self.refresh()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag is None:
            return
        kind, start, (a, b) = self._drag
        self._drag = None
        self.release_mouse()
        column = min(max(event.x - GUTTER, 0), self.plot_width - 1)
        brush, self._brush = self._brush, None
        if kind == "brush" and column != start and brush is not None:
            lo, hi = sorted(brush)
            self.post_message(view_request(self.cursor, max(lo, self.t_start),
                                           min(hi, self.t_end)))
        elif kind == "brush":  # a click: centre the view there
            half = (b - a) // 2
            centre = min(max(self.column_time(column), self.t_start + half), self.t_end - half)
            self.post_message(view_request(self.cursor, centre - half, centre + half))
        self.refresh()
