"""The canonical data model every source produces and every analysis and screen reads.

A :class:`MemoryTrace` is a handful of polars frames plus :class:`TraceMeta` (and, from a
source that walked its levels itself, their arrays: ``walked_levels``).  The column
names and dtypes in the ``*_SCHEMA`` dicts below are the contract of DESIGN.md section 3;
sources build their frames loosely and pass them through :func:`conform`, which adds the
columns a source lacks as nulls and casts the rest, and tests call :func:`validate`.

Conventions shared by every source:

* time ``t`` is int64 nanoseconds; where a capture has no clock (PyTorch snapshots before
  2.2) it is the event index and ``meta.time_unit`` is ``"event"``;
* sizes are int64 bytes, addresses uint64;
* ``allocated``/``active``/``reserved`` on an event are the device's levels *after* it;
* a *ghost* block was allocated before the capture began (freed without its alloc, or
  alive at the end without one): it counts as alive from the start of the trace.

Definitions every screen, ``summary`` and ``state`` follow (docs/formats.md, "Definitions"):

* allocated(t) counts blocks from their ``alloc`` to their ``free`` (for snapshots the
  ``free_completed``: between ``free_requested`` and it a block is *pending free* and still
  counts).  Where the level is built from the blocks (snapshots, msMemScope) it equals, at
  every event, the bytes of the blocks alive in the pool state there (allocated + pending
  free) and of the Tables' "alive at the cursor" blocks.  Where it is the source's own
  figure (profiler ``memory_record``) the blocks may explain less of it.
* Every byte attributed: wherever a level is split into rows, the rows sum to it; the bytes
  no block explains are rows of their own ("alive before the capture", "in no operator":
  :mod:`memtui.analysis.timeline.attribution`).
* A block has one size (``blocks.size``), used everywhere: the allocator's ``size`` where
  the dump knows the block (its address, in the lifetime still open at the dump), else
  the size of its trace event.  ``requested_size`` is shown beside it; size - requested
  is internal fragmentation (memory_viz's "free space lost to rounding").  Allocs and
  frees move the level by that size.
* The start level is walked back from the end: the bytes alive at the end (the dump's
  blocks plus those the trace allocates and never frees, which the dump may lack) minus
  the allocs plus the frees.  It is the bytes of the ghosts, so never negative; the peak
  counts it.  ``allocated_at_end`` is the dump's allocated bytes
  (``torch.cuda.memory_allocated()``) plus any block the dump lacks.
* One event axis, on every source.  ``events`` are sorted by ``t``; ``seq`` is each
  event's place on that time-ordered axis: within a device it rises strictly along the
  frame, so the order of ``seq`` is the order of the events' positions and of their
  times.  A block's (and a segment's) ``seq_alloc``/``seq_free``/``seq_free_requested``
  are the ``seq`` of its own events on its device (``t_alloc``/``t_free`` are their
  times), so ``seq_alloc < seq_free``; ``seq_free_requested`` may also be -1 (requested
  before the trace).  A source whose own order is not time order (msMemScope writes a
  block's rows when it is freed; the Ascend profiler numbers table by table) keeps its
  own number in another column (``row``; msMemScope's DB ``id`` too), never as the axis
  (:mod:`memtui.sources.common.event_axis`).  Steps, leaks and every "before/after"
  question are asked on this axis; :func:`validate` checks it.
* Pending free, and being alive, at an event are decided by event order (``seq_*``), not
  by the clock: several events share a microsecond.
* The cursor addresses an event: its *position* in the device's events (0-based, as
  ``device_events(device)`` orders them); its time is derived.  That position is the one
  event number shown everywhere; positions and ``seq`` are in the same order.
* Layered sources (msMemScope): figures are per memory layer (``pool``: HAL, PTA, ATB,
  MINDSPORE, HOST_PINNED, ...), chosen per device; never a layer plus the layer inside it.
* Invariants, at every event of a device (of each layer of a layered source): allocated
  <= reserved, so free = reserved - allocated (pending frees counted in allocated) is
  never negative; the segments alive add up to reserved where the device's layout is
  complete (``DeviceInfo.layout_complete``: a snapshot's segments are its reservation),
  and never to more than it elsewhere.  Where a file contradicts them (a pool's own total
  below the blocks it holds, a dump whose blocks overflow their segment), the source (or
  the layer view) shows what is known: reserved raised to the least it can be, the
  device's ``reserved_floor`` saying why (every figure of it then reads "reserved >= X"),
  ``reserved_ceiling`` the most it can be where that is known, and one warning naming the
  file, the layer and the rows.  :func:`validate` checks them (:func:`level_breaches`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

#: Event actions of the canonical model.  Sources map their own names onto these.
ACTIONS = (
    "alloc",
    "free_requested",
    "free",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "access",
    "snapshot",
    "workspace",
    "annotate",
)
ACTION_DTYPE = pl.Enum(ACTIONS)

#: Bits of ``blocks.flags`` (MindStudio Insight's inefficient-block kinds).
FLAG_EARLY_ALLOCATION = 1
FLAG_LATE_DEALLOCATION = 2
FLAG_TEMPORARY_IDLENESS = 4
FLAG_NAMES = {
    FLAG_EARLY_ALLOCATION: "early_allocation",
    FLAG_LATE_DEALLOCATION: "late_deallocation",
    FLAG_TEMPORARY_IDLENESS: "temporary_idleness",
}

EVENTS_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Int64(),
    "seq": pl.Int64(),
    "device": pl.String(),
    "action": ACTION_DTYPE,
    "addr": pl.UInt64(),
    "size": pl.Int64(),
    "stream": pl.Int64(),
    "pool": pl.String(),
    "block_id": pl.Int64(),
    "stack_id": pl.Int32(),
    "owner": pl.String(),
    "allocated": pl.Int64(),
    "active": pl.Int64(),
    "reserved": pl.Int64(),
}

BLOCKS_SCHEMA: dict[str, pl.DataType] = {
    "block_id": pl.Int64(),
    "device": pl.String(),
    "addr": pl.UInt64(),
    "size": pl.Int64(),
    "requested_size": pl.Int64(),
    "t_alloc": pl.Int64(),
    "t_free": pl.Int64(),
    "stack_id": pl.Int32(),
    "owner": pl.String(),
    "pool": pl.String(),
    "stream": pl.Int64(),
    "ghost": pl.Boolean(),
    "first_access": pl.Int64(),
    "last_access": pl.Int64(),
    "max_access_gap": pl.Int64(),
    "flags": pl.UInt8(),
    # Extensions beyond DESIGN.md: the event order of the alloc and the free (exact
    # state at an event when several share a timestamp), and when a free was requested
    # (PyTorch "pending free": between free_requested and free_completed), and its
    # event order (pending at an event is decided by order, not by the clock).
    "seq_alloc": pl.Int64(),
    "seq_free": pl.Int64(),
    "t_free_requested": pl.Int64(),
    "seq_free_requested": pl.Int64(),
}

SEGMENTS_SCHEMA: dict[str, pl.DataType] = {
    "segment_id": pl.Int64(),
    "device": pl.String(),
    "addr": pl.UInt64(),
    "size": pl.Int64(),
    "t_alloc": pl.Int64(),
    "t_free": pl.Int64(),
    "stream": pl.Int64(),
    "pool_id": pl.String(),
    "kind": pl.String(),
    # Extensions: event order of the segment's alloc and free, and whether it existed
    # before the trace began.
    "seq_alloc": pl.Int64(),
    "seq_free": pl.Int64(),
    "ghost": pl.Boolean(),
}

FRAMES_SCHEMA: dict[str, pl.DataType] = {
    "frame_id": pl.Int32(),
    "filename": pl.String(),
    "line": pl.Int64(),
    "name": pl.String(),
}

STACKS_SCHEMA: dict[str, pl.DataType] = {
    "stack_id": pl.Int32(),
    "frame_ids": pl.List(pl.Int32()),
}

CALLS_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String(),
    "thread": pl.String(),
    "t_start": pl.Int64(),
    "t_end": pl.Int64(),
    "depth": pl.Int32(),
    "name": pl.String(),
}

CURVES_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Int64(),
    "device": pl.String(),
    "series": pl.String(),
    "component": pl.String(),
    "stream": pl.Int64(),
    "bytes": pl.Int64(),
}

MARKERS_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Int64(),
    "t_end": pl.Int64(),
    "device": pl.String(),
    "kind": pl.String(),
    "name": pl.String(),
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "events": EVENTS_SCHEMA,
    "blocks": BLOCKS_SCHEMA,
    "segments": SEGMENTS_SCHEMA,
    "frames": FRAMES_SCHEMA,
    "stacks": STACKS_SCHEMA,
    "calls": CALLS_SCHEMA,
    "curves": CURVES_SCHEMA,
    "markers": MARKERS_SCHEMA,
}


@dataclass
class DeviceInfo:
    """What is known of one device (or rank) beyond its rows.

    ``has_segments`` says whether the source knows pool segments at all (summary prints
    ``null`` for them otherwise).  ``start_allocated``/``start_reserved`` are the levels
    before the first event, found by walking back from the final state.  The ``*_at_end``
    figures are the source's own end-of-capture numbers where it has them (a snapshot's
    final state); where they are ``None`` the summary takes the last level of the trace.
    """

    name: str
    kind: str = ""
    rank: int | None = None
    host: str | None = None
    has_segments: bool = False
    start_allocated: int = 0
    start_reserved: int | None = None
    allocated_at_end: int | None = None
    reserved_at_end: int | None = None
    segments_at_end: int | None = None
    #: the segments are the whole reservation: at every event they add up to reserved
    layout_complete: bool = False
    #: why the reserved figures are only the least they can be (None: they are exact)
    reserved_floor: str | None = None
    #: the most reserved can be, where the file bounds it (a driver layer's bytes)
    reserved_ceiling: int | None = None


@dataclass
class TraceMeta:
    """Everything about a capture that is not a row: where it came from and what went wrong."""

    source: str
    path: str
    devices: list[DeviceInfo] = field(default_factory=list)
    time_unit: str = "ns"  # "ns", or "event" where the capture has no clock
    host: str | None = None
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: The reopen cache's key of the file as it was read, taken once at open
    #: (:mod:`memtui.loading`): what is kept beside the cache entry later (findings, the
    #: Blocks index, the summary) goes under it, never under the key the path has by then
    #: (a file replaced since, a relative path after a ``chdir``).  None: nothing is kept
    #: (the cache off, a folder, a file that changed while it was read).  Never stored.
    cache_key: Any = field(default=None, compare=False, repr=False)

    def device(self, name: str) -> DeviceInfo:
        for info in self.devices:
            if info.name == name:
                return info
        raise KeyError(name)

    @property
    def device_names(self) -> list[str]:
        return [info.name for info in self.devices]


def empty_frame(name: str) -> pl.DataFrame:
    """An empty frame with the columns of table ``name``."""
    return pl.DataFrame(schema=SCHEMAS[name])


def conform(df: pl.DataFrame | None, name: str) -> pl.DataFrame:
    """Return ``df`` with exactly the columns of table ``name``, in order, cast to its dtypes.

    Columns the frame lacks are added as nulls; columns it has beyond the contract are
    kept after the contract's own (sources may carry extras such as a call stack string).
    """
    schema = SCHEMAS[name]
    if df is None:
        return empty_frame(name)
    exprs = []
    for column, dtype in schema.items():
        if column in df.columns:
            exprs.append(pl.col(column).cast(dtype))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(column))
    extras = [pl.col(c) for c in df.columns if c not in schema]
    return df.select(exprs + extras)


# A source may hold a column of one value (a snapshot's device, pool, stream, owner) as a
# scalar column: polars keeps the one value.  ``df[column]`` writes such a column out, 8 to
# 16 bytes a row, and keeps it with the frame for as long as the frame lives; these ask
# by an expression instead, whose result alone is written out (and dropped after).
# :func:`constants_as_scalars` is how a source makes such columns.

def one_value_columns(frame: pl.DataFrame, names: list[str] | tuple[str, ...]) -> dict:
    """Which of ``names`` hold one value in every row (or null in every row): column ->
    that value (None: null throughout).  Asked by expressions in one pass (null count,
    first value, any other), which order no texts and leave a column of one value as
    it is."""
    names = [name for name in names if name in frame.columns]
    if not names or frame.height == 0:
        return {}
    firsts = [pl.col(name).drop_nulls().first() for name in names]
    figures = frame.select(
        [pl.col(name).null_count().alias(f"n{i}") for i, name in enumerate(names)]
        + [first.alias(f"v{i}") for i, first in enumerate(firsts)]
        + [(pl.col(name) != first).fill_null(False).any().alias(f"d{i}")
           for i, (name, first) in enumerate(zip(names, firsts, strict=True))]).row(0)
    count = len(names)
    found = {}
    for i, name in enumerate(names):
        nulls, value, differs = figures[i], figures[count + i], figures[2 * count + i]
        if nulls == frame.height or (nulls == 0 and not differs):
            found[name] = None if nulls else value
    return found


def constants_as_scalars(frame: pl.DataFrame, names: tuple[str, ...]) -> pl.DataFrame:
    """``frame`` with each of ``names`` that holds one value in every row (or null in
    every row) as a scalar column: polars keeps the one value, not millions of copies
    (8 to 16 bytes a row), and hands out the full column where a caller asks for it."""
    if frame.height < 2:
        return frame
    scalars = [pl.lit(value, frame.schema[name]).alias(name)
               for name, value in one_value_columns(frame, names).items()]
    return frame.with_columns(scalars) if scalars else frame


def null_count(df: pl.DataFrame, column: str) -> int:
    """``df[column].null_count()`` without writing out a column held as one value."""
    return int(df.select(pl.col(column).null_count()).item())


def distinct_values(df: pl.DataFrame, column: str) -> list:
    """The distinct non-null values of ``column`` (unordered), without writing out a
    column held as one value."""
    return df.select(pl.col(column).drop_nulls().unique()).to_series().to_list()


def column_where(df: pl.DataFrame, expr: pl.Expr) -> pl.Series:
    """``expr`` over ``df`` as a Series: a column made from a column held as one value
    (``pl.col("owner").fill_null("")``, ``pl.col("pool") == "HAL"``) is written out in the
    result only, never kept with ``df``."""
    return df.select(expr).to_series()


@dataclass
class MemoryTrace:
    """One capture in the canonical model (see the module docstring)."""

    meta: TraceMeta
    events: pl.DataFrame = field(default_factory=lambda: empty_frame("events"))
    blocks: pl.DataFrame = field(default_factory=lambda: empty_frame("blocks"))
    segments: pl.DataFrame = field(default_factory=lambda: empty_frame("segments"))
    frames: pl.DataFrame = field(default_factory=lambda: empty_frame("frames"))
    stacks: pl.DataFrame = field(default_factory=lambda: empty_frame("stacks"))
    calls: pl.DataFrame = field(default_factory=lambda: empty_frame("calls"))
    curves: pl.DataFrame = field(default_factory=lambda: empty_frame("curves"))
    markers: pl.DataFrame = field(default_factory=lambda: empty_frame("markers"))
    #: Per device, the source's own walk of its levels, where it made one: ``(t,
    #: allocated, reserved)`` (reserved None where unknown), each with the level's start
    #: point first and then one value per event of the device.  The events' ``t``,
    #: ``allocated``, ``active`` and ``reserved`` columns are views of these arrays'
    #: tails, so the levels (``memtui.analysis.timeline.levels``) are held once, not
    #: copied from the columns: :func:`memtui.loading.load_trace` hands them over and
    #: drops them (a trace whose events change must not carry them).
    walked_levels: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray | None]] = field(
        default_factory=dict, repr=False, compare=False)

    def frame(self, name: str) -> pl.DataFrame:
        return getattr(self, name)

    def _device_rows(self, df: pl.DataFrame, device: str) -> pl.DataFrame:
        # One device and no null device: the frame itself, not a copy of millions of rows.
        if self.meta.device_names == [device] and null_count(df, "device") == 0:
            return df
        return df.filter(pl.col("device") == device)

    def device_events(self, device: str) -> pl.DataFrame:
        return self._device_rows(self.events, device)

    def device_blocks(self, device: str) -> pl.DataFrame:
        return self._device_rows(self.blocks, device)

    def device_segments(self, device: str) -> pl.DataFrame:
        return self._device_rows(self.segments, device)


class ModelError(ValueError):
    """A MemoryTrace breaks the contract (a bug in a source, never bad user input)."""


def validate(trace: MemoryTrace) -> None:
    """Check every frame against the contract; raise :class:`ModelError` on the first breach.

    Checks: the contract's columns exist in order with their dtypes; events are sorted by
    ``t``; the event axis (module docstring) holds; the invariants of the levels hold
    (:func:`level_breaches`); every device named in a frame is listed in
    ``meta.devices``; ids are unique.
    """
    for name, schema in SCHEMAS.items():
        df = trace.frame(name)
        got = list(df.schema.items())[: len(schema)]
        want = list(schema.items())
        if [c for c, _ in got] != [c for c, _ in want]:
            raise ModelError(f"{name}: columns {[c for c, _ in got]} != {[c for c, _ in want]}")
        for (column, dtype), (_, expected) in zip(got, want, strict=True):
            if dtype != expected:
                raise ModelError(f"{name}.{column}: dtype {dtype} != {expected}")
    events = trace.events
    if events.height and not events["t"].is_sorted():
        raise ModelError("events are not sorted by t")
    _validate_axis(trace)
    breaches = level_breaches(trace)
    if breaches:
        raise ModelError("; ".join(breaches))
    known = set(trace.meta.device_names)
    for name in ("events", "blocks", "segments", "curves"):
        df = trace.frame(name)
        if df.height:
            unknown = set(df["device"].drop_nulls().unique().to_list()) - known
            if unknown:
                raise ModelError(f"{name}: devices {sorted(unknown)} missing from meta.devices")
    for name, key in (("blocks", "block_id"), ("segments", "segment_id"),
                      ("frames", "frame_id"), ("stacks", "stack_id")):
        column = trace.frame(name)[key]
        if column.null_count() or column.n_unique() != column.len():
            raise ModelError(f"{name}.{key} must be unique and non-null")
    if trace.meta.time_unit not in ("ns", "event"):
        raise ModelError(f"meta.time_unit {trace.meta.time_unit!r} is not 'ns' or 'event'")


def _validate_axis(trace: MemoryTrace) -> None:
    """``seq`` rises along each device's events; every ``seq_*`` of a block or segment is
    the ``seq`` of an event of its device at its ``t_*``, and alloc comes before free."""
    events = trace.events
    if events.height:
        if events["seq"].null_count():
            raise ModelError("events.seq has nulls")
        rising = (pl.col("seq").diff().over("device").fill_null(1) > 0).all()
        if not events.select(rising).item():
            raise ModelError("events.seq does not rise along a device's events (the event "
                             "axis must follow time)")
    at = events.select("device", "seq", "t")
    # a layer view's segments are the driver allocations its blocks live in: their events
    # are the driver layer's, not in the view (their seq still places them on the axis)
    names = ("blocks",) if is_layer_view(trace) else ("blocks", "segments")
    for name in names:
        frame = trace.frame(name)
        for column, time in (("seq_alloc", "t_alloc"), ("seq_free", "t_free"),
                             ("seq_free_requested", "t_free_requested")):
            if column not in frame.columns:
                continue
            named = frame.select("device", seq=pl.col(column), want=pl.col(time)).filter(
                pl.col("seq").is_not_null() & (pl.col("seq") >= 0))
            found = named.join(at, on=["device", "seq"], how="left")
            lost = found.filter(pl.col("t").is_null()).height
            if lost:
                raise ModelError(f"{name}.{column}: {lost} name no event of their device")
            off = found.filter(pl.col("want").is_not_null() & (pl.col("want") != pl.col("t")))
            if off.height:
                raise ModelError(f"{name}.{column}: {off.height} events are not at {time}")
        backwards = frame.filter(pl.col("seq_free") <= pl.col("seq_alloc")).height
        if backwards:
            raise ModelError(f"{name}: {backwards} freed at or before their alloc (seq)")


#: Sources whose events mix memory layers: their figures are per layer, made by
#: ``memtui.analysis.timeline.layers.layer_view`` (a view records its choice in
#: ``meta.extra["layers"]``); the raw trace's levels are no figure anyone shows.
LAYERED_SOURCES = ("msmemscope",)


def is_layer_view(trace: MemoryTrace) -> bool:
    """Whether ``trace`` is one memory layer per device of a layered capture."""
    return "layers" in trace.meta.extra


def segment_level(seq: np.ndarray, segments: pl.DataFrame) -> tuple[np.ndarray, int]:
    """The bytes of ``segments`` alive just after each event of ``seq`` (ascending), and
    before the first: a segment counts from its ``seq_alloc`` (a ghost, or one without a
    ``seq_alloc``, from the start) up to its ``seq_free``; a ``seq`` between two events'
    (an event of another layer) counts from the next event on."""
    level = segment_level_from_start(seq, segments)
    return level[1:], int(level[0])


def segment_level_from_start(seq: np.ndarray, segments: pl.DataFrame) -> np.ndarray:
    """:func:`segment_level` in one int64 array, the level before the first event first
    (a level's start point and its events' values, as a ``Level`` holds them)."""
    size = segments["size"].fill_null(0).to_numpy()
    # level[0] is the start; an event's change lands on the level after it (one on
    # from its row), and a change past the last event in the one slot beyond the end
    level = np.zeros(seq.size + 2, dtype=np.int64)
    level[0] = int(size[segments["seq_alloc"].is_null().to_numpy()].sum())
    for column, sign in ((segments["seq_alloc"], 1), (segments["seq_free"], -1)):
        known = column.is_not_null().to_numpy()
        rows = np.searchsorted(seq, column.fill_null(0).to_numpy()[known])
        np.add.at(level, np.minimum(rows, seq.size) + 1, sign * size[known])
    np.cumsum(level, out=level)
    return level[:-1]


def level_breaches(trace: MemoryTrace) -> list[str]:
    """The invariants of the levels (module docstring) each device breaks, as text (empty
    where all hold).  A layered capture's raw trace is not checked (its levels are per
    layer: check its layer views)."""
    if trace.meta.source in LAYERED_SOURCES and not is_layer_view(trace):
        return []
    out = []
    for info in trace.meta.devices:
        events = trace.device_events(info.name)
        if events.is_empty() or "seq" not in events.columns:
            continue
        allocated = events["allocated"].to_numpy()
        reserved = events["reserved"]
        if reserved.null_count() == reserved.len() or events["allocated"].null_count():
            continue
        known = reserved.is_not_null().to_numpy()
        level = reserved.fill_null(0).to_numpy()
        over = np.flatnonzero(known & (allocated > level))
        if over.size:
            out.append(f"{info.name}: allocated above reserved at {over.size} events (first "
                       f"event {int(over[0])}: {int(allocated[over[0]])} > "
                       f"{int(level[over[0]])})")
        segments = trace.device_segments(info.name)
        if segments.is_empty() or not info.has_segments:
            continue
        held, _ = segment_level(events["seq"].to_numpy(), segments)
        wrong = known & (held != level if info.layout_complete and info.reserved_floor is None
                         else held > level)
        bad = np.flatnonzero(wrong)
        if bad.size:
            rule = "differ from" if info.layout_complete else "exceed"
            out.append(f"{info.name}: the segments alive {rule} reserved at {bad.size} events "
                       f"(first event {int(bad[0])}: {int(held[bad[0]])} vs "
                       f"{int(level[bad[0]])})")
    return out
