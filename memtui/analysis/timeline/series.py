"""The curves of the Trend screen: which levels to draw for a device and a Group By.

Captures with events (snapshots, msMemScope) draw allocated, active (where it differs from
allocated) and reserved.  Profiler data draws its sampled ``curves`` the way MindStudio
Insight's Memory tab does (../shared/formats/ascend_profiler.md section 5): Group By
*Overall* draws the rows whose component and stream are null, one curve per series;
*Stream* one curve per (stream, series); *Component* one per (component, series).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.at_time import Timeline
from memtui.analysis.timeline.levels import Level
from memtui.model import MemoryTrace

GROUP_BYS = ("overall", "stream", "component")

#: Insight's legend order for the Overall view.
SERIES_ORDER = (
    "Operators Allocated",
    "Operators Activated",
    "Operators Reserved",
    "App Reserved",
    "Workspace Allocated",
    "Workspace Reserved",
)


@dataclass(frozen=True)
class Series:
    """One drawn curve: its legend label, a short label for narrow panes, and its level.

    ``role`` is ``allocated`` for the curve drawn as a filled area (the main one) and
    ``line`` for the others; ``stack`` for a layer of a stacked area (memory by role,
    bottom first, in palette colour ``colour``) and ``total`` for the layers' sum (not
    drawn: where each column reads them).
    """

    label: str
    short: str
    level: Level
    role: str = "line"
    colour: int = 0


def has_curves(trace: MemoryTrace, device: str) -> bool:
    curves = trace.curves
    return not curves.is_empty() and bool(
        curves.filter(pl.col("device") == device).height
    )


def group_bys(trace: MemoryTrace, device: str) -> list[str]:
    """The Group By choices that have data for ``device`` (always ``overall`` first)."""
    if not has_curves(trace, device):
        return ["overall"]
    rows = trace.curves.filter(pl.col("device") == device)
    choices = ["overall"]
    if rows["stream"].null_count() < rows.height:
        choices.append("stream")
    if rows["component"].null_count() < rows.height:
        choices.append("component")
    return choices


def _short(series: str) -> str:
    words = series.replace("Operators ", "").replace("Workspace ", "WS ").replace(
        "App Reserved", "App"
    )
    return words[:10]


def _level(rows: pl.DataFrame) -> Level:
    rows = rows.sort("t")
    return Level(rows["t"].to_numpy().astype(np.int64), rows["bytes"].to_numpy().astype(np.int64))


def _series_rank(name: str) -> int:
    return SERIES_ORDER.index(name) if name in SERIES_ORDER else len(SERIES_ORDER)


def _matches(group: dict, keys: list[str]) -> pl.Expr:
    expr = pl.lit(True)
    for key in keys:
        expr = expr & (pl.col(key) == group[key])
    return expr


def _legend_order(groups: list[dict], levels: list[Level], keys: list[str],
                  hide_empty: bool) -> list[int]:
    """The order of the legend: the stream or component holding the most bytes first
    (by its series' highest peak), Insight's series order inside one; series that are
    zero throughout are left out where ``hide_empty`` (a Group By's many empty parts)."""
    peaks = [int(level.values.max()) if level.values.size else 0 for level in levels]
    keep = [i for i in range(len(groups)) if not hide_empty or peaks[i] > 0]
    if len(keys) == 1:
        return sorted(keep, key=lambda i: _series_rank(groups[i]["series"]))
    part_peak: dict = {}
    for i in keep:
        part = groups[i][keys[0]]
        part_peak[part] = max(part_peak.get(part, 0), peaks[i])
    return sorted(keep, key=lambda i: (-part_peak[groups[i][keys[0]]], str(groups[i][keys[0]]),
                                       _series_rank(groups[i]["series"])))


def _event_series(timeline: Timeline) -> list[Series]:
    series = [Series("allocated", "alloc", timeline.allocated, role="allocated")]
    if timeline.active_differs:
        series.append(Series("active", "active", timeline.active))
    if timeline.reserved is not None:
        series.append(Series("reserved", "resv", timeline.reserved))
    return series


def trend_series(
    trace: MemoryTrace, device: str, timeline: Timeline, group_by: str = "overall"
) -> list[Series]:
    """The curves to draw for ``device`` under ``group_by`` (see the module docstring).

    Overall on a capture whose curves all name a component (msMemScope's per-layer
    curves) draws the event levels, as a capture without curves does."""
    rows = trace.curves.filter(pl.col("device") == device) if has_curves(trace, device) \
        else None
    if rows is None or (group_by not in ("stream", "component") and not rows.filter(
            pl.col("component").is_null() & pl.col("stream").is_null()).height):
        return _event_series(timeline)
    if group_by == "stream":
        rows = rows.filter(pl.col("stream").is_not_null())
        keys = ["stream", "series"]
    elif group_by == "component":
        rows = rows.filter(pl.col("component").is_not_null())
        keys = ["component", "series"]
    else:
        rows = rows.filter(pl.col("component").is_null() & pl.col("stream").is_null())
        keys = ["series"]
    groups = rows.select(keys).unique(maintain_order=True).to_dicts()
    levels = [_level(rows.filter(_matches(group, keys))) for group in groups]
    order = _legend_order(groups, levels, keys, hide_empty=group_by != "overall")
    out: list[Series] = []
    for i in order:
        group, name = groups[i], groups[i]["series"]
        if group_by == "stream":
            label = f"{name.split()[-1]} of stream {group['stream']}"
            short = f"{name.split()[-1][:5]} s{group['stream']}"
        elif group_by == "component":
            label = f"{group['component']} {name}"
            short = f"{group['component']} {_short(name)}"[:12]
        else:
            label, short = name, _short(name)
        role = "allocated" if not out and name.endswith("Allocated") else "line"
        out.append(Series(label, short, levels[i], role=role))
    return out


__all__ = ["GROUP_BYS", "SERIES_ORDER", "Series", "group_bys", "has_curves", "trend_series"]
