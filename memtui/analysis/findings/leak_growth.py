"""Leaks without a step clock, and the rate of any leak: never-freed bytes that grow.

A leak is growth of bytes that are never freed, from allocations spread over the trace;
a step clock (:mod:`memtui.analysis.timeline.steps`) says how much a step adds, but is not
needed to see it.  :func:`steady_groups` finds, among the groups of
:mod:`memtui.analysis.findings.leak` (pool, owner, naming frame), those whose blocks that
are allocated in the trace and alive at its end:

* come in at least :data:`MIN_OCCURRENCES` *occurrences* (the allocations of one burst
  count once: a group pausing at least :data:`BURST_PAUSE` of its long pauses between
  them, as a step clock's stack beats);
* through the whole trace: in each of its :data:`PARTS` equal parts (by the event axis),
  spanning at least :data:`MIN_SPAN` of it, growing steadily (their running total
  against the event axis a line: r² at least :data:`MIN_LINEAR`), still in its second
  half (at least :data:`MIN_LATE_SHARE` of their bytes).  A cache that fills and stops,
  a warm-up, and what one step keeps for good (the gradients a backward pass allocates
  layer by layer, the optimizer's state allocated parameter by parameter in its first
  step) grow in a phase of the trace, not through all of it;
* in a trace that frees what it allocates around them: the bytes never freed, of every
  group, are at most :data:`MAX_KEPT_SHARE` of those allocated over the group's span.
  One long pass that keeps what it allocates (a forward pass recorded before its
  backward) keeps its activations in every layer; a loop frees them every step.

:func:`rate_figures` gives every leak its rate: occurrences (count, typical bytes, how
regular their spacing is, first and last time) and bytes per second (a steady line's
slope through the running total over time; none where the capture has no clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

MIN_OCCURRENCES = 5
MIN_SPAN = 0.6
PARTS = 4
MIN_LINEAR = 0.9
MIN_LATE_SHARE = 0.25
MAX_KEPT_SHARE = 0.5
#: An allocation starts an occurrence when the pause since the group's previous one is at
#: least this share of the group's long pauses (the median of those above its mean).
BURST_PAUSE = 0.5
#: Occurrences whose bytes equal the commonest figure make it "the" figure when they are
#: at least this share of all.
SAME_SHARE = 0.5


@dataclass(frozen=True)
class SteadyGroup:
    """A group whose never-freed bytes grow steadily (module docstring)."""

    group: int
    rows: np.ndarray  # the group's never-freed blocks (rows of the leak blocks), by position
    occurrence_rows: np.ndarray  # first block row of each occurrence
    occurrence_bytes: np.ndarray  # bytes each occurrence kept (the rate's sizes)
    linear: float  # r² of the running total against position


def occurrences(position: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Occurrence number (0, 1, ...) of each allocation within its group: a new one where
    the group paused at least :data:`BURST_PAUSE` of its long pauses (module docstring).
    Rows are taken in (group, position) order; the result is in the rows' own order."""
    frame = pl.DataFrame({"group": group, "pos": position,
                          "row": np.arange(position.size)}).sort("group", "pos", "row")
    gap = pl.col("gap")
    long_pause = gap.filter(gap >= gap.mean()).median()
    numbered = frame.with_columns(gap=pl.col("pos").diff().over("group")).with_columns(
        beat=gap.is_null() | (gap >= BURST_PAUSE * long_pause.over("group"))
        | (long_pause.over("group") == 0)).with_columns(
        occurrence=pl.col("beat").cast(pl.Int64).cum_sum().over("group") - 1)
    out = np.empty(position.size, dtype=np.int64)
    out[numbered["row"].to_numpy()] = numbered["occurrence"].to_numpy()
    return out


def steady_groups(group: np.ndarray, start: np.ndarray, end_open: np.ndarray,
                  ghost: np.ndarray, size: np.ndarray, rate_size: np.ndarray,
                  trace_span: tuple[int, int]) -> list[SteadyGroup]:
    """The groups whose never-freed bytes grow steadily through the trace (module
    docstring).  Per block: its ``group``, ``start`` (position of its allocation on the
    event axis), ``end_open`` (never freed), ``ghost``, its ``size`` and the size its rate
    is counted in (``rate_size``: what the code asked, where known); ``trace_span``: the
    first and last position of the device's events."""
    kept = np.flatnonzero(end_open & ~ghost)
    if kept.size < MIN_OCCURRENCES:
        return []
    first, last = trace_span
    span = max(last - first, 1)
    occurrence = occurrences(start[kept], group[kept])
    table = pl.DataFrame({"row": kept, "group": group[kept], "occurrence": occurrence,
                          "pos": start[kept], "bytes": rate_size[kept]})
    occ = table.group_by("group", "occurrence").agg(
        pos=pl.col("pos").min(), row=pl.col("row").sort_by("pos").first(),
        bytes=pl.col("bytes").sum()).sort("group", "pos")
    mid = first + span / 2
    part = ((pl.col("pos") - first) * PARTS // (span + 1)).clip(0, PARTS - 1)
    stats = occ.with_columns(total=pl.col("bytes").cum_sum().over("group")).group_by(
        "group").agg(
        n=pl.len(), first=pl.col("pos").min(), last=pl.col("pos").max(),
        parts=part.n_unique(),
        all_bytes=pl.col("bytes").sum(),
        late=pl.col("bytes").filter(pl.col("pos") >= mid).sum(),
        linear=pl.corr("pos", "total") ** 2,
    ).filter(
        (pl.col("n") >= MIN_OCCURRENCES) & (pl.col("parts") == PARTS)
        & ((pl.col("last") - pl.col("first")) >= MIN_SPAN * span)
        & (pl.col("late") >= MIN_LATE_SHARE * pl.col("all_bytes"))
        & (pl.col("linear").fill_nan(0) >= MIN_LINEAR)
    )
    if stats.is_empty():
        return []
    loop = _kept_share_over(stats, start, end_open, ghost, size)
    found = []
    for row in stats.filter(pl.Series(loop <= MAX_KEPT_SHARE)).iter_rows(named=True):
        mine = occ.filter(pl.col("group") == row["group"])
        rows = table.filter(pl.col("group") == row["group"]).sort("pos")["row"].to_numpy()
        found.append(SteadyGroup(
            group=int(row["group"]), rows=rows, occurrence_rows=mine["row"].to_numpy(),
            occurrence_bytes=mine["bytes"].to_numpy(), linear=float(row["linear"])))
    return found


def _kept_share_over(stats: pl.DataFrame, start: np.ndarray, end_open: np.ndarray,
                     ghost: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Per row of ``stats``: the share of the bytes allocated between its first and last
    occurrence that are never freed (of every group)."""
    traced = ~ghost
    order = np.argsort(start[traced], kind="stable")
    position = start[traced][order]
    every = np.concatenate(([0.0], np.cumsum(size[traced][order], dtype=np.float64)))
    kept = np.concatenate(([0.0], np.cumsum(
        np.where(end_open[traced][order], size[traced][order], 0), dtype=np.float64)))
    lo = np.searchsorted(position, stats["first"].to_numpy(), side="left")
    hi = np.searchsorted(position, stats["last"].to_numpy(), side="right")
    allocated = every[hi] - every[lo]
    return np.where(allocated > 0, (kept[hi] - kept[lo]) / np.maximum(allocated, 1), 1.0)


def typical_bytes(values: np.ndarray) -> float:
    """What one occurrence keeps: the commonest figure where at least :data:`SAME_SHARE`
    of them are that figure (exact to the block's size), else their mean."""
    if values.size == 0:
        return 0.0
    distinct, counts = np.unique(values, return_counts=True)
    if counts.max() >= SAME_SHARE * values.size:
        return float(distinct[np.argmax(counts)])
    return float(values.mean())


def rate_figures(times: np.ndarray, kept: np.ndarray, clock: bool) -> dict[str, Any]:
    """A leak's occurrences as figures: ``occurrences``, ``bytes_per_occurrence``
    (:func:`typical_bytes`), ``regularity`` (the coefficient of variation of the times
    between them: 0 for a metronome), ``first_t`` and ``last_t``, and
    ``bytes_per_second`` (the slope of their running total over time; None without a
    clock or with one occurrence).  ``times`` rise; ``kept`` are each one's bytes."""
    out: dict[str, Any] = {"occurrences": int(times.size),
                           "bytes_per_occurrence": int(round(typical_bytes(kept))),
                           "regularity": None, "first_t": None, "last_t": None,
                           "bytes_per_second": None}
    if times.size == 0:
        return out
    out["first_t"], out["last_t"] = int(times[0]), int(times[-1])
    if times.size < 2:
        return out
    gaps = np.diff(times).astype(np.float64)
    if gaps.mean() > 0:
        out["regularity"] = round(float(gaps.std() / gaps.mean()), 3)
    seconds = (times - times[0]).astype(np.float64) / 1e9
    if clock and seconds[-1] > 0:
        total = np.cumsum(kept, dtype=np.float64)
        slope = np.polyfit(seconds, total, 1)[0]
        out["bytes_per_second"] = int(round(slope))
    return out


__all__ = ["SteadyGroup", "occurrences", "rate_figures", "steady_groups", "typical_bytes"]
