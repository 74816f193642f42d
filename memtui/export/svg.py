"""Inline SVG charts of memory levels for the HTML report: no script, no font, no file.

:func:`level_chart` draws step-function levels (allocated filled, reserved as a line, or
two runs' allocated lines) min-max downsampled to the chart's width
(:mod:`memtui.analysis.timeline.downsample`: no peak narrower than a pixel is lost), with marks:
the peak of each series (``<circle class="peak-marker">`` and its label), OOMs (red
vertical lines, ``class="oom-marker"``) and step starts (ticks under the axis,
``class="step-marker"``).  Every text comes through :func:`html_text`
(:func:`memtui.errors.safe_line`, then :func:`html.escape`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from memtui.analysis.timeline.downsample import bin_start, minmax_bins
from memtui.analysis.timeline.levels import Level
from memtui.errors import safe_line
from memtui.units import format_bytes

WIDTH, HEIGHT = 960, 280
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 24, 40
MAX_STEP_MARKS = 400


#: Characters of one string from a file shown on the page (names of a thousand
#: characters are cut there, as the snapshot loader cuts them).
MAX_TEXT = 1000
#: OOM lines drawn on one chart at most (evenly thinned beyond).
MAX_OOM_MARKS = 50


def html_text(value: object) -> str:
    """``value`` as the text of an HTML element or attribute: cut to :data:`MAX_TEXT`
    characters (saying how many more there were), no raw control or bidi character
    (:func:`memtui.errors.safe_line`: escaped as ``\\x1b``, never a line a CI log reader
    takes for a command), then :func:`html.escape`."""
    text = "" if value is None else str(value)
    if len(text) > MAX_TEXT:
        text = f"{text[:MAX_TEXT]}... ({len(text) - MAX_TEXT:,} more characters)"
    return html.escape(safe_line(text))


@dataclass(frozen=True)
class Series:
    """One level to draw: its name (legend), CSS class, and whether it is filled."""

    name: str
    level: Level
    css: str
    filled: bool = False
    peak_id: str | None = None  # the peak marker's element id (None: not marked)


@dataclass
class Marks:
    """Times to mark: OOMs (with a label each) and step starts."""

    ooms: list[tuple[int, str]] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


def _x(t: np.ndarray | int, t0: int, t1: int) -> np.ndarray:
    span = max(t1 - t0, 1)
    return LEFT + (np.asarray(t, dtype=np.float64) - t0) * (WIDTH - LEFT - RIGHT) / span


def _y(v: np.ndarray | int, top: int) -> np.ndarray:
    scale = (HEIGHT - TOP - BOTTOM) / max(top, 1)
    return HEIGHT - BOTTOM - np.asarray(v, dtype=np.float64) * scale


def _bins_path(series: Series, t0: int, t1: int, top: int) -> str:
    """The series' outline: per pixel column its low and high value, left to right."""
    n = WIDTH - LEFT - RIGHT
    level = series.level
    if level.t.size == 0:
        return ""
    bins = minmax_bins(np.asarray(level.t, dtype=np.int64),
                       np.asarray(level.values, dtype=np.int64), t0, t1, n)
    cols = np.flatnonzero(bins.known)
    # a series ends at its last point (a shorter run is not drawn flat to the longer's end)
    cols = cols[bin_start(cols, t0, t1, n) <= int(level.t[-1])]
    if cols.size == 0:
        return ""
    xs = LEFT + cols.astype(np.float64) + 0.5
    hi, lo = _y(bins.hi[cols], top), _y(bins.lo[cols], top)
    points = []
    for x, a, b in zip(xs, lo, hi, strict=True):
        points.append(f"{x:.1f},{a:.1f}")
        if abs(a - b) >= 0.5:
            points.append(f"{x:.1f},{b:.1f}")
    line = f'<polyline class="{series.css}" points="{" ".join(points)}"/>'
    if not series.filled:
        return line
    base = HEIGHT - BOTTOM
    area = (f"{xs[0]:.1f},{base} " + " ".join(f"{x:.1f},{b:.1f}" for x, b in
                                              zip(xs, hi, strict=True))
            + f" {xs[-1]:.1f},{base}")
    return f'<polygon class="{series.css} area" points="{area}"/>' + line


def _peak(series: Series, t0: int, t1: int, top: int) -> str:
    value, index = series.level.peak()
    if series.peak_id is None or index < 0 or value <= 0:
        return ""
    x = float(_x(int(series.level.t[index]), t0, t1))
    y = float(_y(value, top))
    label = html_text(f"{series.name} peak {format_bytes(value)}")
    anchor = "end" if x > WIDTH * 0.7 else "start"
    dx = -8 if anchor == "end" else 8
    return (f'<g class="peak-marker" id="{series.peak_id}"><title>{label}</title>'
            f'<circle class="peak-marker {series.css}" cx="{x:.1f}" cy="{y:.1f}" r="5"/>'
            f'<text x="{x + dx:.1f}" y="{max(y - 6, 12):.1f}" text-anchor="{anchor}">'
            f"{label}</text></g>")


def _marks(marks: Marks, t0: int, t1: int) -> str:
    parts = []
    base = HEIGHT - BOTTOM
    steps = marks.steps
    if len(steps) > MAX_STEP_MARKS:
        steps = steps[:: -(-len(steps) // MAX_STEP_MARKS)]
    for t in steps:
        x = float(_x(t, t0, t1))
        parts.append(f'<line class="step-marker" x1="{x:.1f}" x2="{x:.1f}" y1="{base}" '
                     f'y2="{base + 6}"/>')
    ooms = marks.ooms
    if len(ooms) > MAX_OOM_MARKS:  # evenly thinned: each one is a line and a label
        ooms = ooms[:: -(-len(ooms) // MAX_OOM_MARKS)]
    for t, label in ooms:
        x = float(_x(t, t0, t1))
        right = x > WIDTH * 0.9
        parts.append(f'<line class="oom-marker" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" '
                     f'y2="{base}"><title>{html_text(label)}</title></line>'
                     f'<text class="oom-label" x="{x - 3 if right else x + 3:.1f}" '
                     f'y="{TOP + 10}" text-anchor="{"end" if right else "start"}">OOM</text>')
    return "".join(parts)


def _axes(t0: int, t1: int, top: int, time_unit: str) -> str:
    base = HEIGHT - BOTTOM
    parts = [f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}"/>',
             f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{base}"/>']
    for share in (0.25, 0.5, 0.75, 1.0):
        y = float(_y(top * share, top))
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}"/><text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" '
                     f'text-anchor="end">{format_bytes(int(top * share))}</text>')
    parts.append(f'<text class="tick" x="{LEFT - 6}" y="{base + 4}" text-anchor="end">0</text>')
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):
        t = t0 + (t1 - t0) * share
        x = float(_x(int(t), t0, t1))
        label = (f"#{int(t - t0)}" if time_unit == "event"
                 else f"+{(t - t0) / 1e9:.3g} s")
        parts.append(f'<text class="tick" x="{x:.1f}" y="{base + 20}" '
                     f'text-anchor="middle">{label}</text>')
    return "".join(parts)


def level_chart(series: list[Series], marks: Marks | None = None, *, title: str = "",
                time_unit: str = "ns", css_id: str = "") -> str:
    """One chart of ``series`` on a shared time and bytes axis (see the module docstring)."""
    levels = [s.level for s in series if s.level.t.size]
    if not levels:
        return '<p class="empty">no memory level to draw</p>'
    t0 = int(min(int(level.t[0]) for level in levels))
    t1 = int(max(int(level.t[-1]) for level in levels))
    if t1 <= t0:
        t1 = t0 + 1
    top = max(int(np.max(level.values)) for level in levels if level.values.size) or 1
    top = int(top * 1.08)
    body = [_axes(t0, t1, top, time_unit)]
    body += [_bins_path(s, t0, t1, top) for s in series]
    body.append(_marks(marks or Marks(), t0, t1))
    body += [_peak(s, t0, t1, top) for s in series]
    legend = "".join(f'<tspan class="{s.css} legend" dx="14">&#9632; {html_text(s.name)}'
                     f"</tspan>" for s in series)
    ident = f' id="{css_id}"' if css_id else ""
    return (f'<svg{ident} class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{html_text(title)}</title>'
            f'<text class="legend" x="{LEFT}" y="14">{legend}</text>{"".join(body)}</svg>')


__all__ = ["Marks", "Series", "level_chart"]
