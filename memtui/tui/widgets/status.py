"""The status bar every screen shows: device, cursor time, levels at the cursor, window.

It reads ``app.cursor`` and the device's :class:`~memtui.analysis.timeline.at_time.Timeline`
(``app.timeline(device)``) and redraws whenever the cursor changes.  Parts are dropped
from the right, least useful first, when the terminal is narrow; every figure carries its
name, so nothing relies on colour.  While the cursor is where the app opened it, a part
says so ("at peak", "at leak": :mod:`memtui.tui.answer`); where it fits, the findings
count ends the line.

Any screen adds it with ``from memtui.tui.widgets.status import StatusBar`` and
``yield StatusBar()``.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from memtui.analysis.tables import format_span, format_time
from memtui.analysis.timeline.levels import reserved_is_floor
from memtui.units import at_least, format_bytes


def short_bytes(n: int | None) -> str:
    """``12.3G`` style bytes for tight places."""
    if n is None:
        return "-"
    text = format_bytes(n)
    number, unit = text.split(" ")
    return number + unit[0]


def findings_badge(findings: dict | None) -> tuple[str, str] | None:
    """``("3 findings (1 high)", "3 found")``: the status bar's part for ``app.findings``."""
    if not findings:
        return None
    items = [f for found in findings.values() for f in found]
    if not items:
        return None
    high = sum(f.severity == "high" for f in items)
    noun = "finding" if len(items) == 1 else "findings"
    full = f"{len(items)} {noun}" + (f" ({high} high)" if high else "")
    return full, f"{len(items)} found"


class StatusBar(Widget):
    """One line at the bottom of each screen (see the module docstring)."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        width: 1fr;
        background: $panel;
        color: $foreground;
    }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "cursor", self._cursor_changed, init=False)
        if hasattr(self.app, "findings"):
            self.watch(self.app, "findings", self._cursor_changed, init=False)

    def _cursor_changed(self, _cursor) -> None:
        self.refresh()

    def parts(self) -> list[tuple[str, str]]:
        """``(full, short)`` texts of each part, most important first."""
        app = self.app
        cursor = getattr(app, "cursor", None)
        if cursor is None:
            return [("loading", "loading")]
        timeline = app.timeline(cursor.device)
        unit = app.trace.meta.time_unit
        start = timeline.start
        event = timeline.event_of(cursor)
        number = f"#{event}/{timeline.positions}"  # the Event View's "#", memtui state's K
        if unit == "event":
            when = f"event {number}"
            when_short = f"#{event}"
        else:
            when = f"{format_time(cursor.t, start, unit)}  event {number}"
            when_short = format_time(cursor.t, start, unit)
        levels = timeline.levels_at_event(event)
        alloc = f"alloc {format_bytes(levels.allocated)}"
        alloc_short = f"A {short_bytes(levels.allocated)}"
        if timeline.active_differs:
            alloc += f"  active {format_bytes(levels.active)}"
            alloc_short += f" a {short_bytes(levels.active)}"
        floor = reserved_is_floor(app.trace, cursor.device)  # the file contradicts itself
        at = ">=" if floor else ""
        resv = f"resv {at_least(levels.reserved, floor)}" if levels.reserved is not None else ""
        resv_short = f"R {at}{short_bytes(levels.reserved)}" if levels.reserved is not None \
            else ""
        layer = app.layer_label(cursor.device) if hasattr(app, "layer_label") else None
        where = f"{cursor.device} {layer}" if layer else cursor.device  # msMemScope layer
        parts = [(where, where), (when, when_short), (alloc, alloc_short)]
        prefix = getattr(app, "status_prefix", None)  # compare mode: the shown run
        if prefix is not None:
            parts.insert(0, (prefix(), prefix()))
        badge = app.follow_badge() if hasattr(app, "follow_badge") else None
        if badge is not None:  # --follow: LIVE, paused, or what stopped the reading
            parts.insert(0, badge)
        if resv:
            parts.append((resv, resv_short))
        note = getattr(app, "cursor_note", None)  # where the app opened it: the answer
        said = note.part(cursor) if note is not None else None
        if said is not None:
            parts.append(said)
        if cursor.window is not None:
            t0, t1 = cursor.window
            span = format_span(t1 - t0, unit)
            full = (f"window {format_time(t0, start, unit)} .. {format_time(t1, start, unit)}"
                    f" ({span})")
            parts.append((full, f"win {span}"))
        return parts

    def render(self) -> Text:
        parts = self.parts()
        width = self.size.width
        sep = " │ "
        for pick in ("full", "short", "drop"):
            texts = [full if pick == "full" else short for full, short in parts]
            line = sep.join(texts)
            if len(line) + 1 <= width or pick == "drop":
                break
        while pick == "drop" and len(texts) > 1 and len(sep.join(texts)) + 1 > width:
            texts.pop()
        line = " " + sep.join(texts)
        badge = findings_badge(getattr(self.app, "findings", None))
        for text in badge or ():  # where it fits: full, else short
            if len(line) + len(sep) + len(text) <= width:
                line += sep + text
                break
        return Text(line, no_wrap=True, overflow="ellipsis")

