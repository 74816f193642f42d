"""Screen 1, Trend: the memory levels over time, the cursor, the window, and what is live.

Top: a legend with each curve's value at the cursor and the peak.  Middle: the
:class:`~memtui.tui.widgets.curve.TrendPlot`.  Bottom: the live bytes at the cursor by call
stack top, by owner or by role (``o`` cycles; profiler captures by operator first; by role
the plot stacks the roles, each its own colour, the legend naming them), summing to
the level at the cursor: the largest groups, the others as one row, then the bytes no
block explains ("alive before the capture", "in no operator"), each a row, every share of
the level.  Computed in a worker so that moving the cursor never waits for it.  For
profiler data ``b`` cycles Group By (Overall / Stream / Component) as in MindStudio
Insight's Memory tab.  A click on the curve selects the largest block alive there and shows
its size, owner and call stack under the live table (memory_viz shows the block under the
mouse).  ``w`` cycles the what-if settings
(:data:`memtui.analysis.replay.settings.WHAT_IF_CHOICES`): the reserved curve a proven
replay predicts under the setting is drawn over the recorded one (the replay runs in a
worker; a capture whose replay is not proven says why instead).
"""

from __future__ import annotations

import polars as pl
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from memtui.analysis.layout.block_map import PeakFinder
from memtui.analysis.roles import ROLE_LABELS, ROLE_SHORT, ROLES, levels_by_role, levels_ready
from memtui.analysis.stacks.callstack import TOP_RULES
from memtui.analysis.stacks.stack_tree import format_stack
from memtui.analysis.summary import device_start
from memtui.analysis.tables import format_time
from memtui.analysis.timeline.attribution import (
    REMAINDER_LABELS,
    groups_by_operator,
    remainder_rows,
)
from memtui.analysis.timeline.downsample import value_at
from memtui.analysis.timeline.levels import Level, reserved_is_floor
from memtui.analysis.timeline.series import Series, group_bys, trend_series
from memtui.errors import printable
from memtui.tui.widgets import paint
from memtui.tui.widgets.block_map import TrendSlider
from memtui.tui.widgets.curve import MARKER_CHARS, Markers, TrendPlot
from memtui.tui.widgets.key_bar import KeyBar
from memtui.tui.widgets.requests import CursorRequest
from memtui.tui.widgets.status import StatusBar, short_bytes
from memtui.units import at_least, counted, format_bytes

LIVE_ROWS = 12
#: The what-if settings as a narrow legend names them.
_SHORT_SETTING = {"expandable_segments:True": "expandable", "max_split_size_mb:512": "split<512M",
                  "roundup_power2_divisions:4": "pow2/4", "garbage_collection_threshold:0.8":
                  "gc 0.8"}
_GLYPHS = ("█", "⠶")  # fill, line: shapes in the legend matching the plot


class TrendScreen(Screen):
    """See the module docstring."""

    BINDINGS = [
        Binding("shift+left", "edge(0, -1)", "View start earlier", show=False,
                id="trend.edge_0_minus_1"),
        Binding("shift+right", "edge(0, 1)", "View start later", show=False, id="trend.edge_0_1"),
        Binding("ctrl+left", "edge(1, -1)", "View end earlier", show=False,
                id="trend.edge_1_minus_1"),
        Binding("ctrl+right", "edge(1, 1)", "View end later", show=False, id="trend.edge_1_1"),
        Binding("o", "toggle_live_by", "Stack/owner/role", show=True,
                id="trend.toggle_live_by"),
        Binding("b", "group_by", "Group by", show=False, id="trend.group_by"),
        Binding("w", "what_if", "What if", show=False, id="trend.what_if"),
    ]

    DEFAULT_CSS = """
    TrendScreen #trend-block { display: none; height: auto; max-height: 5; padding: 0 1;
                               border-top: solid $primary-darken-2; }
    TrendScreen #trend-block.-shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.clicked: tuple[int, int] | None = None  # (t, block) of the last click
        self.group_by = "overall"
        self.live_by = "stack"
        self._live_by_chosen = False  # o pressed: the user's choice, kept
        self._series: list[Series] = []
        self._series_key: tuple | None = None
        self._live_wanted: tuple | None = None
        self._live_running = False
        self._first_paint = True
        self._what_if = -1  # index into WHAT_IF_CHOICES; -1: no overlay
        #: (device, setting) -> (the predicted reserved curve or None, a legend note)
        self._what_ifs: dict[tuple[str, str], tuple[Series | None, str]] = {}
        self._proofs: dict[str, tuple] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="trend-legend")
        yield TrendPlot(id="trend-plot")
        yield Static(id="live-title")
        yield Static(id="live-table")
        yield Static(id="trend-block")
        yield StatusBar()
        yield KeyBar(compact=True)

    def on_worker_state_changed(self, event) -> None:
        """Failed workers go to the app's one handler (``report_worker``)."""
        report = getattr(self.app, "report_worker", None)
        if report is not None:
            report(event)

    def on_mount(self) -> None:
        self.watch(self.app, "cursor", self._cursor_moved, init=False)
        self.watch(self.app, "top_rule", self._top_rule_changed, init=False)
        self.query_one(TrendPlot).focus()
        if not self._live_by_chosen and groups_by_operator(self.app.trace):
            self.live_by = "owner"  # profiler captures: by operator unless asked
        self._first_paint = True  # the live table waits until the curves are on screen
        self._cursor_changed(self.app.cursor)
        self.call_after_refresh(self._painted)

    def _top_rule_changed(self) -> None:
        cursor = self.app.cursor
        if cursor is not None and not self._first_paint:
            self._update_live(cursor.device, cursor.t)

    def _painted(self) -> None:
        self.app.mark_painted("trend")
        self._first_paint = False
        cursor = self.app.cursor
        self._update_live(cursor.device, cursor.t)

    def on_screen_resume(self) -> None:
        self._cursor_changed(self.app.cursor)
        self.query_one(TrendPlot).focus()

    # -- data -----------------------------------------------------------------------------

    def _ensure_series(self, device: str) -> None:
        by_role = self.live_by == "role"
        key = (device, self.group_by, by_role)
        if key == self._series_key:
            return
        app = self.app
        timeline = app.timeline(device)
        if self.group_by not in group_bys(app.trace, device):
            self.group_by = "overall"
            key = (device, self.group_by, by_role)
        roles = levels_ready(app.trace, device) if by_role else None
        if by_role and roles is None:
            self._work_out_roles(device)  # drawn as they were until the roles are in
            if self._series:
                return
        if roles is not None:
            self._series = role_series(roles, timeline)
        else:
            self._series = trend_series(app.trace, device, timeline, self.group_by)
        self._series_key = key
        start, unit = timeline.start, app.trace.meta.time_unit
        plot = self.query_one(TrendPlot)
        plot.time_label = (lambda t: f"#{t}") if unit == "event" else (
            lambda t: _short_time(t - start))
        plot.origin = start
        markers = Markers.from_frame(timeline.markers)
        peak = (timeline.peak_t, timeline.peak) if timeline.peak > 0 else None
        if self._series and self._series[0].role not in ("allocated", "stack"):
            peak = None
        plot.set_series(self._series + self._overlay(device), peak, markers,
                        reserved_peak(timeline))
        self._mount_slider(timeline)

    def _cursor_moved(self, cursor) -> None:
        """The app's cursor moved: followed while this screen is shown; a hidden Trend
        catches up when it is shown again (``on_screen_resume``), so keys on the other
        screens do not pay for its curves and legend."""
        if self.app.screen is self:
            self._cursor_changed(cursor)

    def _cursor_changed(self, cursor) -> None:
        if cursor is None or not self.is_attached:
            return
        self._ensure_series(cursor.device)
        self.query_one(TrendPlot).set_state(cursor.view, cursor.t, cursor.window)
        for slider in self.query(TrendSlider):
            slider.show(cursor)
        self._update_legend(cursor)
        self._show_clicked_block(cursor)
        if self.app.screen is self and not self._first_paint:
            self._update_live(cursor.device, cursor.t)

    def _show_clicked_block(self, cursor) -> None:
        """Under the live table, the block a click on the curve selected (the largest alive
        there, as memory_viz shows the block under the mouse): its size, owner and stack;
        hidden once the cursor leaves that time or that block."""
        pane = self.query_one("#trend-block", Static)
        if self.clicked is None or self.clicked != (cursor.t, cursor.block_id):
            pane.remove_class("-shown")
            return
        pane.update(clicked_block_text(self.app.trace, cursor.device, cursor.block_id))
        pane.add_class("-shown")

    def _update_legend(self, cursor) -> None:
        timeline = self.app.timeline(cursor.device)
        unit = self.app.trace.meta.time_unit
        narrow = self.size.width < 90
        plot = self.query_one(TrendPlot)
        text = Text()  # wraps onto a second line in a narrow pane: no figure dropped
        line = 0
        levels = timeline.levels_at_event(timeline.event_of(cursor))
        floor = reserved_is_floor(self.app.trace, cursor.device)  # the file contradicts
        exact = {id(timeline.allocated): levels.allocated, id(timeline.active): levels.active}
        if timeline.reserved is not None:
            exact[id(timeline.reserved)] = levels.reserved
        roles = self._roles_at(cursor.device, timeline.event_of(cursor))
        for series in self._series:
            if series.role == "total":
                continue
            # the device's own levels: exact at the cursor's event (as the status bar)
            value = exact.get(id(series.level))
            if series.role == "stack" and roles is not None:
                value = roles.get(ROLES[series.colour], 0)
            if value is None:
                value = _value_at(series, cursor.t)
            if series.role == "stack":
                glyph, component = _GLYPHS[0], f"trendplot--stack-{series.colour}"
            elif series.role == "allocated":
                glyph, component = _GLYPHS[0], "trendplot--fill"
            else:
                glyph, component = _GLYPHS[1], f"trendplot--line-{min(line, 5)}"
                line += 1
            text.append(glyph + " ", style=plot.get_component_rich_style(component))
            label = series.short if narrow else series.label
            at = ">=" if series.label == "reserved" and floor else ""  # the least it can be
            text.append(f"{label} {at}{short_bytes(value) if narrow else format_bytes(value)}  ")
        setting = self._what_if_setting()
        if setting is not None:  # the what-if overlay: the next line colour
            overlay, note = self._what_ifs.get((cursor.device, setting), (None, "replaying..."))
            if overlay is not None:
                text.append(_GLYPHS[1] + " ", style=plot.get_component_rich_style(
                    f"trendplot--line-{min(line, 5)}"))
            name = _SHORT_SETTING.get(setting, setting) if narrow else setting
            text.append(f"if {name}: {printable(note)}  ", style="italic")
        groups = len(group_bys(self.app.trace, cursor.device)) > 1
        if groups:
            text.append(f"[b] {self.group_by}  " if narrow else f"[b] group: {self.group_by}  ")
        if timeline.peak > 0:
            when = format_time(timeline.peak_t, timeline.start, unit)
            text.append("▲ peak ", style="bold")
            if narrow:
                text.append(f"{short_bytes(timeline.peak)} {when}")
            else:
                text.append(f"{format_bytes(timeline.peak)} at {when}")
        top = reserved_peak(timeline)
        if top is not None:
            text.append("  △ ", style="bold")
            if narrow:
                text.append(f"resv {'>=' if floor else ''}{short_bytes(top[1])}")
            else:
                text.append(f"reserved peak {at_least(top[1], floor)} at "
                            f"{format_time(top[0], timeline.start, unit)}")
        for char, name in self._marker_kinds(timeline.markers):
            text.append(f"  {char} ", style="bold")
            text.append(name)
        marker = _marker_at(timeline.markers, cursor.t)
        if marker:
            text.append(f"  in {marker}", style="italic")
        self.query_one("#trend-legend", Static).update(text)

    def _roles_at(self, device: str, event: int) -> dict[str, int] | None:
        """Bytes by role just after ``event`` where the roles are worked out (None else)."""
        if self.live_by != "role":
            return None
        levels = levels_ready(self.app.trace, device)
        return levels.at_event(event) if levels is not None else None

    @work(thread=True, group="roles", description="the roles", exit_on_error=False)
    def _work_out_roles(self, device: str) -> None:
        """Memory by role of ``device`` (seconds on a large capture), then drawn."""
        levels_by_role(self.app.trace, device)
        self.app.call_from_thread(self._roles_done)

    def _roles_done(self) -> None:
        self._series_key = None
        if self.is_attached and self.app.cursor is not None:
            self._cursor_changed(self.app.cursor)

    def _marker_kinds(self, markers: pl.DataFrame) -> list[tuple[str, str]]:
        """:func:`marker_kinds` of ``markers``, kept while the same frame is shown (the
        legend is written on every cursor move)."""
        kept = getattr(self, "_kinds_of", None)
        if kept is None or kept[0] is not markers:
            kept = self._kinds_of = (markers, marker_kinds(markers))
        return kept[1]

    def _update_live(self, device: str, t: int) -> None:
        """Ask for the live table at ``t``; requests made while one is computed coalesce."""
        if self.app.trace.blocks.is_empty():
            self.query_one("#live-title", Static).update(
                Text("No blocks in this capture: it has levels only.", style="italic"))
            self.query_one("#live-table", Static).update("")
            return
        cursor = self.app.cursor
        event = self.app.timeline(device).event_of(cursor) \
            if cursor is not None and (cursor.device, cursor.t) == (device, t) else None
        self._live_wanted = (device, t, self.live_by, self.app.top_rule, event)
        if not self._live_running:
            self._live_running = True
            self._compute_live(*self._live_wanted)

    @work(thread=True, group="live", description="the live table", exit_on_error=False)
    def _compute_live(self, device: str, t: int, by: str, rule: str,
                      event: int | None = None) -> None:
        try:  # exact at the cursor's event (the status bar's level), else at time t
            live = self.app.live_blocks(device)
            timeline = self.app.timeline(device)
            level = timeline.levels_at_event(event).allocated if event is not None \
                else timeline.levels_at(t).allocated
            total, count = live.total(t, event), int(live.mask(t, event).sum())
            if by == "role":  # every role a row, summing to the level: no rest
                top = (role_rows(self.app.trace, device, live, t,
                                 event if event is not None else timeline.event_at(t)), [])
                total = level
            else:
                top = live.top(t, by=by, limit=LIVE_ROWS, event=event)
                top = (top, remainder_rows(self.app.trace, device, level, total))
        except Exception:
            self.app.call_from_thread(self._live_done, None)
            raise
        self.app.call_from_thread(self._live_done,
                                  (device, t, by, rule, top, total, count, event, level))

    def _live_done(self, result) -> None:
        self._live_running = False
        if result is not None:
            self._show_live(*result)
            if self._live_wanted is not None \
                    and self._live_wanted != (*result[:4], result[7]):
                self._live_running = True
                self._compute_live(*self._live_wanted)

    def _show_live(self, device, t, by, rule, top, total, count, event=None,
                   level=None) -> None:
        cursor = self.app.cursor
        if cursor is None or (cursor.device, cursor.t, self.app.top_rule) != (device, t, rule):
            return
        self._live_shown = (device, t, by, rule, top, total, count, event, level)
        timeline = self.app.timeline(device)
        when = format_time(t, timeline.start, self.app.trace.meta.time_unit)
        owner = "operator" if groups_by_operator(self.app.trace) else "owner"
        what = TOP_RULES[rule] if by == "stack" else "role" if by == "role" else owner
        level = total if level is None else level
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(f"Live at {when}", style="bold")
        title.append(f": {format_bytes(level)}")
        if level != total:  # the bytes no block explains are rows of their own
            title.append(f" ({format_bytes(total)} in {counted(count, 'block')})")
        else:
            title.append(f" in {counted(count, 'block')}")
        title.append(f", by {what} ")
        following = {"stack": owner, "owner": "role", "role": "stack"}[by]
        title.append(f"(o: by {following}, T: which frame)", style="dim")
        self.query_one("#live-title", Static).update(title)
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False,
                      header_style="bold")
        table.add_column("Bytes", justify="right", no_wrap=True, width=10)
        table.add_column("%", justify="right", no_wrap=True, width=5)
        table.add_column("Blocks", justify="right", no_wrap=True, width=7)
        table.add_column(what.capitalize(), no_wrap=True, overflow="ellipsis", ratio=1)
        groups, rest = top
        height = self.query_one("#live-table", Static).size.height
        fit = height - 1 if height > 1 else LIVE_ROWS  # rows under the header
        shown = max(fit - len(rest) - 1, 1)  # the other groups and the rest always show
        top = live_rows(groups.head(shown), total, count, rest)
        for row in top.iter_rows(named=True):  # shares of the level: one denominator
            share = 100 * row["bytes"] / level if level else 0
            named = row["where"] in REMAINDER_LABELS or row["blocks"] < 0
            blocks = "" if row["blocks"] == 0 and named else f"{abs(row['blocks']):,}"
            table.add_row(format_bytes(row["bytes"]), f"{share:.0f}", blocks,
                          Text(printable(str(row["where"])),  # a name from the file
                               style="italic" if named else ""))
        self.query_one("#live-table", Static).update(table)

    def on_resize(self) -> None:
        """Fit the live table to its new height (its rows still sum to the level)."""
        shown = getattr(self, "_live_shown", None)
        if shown is not None:
            self.call_after_refresh(self._show_live, *shown)

    def legend_rows(self) -> list[tuple[str, str]]:
        """(Rich markup sample, meaning) of the plot's marks, for the help."""
        plot = self.query_one(TrendPlot)
        rows = []
        line = 0
        for series in self._series:
            if series.role == "allocated":
                glyph, component = _GLYPHS[0], "trendplot--fill"
            else:
                glyph, component = _GLYPHS[1], f"trendplot--line-{min(line, 5)}"
                line += 1
            colour = plot.get_component_rich_style(component).color
            name = colour.name if colour is not None else "default"
            rows.append((f"[{name}]{glyph * 3}[/]", f"{series.label} (filled: the main curve)"
                         if series.role == "allocated" else series.label))
        rows.append(("▲", "the peak of allocated"))
        rows.append(("△", "the peak of reserved"))
        rows.append((f"[{paint.TREND_IN_VIEW} on {paint.SHADE}]▆▆▆[/]", "zoom slider: the "
                     "whole run, the view shaded (drag it; shift+←/→ and ctrl+←/→ move its "
                     "edges)"))
        rows.append(("│", "the cursor; the window is shaded"))
        markers = self.app.timeline(self.app.cursor.device).markers
        rows += [(char, f"{name} on the time axis") for char, name in marker_kinds(markers)]
        return rows

    def _marker_kinds(self, markers) -> list[tuple[str, str]]:
        """:func:`marker_kinds` of the shown markers, found once per markers frame (the
        legend asks at every cursor move)."""
        cached = getattr(self, "_kinds_of", None)
        if cached is None or cached[0] is not markers:
            cached = self._kinds_of = (markers, marker_kinds(markers))
        return cached[1]

    def trace_replaced(self) -> None:
        """The app shows a grown trace (``--follow``): curves, legend and live table anew."""
        self._series_key = None
        cursor = self.app.cursor
        if self.is_attached and cursor is not None:
            self._cursor_changed(cursor)

    # -- the zoom slider --------------------------------------------------------------------

    def _mount_slider(self, timeline) -> None:
        """The run's allocated level under the plot with the view shaded (Insight's zoom
        slider): one per device, replacing the last."""
        level = timeline.allocated
        ooms = timeline.markers.filter(pl.col("kind") == "oom")["t"].to_list() \
            if not timeline.markers.is_empty() else []
        existing = self.query(TrendSlider)
        if existing:  # another device or a grown trace: new data, same widget
            slider = existing.first()
            slider.peaks, slider.marks = PeakFinder(level), ooms
            slider.t_start, slider.t_end = timeline.start, max(timeline.end,
                                                               timeline.start + 1)
            slider._levels_width = -1
        else:
            slider = TrendSlider(PeakFinder(level), timeline.start, timeline.end, marks=ooms)
            slider.styles.height = 2 if self.app.size.height < 30 else 3
            self.mount(slider, after=self.query_one(TrendPlot))
        self.call_after_refresh(self._show_slider)

    def _show_slider(self) -> None:
        cursor = self.app.cursor
        for slider in self.query(TrendSlider):
            if cursor is not None:
                slider.show(cursor)

    def on_cursor_request(self, message: CursorRequest) -> None:
        message.stop()
        self.app.move_cursor(**message.changes)

    def action_edge(self, edge: int, step: int) -> None:
        """Move the view's start (0) or end (1) by a tenth of the view."""
        cursor = self.app.cursor
        if cursor is None:
            return
        timeline = self.app.timeline(cursor.device)
        v0, v1 = cursor.view
        delta = max((v1 - v0) // 10, 1) * step
        if edge == 0:
            v0 = min(max(v0 + delta, timeline.start), v1 - 1)
        else:
            v1 = max(min(v1 + delta, timeline.end), v0 + 1)
        self.app.move_cursor(view=(v0, v1), t=min(max(cursor.t, v0), v1))

    # -- actions --------------------------------------------------------------------------

    def action_toggle_live_by(self) -> None:
        """By stack, by owner, by role (the plot then stacks the roles), by stack again."""
        self._live_by_chosen = True
        self.live_by = {"stack": "owner", "owner": "role", "role": "stack"}[self.live_by]
        cursor = self.app.cursor
        self._series_key = None
        self._cursor_changed(cursor)
        self._update_live(cursor.device, cursor.t)

    def action_group_by(self) -> None:
        choices = group_bys(self.app.trace, self.app.cursor.device)
        if len(choices) < 2:
            self.notify("Group By needs profiler data with streams or components.")
            return
        self.group_by = choices[(choices.index(self.group_by) + 1) % len(choices)]
        self._series_key = None
        self._cursor_changed(self.app.cursor)

    # -- what if ----------------------------------------------------------------------------

    def _what_if_setting(self) -> str | None:
        from memtui.analysis.replay.settings import WHAT_IF_CHOICES

        return WHAT_IF_CHOICES[self._what_if] if self._what_if >= 0 else None

    def _overlay(self, device: str) -> list[Series]:
        setting = self._what_if_setting()
        overlay = self._what_ifs.get((device, setting), (None, ""))[0] if setting else None
        return [overlay] if overlay is not None else []

    def action_what_if(self) -> None:
        """The next what-if setting (after the last: none), replayed in a worker."""
        from memtui.analysis.replay.settings import WHAT_IF_CHOICES

        cursor = self.app.cursor
        if cursor is None:
            return
        self._what_if = self._what_if + 1 if self._what_if + 1 < len(WHAT_IF_CHOICES) else -1
        setting = self._what_if_setting()
        if setting is not None and (cursor.device, setting) not in self._what_ifs:
            self._replay(cursor.device, setting)
        self._series_key = None
        self._cursor_changed(cursor)

    @work(thread=True, group="whatif", description="the what-if replay", exit_on_error=False)
    def _replay(self, device: str, setting: str) -> None:
        from memtui.analysis.replay.predict import predict
        from memtui.analysis.replay.proof import prove
        from memtui.analysis.replay.settings import apply_changes, from_capture

        trace = self.app.trace
        if trace.meta.source != "torch_snapshot":
            result: tuple[Series | None, str] = (None, "only PyTorch snapshots replay")
        else:
            if device not in self._proofs:
                self._proofs[device] = prove(trace, device)
            settings = apply_changes(from_capture(trace.meta.extra.get("allocator_settings")),
                                     [setting])
            p = predict(trace, device, settings, self._proofs[device])
            if p.proof.refused:
                result = (None, "no replay: " + p.proof.refused.split(":")[0].split(" (")[0])
            elif p.refused or p.curve is None or p.predicted is None or p.recorded is None:
                result = (None, f"not proven, {p.proof.address_share:.0%} of allocs at their "
                                "address (memtui whatif says why)")
            else:
                events = self._proofs[device][1].events  # the proof's run: same events
                level = Level(events["t"].to_numpy().astype("int64"), p.curve.astype("int64"))
                note = (f"peak {short_bytes(p.recorded.reserved_peak)}"
                        f"→{short_bytes(p.predicted.reserved_peak)}"
                        + (f", {p.predicted.ooms} OOM" if p.predicted.ooms else ""))
                result = (Series(f"reserved if {setting}", "if", level), note)
        self.app.call_from_thread(self._replayed, device, setting, result)

    def _replayed(self, device: str, setting: str,
                  result: tuple[Series | None, str]) -> None:
        self._what_ifs[(device, setting)] = result
        cursor = self.app.cursor
        if self.is_attached and cursor is not None and cursor.device == device:
            self._series_key = None
            self._cursor_changed(cursor)

    def on_trend_plot_cursor_request(self, message: TrendPlot.CursorRequest) -> None:
        app = self.app
        cursor = app.cursor
        if message.zoom is not None:
            app.zoom_view(message.zoom, message.around)
        elif message.window is not None:
            app.move_cursor(window=message.window)
        elif message.t is not None:
            device = cursor.device
            timeline = app.timeline(device)
            event = timeline.event_at(message.t)
            block = app.live_blocks(device).largest(timeline.time_of(event), event) \
                if not app.trace.blocks.is_empty() else None
            self.clicked = None
            moved = app.move_cursor(t=message.t, view=cursor.view, block_id=block)
            if block is not None and moved is not None:
                self.clicked = (moved.t, block)
                self._show_clicked_block(moved)


def clicked_block_text(trace, device: str, block_id: int) -> Text:
    """The clicked block in two to five lines: size, owner, lifetime, then its stack
    (innermost first, as memory_viz prints it)."""
    blocks = trace.device_blocks(device).filter(pl.col("block_id") == block_id)
    if blocks.is_empty():
        return Text("")
    row = blocks.row(0, named=True)
    origin = device_start(trace, device)
    unit = trace.meta.time_unit
    born = "before the capture" if row["ghost"] else format_time(row["t_alloc"], origin, unit)
    gone = format_time(row["t_free"], origin, unit) if row["t_free"] is not None else "never"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("Largest block here", style="bold")
    text.append(f": block {block_id}, {format_bytes(int(row['size'] or 0))}")
    if row["owner"]:
        text.append(f", {printable(row['owner'])}")
    text.append(f", allocated {born}, freed {gone}\n")
    stack = format_stack(trace, row["stack_id"], limit=4)
    text.append("\n".join("  " + printable(line) for line in stack), style="dim")
    return text


def role_series(levels, timeline) -> list[Series]:
    """The roles as stacked layers (bottom first, in the order of ROLES, each its own
    colour) and their sum, the allocated level, read per column (memory by role)."""
    layers = [Series(ROLE_LABELS[role], ROLE_SHORT[role], level, role="stack",
                     colour=ROLES.index(role))
              for role, level in levels.series(timeline).items()]
    return layers + [Series("allocated", "alloc", timeline.allocated, role="total")]


def role_rows(trace, device: str, live, t: int, event: int) -> pl.DataFrame:
    """The live table by role: each role holding bytes, its bytes (summing to the level
    at ``event``) and its blocks alive."""
    import numpy as np

    from memtui.analysis.roles import block_roles

    roles = levels_by_role(trace, device).at_event(event)
    codes = block_roles(trace, device).codes
    mask = live.mask(t, event)
    counts = np.bincount(codes[mask], minlength=len(ROLES)) if codes.size == mask.size \
        else np.zeros(len(ROLES), dtype=np.int64)
    rows = [(ROLE_LABELS[r] + (" (no rule explains it)" if r == "other" else ""),
             roles[r], int(counts[i])) for i, r in enumerate(ROLES) if roles[r]]
    rows.sort(key=lambda row: -row[1])
    return pl.DataFrame(rows, schema={"where": pl.String, "bytes": pl.Int64,
                                      "blocks": pl.Int64}, orient="row")


def live_rows(top: pl.DataFrame, total: int, count: int, rest) -> pl.DataFrame:
    """The live table's rows summing to the level: the largest groups (``top``), the other
    groups as one row, then the named bytes no block explains (``rest``; no blocks)."""
    shown, blocks = int(top["bytes"].sum() or 0), int(top["blocks"].sum() or 0)
    extra = []
    if total - shown or count - blocks:
        extra.append({"where": "(other groups)", "bytes": total - shown,
                      "blocks": -(count - blocks)})  # negative: a summed row, in italics
    extra += [{"where": r.label, "bytes": r.bytes, "blocks": 0} for r in rest]
    if not extra:
        return top
    return pl.concat([top, pl.DataFrame(extra, schema=top.schema)])


MARKER_NAMES = {"step": "step", "mstx": "mark", "annotation": "annotation", "oom": "OOM",
                "annotate": "mark"}


def marker_kinds(markers) -> list[tuple[str, str]]:
    """(axis character, name) of each kind of point mark in ``markers``, and ``├─┤`` where
    there are ranges: the Trend legend names every mark on its time axis."""
    if markers.is_empty():
        return []
    out = []
    points = markers.filter(pl.col("t_end").is_null() | (pl.col("t_end") == pl.col("t")))
    for kind in sorted(points["kind"].drop_nulls().unique().to_list()):
        out.append((MARKER_CHARS.get(kind, "╷"), MARKER_NAMES.get(kind, kind)))
    if points.height < markers.height:
        out.append(("├─┤", "range"))
    return out


def reserved_peak(timeline) -> tuple[int, int] | None:
    """(time, bytes) of the highest reserved level, where the capture has one."""
    level = timeline.reserved
    if level is None or level.values.size == 0:
        return None
    value, at = level.peak()
    return (int(level.t[at]), int(value)) if at >= 0 and value > 0 else None


def _marker_at(markers, t: int) -> str | None:
    """The name of the innermost marked range holding ``t`` (a step, an annotation)."""
    if markers.is_empty():
        return None
    holding = markers.filter(
        (pl.col("t") <= t) & pl.col("t_end").is_not_null() & (pl.col("t_end") >= t))
    if holding.is_empty():
        return None
    return holding.sort("t", descending=True)["name"][0]


def _value_at(series: Series, t: int) -> int:
    return value_at(series.level.t, series.level.values, t)


def _short_time(ns: int) -> str:
    """A compact relative time for axis labels: ``+1.25s``, ``+350ms``."""
    if ns == 0:
        return "+0"
    seconds = ns / 1e9
    if abs(seconds) >= 100:
        return f"+{seconds:.0f}s"
    if abs(seconds) >= 1:
        return f"+{seconds:.3g}s"
    if abs(seconds) >= 1e-3:
        return f"+{seconds * 1e3:.3g}ms"
    return f"+{seconds * 1e6:.3g}us"

