"""Where the training steps of a device begin: from markers, else from the trace's rhythm.

Steps come, in this order, from

* markers that name steps: snapshot ``external_annotations`` such as ``ProfilerStep#N``,
  msMemScope ``STEP`` / mstx marks and ranges (any marker whose name says "step"); of
  those, the name pattern (digits ignored) seen most often;
* the recurring allocation pattern: a training loop allocates from the same call stacks
  every iteration.  The stack (or, without stacks, the size) whose allocations are most
  evenly spaced, at least 4 of them spread over most of the trace, and most often among
  those, beats once per step (without markers, :mod:`.leak` also asks that the steps free
  most of what they allocate, as a loop does);
* equal slices of the trace, where nothing recurs (said so, and trusted less).

Boundaries are positions on the event axis (``seq``): a block is alive at boundary ``b``
when ``seq_alloc < b <= seq_free`` (ghosts from the start, never-freed ones to the end).
Where a source has no ``seq`` on its blocks, times are used the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace

STEP_NAME = re.compile(r"step", re.IGNORECASE)
MIN_STEPS = 4
#: Largest coefficient of variation of the spacing of a stack's allocations that still
#: counts as "once per step".
REGULAR_CV = 0.25
#: Share of the trace (in allocations) the recurring stack must span, times
#: ``(count - 1) / count`` (a loop of n steps is beaten n times, from step 0 to step n-1):
#: a rhythm of layers inside one forward or backward pass spans only that pass.
MIN_COVERAGE = 0.8
FALLBACK_SLICES = 16


@dataclass(frozen=True)
class Steps:
    """Step starts of one device on the axis ``axis`` (``"seq"`` or ``"t"``).

    ``bounds[k]`` is where step ``k`` begins; the last step runs to the end of the trace
    and may be cut short (the capture stopped in it).  ``times`` are the same boundaries
    as times.  ``source`` says where they came from, ``by_markers`` whether markers said so.
    """

    bounds: np.ndarray
    times: np.ndarray
    axis: str
    source: str
    by_markers: bool
    anchor_stack: int | None = None
    names: tuple[str, ...] = ()
    sliced: bool = False  # equal slices: nothing recurs

    def name(self, k: int) -> str:
        """What step ``k`` is called: its marker's name, or ``step k``."""
        if 0 <= k < len(self.names) and self.names[k]:
            return self.names[k]
        return f"step {k}"

    @property
    def count(self) -> int:
        return int(self.bounds.size)


def find_steps(trace: MemoryTrace, device: str) -> Steps | None:
    """The step boundaries of ``device`` (None without events enough to have steps)."""
    events = trace.device_events(device)
    if events.height < 2:
        return None
    axis = "seq" if _blocks_have_seq(trace, device) else "t"
    t = events["t"].to_numpy().astype(np.int64)
    pos = events[axis].to_numpy().astype(np.int64)
    marked = _marker_steps(trace, device)
    if marked is not None:
        starts, names, pattern = marked
        index = np.searchsorted(t, starts, side="left")
        index, first = np.unique(index, return_index=True)
        names = [names[i] for i in first]
        keep = index < t.size
        if keep.sum() >= MIN_STEPS - 1:
            return Steps(bounds=pos[index[keep]], times=t[index[keep]], axis=axis,
                         source=f"markers ({pattern})", by_markers=True,
                         names=tuple(n for n, k in zip(names, keep, strict=True) if k))
    rhythm = _rhythm_steps(events)
    if rhythm is not None:
        index, label, stack = rhythm
        return Steps(bounds=pos[index], times=t[index], axis=axis,
                     source=f"the recurring allocations of {label}", by_markers=False,
                     anchor_stack=stack)
    if axis == "t" and not (events["action"] == "alloc").any():
        found = _block_rhythm_steps(trace, device)
        if found is not None:
            return found
    index = unique_sorted(np.linspace(0, t.size - 1, FALLBACK_SLICES + 1).astype(np.int64)[:-1])
    return Steps(bounds=pos[index], times=t[index], axis=axis,
                 source=f"{index.size} equal slices of the trace (no steps found)",
                 by_markers=False, sliced=True)


def _blocks_have_seq(trace: MemoryTrace, device: str) -> bool:
    blocks = trace.device_blocks(device)
    traced = blocks.filter(~pl.col("ghost").fill_null(False))
    return traced.height > 0 and traced["seq_alloc"].null_count() == 0 \
        and trace.device_events(device)["seq"].null_count() == 0


def _marker_steps(trace: MemoryTrace,
                  device: str) -> tuple[np.ndarray, list[str], str] | None:
    """Start times and names of the most frequent step-naming marker pattern, and it."""
    markers = trace.markers
    if markers.is_empty():
        return None
    rows = markers.filter(
        (pl.col("device").is_null() | (pl.col("device") == device))
        & pl.col("t").is_not_null() & pl.col("name").is_not_null()
        & (pl.col("name").str.contains("(?i)step") | pl.col("kind").str.contains("(?i)step"))
    ).with_columns(pattern=pl.col("name").str.replace_all(r"\d+", "N"))
    if rows.is_empty():
        return None
    # what says "this is a step" most plainly first: msMemScope STEP rows, the profiler's
    # ProfilerStep#N, then any other name with "step" (Optimizer.step, "step start", ...)
    rank = (pl.when(pl.col("kind").str.contains("(?i)step")).then(0)
            .when(pl.col("name").str.starts_with("ProfilerStep")).then(1).otherwise(2))
    counts = rows.with_columns(rank=rank).group_by("pattern").agg(
        n=pl.col("t").n_unique(), rank=pl.col("rank").min(),
    ).filter(pl.col("n") >= MIN_STEPS - 1).sort(["rank", "n", "pattern"],
                                                descending=[False, True, False])
    if counts.is_empty():
        return None
    pattern, n = counts.select("pattern", "n").row(0)
    if n < MIN_STEPS - 1:
        return None
    chosen = rows.filter(pl.col("pattern") == pattern).sort("t").unique(
        "t", keep="first", maintain_order=True)
    return chosen["t"].to_numpy().astype(np.int64), chosen["name"].to_list(), pattern


def _block_rhythm_steps(trace: MemoryTrace, device: str) -> Steps | None:
    """Steps from the rhythm of the blocks' allocations, for a source whose events hold
    no allocations (an Ascend profiler folder: operator_memory rows are blocks, its events
    are memory_record levels).  Blocks recur by owner (the operator) and size, as stacks
    do elsewhere; only blocks freed again can beat the clock: a loop's churn, never
    blocks that accumulate."""
    blocks = trace.device_blocks(device).filter(
        ~pl.col("ghost").fill_null(False) & pl.col("t_alloc").is_not_null()
        & pl.col("t_free").is_not_null() & pl.col("size").is_not_null())
    if blocks.is_empty():
        return None
    allocs = blocks.sort("t_alloc", maintain_order=True).select(
        "t_alloc", "size", owner=pl.col("owner").fill_null(""), action=pl.lit("alloc"),
        stack_id=pl.struct(pl.col("owner").fill_null(""), "size").rank("dense")
        .cast(pl.Int64))
    rhythm = _rhythm_steps(allocs)
    if rhythm is None:
        return None
    index = rhythm[0]
    owner, size = allocs.row(int(index[0]), named=True)["owner"], allocs["size"][int(index[0])]
    times = _fill_missed_beats(allocs["t_alloc"].to_numpy().astype(np.int64)[index])
    return Steps(bounds=times, times=times, axis="t",
                 source=f"the recurring allocations of {size}-byte {owner or ''} blocks"
                 .replace("  ", " "), by_markers=False)


def _fill_missed_beats(times: np.ndarray) -> np.ndarray:
    """``times`` with a beat put back in the middle of every gap about twice the median
    one (1.6x to 2.4x): a step whose clock block came out another size (the allocator
    kept a larger free block whole) still begins a step."""
    if times.size < MIN_STEPS:
        return times
    gaps = np.diff(times)
    median = float(np.median(gaps))
    missed = np.flatnonzero((gaps >= 1.6 * median) & (gaps <= 2.4 * median))
    if median <= 0 or missed.size == 0:
        return times
    return np.sort(np.concatenate([times, times[missed] + gaps[missed] // 2]))


def _rhythm_steps(events: pl.DataFrame) -> tuple[np.ndarray, str, int | None] | None:
    """Row indexes (into ``events``) of the allocations that beat once per step."""
    allocs = events.select(
        row=pl.int_range(0, pl.len(), dtype=pl.Int64), action=pl.col("action"),
        stack_id=pl.col("stack_id"), size=pl.col("size"),
    ).filter(pl.col("action") == "alloc")
    if allocs.height < MIN_STEPS * 2:
        return None
    use_stack = allocs["stack_id"].null_count() <= allocs.height // 2
    key = "stack_id" if use_stack else "size"
    allocs = allocs.filter(pl.col(key).is_not_null()).with_columns(
        pos=pl.int_range(0, pl.len(), dtype=pl.Int64))
    n = allocs.height
    if n < MIN_STEPS * 2:
        return None
    stats = (
        allocs.sort(key, "pos")
        .with_columns(gap=pl.col("pos").diff().over(key))
        .group_by(key)
        .agg(count=pl.len(), mean=pl.col("gap").mean(), std=pl.col("gap").std(ddof=0),
             first=pl.col("pos").min(), last=pl.col("pos").max())
        .with_columns(cv=pl.col("std") / pl.col("mean"),
                      coverage=(pl.col("last") - pl.col("first")) / n)
        .filter((pl.col("count") >= MIN_STEPS) & (pl.col("cv") <= REGULAR_CV)
                & (pl.col("coverage")
                   >= MIN_COVERAGE * (pl.col("count") - 1) / pl.col("count")))
        .sort(["count", "cv", "first"], descending=[True, False, False])
    )
    if stats.is_empty():
        return None
    value = stats[key][0]
    rows = allocs.filter(pl.col(key) == value)["row"].to_numpy()
    label = f"stack {value}" if use_stack else f"{value}-byte blocks"
    return rows.astype(np.int64), label, int(value) if use_stack else None


__all__ = ["Steps", "find_steps"]
