"""Screen 1 in compare mode: both runs' allocated curves on one axis, and B - A under them.

The axis is the shown run's (``tab`` switches A and B): its curve is the filled area, the
other run's curve is mapped onto the axis by the alignment (``a`` switches it, ``<`` ``>``
shift B) and drawn as a line.  The legend names both files with their level at the
cursor; the strip under the plot is B - A over the view
(:class:`~memtui.tui.widgets.delta.DeltaStrip`); the lines under it give the peaks and
the end of both runs and their deltas.

It reads the comparison from the app (``app.comparison_for(device)``, ``app.axis_levels(pair)``,
``app.side``, ``app.side_label(side)``) and watches ``app.cursor`` and ``app.comparison_key``.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from memtui.analysis.across.compare import sample
from memtui.analysis.timeline.series import Series
from memtui.tui.widgets.curve import Markers, TrendPlot
from memtui.tui.widgets.delta import DeltaStrip
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.status import StatusBar, short_bytes
from memtui.units import format_bytes, signed_bytes

_GLYPHS = ("█", "⠶")


class CompareTrendScreen(Screen):
    """See the module docstring."""

    DEFAULT_CSS = """
    CompareTrendScreen #cmp-legend { height: 1; padding: 0 1; }
    CompareTrendScreen #cmp-plot { height: 1fr; min-height: 6; }
    CompareTrendScreen #cmp-delta-title { height: 1; padding: 0 1; background: $panel; }
    CompareTrendScreen #cmp-figures { height: auto; max-height: 5; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._key: tuple | None = None
        self._levels: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="cmp-legend")
        yield TrendPlot(id="cmp-plot")
        yield Static(id="cmp-delta-title")
        yield DeltaStrip(id="cmp-delta")
        yield Static(id="cmp-figures")
        yield StatusBar()
        yield KeyBar(compact=True)

    def on_mount(self) -> None:
        self.watch(self.app, "cursor", self._redraw, init=False)
        self.watch(self.app, "comparison_key", self._comparison_changed, init=False)
        self.query_one(TrendPlot).focus()
        self._redraw(self.app.cursor)
        self.call_after_refresh(self.app.mark_painted, "trend")

    def on_screen_resume(self) -> None:
        self._redraw(self.app.cursor)
        self.query_one(TrendPlot).focus()

    def _comparison_changed(self, _key) -> None:
        self._key = None
        self._redraw(self.app.cursor)

    # -- data -----------------------------------------------------------------------------

    def _ensure(self, device: str) -> None:
        app = self.app
        pair = app.comparison_for(device)
        key = (device, app.side, id(pair))
        if key == self._key:
            return
        self._key = key
        plot = self.query_one(TrendPlot)
        timeline = app.timeline(device)
        start, unit = timeline.start, app.trace.meta.time_unit
        plot.time_label = (lambda t: f"#{t}") if unit == "event" else (
            lambda t: _short_time(t - start))
        plot.origin = start
        this_label, other_label = app.side_label(app.side), app.side_label(app.other_side)
        if pair is None:
            self._levels = None
            series = [Series(this_label, app.side.upper(), timeline.allocated, "allocated")]
        else:
            this, other, delta = app.axis_levels(pair)
            self._levels = (this, other, delta)
            series = [Series(this_label, app.side.upper(), this, "allocated"),
                      Series(other_label, app.other_side.upper(), other, "line")]
        peak = (timeline.peak_t, timeline.peak) if timeline.peak > 0 else None
        plot.set_series(series, peak, Markers.from_frame(timeline.markers))

    def _redraw(self, cursor) -> None:
        if cursor is None or not self.is_attached:
            return
        self._ensure(cursor.device)
        self.query_one(TrendPlot).set_state(cursor.view, cursor.t, cursor.window)
        delta = self._levels[2] if self._levels else None
        self.query_one(DeltaStrip).set_data(delta, cursor.view, cursor.t)
        self._legend(cursor)
        self._figures(cursor)

    def _legend(self, cursor) -> None:
        app = self.app
        plot = self.query_one(TrendPlot)
        narrow = self.size.width < 90
        text = Text(no_wrap=True, overflow="ellipsis")
        sides = [(app.side, "trendplot--fill", _GLYPHS[0]),
                 (app.other_side, "trendplot--line-0", _GLYPHS[1])]
        for index, (side, component, glyph) in enumerate(sides):
            if index and self._levels is None:
                break
            text.append(glyph + " ", style=plot.get_component_rich_style(component))
            level = self._levels[index] if self._levels else app.timeline(cursor.device).allocated
            value = int(sample(level, [cursor.t])[0])
            name = app.side_label(side, short=narrow)
            size = short_bytes(value) if narrow else format_bytes(value)
            text.append(f"{name} {size}  ")
        text.append(f"[tab] {app.side.upper()} shown", style="dim")
        self.query_one("#cmp-legend", Static).update(text)
        title = Text(no_wrap=True, overflow="ellipsis")
        if self._levels is None:
            title.append(f"{cursor.device} has no counterpart in the other run", style="italic")
        else:
            now = int(sample(self._levels[2], [cursor.t])[0])
            title.append("B - A ", style="bold")
            title.append(f"{signed_bytes(now)} here  ")
            title.append(app.alignment_text(cursor.device), style="dim")
        self.query_one("#cmp-delta-title", Static).update(title)

    def _figures(self, cursor) -> None:
        pair = self.app.comparison_for(cursor.device)
        box = self.query_one("#cmp-figures", Static)
        if pair is None:
            box.update("")
            return
        table = Table(box=None, expand=False, show_edge=False, pad_edge=False,
                      header_style="bold")
        table.add_column("", no_wrap=True)
        for column in ("A", "B", "B - A"):
            table.add_column(column, justify="right", no_wrap=True)
        rows = [("peak allocated", pair.a.peak, pair.b.peak),
                ("peak reserved", pair.a.peak_reserved, pair.b.peak_reserved),
                ("allocated at end", pair.a.end_allocated, pair.b.end_allocated)]
        for name, a, b in rows:
            delta = None if a is None or b is None else b - a
            table.add_row(name, format_bytes(a), format_bytes(b), signed_bytes(delta))
        box.update(table)

    def on_trend_plot_cursor_request(self, message: TrendPlot.CursorRequest) -> None:
        app = self.app
        if message.zoom is not None:
            app.zoom_view(message.zoom, message.around)
        elif message.window is not None:
            app.move_cursor(window=message.window)
        elif message.t is not None:
            app.move_cursor(t=message.t, view=app.cursor.view)


def _short_time(ns: int) -> str:
    """A compact relative time for axis labels: ``+1.25s``, ``+350ms``."""
    seconds = ns / 1e9
    if ns == 0:
        return "+0"
    if abs(seconds) >= 1:
        return f"+{seconds:.3g}s"
    if abs(seconds) >= 1e-3:
        return f"+{seconds * 1e3:.3g}ms"
    return f"+{seconds * 1e6:.3g}us"
