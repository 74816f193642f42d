"""The status bar every screen shows: the same fields, in the same words, on every screen
and at every size.

It reads ``app.cursor`` and the device's :class:`~memtui.analysis.timeline.at_time.Timeline`
(``app.timeline(device)``) and redraws whenever the cursor or the findings change.  Its
fields, in order: a long read's preview (``PREVIEW: R of N rows read``), what ``--follow``
is doing, the run shown (compare mode), the device (and its memory layer), the cursor's
time and ``event #K/N`` (always), the levels just after that event (``alloc``, ``active``
where it differs, ``resv``), where the app put the cursor (``at peak``, ``at leak``,
``at oom``: said until the cursor moves to another event), the window, the warnings
(``⚠ 2 warnings (A)``: the Capture facts list them; nothing pops up over the figures) and
the findings count.  A terminal too narrow for one line gets a second
(a third at most), broken between fields: no field is ever dropped or shortened, and
:data:`ABBREVIATIONS` (shown by ``?``) says what each short word means.  Every figure
carries its name, so nothing relies on colour.

Any screen adds it with ``from memtui.tui.widgets.status import StatusBar`` and
``yield StatusBar()``.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from memtui.analysis.tables import format_span, format_time
from memtui.analysis.timeline.levels import reserved_is_floor
from memtui.progress import counted as counted_short
from memtui.units import at_least, counted, format_bytes

SEPARATOR = " │ "
#: A bar wider than the terminal wraps onto this many lines at most (the last one is cut).
MAX_LINES = 3

#: What the status bar's short words mean (the help, ``?``, lists them).
ABBREVIATIONS: list[tuple[str, str]] = [
    ("event #K/N", "the cursor's event: K of the device's N events, counted from 0 "
                   "(the Event View's #, memtui state --event K)"),
    ("alloc", "allocated: bytes in blocks alive just after that event"),
    ("active", "active bytes, where the capture reports them apart from allocated"),
    ("resv", "reserved: bytes the allocator holds from the device (its segments)"),
    ("at peak / leak / oom", "the cursor is where memtui put it: the allocated peak, the "
                             "top leak's or OOM's evidence"),
    ("win", "the length of the selected window ([ and ] set it, x clears it)"),
    ("⚠ N warnings (A)", "what the loader or the keymap said: A lists them"),
    ("N found, H high", "findings, H of them of high severity (6: the Findings screen)"),
    ("PREVIEW: R of N rows read", "a long read's first R rows, shown while the rest is read "
                                  "(blocks still held then are not among them); the whole "
                                  "capture takes their place, then the findings come"),
]


def short_bytes(n: int | None) -> str:
    """``12.3G`` style bytes for tight places."""
    if n is None:
        return "-"
    text = format_bytes(n)
    number, unit = text.split(" ")
    return number + unit[0]


def findings_badge(findings: dict | None) -> str | None:
    """``"3 found, 1 high"``: the status bar's part for ``app.findings`` (None before they
    are found)."""
    if findings is None:
        return None
    items = [f for found in findings.values() for f in found]
    high = sum(f.severity == "high" for f in items)
    return f"{len(items)} found" + (f", {high} high" if high else "")


def preview_badge(preview: dict) -> str:
    """The status bar's part while a long read's preview is shown."""
    return (f"PREVIEW: {counted_short(preview['rows'])} of {counted_short(preview['of'])} "
            "rows read")


def warnings_badge(count: int) -> str | None:
    """``"⚠ 2 warnings (A)"``, None without any."""
    return f"⚠ {counted(count, 'warning')} (A)" if count else None


def wrap_parts(parts: list[str], width: int, max_lines: int = MAX_LINES) -> list[str]:
    """``parts`` joined by the separator into lines of at most ``width - 1`` cells (one
    leading space each), a new line between parts where one does not fit; past
    ``max_lines`` the rest joins the last line (cut when painted)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines) < max_lines and len(lines[-1]) + len(SEPARATOR) + len(part) \
                + 1 > width:
            lines.append(part)
        elif lines:
            lines[-1] += SEPARATOR + part
        else:
            lines.append(part)
    return [" " + line for line in lines] or [" "]


class StatusBar(Widget):
    """A line at the bottom of each screen, two or three where it is narrow (see the
    module docstring)."""

    DEFAULT_CSS = """
    StatusBar {
        height: auto;
        width: 1fr;
        background: $panel;
        color: $foreground;
    }
    """

    def on_mount(self) -> None:
        self._lines_painted = 1
        self.watch(self.app, "cursor", self._changed, init=False)
        if hasattr(self.app, "findings"):
            self.watch(self.app, "findings", self._changed, init=False)

    def _changed(self, _value=None) -> None:
        """Repaint; lay the screen out again where the bar gains or loses a line."""
        lines = len(self.lines(self.size.width)) if self.size.width else 1
        self.refresh(layout=lines != getattr(self, "_lines_painted", 1))

    def parts(self) -> list[str]:
        """The text of each field, in order."""
        app = self.app
        cursor = getattr(app, "cursor", None)
        if cursor is None:
            return ["loading"]
        timeline = app.timeline(cursor.device)
        unit = app.trace.meta.time_unit
        event = timeline.event_of(cursor)
        number = f"event #{event}/{timeline.positions}"  # the Event View's "#"
        when = number if unit == "event" else \
            f"{format_time(cursor.t, timeline.start, unit)}  {number}"
        levels = timeline.levels_at_event(event)
        layer = app.layer_label(cursor.device) if hasattr(app, "layer_label") else None
        parts = [f"{cursor.device} {layer}" if layer else cursor.device, when,
                 f"alloc {format_bytes(levels.allocated)}"]
        if timeline.active_differs:
            parts.append(f"active {format_bytes(levels.active)}")
        if levels.reserved is not None:  # ">= X" where the file contradicts itself
            floor = reserved_is_floor(app.trace, cursor.device)
            parts.append(f"resv {at_least(levels.reserved, floor)}")
        prefix = getattr(app, "status_prefix", None)  # compare mode: the shown run
        if prefix is not None:
            parts.insert(0, prefix())
        badge = app.follow_badge() if hasattr(app, "follow_badge") else None
        if badge is not None:  # --follow: LIVE, paused, or what stopped the reading
            parts.insert(0, badge[0])
        preview = getattr(app, "preview", None)
        if preview is not None:  # a long read's first rows, until the whole is in
            parts.insert(0, preview_badge(preview))
        note = getattr(app, "cursor_note", None)  # where the app opened it: the answer
        said = note.part(cursor) if note is not None else None
        if said is not None:
            parts.append(said)
        if cursor.window is not None:
            parts.append(f"win {format_span(cursor.window[1] - cursor.window[0], unit)}")
        warned = warnings_badge(len(getattr(app, "warnings_said", lambda: [])()))
        if warned:
            parts.append(warned)
        found = findings_badge(getattr(app, "findings", None))
        if found:
            parts.append(found)
        return parts

    def lines(self, width: int) -> list[str]:
        return wrap_parts(self.parts(), max(width, 1))

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        lines = self.lines(self.size.width)
        self._lines_painted = len(lines)
        return Text("\n".join(lines), no_wrap=True, overflow="ellipsis")
