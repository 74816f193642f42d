"""Many ranks side by side: one small row per rank and device, and the outliers among them.

:func:`rank_rows` turns one loaded capture into a :class:`RankRow` per device: peak
allocated, peak reserved, allocated at the end, when the peak happened, a min-max
downsampled curve for a sparkline, and (where the findings analyses exist) leak bytes per
step and fragmentation.  A row is small (a few hundred bytes), so a process or a cluster
worker can load a whole rank, compute its rows and send back only them.

:func:`flag_outliers` marks the rows whose figure lies more than three median absolute
deviations (MAD) from the median of the rows of its kind (host memory apart from
accelerator memory: :func:`device_group`), above or below, with a sentence saying which
figure and by how much.  The MAD is taken as at least 1% of the median, so ranks within
a percent of each other are never outliers (identical ranks have a MAD of zero).  Both
sides count: the rank that peaks or keeps more runs out of memory first, and a rank at
half the others' peak did other work than they did (an uneven split, a rank that stopped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import numpy as np

from memtui.analysis.findings import Finding, find_all
from memtui.analysis.findings.leak import leak_rate
from memtui.analysis.summary import device_summary
from memtui.analysis.timeline.downsample import minmax_bins
from memtui.analysis.timeline.levels import allocated_level, reserved_level
from memtui.model import MemoryTrace
from memtui.units import format_bytes

#: Points of the downsampled curve each row carries (the sparkline's resolution).
CURVE_POINTS = 48
#: Outlier rule: beyond median +- MAD_FACTOR * max(MAD, MIN_SPREAD * median).
MAD_FACTOR = 3.0
MIN_SPREAD = 0.01
#: Rows needed before anything can be called an outlier.
MIN_ROWS = 3

#: (RankRow attribute, words in the ``why`` sentence), the figures tested for outliers.
OUTLIER_FIGURES: tuple[tuple[str, str], ...] = (
    ("peak_allocated", "peak allocated"),
    ("peak_reserved", "peak reserved"),
    ("allocated_at_end", "allocated at end"),
    ("leak_bytes_per_step", "leak per step"),
)


@dataclass
class RankRow:
    """One rank's device: the figures of the Ranks screen and of ``summary``'s ``ranks``.

    ``peak_time`` is relative to the device's first time, in the trace's ``time_unit``
    (ns, or event numbers).  ``curve`` holds the highest allocated level in each of
    :data:`CURVE_POINTS` equal slices of the device's time range.  ``device_entry`` is the
    device's entry of the summary object (``summary`` JSON ``devices``).
    """

    rank: int | None
    device: str
    path: str
    peak_allocated: int
    peak_reserved: int | None
    allocated_at_end: int
    peak_time: int | None
    time_unit: str = "ns"
    curve: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    leak_bytes_per_step: int | None = None
    fragmentation: float | None = None
    outlier: bool = False
    why: str = ""
    device_entry: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """What tells rows apart: the capture's path and the device in it."""
        return self.path, self.device

    def as_json(self) -> dict[str, Any]:
        """The row's entry of ``summary --json``'s ``ranks`` list."""
        return {
            "rank": self.rank,
            "device": self.device,
            "path": self.path,
            "peak_allocated_bytes": self.peak_allocated,
            "peak_reserved_bytes": self.peak_reserved,
            "allocated_at_end_bytes": self.allocated_at_end,
            "outlier": self.outlier,
            "why": self.why,
        }


def rank_rows(trace: MemoryTrace, path: str, rank: int | None = None,
              points: int = CURVE_POINTS,
              findings: dict[str, list[Finding]] | None = None) -> list[RankRow]:
    """One row per device of ``trace`` (devices with no level at all are left out).

    ``rank`` is what the capture's names said; where it is None, the device's own rank
    (profiler DBs, msMemScope) is taken.  ``findings`` (per device, as
    :func:`memtui.analysis.findings.find_all` gives them; computed here when None) fill
    the leak per step and the fragmentation.
    """
    findings = find_all(trace, what_if=False) if findings is None else findings
    rows = []
    for device in trace.meta.device_names:
        entry = device_summary(trace, device)
        allocated = allocated_level(trace, device)
        if allocated.values.size == 0:
            continue
        row = _row(trace, device, path, rank, entry, allocated, points)
        row.leak_bytes_per_step, row.fragmentation = finding_figures(
            findings.get(device, []))
        rows.append(row)
    return rows


def finding_figures(found: Sequence[Finding]) -> tuple[int, float]:
    """(leak bytes per step, fragmentation) of one device's findings: the leaks' growth
    per step summed (per occurrence where the device has no steps; 0: no leak found), and
    the fragmentation finding's fragmented share of reserved (free inside partly used
    segments, at the moment it names: the one measure every output calls fragmentation;
    0: no such finding)."""
    leak = sum(leak_rate(f) for f in found if f.kind == "leak")
    fragmentation = 0.0
    for f in found:
        if f.kind == "fragmentation":
            fragmentation = float(f.detail.get("fragmented_share") or 0.0)
    return leak, fragmentation


def _row(trace: MemoryTrace, device: str, path: str, rank: int | None, entry: dict,
         allocated, points: int) -> RankRow:
    info = trace.meta.device(device)
    t = allocated.t
    peak, index = allocated.peak()
    reserved = reserved_level(trace, device)
    peak_reserved = int(reserved.values.max()) if reserved is not None and \
        reserved.values.size else None
    start, end = int(t[0]), int(t[-1])
    curve = minmax_bins(t, allocated.values, start, max(end, start + 1), points).hi
    return RankRow(
        rank=rank if rank is not None else info.rank,
        device=device,
        path=path,
        peak_allocated=peak,
        peak_reserved=peak_reserved,
        allocated_at_end=int(entry["allocated_at_end_bytes"] or 0),
        peak_time=int(t[index]) - _origin(trace, device, start) if index >= 0 else None,
        time_unit=trace.meta.time_unit,
        curve=curve.astype(np.int64),
        device_entry=entry,
    )


def median_and_spread(values: np.ndarray) -> tuple[float, float]:
    """The median and the spread the outlier rule uses: max(MAD, MIN_SPREAD * |median|)."""
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median)))
    return median, max(mad, MIN_SPREAD * abs(median))


def device_group(device: str) -> str:
    """``"host"`` for host memory (``host``, ``cpu``, pinned), else ``"device"``: ranks are
    only compared with devices of the same group."""
    name = device.lower().rsplit("/", 1)[-1]
    return "host" if name.startswith(("host", "cpu")) else "device"


def flag_outliers(rows: Sequence[RankRow]) -> list[RankRow]:
    """``rows`` (copies) with ``outlier`` and ``why`` set by the rule of the module
    docstring, for every figure of :data:`OUTLIER_FIGURES` that at least
    :data:`MIN_ROWS` rows of one :func:`device_group` have."""
    reasons: list[list[str]] = [[] for _ in rows]
    groups = [device_group(row.device) for row in rows]
    for (attribute, words), group in product(OUTLIER_FIGURES, sorted(set(groups))):
        known = [(i, getattr(row, attribute)) for i, row in enumerate(rows)
                 if groups[i] == group and getattr(row, attribute) is not None]
        if len(known) < MIN_ROWS:
            continue
        values = np.array([value for _, value in known], dtype=np.float64)
        median, spread = median_and_spread(values)
        high, low = median + MAD_FACTOR * spread, median - MAD_FACTOR * spread
        for (i, value), x in zip(known, values, strict=True):
            if x > high:
                reasons[i].append(
                    f"{words} {format_bytes(int(value))} is {format_bytes(int(x - median))} "
                    f"above the median {format_bytes(int(median))} (limit "
                    f"{format_bytes(int(high))}: median + 3 MAD)")
            elif x < low:
                reasons[i].append(
                    f"{words} {format_bytes(int(value))} is {format_bytes(int(median - x))} "
                    f"below the median {format_bytes(int(median))} (limit "
                    f"{format_bytes(int(low))}: median - 3 MAD)")
    return [replace(row, outlier=bool(why), why="; ".join(why))
            for row, why in zip(rows, reasons, strict=True)]


def sort_rows(rows: Sequence[RankRow]) -> list[RankRow]:
    """Rows in rank order (unknown ranks last), then by path and device."""
    return sorted(rows, key=lambda r: (r.rank is None, r.rank or 0, r.path, r.device))


def sparkline(curve: np.ndarray, top: int, width: int) -> str:
    """``curve`` as ``width`` block characters scaled to ``top`` (the same for every row,
    so heights compare across ranks); each character is the highest point under it."""
    ticks = "▁▂▃▄▅▆▇█"
    if curve.size == 0 or width <= 0:
        return ""
    edges = np.linspace(0, curve.size, width + 1).astype(np.int64)
    edges[1:] = np.maximum(edges[1:], edges[:-1] + 1)
    edges = np.minimum(edges, curve.size)
    highs = np.array([curve[a:b].max() if b > a else curve[-1]
                      for a, b in zip(edges[:-1], edges[1:], strict=True)])
    scale = max(int(top), 1)
    levels = np.clip((highs * (len(ticks) - 1) + scale - 1) // scale, 0, len(ticks) - 1)
    return "".join(ticks[int(level)] for level in levels)


def _origin(trace: MemoryTrace, device: str, level_start: int) -> int:
    """Where the device's time starts, as ``summary``, ``state`` and the UI count it: its
    first event or level sample, whichever comes first (a profiler's levels may start
    after its first operator event)."""
    first_event = trace.device_events(device)["t"].min()
    return level_start if first_event is None else min(level_start, int(first_event))


__all__ = ["CURVE_POINTS", "OUTLIER_FIGURES", "RankRow", "device_group", "finding_figures",
           "flag_outliers", "median_and_spread",
           "rank_rows", "sort_rows", "sparkline"]
