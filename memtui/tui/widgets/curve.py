"""The Trend plot: memory curves over time with the cursor, window, peak and markers.

The first series (``role="allocated"``) is drawn as a filled area with eighth blocks; the
others as braille lines (2 x 4 dots per cell), each min-max downsampled to the pixels of
the pane (:func:`memtui.analysis.timeline.downsample.minmax_bins`), so nothing narrower than a
column is lost and zooming in shows every step.  Series of ``role="stack"`` (memory by
role) are drawn instead as filled layers stacked bottom first, each in its own colour,
read in each column where the layers' sum (a ``role="total"`` series, not drawn) is
highest there, so the stack's top is the allocated curve's.  Fill and lines differ in
shape, not only in colour.  Under the plot: a marker row (steps, annotations, MSTX
ranges, the peak ``▲``, the window's ``[`` ``]`` and the cursor ``┴``) and a time axis.

The plot grid is computed only when the data, the view or the size change; the cursor
and window are overlays applied while painting lines, so moving the cursor is cheap.
Mouse: click sets the cursor, drag selects a window, the wheel zooms around the pointer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from memtui.analysis.timeline.downsample import bin_of, bin_start, minmax_bins
from memtui.analysis.timeline.series import Series
from memtui.tui.widgets import paint
from memtui.tui.widgets.status import short_bytes

FILL_CHARS = " ▁▂▃▄▅▆▇█"
BRAILLE = np.array([chr(0x2800 + code) for code in range(256)])
# Dot bits of a braille cell by (row from the top, column).
_DOT_BITS = np.array([[0x01, 0x08], [0x02, 0x10], [0x04, 0x20], [0x40, 0x80]], dtype=np.int64)
MARKER_CHARS = {"step": "╷", "mstx": "▴", "annotation": "═", "oom": "!", "annotate": "▴"}
AXIS_WIDTH = 7
# Style ids in the grid.
EMPTY, FILL = 0, 1
LINE0 = 2  # LINE0 + i: line series i; + 16: the same over the fill
STACK0 = 40  # STACK0 + k: stacked layer k (role="stack" series, bottom first)
STACK_COLOURS = 8


def _column_times(level, t0: int, t1: int, cols: int) -> np.ndarray:
    """Per column of ``[t0, t1]``, the time in it where ``level`` is highest: a change
    inside it, or just before its start where the level entering it is as high (the
    values :func:`minmax_bins` takes for the column)."""
    starts = bin_start(np.arange(cols), t0, t1, cols).astype(np.int64)
    times = starts - 1
    t, v = level.t, level.values
    a = int(np.searchsorted(t, t0, side="left"))
    b = int(np.searchsorted(t, t1, side="right"))
    inside_t, inside_v = t[a:b], v[a:b]
    if inside_t.size == 0:
        return times
    entering = np.searchsorted(t, starts, side="left") - 1
    base = np.where(entering >= 0, v[np.clip(entering, 0, None)], np.iinfo(np.int64).min)
    firsts = np.searchsorted(inside_t, starts, side="left")
    ends = np.append(firsts[1:], inside_t.size)
    occupied = np.flatnonzero(ends > firsts)
    lengths = ends[occupied] - firsts[occupied]
    highest = np.maximum.reduceat(inside_v, firsts[occupied])
    run_of = np.repeat(np.arange(occupied.size), lengths)  # the runs tile inside_*
    hits = np.flatnonzero(inside_v[firsts[occupied[0]]:] == highest[run_of])
    _, first = np.unique(run_of[hits], return_index=True)
    at = firsts[occupied[0]] + hits[first]
    times[occupied] = np.where(highest > base[occupied], inside_t[at], starts[occupied] - 1)
    return times


def _values_at(level, times: np.ndarray) -> np.ndarray:
    """The step function ``level`` at each of ``times`` (0 before its first point)."""
    if level.t.size == 0:
        return np.zeros(times.size, dtype=np.int64)
    at = np.searchsorted(level.t, times, side="right") - 1
    return np.where(at >= 0, level.values[np.clip(at, 0, None)], 0).astype(np.int64)


def nice_step(span: float, count: int) -> float:
    """A 1-2-5 step that cuts ``span`` into about ``count`` parts."""
    if span <= 0 or count <= 0:
        return 1.0
    raw = span / count
    power = 10 ** np.floor(np.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return float(factor * power)
    return float(10 * power)


def nice_bytes_ceiling(top: int) -> int:
    """The smallest 1-2-5 multiple of a binary unit (KiB, MiB, GiB...) at or above ``top``,
    so that axis labels read ``8.0G`` and ``4.0G`` rather than ``7.5G``."""
    if top <= 0:
        return 1
    unit = 1
    while top >= unit * 1024:
        unit *= 1024
    step = nice_step(top / unit, 4)
    return int(np.ceil(top / unit / step - 1e-9) * step * unit)


@dataclass(frozen=True)
class Markers:
    """Marks on the time axis: start times, end times (equal to the start for a point)
    and kinds (``step``, ``mstx``, ``annotation``, ``oom``...)."""

    t: np.ndarray
    t_end: np.ndarray
    kinds: np.ndarray

    @classmethod
    def empty(cls) -> Markers:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dtype=object))

    @classmethod
    def from_frame(cls, markers) -> Markers:
        """From a ``markers`` frame of the model (rows without a time are dropped)."""
        rows = markers.filter(markers["t"].is_not_null())
        t = rows["t"].to_numpy().astype(np.int64)
        t_end = rows["t_end"].fill_null(rows["t"]).to_numpy().astype(np.int64)
        return cls(t, t_end, rows["kind"].fill_null("").to_numpy())


@dataclass(frozen=True)
class PlotGrid:
    """The drawn plot without overlays: characters and style ids, one row per line."""

    chars: list[list[str]]
    styles: np.ndarray  # (rows, cols) int
    ymax: int
    view: tuple[int, int]


class TrendPlot(Widget, can_focus=True):
    """See the module docstring.  Set data with :meth:`set_series`, state with
    :meth:`set_state`; it posts :class:`CursorRequest` for clicks, drags and the wheel."""

    COMPONENT_CLASSES = {
        "trendplot--fill", "trendplot--line-0", "trendplot--line-1", "trendplot--line-2",
        "trendplot--line-3", "trendplot--line-4", "trendplot--line-5", "trendplot--cursor",
        "trendplot--window", "trendplot--axis", "trendplot--peak", "trendplot--marker",
        *(f"trendplot--stack-{k}" for k in range(STACK_COLOURS)),
    }

    DEFAULT_CSS = """
    TrendPlot { height: 1fr; min-height: 6; }
    TrendPlot > .trendplot--fill { color: $primary; }
    TrendPlot > .trendplot--line-0 { color: $warning; text-style: bold; }
    TrendPlot > .trendplot--line-1 { color: $success; }
    TrendPlot > .trendplot--line-2 { color: $secondary; }
    TrendPlot > .trendplot--line-3 { color: $error; }
    TrendPlot > .trendplot--line-4 { color: $accent; }
    TrendPlot > .trendplot--line-5 { color: $foreground; }
    TrendPlot > .trendplot--cursor { color: $foreground; text-style: bold; }
    TrendPlot > .trendplot--window { background: ansi_bright_black; }
    TrendPlot > .trendplot--axis { color: $foreground-muted; }
    TrendPlot > .trendplot--peak { color: $error; text-style: bold; }
    TrendPlot > .trendplot--marker { color: $secondary; }
    TrendPlot > .trendplot--stack-0 { color: ansi_blue; }
    TrendPlot > .trendplot--stack-1 { color: ansi_yellow; }
    TrendPlot > .trendplot--stack-2 { color: ansi_magenta; }
    TrendPlot > .trendplot--stack-3 { color: ansi_green; }
    TrendPlot > .trendplot--stack-4 { color: ansi_bright_black; }
    TrendPlot > .trendplot--stack-5 { color: ansi_cyan; }
    TrendPlot > .trendplot--stack-6 { color: ansi_red; }
    TrendPlot > .trendplot--stack-7 { color: ansi_white; }
    """

    class CursorRequest(Message):
        """The user clicked (``t``), dragged (``window``; ``final`` once released) or turned
        the wheel (``zoom`` factor around the time ``around``)."""

        def __init__(self, t: int | None = None, window: tuple[int, int] | None = None,
                     zoom: float | None = None, around: int | None = None,
                     final: bool = True) -> None:
            super().__init__()
            self.t = t
            self.window = window
            self.zoom = zoom
            self.around = around
            self.final = final

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.series: list[Series] = []
        self.view: tuple[int, int] = (0, 1)
        self.cursor_t = 0
        self.window: tuple[int, int] | None = None
        self.peak: tuple[int, int] | None = None  # (t, value)
        self.reserved_peak: tuple[int, int] | None = None  # (t, value), drawn △
        self.markers = Markers.empty()
        self.time_label = lambda t: str(t)
        self.origin = 0  # axis ticks fall on round distances from this time
        self._grid: PlotGrid | None = None
        self._grid_key: tuple | None = None
        self._marker_chars: list[str] = []
        self._marker_key: tuple | None = None
        self._drag_from: int | None = None
        self._dragged = False

    # -- inputs ---------------------------------------------------------------------------

    def set_series(self, series: list[Series], peak: tuple[int, int] | None,
                   markers: Markers, reserved_peak: tuple[int, int] | None = None) -> None:
        self.series = series
        self.peak = peak
        self.reserved_peak = reserved_peak
        self.markers = markers
        self._grid_key = None
        self.refresh()

    def set_state(self, view: tuple[int, int], t: int, window: tuple[int, int] | None) -> None:
        changed = (view, t, window) != (self.view, self.cursor_t, self.window)
        self.view, self.cursor_t, self.window = view, t, window
        if changed:
            self.refresh()

    # -- geometry -------------------------------------------------------------------------

    @property
    def plot_width(self) -> int:
        return max(self.size.width - self.axis_width, 1)

    @property
    def plot_height(self) -> int:
        return max(self.size.height - 2, 1)

    @property
    def axis_width(self) -> int:
        return AXIS_WIDTH if self.size.width >= 50 else 6

    def column_of(self, t: int) -> int:
        return int(bin_of(np.array([t]), *self.view, self.plot_width)[0])

    def time_of_column(self, column: int) -> int:
        """The time at the middle of a plot column."""
        v0, v1 = self.view
        n = self.plot_width
        column = min(max(column, 0), n - 1)
        lo = int(bin_start(column, v0, v1, n))
        hi = int(bin_start(column + 1, v0, v1, n)) - 1 if column + 1 < n else v1
        return (lo + max(hi, lo)) // 2

    # -- the grid -------------------------------------------------------------------------

    def grid(self) -> PlotGrid:
        key = (id(self.series), self.view, self.size.width, self.size.height)
        if self._grid is None or self._grid_key != key:
            self._grid = self._build_grid()
            self._grid_key = key
        return self._grid

    def _ymax(self, bins: list) -> int:
        top = max((int(b.hi[b.known].max()) for b in bins if b.known.any()), default=0)
        return nice_bytes_ceiling(top)

    def _build_grid(self) -> PlotGrid:
        if any(s.role == "stack" for s in self.series):
            return self._stacked_grid()
        rows, cols = self.plot_height, self.plot_width
        v0, v1 = self.view
        fills = [s for s in self.series if s.role == "allocated"]
        lines = [s for s in self.series if s.role != "allocated"]
        fill_bins = [minmax_bins(s.level.t, s.level.values, v0, v1, cols) for s in fills]
        line_bins = [minmax_bins(s.level.t, s.level.values, v0, v1, cols * 2) for s in lines]
        ymax = self._ymax(fill_bins + line_bins)
        chars = np.full((rows, cols), " ", dtype="<U1")
        styles = np.zeros((rows, cols), dtype=np.int64)
        fill_eighths = np.zeros((rows, cols), dtype=np.int64)
        for bins in fill_bins:
            height = np.where(bins.known, np.round(bins.hi / ymax * rows * 8), 0).astype(np.int64)
            height = np.where(bins.known & (bins.hi > 0), np.maximum(height, 1), height)
            level = np.arange(rows)[::-1, None] * 8  # eighths below each row, top row first
            eighths = np.clip(height[None, :] - level, 0, 8)
            fill_eighths = np.maximum(fill_eighths, eighths)
        filled = fill_eighths > 0
        chars[filled] = np.array(list(FILL_CHARS))[fill_eighths[filled]]
        styles[filled] = FILL
        for index, bins in enumerate(line_bins):
            code = self._braille(bins, ymax, rows, cols)
            drawn = code > 0
            over_fill = drawn & (fill_eighths >= 4)
            chars[drawn] = BRAILLE[code[drawn]]
            styles[drawn] = LINE0 + min(index, 5)
            styles[over_fill] = LINE0 + min(index, 5) + 16
        return PlotGrid([list(row) for row in chars], styles, ymax, self.view)

    def _stacked_grid(self) -> PlotGrid:
        """The ``role="stack"`` layers, bottom first, read in each column where their
        ``role="total"`` is highest (see the module docstring); ``colour`` of a layer is
        its :class:`Series` ``short``'s index in the palette (``stack-K``)."""
        rows, cols = self.plot_height, self.plot_width
        v0, v1 = self.view
        layers = [s for s in self.series if s.role == "stack"]
        total = next((s for s in self.series if s.role == "total"), None)
        times = _column_times(total.level if total is not None else layers[0].level,
                              v0, v1, cols)
        values = np.stack([_values_at(s.level, times) for s in layers])
        tops = np.cumsum(values, axis=0)  # (layers, cols)
        ymax = nice_bytes_ceiling(int(tops[-1].max()) if tops.size else 0)
        chars = np.full((rows, cols), " ", dtype="<U1")
        styles = np.zeros((rows, cols), dtype=np.int64)
        unit = ymax / rows
        middle = (np.arange(rows)[::-1] + 0.5) * unit  # each row's middle, top row first
        layer = (tops[None, :, :] <= middle[:, None, None]).sum(axis=1)  # (rows, cols)
        inside = layer < len(layers)
        colours = np.array([s.colour for s in layers], dtype=np.int64)
        chars[inside] = "█"
        styles[inside] = STACK0 + colours[np.clip(layer, 0, len(layers) - 1)][inside]
        # the top cell of each column in eighths, the colour of the layer under it
        eighths = np.round(tops[-1] / unit * 8).astype(np.int64) if tops.size else \
            np.zeros(cols, dtype=np.int64)
        top_row = rows - 1 - eighths // 8
        part = eighths % 8
        show = (part > 0) & (top_row >= 0)
        cols_shown = np.flatnonzero(show)
        below = np.clip(top_row[cols_shown] + 1, 0, rows - 1)
        chars[top_row[cols_shown], cols_shown] = np.array(list(FILL_CHARS))[part[cols_shown]]
        styles[top_row[cols_shown], cols_shown] = np.where(
            styles[below, cols_shown] >= STACK0, styles[below, cols_shown],
            STACK0 + colours[-1])
        return PlotGrid([list(row) for row in chars], styles, ymax, self.view)

    @staticmethod
    def _braille(bins, ymax: int, rows: int, cols: int) -> np.ndarray:
        """Braille codes (rows x cols) drawing the min-max range of each pixel column."""
        pixels = rows * 4
        scale = pixels / ymax
        lo = np.clip(np.floor(bins.lo * scale), 0, pixels - 1).astype(np.int64)
        hi = np.clip(np.floor(bins.hi * scale), 0, pixels - 1).astype(np.int64)
        y = np.arange(pixels)[:, None]  # from the bottom
        dots = (y >= lo[None, :]) & (y <= hi[None, :]) & bins.known[None, :]
        dots = dots[::-1]  # top row first
        cells = dots.reshape(rows, 4, cols, 2)
        return np.einsum("rycx,yx->rc", cells.astype(np.int64), _DOT_BITS)

    # -- painting -------------------------------------------------------------------------

    def _styles(self) -> dict[str, Style]:
        names = ["fill", "cursor", "window", "axis", "peak", "marker"] + [
            f"line-{i}" for i in range(6)] + [f"stack-{k}" for k in range(STACK_COLOURS)]
        return {name: self.get_component_rich_style(f"trendplot--{name}") for name in names}

    def _style_of(self, sid: int, styles: dict[str, Style]) -> Style:
        if sid == FILL:
            return styles["fill"]
        if sid >= STACK0:
            return styles[f"stack-{sid - STACK0}"]
        if sid >= LINE0 + 16:
            line = styles[f"line-{sid - LINE0 - 16}"]
            return line + Style(bgcolor=styles["fill"].color)
        if sid >= LINE0:
            return styles[f"line-{sid - LINE0}"]
        return Style()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not self.series:
            return Strip.blank(width, paint.PLAIN)
        grid = self.grid()
        styles = self._styles()
        rows = self.plot_height
        if y < rows:
            return self._plot_line(y, grid, styles)
        if y == rows:
            return self._marker_line(styles)
        if y == rows + 1:
            return self._axis_line(styles)
        return Strip.blank(width, paint.PLAIN)

    def _y_label(self, y: int, grid: PlotGrid) -> str:
        """Labels at the top (the scale's maximum), the row holding half of it, and 0."""
        rows = self.plot_height
        width = self.axis_width - 1
        if y == 0:
            return short_bytes(grid.ymax).rjust(width)
        if y == rows - 1:
            return "0".rjust(width)
        if rows >= 6 and y == rows - 1 - (rows * 4 // 2) // 4:
            return short_bytes(grid.ymax // 2).rjust(width)
        return " " * width

    def _window_columns(self) -> tuple[int, int] | None:
        if self.window is None:
            return None
        w0, w1 = self.window
        v0, v1 = self.view
        if w1 < v0 or w0 > v1 or (w0 <= v0 and w1 >= v1):
            return None  # outside the view, or all of it (zoomed to it): nothing to mark
        return self.column_of(max(w0, v0)), self.column_of(min(w1, v1))

    def _cursor_column(self) -> int | None:
        v0, v1 = self.view
        if v0 <= self.cursor_t <= v1:
            return self.column_of(self.cursor_t)
        return None

    def _plot_line(self, y: int, grid: PlotGrid, styles: dict[str, Style]) -> Strip:
        chars = list(grid.chars[y])
        sids = grid.styles[y]
        cursor = self._cursor_column()
        window = self._window_columns()
        label = self._y_label(y, grid)
        segments = [Segment(label, styles["axis"]), Segment("┤" if label.strip() else "│",
                                                           styles["axis"])]
        run_text: list[str] = []
        run_style: Style | None = None
        for x, char in enumerate(chars):
            style = self._style_of(int(sids[x]), styles)
            if window is not None and window[0] <= x <= window[1]:
                style = style + Style(bgcolor=styles["window"].bgcolor)
            if x == cursor:  # a crosshair: the legend reads the values out exactly
                sid = int(sids[x])
                over_fill = sid == FILL and char == "█" or sid >= LINE0 + 16
                char = "│"
                style = styles["cursor"]
                if over_fill:
                    style = style + Style(bgcolor=styles["fill"].color)
            if style != run_style and run_text:
                segments.append(Segment("".join(run_text), run_style))
                run_text = []
            run_style = style
            run_text.append(char)
        if run_text:
            segments.append(Segment("".join(run_text), run_style))
        return Strip(segments, self.size.width)

    def _marker_line(self, styles: dict[str, Style]) -> Strip:
        cols = self.plot_width
        key = (self.view, cols, id(self.markers))
        if self._marker_key != key:
            self._marker_chars = [" "] * cols
            self._draw_markers(self._marker_chars)
            self._marker_key = key
        chars = list(self._marker_chars)
        kinds = ["marker"] * cols
        v0, v1 = self.view
        if self.reserved_peak is not None and v0 <= self.reserved_peak[0] <= v1:
            x = self.column_of(self.reserved_peak[0])
            chars[x], kinds[x] = "△", "peak"
        if self.peak is not None and v0 <= self.peak[0] <= v1:
            x = self.column_of(self.peak[0])
            chars[x], kinds[x] = "▲", "peak"
        window = self._window_columns()
        if window is not None:
            chars[window[0]], kinds[window[0]] = "[", "window"
            chars[window[1]], kinds[window[1]] = "]", "window"
        cursor = self._cursor_column()
        if cursor is not None:
            chars[cursor], kinds[cursor] = "┴", "cursor"
        segments = [Segment(" " * (self.axis_width - 1) + "└", styles["axis"])]
        for x, char in enumerate(chars):
            style = styles[kinds[x]] if char != " " else styles["axis"]
            segments.append(Segment(char, style))
        return Strip(segments, self.size.width).simplify()

    def _draw_markers(self, chars: list[str]) -> None:
        """Ranges as ``─`` with ``├`` ``┤`` ends and points as ticks, where they are at
        least two columns apart; denser ones merge into a ``═`` band (vectorised: a capture
        may mark every step of a long run)."""
        markers = self.markers
        if markers.t.size == 0:
            return
        v0, v1 = self.view
        t, t_end = markers.t, markers.t_end
        is_range = t_end > t
        last = np.where(is_range, t_end, t)
        shown = (last >= v0) & (t <= v1)
        if not shown.any():
            return
        cols = len(chars)
        t, t_end, last, is_range = t[shown], t_end[shown], last[shown], is_range[shown]
        kinds = markers.kinds[shown]
        first_col = bin_of(np.maximum(t, v0), v0, v1, cols)
        last_col = bin_of(np.minimum(last, v1), v0, v1, cols)
        # two distinct start columns side by side (np.unique would import numpy.ma, about
        # 10 ms of the first paint)
        dense = bool((np.diff(np.sort(first_col)) == 1).any())
        if dense:
            cover = np.zeros(cols + 1, dtype=np.int64)
            np.add.at(cover, first_col[is_range], 1)
            np.add.at(cover, last_col[is_range] + 1, -1)
            for x in np.flatnonzero(np.cumsum(cover)[:cols] > 0):
                chars[x] = "═"
            for x in set(first_col[~is_range].tolist()):
                chars[x] = "╪"
            return
        for a, b, ranged, begins, ends, kind in zip(
                first_col, last_col, is_range, t >= v0, last <= v1, kinds, strict=True):
            if ranged:
                for x in range(a, b + 1):
                    chars[x] = "─" if chars[x] == " " else chars[x]
                if begins:
                    chars[a] = "├"
                if ends and b != a:
                    chars[b] = "┤"
            else:
                chars[a] = MARKER_CHARS.get(str(kind), "╷")

    def _axis_line(self, styles: dict[str, Style]) -> Strip:
        cols = self.plot_width
        text = [" "] * cols
        v0, v1 = self.view
        sample = self.time_label(v1)
        count = max(cols // (len(sample) + 4), 1)
        step = max(int(nice_step(v1 - v0, count)), 1)
        first = self.origin + -(-(v0 - self.origin) // step) * step  # exact: no floats
        ticks = range(first, v1 + 1, step)
        last_end = -1
        for tick in ticks:
            x = self.column_of(int(tick))
            label = self.time_label(int(tick))
            if x <= last_end or x + len(label) > cols:
                continue
            text[x:x + len(label)] = list(label)
            last_end = x + len(label)
        line = " " * self.axis_width + "".join(text)
        return Strip([Segment(line, styles["axis"])], self.size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    # -- mouse ----------------------------------------------------------------------------

    def _time_at(self, x: int) -> int | None:
        column = x - self.axis_width
        if column < 0 or not self.series:
            return None
        return self.time_of_column(column)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        t = self._time_at(event.x)
        if t is None or event.button != 1:
            return
        self._drag_from = t
        self._dragged = False
        self.capture_mouse()
        event.stop()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._drag_from is None or not event.button:
            return
        t = self._time_at(max(event.x, self.axis_width))
        if t is None:
            return
        if abs(self.column_of(t) - self.column_of(self._drag_from)) >= 1:
            self._dragged = True
            self.post_message(self.CursorRequest(window=(self._drag_from, t), final=False))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag_from is None:
            return
        start, self._drag_from = self._drag_from, None
        self.release_mouse()
        t = self._time_at(max(event.x, self.axis_width))
        if t is None:
            return
        if self._dragged and self.column_of(t) != self.column_of(start):
            self.post_message(self.CursorRequest(window=(start, t)))
        else:
            self.post_message(self.CursorRequest(t=t))
        event.stop()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 0.67)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 1.5)

    def _wheel(self, event: events.MouseEvent, factor: float) -> None:
        t = self._time_at(event.x)
        if t is not None:
            self.post_message(self.CursorRequest(zoom=factor, around=t))
            event.stop()
