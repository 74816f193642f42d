"""The state of one device at a time: its levels, its events in order, the blocks alive.

:class:`Timeline` holds, per device, the sorted event times (the steps the cursor moves
by), the allocated / active / reserved levels and their peak, so that the levels at any
time are one binary search away.  :class:`LiveBlocks` answers which blocks are alive at a
time (``t_alloc <= t < t_free``, ghosts from the start) and sums them by call stack (ghosts
as "alive before the capture") or owner.  Both are built once per device and then answer
in ``O(log N)`` or one vectorised pass over the blocks; nothing here imports textual.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from memtui.analysis.timeline.downsample import value_at
from memtui.analysis.timeline.levels import Level, allocated_level, reserved_level
from memtui.arrays import unique_sorted, with_first
from memtui.model import MemoryTrace

PROFILER_ACTIVATED = "Operators Activated"
#: The name of the bytes alive before the capture began (ghosts, and in
#: memtui.analysis.timeline.attribution the start level no block explains).
BEFORE_CAPTURE = "alive before the capture"
_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Levels:
    """allocated / active / reserved at one time (reserved None where unknown)."""

    allocated: int
    active: int
    reserved: int | None


def active_level(trace: MemoryTrace, device: str, allocated: Level) -> Level:
    """active(t): the events' ``active`` column, the profiler's "Operators Activated"
    curve (Overall), or else the same as allocated (DESIGN.md section 3)."""
    curves = trace.curves
    if not curves.is_empty():
        rows = curves.filter(
            (pl.col("device") == device) & (pl.col("series") == PROFILER_ACTIVATED)
            & pl.col("component").is_null() & pl.col("stream").is_null()
        ).sort("t")
        if not rows.is_empty():
            return Level(rows["t"].to_numpy().astype(np.int64),
                         rows["bytes"].to_numpy().astype(np.int64))
    active = trace.device_events(device)["active"].drop_nulls()
    if active.is_empty() or allocated.values.size != active.len() + 1:
        return allocated
    values = active.to_numpy()  # no copy: compared, and copied once where it differs
    if np.array_equal(values, allocated.values[1:]):
        return allocated
    return Level(allocated.t, with_first(allocated.values[0], values))


@dataclass
class Timeline:
    """Event times and levels of one device (see the module docstring).

    ``times`` are the points the cursor steps through, one per event: the device's event
    times in the trace's order (several may share a timestamp), or for sources without
    events (profiler curves, a final state only) the distinct times of its levels.  An
    event's *position* is its index in ``times`` (0-based): the cursor addresses a
    position, and its time is ``times[position]``.  ``start``/``end`` bound every view.
    """

    device: str
    times: np.ndarray
    allocated: Level
    active: Level
    reserved: Level | None
    start: int
    end: int
    peak: int
    peak_t: int
    events: int = 0
    markers: pl.DataFrame = field(default_factory=pl.DataFrame)

    @classmethod
    def build(cls, trace: MemoryTrace, device: str) -> Timeline:
        allocated = allocated_level(trace, device)
        reserved = reserved_level(trace, device)
        active = active_level(trace, device, allocated)
        event_t = trace.device_events(device)["t"].to_numpy().astype(np.int64, copy=False)
        times = event_t if event_t.size else unique_sorted(allocated.t)
        if times.size == 0:
            times = np.zeros(1, dtype=np.int64)
        bounds = [times[0], times[-1]]
        for level in (allocated, active, reserved):
            if level is not None and level.t.size:
                bounds += [level.t[0], level.t[-1]]
        peak, index = allocated.peak()
        peak_t = int(allocated.t[index]) if index >= 0 else int(times[0])
        markers = trace.markers.filter(
            pl.col("device").is_null() | (pl.col("device") == device)
        ).filter(pl.col("t").is_not_null())
        return cls(
            device=device, times=times, allocated=allocated, active=active,
            reserved=reserved, start=int(min(bounds)), end=int(max(bounds)), peak=peak,
            peak_t=peak_t, events=int(event_t.size), markers=markers,
        )

    @property
    def active_differs(self) -> bool:
        return self.active is not self.allocated

    def levels_at(self, t: int) -> Levels:
        reserved = None
        if self.reserved is not None and self.reserved.values.size:
            reserved = value_at(self.reserved.t, self.reserved.values, t)
        return Levels(
            allocated=value_at(self.allocated.t, self.allocated.values, t),
            active=value_at(self.active.t, self.active.values, t),
            reserved=reserved,
        )

    def event_number(self, t: int) -> int:
        """How many of the device's steps happened at or before ``t`` (0 before the first)."""
        return int(np.searchsorted(self.times, t, side="right"))

    # -- positions: the cursor addresses an event ------------------------------------------

    @property
    def positions(self) -> int:
        """How many positions the cursor can take (one per event)."""
        return int(self.times.size)

    def clamp_event(self, event: int) -> int:
        return int(min(max(int(event), 0), self.times.size - 1))

    def event_at(self, t: int) -> int:
        """The position of the last event at or before ``t`` (the first event before it)."""
        return self.clamp_event(int(np.searchsorted(self.times, t, side="right")) - 1)

    def time_of(self, event: int) -> int:
        return int(self.times[self.clamp_event(event)])

    def event_of(self, cursor) -> int:
        """The position a cursor addresses (its ``event``, else the last event at its time)."""
        event = getattr(cursor, "event", None)
        return self.clamp_event(event) if event is not None else self.event_at(cursor.t)

    def _aligned(self, level: Level | None) -> bool:
        """Whether ``level`` holds the start level and then one value per event."""
        return (level is not None and self.events == self.times.size
                and level.values.size == self.times.size + 1)

    def _level_at_event(self, level: Level, event: int) -> int:
        if self._aligned(level):
            return int(level.values[event + 1])
        return value_at(level.t, level.values, self.time_of(event))

    def levels_at_event(self, event: int) -> Levels:
        """allocated / active / reserved just after the event at ``event`` (exact also when
        several events share its timestamp)."""
        event = self.clamp_event(event)
        reserved = None
        if self.reserved is not None and self.reserved.values.size:
            reserved = self._level_at_event(self.reserved, event)
        return Levels(allocated=self._level_at_event(self.allocated, event),
                      active=self._level_at_event(self.active, event), reserved=reserved)

    @property
    def peak_event(self) -> int:
        """The position of the event after which allocated is highest (the first event
        where the peak is the start level: the cursor stands on events)."""
        if self._aligned(self.allocated):
            return int(np.argmax(self.allocated.values[1:]))
        return self.event_at(self.peak_t)

    @property
    def peak_at_start(self) -> bool:
        """Whether the peak (:attr:`peak`, the start level included) is the level before
        the first event and no event reaches it again: then no event is "the peak"."""
        values = self.allocated.values
        return self._aligned(self.allocated) and values.size > 1 \
            and int(values[0]) == self.peak and int(values[1:].max()) < self.peak

    def start_levels(self) -> Levels:
        """allocated / active / reserved before the first event (where the levels hold a
        start value: one value per event after it), else those just after it."""
        if not self._aligned(self.allocated):
            return self.levels_at_event(0)
        reserved = None
        if self.reserved is not None and self.reserved.values.size:
            reserved = (int(self.reserved.values[0]) if self._aligned(self.reserved)
                        else self._level_at_event(self.reserved, 0))
        active = (int(self.active.values[0]) if self._aligned(self.active)
                  else self._level_at_event(self.active, 0))
        return Levels(allocated=int(self.allocated.values[0]), active=active,
                      reserved=reserved)

    def step(self, t: int, count: int) -> int:
        """The time ``count`` steps after (or, negative, before) ``t``, clamped to the ends.

        Steps sharing a timestamp count as one: the cursor cannot stand between them.
        """
        times = self.times
        if count > 0:
            index = int(np.searchsorted(times, t, side="right")) + count - 1
        elif count < 0:
            index = int(np.searchsorted(times, t, side="left")) + count
        else:
            return t
        index = min(max(index, 0), times.size - 1)
        return int(times[index])

    def clamp(self, t: int) -> int:
        return int(min(max(int(t), self.start), self.end))


class LiveBlocks:
    """Which blocks of one device are alive at a time, and their bytes by stack or owner."""

    def __init__(self, blocks: pl.DataFrame, tops: pl.DataFrame | None = None,
                 positions: pl.DataFrame | None = None) -> None:
        """``positions`` (:func:`block_positions`) make "alive just after event K" exact,
        also among events sharing a timestamp (``event=`` in the queries below)."""
        self.blocks = blocks
        self.pos_alloc = self.pos_free = None
        if positions is not None:
            aligned = blocks.select("block_id").join(positions, on="block_id", how="left",
                                                     maintain_order="left")
            self.pos_alloc = aligned["pos_alloc"].fill_null(_NEVER).to_numpy()
            self.pos_free = aligned["pos_free"].fill_null(_NEVER).to_numpy()
        self.t_alloc = blocks["t_alloc"].fill_null(np.iinfo(np.int64).min).to_numpy()
        self.t_free = blocks["t_free"].fill_null(_NEVER).to_numpy()
        self.size = blocks["size"].fill_null(0).to_numpy().astype(np.int64)
        self._keys: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._tops = tops

    def mask(self, t: int, event: int | None = None) -> np.ndarray:
        """Blocks alive at ``t``, or just after the event at position ``event`` (exact)."""
        if event is not None and self.pos_alloc is not None:
            return (self.pos_alloc <= event) & (self.pos_free > event)
        return (self.t_alloc <= t) & (self.t_free > t)

    def alive_ids(self, t: int) -> np.ndarray:
        return self.blocks["block_id"].to_numpy()[self.mask(t)]

    def _key(self, by: str) -> tuple[np.ndarray, np.ndarray]:
        """Codes per block and the label of each code, for grouping ``by`` stack or owner."""
        if by not in self._keys:
            if by == "owner":
                labels = self.blocks["owner"].fill_null("(no owner)")
            else:
                frame = self.blocks.select("stack_id")
                if self._tops is not None and not self._tops.is_empty():
                    frame = frame.join(self._tops, on="stack_id", how="left", maintain_order="left")
                    labels = frame["top"].fill_null("(no stack)")
                else:
                    labels = pl.Series(["(no stack)"] * frame.height, dtype=pl.String)
                ghost = self.blocks["ghost"].fill_null(False) if "ghost" in self.blocks.columns \
                    else pl.Series([False] * frame.height)
                labels = pl.select(pl.when(ghost).then(pl.lit(BEFORE_CAPTURE))
                                   .otherwise(labels)).to_series()
            codes = (labels.rank("dense") - 1).to_numpy().astype(np.int64)
            names = labels.unique().sort().to_numpy()
            self._keys[by] = (codes, names)
        return self._keys[by]

    def top(self, t: int, by: str = "stack", limit: int = 10,
            event: int | None = None) -> pl.DataFrame:
        """The ``limit`` largest groups of live bytes at ``t``: ``where, bytes, blocks``."""
        schema = {"where": pl.String, "bytes": pl.Int64, "blocks": pl.Int64}
        if self.size.size == 0:
            return pl.DataFrame(schema=schema)
        codes, names = self._key(by)
        mask = self.mask(t, event)
        if not mask.any():
            return pl.DataFrame(schema=schema)
        live_codes = codes[mask]
        size = np.bincount(live_codes, weights=self.size[mask], minlength=names.size)
        count = np.bincount(live_codes, minlength=names.size)
        order = np.argsort(-size, kind="stable")
        order = order[count[order] > 0][:limit]
        return pl.DataFrame(
            {"where": names[order], "bytes": size[order].astype(np.int64),
             "blocks": count[order].astype(np.int64)},
            schema=schema,
        )

    def total(self, t: int, event: int | None = None) -> int:
        return int(self.size[self.mask(t, event)].sum())

    def largest(self, t: int, event: int | None = None) -> int | None:
        """The ``block_id`` of the largest block alive at ``t`` (or just after the event at
        position ``event``); None where none is (what a click on the Trend shows)."""
        mask = self.mask(t, event)
        if not mask.any():
            return None
        rows = np.flatnonzero(mask)
        return int(self.blocks["block_id"][int(rows[np.argmax(self.size[rows])])])




def block_positions(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """``block_id, pos_alloc, pos_free`` of the device's blocks: the positions (in the
    device's events, as the cursor counts them) of each block's alloc and free, so that a
    block is alive just after event K when ``pos_alloc <= K < pos_free``.

    Taken from the block's ``seq_alloc``/``seq_free`` where its events are in the trace;
    a ghost is alive from before the first event (-1), a block never freed to the end;
    blocks with no events (profiler operator tables) are placed by time.  A ``seq`` is
    found by binary search on the device's ``seq`` (rising along its events, model.py
    "One event axis"; a join where it does not rise)."""
    events = trace.device_events(device)
    blocks = trace.device_blocks(device)
    times = events["t"].to_numpy().astype(np.int64, copy=False)
    if times.size == 0:  # positions count the level's times (as Timeline.times does)
        times = unique_sorted(allocated_level(trace, device).t)
    find = _seq_finder(events)
    never = np.iinfo(np.int64).max

    def placed(seq: str, time: str, missing_time: int) -> np.ndarray:
        """Positions of the events ``seq`` names, by ``time`` where it names none."""
        found = find(blocks[seq])
        lost = found < 0
        if lost.any():
            t = blocks[time].fill_null(missing_time).to_numpy()[lost]
            by_time = np.searchsorted(times, t, side="left").astype(np.int64)
            found[lost] = np.where(t == never, never, by_time)
        return found

    ghost = blocks["ghost"].fill_null(False).to_numpy()
    pos_alloc = np.where(ghost, -1, placed("seq_alloc", "t_alloc", np.iinfo(np.int64).min))
    out = pl.DataFrame({"block_id": blocks["block_id"],
                        "pos_alloc": pos_alloc.astype(np.int64, copy=False),
                        "pos_free": placed("seq_free", "t_free", never)})
    if "seq_free_requested" in blocks.columns and "t_free_requested" in blocks.columns:
        out = out.with_columns(pos_free_requested=placed(
            "seq_free_requested", "t_free_requested", never))
    return out


#: A device's seqs spanning at most this many times its events are found by a table.
_DENSE_SPAN = 4


def _seq_finder(events: pl.DataFrame):
    """A function from a column of ``seq`` values to their event positions (-1 where no
    event of the device has it, or the value is null)."""
    seq = events["seq"].to_numpy().astype(np.int64, copy=False) if events.height \
        else np.zeros(0, dtype=np.int64)
    rising = events["seq"].null_count() == 0 and bool(np.all(seq[1:] > seq[:-1]))
    # rising by one from event to event (a snapshot's device): a seq's position is its
    # distance from the first, no search
    contiguous = rising and seq.size > 0 and int(seq[-1]) - int(seq[0]) == seq.size - 1
    # rising with gaps (an msMemScope device: its rows among the file's others): where
    # the seqs span at most a few times the events, a table indexed by seq (4 bytes a
    # seq) finds each position at once, made on the first search
    span = int(seq[-1]) - int(seq[0]) + 1 if rising and seq.size else 0
    dense = rising and not contiguous and seq.size > 0 and span <= _DENSE_SPAN * seq.size
    made: list[np.ndarray] = []

    def position_of() -> np.ndarray:
        if not made:
            table = np.full(span, -1, dtype=np.int32 if seq.size < 2**31 else np.int64)
            table[seq - seq[0]] = np.arange(seq.size, dtype=table.dtype)
            made.append(table)
        return made[0]

    def find(values: pl.Series) -> np.ndarray:
        known = ~values.is_null().to_numpy()
        wanted = values.fill_null(-1).to_numpy().astype(np.int64, copy=False)
        if not seq.size:
            return np.full(wanted.size, -1, dtype=np.int64)
        if contiguous:
            at = wanted - seq[0]
            at[~(known & (at >= 0) & (at < seq.size))] = -1
            return at
        if dense:  # a table from seq to position: a lookup, not a binary search
            table = position_of()
            at = wanted - seq[0]
            inside = known & (at >= 0) & (at < table.size)
            at[~inside] = 0
            found = table[at].astype(np.int64)
            found[~inside] = -1
            return found
        if rising:  # (in place where it can: a block's worth of int64 per temporary)
            at = np.searchsorted(seq, wanted).astype(np.int64, copy=False)
            hit = seq[np.minimum(at, seq.size - 1)] == wanted
            hit &= known
            hit &= at < seq.size
            at[~hit] = -1
            return at
        by_seq = events.select(seq=pl.col("seq"), pos=pl.int_range(0, pl.len(),
                                                                    dtype=pl.Int64))
        joined = pl.DataFrame({"seq": values}).join(by_seq, on="seq", how="left",
                                                    maintain_order="left")
        return joined["pos"].fill_null(-1).to_numpy().astype(np.int64)

    return find


__all__ = ["Levels", "LiveBlocks", "Timeline", "active_level", "block_positions"]
