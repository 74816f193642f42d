"""The time-axis call flame of one thread (msMemScope python traces), as MindStudio
Insight shows it: depth down, time across the cursor's view, a gold cursor line; names
are written inside the calls wide enough to hold them; the cursor's window (the selected
range) is shaded.  Clicking a call moves the cursor
to the click's time (Line API; each line cached until the view or the thread changes).
"""

from __future__ import annotations

import zlib

import numpy as np
from rich.segment import Segment
from textual import events
from textual.cache import LRUCache
from textual.strip import Strip
from textual.widget import Widget

from memtui.analysis.stacks.call_flame import NONE, CallFlame
from memtui.tui.cursor import CursorState
from memtui.tui.widgets import paint
from memtui.tui.widgets.requests import CursorRequest

GUTTER = 4  # depth numbers


def name_colour(name: str) -> str:
    return paint.PALETTE[zlib.crc32(name.encode()) % len(paint.PALETTE)]


class CallFlameView(Widget, can_focus=True):
    """One thread's calls over the cursor's view (see the module docstring)."""

    DEFAULT_CSS = """
    CallFlameView { height: 1fr; min-height: 3; }
    """

    def __init__(self, flame: CallFlame, *, name: str | None = None,
                 id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self.flame = flame
        self.cursor: CursorState | None = None
        self.first_depth = 0
        self._grid: np.ndarray | None = None
        self._grid_key: tuple | None = None
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)

    def show(self, cursor: CursorState, flame: CallFlame | None = None) -> None:
        self.cursor = cursor
        if flame is not None:
            self.flame = flame
            self.first_depth = 0
            self._grid_key = None
        self.refresh()

    def scroll_depth(self, delta: int) -> None:
        self.first_depth = min(max(self.first_depth + delta, 0),
                               max(self.flame.max_depth - 1, 0))
        self.refresh()

    @property
    def plot_width(self) -> int:
        return max(self.size.width - GUTTER, 1)

    def grid(self) -> np.ndarray | None:
        if self.cursor is None:
            return None
        t0, t1 = self.cursor.view
        key = (id(self.flame), t0, t1, self.plot_width, self.size.height, self.first_depth)
        if key != self._grid_key:
            self._grid = self.flame.rasterise(t0, t1, self.plot_width, self.first_depth,
                                              self.size.height)
            self._grid_key = key
        return self._grid

    def cursor_column(self) -> int | None:
        if self.cursor is None:
            return None
        t0, t1 = self.cursor.view
        if not t0 <= self.cursor.t <= t1:
            return None
        span = max(t1 - t0, 1) / self.plot_width
        return min(int((self.cursor.t - t0) / span), self.plot_width - 1)

    def window_columns(self) -> tuple[int, int] | None:
        """Columns of the cursor's window (the selected range), if it shows."""
        if self.cursor is None or self.cursor.window is None:
            return None
        (t0, t1), (w0, w1) = self.cursor.view, self.cursor.window
        if w1 < t0 or w0 > t1:
            return None
        span = max(t1 - t0, 1) / self.plot_width
        a = int((max(w0, t0) - t0) / span)
        b = min(int((min(w1, t1) - t0) / span), self.plot_width - 1)
        return a, b + 1

    def render_line(self, y: int) -> Strip:
        grid = self.grid()
        if grid is None:
            return Strip.blank(self.size.width, paint.PLAIN)
        cursor_x = self.cursor_column()
        window = self.window_columns()
        key = (self._grid_key, y, cursor_x, window)
        strip = self._lines.get(key)
        if strip is None:
            strip = self._draw(grid[y], y, cursor_x, window)
            self._lines[key] = strip
        return strip

    def _draw(self, calls: np.ndarray, y: int, cursor_x: int | None,
              window: tuple[int, int] | None = None) -> Strip:
        depth = self.first_depth + y
        label = f"{depth:>3} " if depth < self.flame.max_depth else " " * GUTTER
        segments = [Segment(label, paint.style("#7a7a7a", None))]
        row = calls.tolist()
        x = 0
        while x < len(row):
            call = row[x]
            end = x + 1
            while end < len(row) and row[end] == call:
                end += 1
            if call == NONE:
                text, fg, bg = " " * (end - x), None, None
                if window is not None and window[0] < end and x < window[1]:
                    end = min(end, window[1]) if x >= window[0] else window[0]
                    inside = x >= window[0]
                    text, bg = " " * (end - x), paint.WINDOW if inside else None
            else:
                name = self.flame.label(call)
                room = end - x
                text = (name[: room - 1] + " ") if room >= 3 else " " * room
                text = text.ljust(room)
                fg, bg = "#101010", name_colour(name)
            segments.append(Segment(text, paint.style(fg, bg)))
            x = end
        strip = Strip(segments)
        if cursor_x is not None:
            before = strip.crop(0, GUTTER + cursor_x)
            after = strip.crop(GUTTER + cursor_x + 1)
            mark = Strip([Segment("│", paint.style(paint.CURSOR, None, bold=True))])
            strip = Strip.join([before, mark, after])
        return strip.adjust_cell_length(self.size.width, paint.PLAIN)

    def on_click(self, event: events.Click) -> None:
        if self.cursor is None or event.x < GUTTER:
            return
        t0, t1 = self.cursor.view
        t = int(t0 + (event.x - GUTTER + 0.5) * (t1 - t0) / self.plot_width)
        self.post_message(CursorRequest(t=t))
