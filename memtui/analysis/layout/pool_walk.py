"""The pool at the cursor's event, stepped from the pool at the event before: the Pool
screen's keys.

:func:`~memtui.analysis.layout.pool_state.state_at_seq` lays every live block into its
segment and sorts them all by (segment, address): about 30 ms at 125k live blocks (a
20M-event snapshot), on every cursor key.  Between two neighbouring events only the
blocks allocated, freed or asked to be freed in between change.  :class:`PoolWalk` keeps
the last state it made, with each of its blocks' lifetime on the event axis and sort key,
and makes the state at a nearby event from it: the blocks that died are dropped, those
born are placed and merged in where their key sorts, and only the segments they (or a
block whose free was requested in between) sit in are measured again, their gaps spliced
into the others'.  Numpy over the blocks that changed and copies of the arrays: no sort
of the live blocks, no loop over events.

The state is the same :class:`PoolState`, array for array, as the full computation's
(tests/test_pool_walk.py compares them on random walks).  The walk makes the full one
where a step could not be exact or would not be cheaper: the first state, a segment
allocated or freed in between (every block's segment number may move), a far jump, an
address key that does not fit 64 bits, a born block tied with a kept one on (segment,
address) (a broken trace), a device whose lifetimes are not exact by event order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from memtui.analysis.layout.pool_state import (
    PoolState,
    orders_by_seq,
    pool_state_placed,
    segment_measures,
    state_at_event,
    state_at_seq,
    time_after_seq,
)
from memtui.analysis.timeline.live import DeviceIndex, cached, device_index, event_blocks
from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace

#: A step changing more blocks than this share of the live ones is no cheaper than the
#: full computation: it makes that instead.
STEP_SHARE = 0.25
#: ... and a step of up to this many changed blocks is always taken.
STEP_BLOCKS = 4096


@dataclass(frozen=True)
class _Walked:
    """A state and, per block in its order, what stepping from it needs."""

    seq: int
    state: PoolState
    start: np.ndarray  # seq_alloc (INT64_MIN: before the trace)
    end: np.ndarray  # seq_free (INT64_MAX: never)
    free_requested: np.ndarray  # seq_free_requested (INT64_MAX: never)
    key: np.ndarray | None  # (segment + 1) << address bits | address: the blocks' order


class PoolWalk:
    """The pool of one device at any event, stepped from the last one asked for (see the
    module docstring).  Thread safe: one step at a time."""

    def __init__(self, trace: MemoryTrace, device: str) -> None:
        self.trace = trace
        self.device = device
        self.index: DeviceIndex = device_index(trace, device)
        self.exact = orders_by_seq(trace, device)
        self._last: _Walked | None = None
        self._lock = threading.Lock()
        self._seg_end_sorted: np.ndarray | None = None
        addr = self.index.addr
        self._addr_bits = (max(int(addr.max()).bit_length(), 1)
                           if addr.size and int(addr.min()) >= 0 else None)
        #: how many states were stepped and how many made in full (tests, benchmarks)
        self.steps = 0
        self.full = 0

    def state_at_event(self, event: int, t: int | None = None) -> PoolState:
        """:func:`~memtui.analysis.layout.pool_state.state_at_event`, stepped."""
        events = self.trace.device_events(self.device)
        if not self.exact or events.is_empty():
            return state_at_event(self.trace, self.device, event, t)
        event = min(max(int(event), 0), events.height - 1)
        # the time after it: its own (events in seq order), as time_after_seq finds it
        return self._state(int(events["seq"][event]),
                           int(event_blocks(self.trace, self.device).t[event]))

    def state_at_seq(self, seq: int) -> PoolState:
        """:func:`~memtui.analysis.layout.pool_state.state_at_seq`, stepped where the last
        state is near (on a device whose lifetimes are exact by event order)."""
        if not self.exact:
            return state_at_seq(self.trace, self.device, seq)
        return self._state(seq, time_after_seq(self.trace, self.device, seq,
                                                self.index.t_start))

    def _state(self, seq: int, t: int) -> PoolState:
        """The state at event ``seq``, whose time is ``t``."""
        with self._lock:
            last = self._last
            if last is not None and last.seq == seq:
                return last.state
            walked = self._step(last, seq, t) if last is not None else None
            if walked is None:
                walked = self._whole(seq, t)
                self.full += 1
            else:
                self.steps += 1
            self._last = walked
            return walked.state

    # -- the full computation, with what a step needs ---------------------------------------

    def _whole(self, seq: int, t: int) -> _Walked:
        index = self.index
        block_life, segment_life = index.seq_lives()
        positions = block_life.positions_at(seq)
        state, placed = pool_state_placed(index, segment_life.at(seq),
                                          block_life.order[positions], t, seq=seq)
        positions = positions[placed]
        return _Walked(seq=seq, state=state, start=block_life.start[positions],
                       end=block_life.end[positions],
                       free_requested=index.seq_free_requested[state.blk_row],
                       key=self._keys(state.blk_segment, state.blk_addr, state.seg_id.size))

    def _keys(self, where: np.ndarray, addr: np.ndarray, n_seg: int) -> np.ndarray | None:
        """The blocks' sort key (segment, address) packed in one int64, or None where it
        does not fit (then no step is taken)."""
        bits = self._addr_bits
        if bits is None or (n_seg + 1).bit_length() + bits > 63:
            return None
        return ((where + 1) << bits) | addr

    # -- a step ---------------------------------------------------------------------------

    def _step(self, last: _Walked, seq: int, t: int) -> _Walked | None:
        """The state at ``seq`` from ``last``, or None where the full computation is due."""
        if last.key is None or self._segments_change(last.seq, seq):
            return None
        index = self.index
        block_life = index.seq_lives()[0]
        lo, hi = sorted((last.seq, seq))
        born_between = int(np.searchsorted(block_life.start, hi, side="right")
                           - np.searchsorted(block_life.start, lo, side="right"))
        if born_between > max(STEP_BLOCKS, STEP_SHARE * last.state.blk_row.size):
            return None  # a far jump
        kept = (last.start <= seq) & (seq < last.end)
        positions = self._born(last.seq, seq)
        rows = block_life.order[positions]
        keep_rows = ~index.is_segment[rows]
        positions, rows = positions[keep_rows], rows[keep_rows]
        changed = rows.size + int(kept.size - np.count_nonzero(kept))
        if changed > max(STEP_BLOCKS, STEP_SHARE * (rows.size + kept.size)):
            return None
        return self._merged(last, seq, t, kept, positions, rows)

    def _born(self, before: int, seq: int) -> np.ndarray:
        """Positions (in the block lifetime index) of the blocks alive at ``seq`` but not
        at ``before``: ahead, those allocated in between and alive still; back, those
        alive at ``seq`` freed by ``before``."""
        life = self.index.seq_lives()[0]
        if seq > before:
            first, last = np.searchsorted(life.start, (before, seq), side="right")
            positions = np.arange(first, last, dtype=np.int64)
            return positions[life.end[positions] > seq]
        positions = life.positions_at(seq)
        return positions[life.end[positions] <= before]

    def _segments_change(self, a: int, b: int) -> bool:
        """Whether a segment is allocated or freed after event ``min(a, b)`` up to
        ``max(a, b)`` (then each block's segment index may move: no step)."""
        segment_life = self.index.seq_lives()[1]
        if self._seg_end_sorted is None:
            self._seg_end_sorted = np.sort(segment_life.end)
        lo, hi = min(a, b), max(a, b)
        return any(int(np.searchsorted(values, hi, side="right")
                       - np.searchsorted(values, lo, side="right")) > 0
                   for values in (segment_life.start, self._seg_end_sorted))

    def _merged(self, last: _Walked, seq: int, t: int, kept: np.ndarray,
                positions: np.ndarray, rows: np.ndarray) -> _Walked | None:
        """``last``'s blocks where ``kept``, with the blocks ``rows`` (at ``positions`` of
        the lifetime index) merged in by key, and the segments that changed measured."""
        index, old = self.index, last.state
        block_life = index.seq_lives()[0]
        addr = index.addr[rows]
        where = _segment_of(old.seg_addr, old.seg_addr + old.seg_size, addr)
        key = self._keys(where, addr, old.seg_id.size)
        assert key is not None  # the segments are last's: their count fits as it did
        # the born blocks in the full computation's order: key, then lifetime position
        order = np.lexsort((positions, key))
        positions, rows, addr, where, key = (positions[order], rows[order], addr[order],
                                             where[order], key[order])
        assert last.key is not None  # (_step steps only from a state with its keys)
        kept_key = last.key[kept]
        at = np.searchsorted(kept_key, key, side="left")
        if np.any(np.searchsorted(kept_key, key, side="right") != at):
            return None  # a born block shares (segment, address) with a kept one
        # each merged place takes a kept block (its index in last's arrays) or a born one
        # (its index after them): one gather per array
        born = at + np.arange(at.size)
        source = np.empty(kept_key.size + born.size, dtype=np.int64)
        stays = np.ones(source.size, dtype=bool)
        stays[born] = False
        source[stays] = np.flatnonzero(kept)
        source[born] = kept.size + np.arange(born.size)

        def merged(old_values: np.ndarray, new_values: np.ndarray) -> np.ndarray:
            return np.concatenate((old_values, new_values))[source]

        blk_row = merged(old.blk_row, rows)
        blk_segment = merged(old.blk_segment, where)
        free_requested = merged(last.free_requested, index.seq_free_requested[rows])
        pending = free_requested <= seq
        state = replace(
            old, t=t,
            blk_row=blk_row, blk_id=merged(old.blk_id, index.block_id[rows]),
            blk_addr=merged(old.blk_addr, addr), blk_size=merged(old.blk_size, index.size[rows]),
            blk_pending=pending, blk_requested=merged(old.blk_requested, index.requested[rows]),
            blk_segment=blk_segment)
        # the segments whose blocks changed: died, born, or their free requested
        touched = np.concatenate([old.blk_segment[~kept], where,
                                  blk_segment[pending != merged(old.blk_pending, pending[born])]])
        state = _remeasured(state, unique_sorted(touched[touched >= 0]))
        return _Walked(seq=seq, state=state, start=merged(last.start, block_life.start[positions]),
                       end=merged(last.end, block_life.end[positions]),
                       free_requested=free_requested, key=merged(last.key, key))


def _segment_of(seg_addr: np.ndarray, seg_end: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """Index of the segment (sorted by address) holding each address, -1 for none (as
    :func:`~memtui.analysis.layout.pool_state.pool_state_placed` places blocks)."""
    where = np.searchsorted(seg_addr, addr, side="right") - 1
    inside = where >= 0
    inside[inside] = addr[inside] < seg_end[where[inside]]
    return np.where(inside, where, -1)


def _remeasured(state: PoolState, touched: np.ndarray) -> PoolState:
    """``state`` with the per-segment measures and gaps of segments ``touched`` (sorted
    indexes) measured again from their blocks, the others' kept."""
    if touched.size == 0:
        return state
    first = np.searchsorted(state.blk_segment, touched, side="left")
    count = np.searchsorted(state.blk_segment, touched, side="right") - first
    # the touched segments' blocks (contiguous runs of the sorted blocks), in order
    starts = np.repeat(first - np.cumsum(count) + count, count)
    members = starts + np.arange(int(count.sum()))
    local = np.repeat(np.arange(touched.size), count)
    seg_end = state.seg_addr + state.seg_size
    measures = segment_measures(local, state.blk_addr[members], state.blk_size[members],
                                state.blk_pending[members], state.blk_requested[members],
                                state.seg_addr[touched], seg_end[touched])
    fields = {}
    for name in ("seg_allocated", "seg_pending", "seg_requested", "seg_free",
                 "seg_largest_gap", "seg_blocks"):
        values = getattr(state, name).copy()
        values[touched] = measures[name]
        fields[name] = values
    # the touched segments' gaps replace theirs, in (segment, address) order
    gap_segment = touched[measures["gap_segment"]]
    redone = np.zeros(state.seg_id.size, dtype=bool)
    redone[touched] = True
    keep = ~redone[state.gap_segment]
    at = np.searchsorted(state.gap_segment[keep], gap_segment, side="left")
    fields["gap_segment"] = np.insert(state.gap_segment[keep], at, gap_segment)
    fields["gap_addr"] = np.insert(state.gap_addr[keep], at, measures["gap_addr"])
    fields["gap_size"] = np.insert(state.gap_size[keep], at, measures["gap_size"])
    return replace(state, **fields)


def pool_walk(trace: MemoryTrace, device: str) -> PoolWalk:
    """The (cached) :class:`PoolWalk` of ``device``."""
    return cached(trace, ("pool_walk", device), lambda: PoolWalk(trace, device))
