"""Memory levels over time for one device: the series every screen and ``summary`` share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from memtui.analysis.timeline.live import held, remember
from memtui.arrays import with_first
from memtui.model import MemoryTrace

#: The profiler curve that stands for "allocated" where a source reports curves.
PROFILER_ALLOCATED = "Operators Allocated"
PROFILER_RESERVED = "Operators Reserved"


@dataclass(frozen=True)
class Level:
    """A step function: ``values[i]`` holds from ``t[i]`` until ``t[i + 1]``.

    ``t[0]`` is the start of the trace, where ``values[0]`` is the level before the first
    event (walked back from the final state), so the peak counts the start level too.
    """

    t: np.ndarray
    values: np.ndarray

    def peak(self) -> tuple[int, int]:
        """(peak value, index of its first occurrence); (0, -1) for an empty level."""
        if self.values.size == 0:
            return 0, -1
        index = int(np.argmax(self.values))
        return int(self.values[index]), index


def seed_levels(trace: MemoryTrace, device: str, allocated: Level,
                reserved: Level | None) -> None:
    """Let :func:`allocated_level` and :func:`reserved_level` of ``trace`` and ``device``
    answer with these (computed from the same capture earlier and kept since), held in
    the trace's one store of results (:func:`memtui.analysis.timeline.live.remember`)."""
    remember(trace, ("allocated_level", device), allocated)
    remember(trace, ("reserved_level", device), reserved)


def walked_levels(trace: MemoryTrace) -> dict[str, tuple[Level, Level | None]]:
    """The allocated and reserved levels of each device whose source walked them itself
    (``MemoryTrace.walked_levels``), holding the source's arrays: the same figures
    :func:`allocated_level` and :func:`reserved_level` would copy out of the events'
    columns, which view them.  A device without events is left to those (its level may
    come from its blocks)."""
    out: dict[str, tuple[Level, Level | None]] = {}
    for device, (t, allocated, reserved) in trace.walked_levels.items():
        if t.size > 1:
            out[device] = (Level(t, allocated),
                           None if reserved is None else Level(t, reserved))
    return out


def _seeded(trace: MemoryTrace, kind: str, device: str) -> tuple[bool, Level | None]:
    found, level = held(trace, (f"{kind}_level", device))
    return found, level  # type: ignore[return-value]


def reserved_is_floor(trace: MemoryTrace, device: str) -> bool:
    """Whether ``device``'s reserved figures are only the least they can be (its file
    contradicts itself: ``DeviceInfo.reserved_floor`` says how; every figure then reads
    ``>= X``)."""
    try:
        return bool(trace.meta.device(device).reserved_floor)
    except KeyError:
        return False


def allocated_level(trace: MemoryTrace, device: str) -> Level:
    """allocated(t) of DESIGN.md section 3 for ``device`` (made once per trace and device:
    the reopen cache's writer, the findings and the screens share it)."""
    found, level = _seeded(trace, "allocated", device)
    if found and level is not None:
        return level
    from memtui.analysis.timeline.live import cached

    return cached(trace, ("allocated_level", device), lambda: _allocated(trace, device))


def _allocated(trace: MemoryTrace, device: str) -> Level:
    curve = _curve(trace, device, PROFILER_ALLOCATED)
    if curve is not None:
        return curve
    info = trace.meta.device(device)
    events = trace.device_events(device).select("t", "allocated").drop_nulls("allocated")
    if events.is_empty():
        from_blocks = _blocks_level(trace, device)
        if from_blocks is not None:
            return from_blocks
    t = events["t"].to_numpy()
    return Level(t=with_first(t[0] if t.size else 0, t),
                 values=with_first(info.start_allocated, events["allocated"].to_numpy()))


def reserved_level(trace: MemoryTrace, device: str) -> Level | None:
    """reserved(t) for ``device``, or None where the source knows no reserved memory (made
    once, as :func:`allocated_level`; where both levels step at every event they share
    one array of times)."""
    found, level = _seeded(trace, "reserved", device)
    if found:
        return level
    from memtui.analysis.timeline.live import cached

    return cached(trace, ("reserved_level", device), lambda: _reserved(trace, device))


def _reserved(trace: MemoryTrace, device: str) -> Level | None:
    curve = _curve(trace, device, PROFILER_RESERVED)
    if curve is not None:
        return curve
    info = trace.meta.device(device)
    events = trace.device_events(device).select("t", "reserved").drop_nulls("reserved")
    if events.is_empty() and info.start_reserved is None:
        return None
    values = events["reserved"].to_numpy()
    start = info.start_reserved if info.start_reserved is not None else (
        values[0] if values.size else 0)
    allocated = allocated_level(trace, device)
    if allocated.t.size == values.size + 1 and events.height == \
            trace.device_events(device).height and _steps_at_events(trace, device):
        t = allocated.t  # the same events, the same times: one array for both levels
    else:
        t = events["t"].to_numpy()
        t = with_first(t[0] if t.size else 0, t)
    return Level(t=t, values=with_first(start, values))


def _steps_at_events(trace: MemoryTrace, device: str) -> bool:
    """Whether the allocated level steps at every event of ``device`` (its times are the
    events' own, none left out, no curve in their place)."""
    events = trace.device_events(device)
    return (_curve(trace, device, PROFILER_ALLOCATED) is None
            and events["allocated"].null_count() == 0)


def _blocks_level(trace: MemoryTrace, device: str) -> Level | None:
    """allocated(t) from the blocks' lifetimes alone (a profiler's operator table without
    events or curves): each block counts from its ``t_alloc`` to its ``t_free``; ghosts and
    blocks with no alloc time from the start."""
    blocks = trace.device_blocks(device).filter(pl.col("size").is_not_null())
    if blocks.is_empty() or blocks["t_alloc"].drop_nulls().is_empty():
        return None
    from_start = blocks["ghost"].fill_null(False) | blocks["t_alloc"].is_null()
    start = int(blocks.filter(from_start)["size"].sum() or 0)
    opened = blocks.filter(~from_start).select(t="t_alloc", delta="size")
    closed = blocks.filter(pl.col("t_free").is_not_null()).select(
        t="t_free", delta=-pl.col("size"))
    steps = pl.concat([opened, closed]).group_by("t").agg(pl.col("delta").sum()).sort("t")
    if steps.is_empty():  # only ghosts (a dump without history): the events' rule holds
        return None
    t = steps["t"].to_numpy().astype(np.int64, copy=False)
    values = start + np.cumsum(steps["delta"].to_numpy().astype(np.int64, copy=False))
    return Level(t=np.concatenate([t[:1], t]), values=np.concatenate([[start], values]))


def _curve(trace: MemoryTrace, device: str, series: str) -> Level | None:
    curves = trace.curves
    if curves.is_empty():
        return None
    rows = curves.filter(
        (pl.col("device") == device) & (pl.col("series") == series)
        & pl.col("component").is_null() & pl.col("stream").is_null()
    ).sort("t", maintain_order=True)  # equal times keep the source's order
    if rows.is_empty():
        return None
    return Level(t=rows["t"].to_numpy().astype(np.int64, copy=False),
                 values=rows["bytes"].to_numpy().astype(np.int64, copy=False))
