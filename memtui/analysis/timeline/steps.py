"""Where the training steps of a device begin: from markers, else from the trace's rhythm.

Steps come, in this order, from

* markers that name steps: snapshot ``external_annotations`` such as ``ProfilerStep#N``,
  msMemScope ``STEP`` / mstx marks and ranges (any marker whose name says "step"); of
  those, the name pattern (digits ignored) seen most often;
* the period of the whole allocation signal (:mod:`.period`): the level of the blocks
  the trace allocates and frees again returns to its floor at the end of every step,
  whatever the step allocated on the way (stacks chosen by the data, counts and sizes
  that vary, an evaluation every few steps, a jittered clock);
* the recurring allocation pattern: a training loop allocates from the same call stacks
  every iteration, and frees what it allocates there within the iteration (activations,
  gradients, temporaries).  A stack (or, without stacks, a size) *beats* at each of its
  allocations that follows a long pause of that stack (the first of a burst: a backward
  pass allocating 20 times from one stack beats once); the clock is the stack whose beats
  are most evenly spaced, at least 4 of them spread over most of the trace, most often
  among those, whose blocks are freed within two of its periods, which allocates as often
  in nearly every one of its periods, and with which two other evenly recurring stacks
  keep time (as often in nearly every period), or one where the two make up most of the
  allocations.  A stack whose
  blocks accumulate (a leak that recurs every step, or every k-th step) is never the clock:
  it would measure the leak by itself.  (Without markers :mod:`.leak` also asks that the
  steps free most of what they allocate, as a loop does);
* equal slices of the trace, where nothing recurs (said so, and trusted less).

The last step counts as finished (``last_finished``) when as many events follow its start
as a step usually holds: a capture that stopped in it leaves it short.

Boundaries are on the one time-ordered event axis (``seq``, model.py "One event axis"),
so they rise with the steps: a block is alive at boundary ``b`` when
``seq_alloc < b <= seq_free`` (ghosts from the start, never-freed ones to the end).  Where
a source has no ``seq`` on its blocks (or a ``seq`` that does not follow time), times are
used the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.period import periodic_steps
from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace, column_where, distinct_values

STEP_NAME = re.compile(r"step", re.IGNORECASE)
MIN_STEPS = 4
#: Largest coefficient of variation of the spacing of a stack's allocations that still
#: counts as "once per step".
REGULAR_CV = 0.25
#: A stack's allocation *beats* where its pause since its previous allocation is at least
#: this share of its long pauses (the median of those above its mean): the first of each
#: burst, every allocation of a stack allocating once a step.
BEAT_PAUSE = 0.5
#: Share of the clock stack's blocks that must be freed within two of its periods.
MIN_CLOCK_FREED = 0.9
#: Clock candidates (best first) tried for other stacks keeping time with them, and how
#: many must (a loop allocates from many stacks every step).
MAX_CLOCK_TRIES = 16
MIN_KEEPING_TIME = 2
#: ... or the steady stacks make up this share of the allocations in the clock's span (a
#: small loop of two stacks).
MIN_STEADY_SHARE = 0.5
#: A last step holding at least this share of a usual step's events finished.
FINISHED_SHARE = 0.9
#: Share of the trace (in allocations) the recurring stack must span, times
#: ``(count - 1) / count`` (a loop of n steps is beaten n times, from step 0 to step n-1):
#: a rhythm of layers inside one forward or backward pass spans only that pass.
MIN_COVERAGE = 0.8
FALLBACK_SLICES = 16


@dataclass(frozen=True)
class Steps:
    """Step starts of one device on the axis ``axis`` (``"seq"`` or ``"t"``).

    ``bounds[k]`` is where step ``k`` begins (rising); the last step runs to the end of
    the trace and may be cut short (the capture stopped in it): ``last_finished`` says it
    was not, and ``end`` is then where it ends (just after the last event; ``end_time``
    the time of the last event).
    ``times`` are the same boundaries as times.  ``source`` says where they came from,
    ``by_markers`` whether markers said so.
    """

    bounds: np.ndarray
    times: np.ndarray
    axis: str
    source: str
    by_markers: bool
    anchor_stack: int | None = None
    names: tuple[str, ...] = ()
    sliced: bool = False  # equal slices: nothing recurs
    last_finished: bool = False
    end: int = 0
    end_time: int = 0

    def name(self, k: int) -> str:
        """What step ``k`` is called: its marker's name, or ``step k``."""
        if 0 <= k < len(self.names) and self.names[k]:
            return self.names[k]
        return f"step {k}"

    @property
    def count(self) -> int:
        return int(self.bounds.size)

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, times) of the boundaries at which whole steps are measured: every
        step start, and the end of the last step where it finished."""
        if not self.last_finished:
            return self.bounds, self.times
        return np.append(self.bounds, self.end), np.append(self.times, self.end_time)


def find_steps(trace: MemoryTrace, device: str) -> Steps | None:
    """The step boundaries of ``device`` (None without events enough to have steps)."""
    events = trace.device_events(device)
    if events.height < 2:
        return None
    axis = "seq" if _blocks_have_seq(trace, device) else "t"
    t = events["t"].to_numpy().astype(np.int64, copy=False)
    pos = events[axis].to_numpy().astype(np.int64, copy=False)
    end = {"end": int(pos[-1]) + 1, "end_time": int(t[-1])}
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
                         names=tuple(n for n, k in zip(names, keep, strict=True) if k),
                         last_finished=_last_finished(index[keep], t.size), **end)
    rows = _allocator_rows(events)
    # every row (as usual): the frame itself, not a gathered copy of every column
    read = events if rows.size == events.height else events[rows]
    periodic = periodic_steps(read)
    if periodic is not None:
        index, period = periodic
        index = rows[index]
        return Steps(bounds=pos[index], times=t[index], axis=axis,
                     source=f"the period of the allocations and frees (about "
                            f"{period:.0f} of them a step)", by_markers=False,
                     last_finished=_last_finished(index, t.size), **end)
    rhythm = rhythm_steps(read)
    if rhythm is not None:
        index, label, stack = rhythm
        index = rows[index]
        return Steps(bounds=pos[index], times=t[index], axis=axis,
                     source=f"the recurring allocations of {label}", by_markers=False,
                     anchor_stack=stack, last_finished=_last_finished(index, t.size), **end)
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
    seq = trace.device_events(device)["seq"]
    return traced.height > 0 and traced["seq_alloc"].null_count() == 0 \
        and seq.null_count() == 0 and seq.is_sorted()


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
    return chosen["t"].to_numpy().astype(np.int64, copy=False), chosen["name"].to_list(), pattern


def _allocator_rows(events: pl.DataFrame) -> np.ndarray:
    """Rows of ``events`` the step clock reads: all, but an msMemScope device's HAL rows
    where other pools lie above it (HAL allocations are the driver segments under those
    pools' blocks, as a snapshot's segment_alloc is: a burst of new segments in the first
    step would otherwise read as a pause of a stack, and beat once more)."""
    every = np.arange(events.height, dtype=np.int64)
    if "pool" not in events.columns:
        return every
    pools = distinct_values(events, "pool")
    if len(pools) < 2 or "HAL" not in pools:
        return every
    return np.flatnonzero(column_where(events, pl.col("pool").fill_null("") != "HAL").to_numpy())


def _block_rhythm_steps(trace: MemoryTrace, device: str) -> Steps | None:
    """Steps from the blocks' allocations and frees, for a source whose events hold no
    allocations (an Ascend profiler folder: operator_memory rows are blocks, its events
    are memory_record levels).  The blocks' allocations and frees, in time order, are read
    as events: first the period of their transient level (:mod:`.period`), then their
    rhythm (:func:`rhythm_steps`: only a stack whose blocks are freed again is a clock),
    blocks recurring by owner (the operator) and size as stacks do elsewhere."""
    blocks = trace.device_blocks(device).filter(
        ~pl.col("ghost").fill_null(False) & pl.col("t_alloc").is_not_null()
        & pl.col("size").is_not_null())
    if blocks.is_empty():
        return None
    keyed = blocks.select(
        "block_id", "size", "t_alloc", "t_free", owner=pl.col("owner").fill_null(""),
        stack_id=pl.struct(pl.col("owner").fill_null(""), "size").rank("dense")
        .cast(pl.Int64))
    parts = [keyed.select("block_id", "size", "stack_id", "owner", t=pl.col("t_alloc"),
                          action=pl.lit("alloc"), order=pl.lit(1)),
             keyed.filter(pl.col("t_free").is_not_null()).select(
                 "block_id", "size", "stack_id", "owner", t=pl.col("t_free"),
                 action=pl.lit("free"), order=pl.lit(0))]
    events = pl.concat(parts).sort("t", "order", "block_id")
    t = events["t"].to_numpy().astype(np.int64, copy=False)
    end = {"end": int(t[-1]) + 1, "end_time": int(t[-1])}
    periodic = periodic_steps(events)
    if periodic is not None:
        times = t[periodic[0]]
        return Steps(bounds=times, times=times, axis="t",
                     source=f"the period of the blocks' allocations and frees (about "
                            f"{periodic[1]:.0f} of them a step)", by_markers=False,
                     last_finished=_last_finished(periodic[0], t.size), **end)
    rhythm = rhythm_steps(events)
    if rhythm is None:
        return None
    index = rhythm[0]
    clock = events.row(int(index[0]), named=True)
    times = _fill_missed_beats(t[index])
    label = f"{clock['size']}-byte {clock['owner']} blocks".replace("  ", " ")
    return Steps(bounds=times, times=times, axis="t",
                 source=f"the recurring allocations of {label}", by_markers=False,
                 last_finished=_last_finished(np.searchsorted(t, times), t.size), **end)


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


def _last_finished(index: np.ndarray, events: int) -> bool:
    """Whether the step starting at event ``index[-1]`` holds as many events as a usual
    step (the median of the others): the capture did not stop in it."""
    if index.size < 2:
        return False
    usual = float(np.median(np.diff(index)))
    return usual > 0 and events - int(index[-1]) >= FINISHED_SHARE * usual


def rhythm_steps(events: pl.DataFrame) -> tuple[np.ndarray, str, int | None] | None:
    """Row indexes (into ``events``, rising) of the clock's beats, its label and stack (see
    the module docstring), or None where no stack keeps time."""
    rows = events.select(
        row=pl.int_range(0, pl.len(), dtype=pl.Int64), action=pl.col("action"),
        stack_id=pl.col("stack_id"), size=pl.col("size"), block_id=pl.col("block_id"),
    )
    allocs = rows.filter(pl.col("action") == "alloc")
    if allocs.height < MIN_STEPS * 2:
        return None
    use_stack = allocs["stack_id"].null_count() <= allocs.height // 2
    key = "stack_id" if use_stack else "size"
    freed = rows.filter((pl.col("action") == "free") & pl.col("block_id").is_not_null()) \
        .group_by("block_id").agg(free_row=pl.col("row").min())
    allocs = allocs.filter(pl.col(key).is_not_null()).with_columns(
        pos=pl.int_range(0, pl.len(), dtype=pl.Int64),
    ).join(freed, on="block_id", how="left", maintain_order="left")
    n = allocs.height
    if n < MIN_STEPS * 2:
        return None
    pause = pl.col("pause")
    long_pause = pause.filter(pause >= pause.mean()).median()
    beats = allocs.sort(key, "pos").with_columns(
        pause=pl.col("pos").diff().over(key)).with_columns(
        beat=pause.is_null() | (pause >= BEAT_PAUSE * long_pause.over(key)))
    stats = (
        beats.filter("beat")
        .with_columns(gap=pl.col("pos").diff().over(key))
        .group_by(key)
        .agg(count=pl.len(), mean=pl.col("gap").mean(), std=pl.col("gap").std(ddof=0),
             first=pl.col("pos").min(), last=pl.col("pos").max(),
             period_rows=(pl.col("row").max() - pl.col("row").min()) / (pl.len() - 1))
        .with_columns(cv=pl.col("std") / pl.col("mean"),
                      coverage=(pl.col("last") - pl.col("first")) / n)
        .filter((pl.col("count") >= MIN_STEPS) & (pl.col("cv") <= REGULAR_CV)
                & (pl.col("coverage")
                   >= MIN_COVERAGE * (pl.col("count") - 1) / pl.col("count")))
    )
    if stats.is_empty():
        return None
    alloc_rows = allocs["row"].to_numpy()  # rising
    # (beats are in (key, pos) order, and pos follows row: each list comes out rising)
    regular = beats.join(stats.select(key), on=key, how="semi", maintain_order="left") \
        .group_by(key, maintain_order=True).agg(
            beats=pl.col("row").filter(pl.col("beat")), rows=pl.col("row"))
    beat_rows = {value: np.asarray(b, dtype=np.int64) for value, b, _ in regular.iter_rows()}
    all_rows = {value: np.asarray(r, dtype=np.int64) for value, _, r in regular.iter_rows()}
    stats = stats.join(_freed_share(beats, stats, key, int(rows.height)), on=key,
                       how="left").filter(pl.col("freed") >= MIN_CLOCK_FREED) \
        .sort(["count", "cv", "first"], descending=[True, False, False])
    for value in stats[key].head(MAX_CLOCK_TRIES).to_list():
        index = beat_rows[value]
        if _steady(index, all_rows[value]) and _corroborated(
                index, all_rows[value], [r for v, r in all_rows.items() if v != value],
                alloc_rows):
            label = f"stack {value}" if use_stack else f"{value}-byte blocks"
            return index, label, int(value) if use_stack else None
    return None


def _steady(clock: np.ndarray, rows: np.ndarray) -> bool:
    """Whether ``rows`` (a stack's allocations) fall the same number of times, at least
    once, in (nearly) every period between the beats of ``clock``: a loop does the same
    work every step; allocations at random do not."""
    periods = clock.size - 1
    if periods < 1:
        return False
    period_of = np.searchsorted(clock, rows, side="right") - 1
    counts = np.bincount(period_of[(period_of >= 0) & (period_of < periods)],
                         minlength=periods)
    usual = np.bincount(counts).argmax()
    return bool(usual > 0 and (counts == usual).mean() >= MIN_CLOCK_FREED)


def _corroborated(clock: np.ndarray, own: np.ndarray, others: list[np.ndarray],
                  alloc_rows: np.ndarray) -> bool:
    """Whether other evenly recurring stacks are steady in the periods of ``clock``
    (:func:`_steady`): :data:`MIN_KEEPING_TIME` of them, or fewer that with the clock's
    own make up :data:`MIN_STEADY_SHARE` of the allocations in its span.  A loop's stacks
    keep time together; a stack that recurs evenly by chance among unrelated allocations
    does so alone."""
    def in_span(rows: np.ndarray) -> int:
        return int(np.searchsorted(rows, clock[-1]) - np.searchsorted(rows, clock[0]))

    keeping, steady = 0, in_span(own)
    for rows in others:
        if _steady(clock, rows):
            keeping += 1
            steady += in_span(rows)
            if keeping >= MIN_KEEPING_TIME:
                return True
    return keeping > 0 and steady >= MIN_STEADY_SHARE * in_span(alloc_rows)


def _freed_share(allocs: pl.DataFrame, stats: pl.DataFrame, key: str,
                 events: int) -> pl.DataFrame:
    """Per candidate ``key``: the share of its blocks freed within two of its periods (in
    events), among those allocated early enough for that to be seen."""
    window = 2 * pl.col("period_rows")
    judged = allocs.join(stats.select(key, "period_rows"), on=key, how="inner").filter(
        pl.col("row") + window < events)
    return judged.group_by(key).agg(freed=(
        pl.col("free_row").is_not_null() & (pl.col("free_row") - pl.col("row") <= window)
    ).mean())


__all__ = ["Steps", "find_steps"]
