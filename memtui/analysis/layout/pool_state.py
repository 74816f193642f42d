"""The allocator's pool at any moment: segments, their blocks, free gaps, fragmentation.

memory_viz's Allocator State History replays the trace backwards from the dump on every
click.  Here the state at ``t`` comes straight from the lifetimes: the segments and
blocks alive at ``t`` (:mod:`memtui.analysis.timeline.live`), each block placed in the segment
that holds its address, then sorted by address to find the gaps between them.  Every
step is numpy over the live rows only.

A live block is *allocated*, or *pending free* between its ``free_requested`` and its
``free_completed`` (PyTorch waits for the streams that used it).  The rest of a segment
is *free*, as gaps.

Fragmentation has one definition here, used by every screen, ``memtui state``, the
findings, ``memtui whatif`` and the report (:class:`Fragmentation`,
:attr:`PoolState.fragmentation`).  Reserved but unallocated bytes split three ways, each
with one name: **fragmented** (free inside *partly used* segments, those that also hold
a live block: a segment cannot be given back while one block lives in it, and its gaps
serve only requests that fit them), **cached** (segments that hold no live block at
all, *wholly free*: the next requests that fit reuse them, ``empty_cache()`` gives them
back: not fragmentation) and **rounding** (inside the live blocks, the allocator's
rounding: size - requested size).  Fragmented bytes are said as a share *of reserved*,
never as a ratio of gaps; the largest gap of the partly used segments says what the
largest request they could serve is.

:func:`explain_oom` reads the state at an ``oom`` event: the request against the
largest gap the allocator could have used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from memtui.analysis.timeline.live import DeviceIndex, cached, device_index
from memtui.model import MemoryTrace

#: PyTorch's caching allocator serves requests up to 1 MiB from "small" segments.
SMALL_REQUEST = 1 << 20


#: The names of the three measures (module docstring), as every output says them.
FRAGMENTED = "fragmented"
FRAGMENTED_MEANS = "free inside partly used segments"
CACHED = "cached"
CACHED_MEANS = "wholly free segments"
ROUNDING = "rounding"
ROUNDING_MEANS = "lost to rounding inside blocks"


@dataclass(frozen=True)
class Fragmentation:
    """Where a pool's reserved but unallocated bytes are (see the module docstring)."""

    reserved: int
    fragmented: int  # free inside partly used segments
    fragmented_segments: int  # segments with live blocks and free bytes
    largest_gap: int  # the largest free range inside those segments
    cached: int  # bytes of live segments that hold no live block
    cached_segments: int
    rounding: int  # size - requested inside the live blocks

    @property
    def share(self) -> float:
        """Fragmented bytes as a share of reserved (0 with nothing reserved)."""
        return self.fragmented / self.reserved if self.reserved else 0.0

    def to_dict(self) -> dict[str, int | float]:
        return {"reserved_bytes": self.reserved, "fragmented_bytes": self.fragmented,
                "fragmented_segments": self.fragmented_segments,
                "fragmented_share": round(self.share, 4),
                "largest_gap_bytes": self.largest_gap, "cached_bytes": self.cached,
                "cached_segments": self.cached_segments, "rounding_bytes": self.rounding}


@dataclass(frozen=True)
class PoolState:
    """The pool of one device at ``t``.  Arrays are per live segment (``seg_*``, sorted
    by address), per live block (``blk_*``, sorted by address) and per free gap
    (``gap_*``).  ``seg_row``/``blk_row`` are rows of the :class:`DeviceIndex` arrays.
    """

    t: int
    seg_row: np.ndarray
    seg_id: np.ndarray
    seg_addr: np.ndarray
    seg_size: np.ndarray
    seg_allocated: np.ndarray
    seg_pending: np.ndarray
    seg_requested: np.ndarray
    seg_free: np.ndarray
    seg_largest_gap: np.ndarray
    seg_blocks: np.ndarray
    blk_row: np.ndarray
    blk_id: np.ndarray
    blk_addr: np.ndarray
    blk_size: np.ndarray
    blk_pending: np.ndarray
    blk_requested: np.ndarray
    blk_segment: np.ndarray  # index into seg_* (-1: in no live segment)
    gap_segment: np.ndarray
    gap_addr: np.ndarray
    gap_size: np.ndarray
    #: Every live segment piece's id (an expandable segment's mapped ranges are pieces of
    #: one segment; other segments are one piece) and the index of its segment.
    piece_id: np.ndarray
    piece_segment: np.ndarray

    def segment_of_id(self, segment_id: int) -> int | None:
        """Index (into ``seg_*``) of the segment that segment id ``segment_id`` is (or, for a
        mapped range of an expandable segment, is part of)."""
        hits = np.flatnonzero(self.piece_id == segment_id)
        return int(self.piece_segment[hits[0]]) if hits.size else None

    @property
    def reserved(self) -> int:
        return int(self.seg_size.sum())

    @property
    def allocated(self) -> int:
        """Bytes in allocated blocks (pending frees not included)."""
        return int(self.blk_size[~self.blk_pending].sum())

    @property
    def pending(self) -> int:
        return int(self.blk_size[self.blk_pending].sum())

    @property
    def rounding(self) -> int:
        """Bytes lost to rounding in the live blocks: size - requested_size (memory_viz's
        "free space lost to rounding"); 0 where the source knows no requested size."""
        return int(np.maximum(self.blk_size - self.blk_requested, 0).sum())

    @property
    def free(self) -> int:
        return int(self.seg_free.sum())

    @property
    def largest_gap(self) -> int:
        return int(self.gap_size.max()) if self.gap_size.size else 0

    def fragmentation_of(self, reserved: int | None) -> Fragmentation:
        """:attr:`fragmentation` measured against the device's reserved level at this
        moment (``reserved``: where a layer's reserved holds more than the segments
        listed, the share is of it; None: of the segments)."""
        measures = self.fragmentation
        if reserved is None or reserved <= measures.reserved:
            return measures
        return replace(measures, reserved=int(reserved))

    @property
    def fragmentation(self) -> Fragmentation:
        """Reserved but unallocated bytes, split (see the module docstring); the share is
        of the segments listed (:meth:`fragmentation_of` for a device's level)."""
        empty = self.seg_blocks == 0
        partly = ~empty & (self.seg_free > 0)
        in_partly = ~empty[self.gap_segment] if self.gap_size.size else np.zeros(0, bool)
        return Fragmentation(
            reserved=self.reserved,
            fragmented=int(self.seg_free[partly].sum()),
            fragmented_segments=int(partly.sum()),
            largest_gap=int(self.gap_size[in_partly].max()) if in_partly.any() else 0,
            cached=int(self.seg_size[empty].sum()),
            cached_segments=int(empty.sum()),
            rounding=self.rounding,
        )

    @property
    def orphans(self) -> int:
        """Live blocks in no live segment (a source without segments, or a broken trace)."""
        return int((self.blk_segment < 0).sum())

    def segment_of_block(self, block_id: int) -> int | None:
        """Index (into ``seg_*``) of the segment holding live block ``block_id``."""
        hits = np.flatnonzero(self.blk_id == block_id)
        if not hits.size or self.blk_segment[hits[0]] < 0:
            return None
        return int(self.blk_segment[hits[0]])

    def blocks_of_segment(self, index: int) -> np.ndarray:
        """Indices (into ``blk_*``) of the blocks in segment ``index``, by address."""
        lo = int(np.searchsorted(self.blk_segment, index, side="left"))
        hi = int(np.searchsorted(self.blk_segment, index, side="right"))
        return np.arange(lo, hi)

    def gaps_of_segment(self, index: int) -> np.ndarray:
        lo = int(np.searchsorted(self.gap_segment, index, side="left"))
        hi = int(np.searchsorted(self.gap_segment, index, side="right"))
        return np.arange(lo, hi)

    def segment_at_address(self, addr: int) -> int | None:
        """Index of the live segment whose range holds ``addr``."""
        i = int(np.searchsorted(self.seg_addr, addr, side="right")) - 1
        if i >= 0 and addr < self.seg_addr[i] + self.seg_size[i]:
            return i
        return None


def state_at(trace: MemoryTrace, device: str, t: int) -> PoolState:
    """The pool of ``device`` once every event at or before ``t`` has happened."""
    index = device_index(trace, device)
    return pool_state(index, index.segments_at(t), index.blocks_at(t), t)


def state_at_seq(trace: MemoryTrace, device: str, seq: int) -> PoolState:
    """The pool just after the device's event number ``seq`` (its order in the source).

    Blocks whose free was requested at or before that event (by event order, not by the
    clock: several events share a microsecond) count as pending.
    """
    index = device_index(trace, device)
    block_life, segment_life = index.seq_lives()
    return pool_state(index, segment_life.at(seq), block_life.at(seq),
                      time_after_seq(trace, device, seq, index.t_start), seq=seq)


def time_after_seq(trace: MemoryTrace, device: str, seq: int, start: int) -> int:
    """The latest time of the device's events up to number ``seq`` (``start`` before the
    first): where ``seq`` is in order (as events are by time), the time of the last event
    of that prefix, found by bisection rather than by a pass over every event (a cursor
    key on millions of events)."""
    events = trace.device_events(device)
    if orders_by_seq(trace, device):
        upto = int(events["seq"].search_sorted(seq, side="right"))  # no copy of the column
        return int(events["t"][upto - 1]) if upto else start
    before = events.filter(pl.col("seq") <= seq)
    return int(before["t"].max()) if before.height else start


def state_at_event(trace: MemoryTrace, device: str, event: int,
                   t: int | None = None) -> PoolState:
    """The pool just after the device's event at position ``event`` (0-based, in the
    device's events as the cursor counts them).

    Exact by event order where the source numbers its events in time order and every
    traced block knows its events (PyTorch snapshots); else the state at that event's time.
    A device without events (a profiler's operator table) counts its positions on the
    times of its levels: give that time as ``t``.
    """
    events = trace.device_events(device)
    if events.is_empty():
        return state_at(trace, device, device_index(trace, device).t_start if t is None else t)
    event = min(max(int(event), 0), events.height - 1)
    if orders_by_seq(trace, device):
        return state_at_seq(trace, device, int(events["seq"][event]))
    return state_at(trace, device, int(events["t"][event]))


def block_rows_at_event(trace: MemoryTrace, device: str, event: int,
                        t: int | None = None) -> np.ndarray:
    """Rows (in :func:`device_index`'s arrays) of the blocks alive just after the device's
    event at position ``event``: by event order where :func:`state_at_event` is exact, so
    the rows' sizes sum to the status bar's allocated at that event, also among events
    sharing a timestamp; else the blocks alive at that event's time (or ``t``)."""
    index = device_index(trace, device)
    events = trace.device_events(device)
    if events.is_empty():
        return index.blocks_at(index.t_start if t is None else t)
    seq = event_seq(trace, device, event)
    if seq is not None:
        return index.seq_lives()[0].at(seq)
    return index.blocks_at(int(events["t"][min(max(int(event), 0), events.height - 1)]))


def event_seq(trace: MemoryTrace, device: str, event: int | None) -> int | None:
    """The ``seq`` of the device's event at position ``event`` where lifetimes are exact
    by event order (as :func:`state_at_event`), else None (go by the event's time)."""
    events = trace.device_events(device)
    if event is None or events.is_empty() or not orders_by_seq(trace, device):
        return None
    return int(events["seq"][min(max(int(event), 0), events.height - 1)])


def event_in_life(trace: MemoryTrace, device: str, block_id: int, t: int) -> int | None:
    """The device's event position closest to time ``t`` just after which block
    ``block_id`` is alive (the last event at or before ``t``, moved into the block's life
    where it falls outside): a click on a block's band at ``t`` puts the cursor on an
    event that shows that block.  None where lifetimes are not exact by event order or
    the block is unknown or never alive just after an event."""
    if not orders_by_seq(trace, device):
        return None
    index = device_index(trace, device)
    row = index.row_of_block(block_id)
    if row is None:
        return None
    events = trace.device_events(device)
    seqs = events["seq"].to_numpy()
    times = events["t"].to_numpy()
    block = index.blocks.row(row, named=True)
    ghost = bool(block["ghost"])  # alive before the first event
    lo = 0 if ghost or block["seq_alloc"] is None else \
        int(np.searchsorted(seqs, block["seq_alloc"], side="left"))
    hi = seqs.size - 1 if block["seq_free"] is None else \
        int(np.searchsorted(seqs, block["seq_free"], side="left")) - 1
    if hi < lo:
        return None
    at = int(np.searchsorted(times, t, side="right")) - 1
    return min(max(at, lo), hi)


def orders_by_seq(trace: MemoryTrace, device: str) -> bool:
    """Whether the device's events are in ``seq`` order and every traced block knows the
    ``seq`` of its allocation (cached): a state can then be found by ``seq`` alone."""

    def check() -> bool:
        seq = trace.device_events(device)["seq"]
        blocks = trace.device_blocks(device)
        traced = blocks.filter(~pl.col("ghost").fill_null(False))
        return (seq.null_count() == 0 and seq.is_sorted()
                and traced["seq_alloc"].null_count() == 0)
    return cached(trace, ("orders_by_seq", device), check)


def pool_state(index: DeviceIndex, seg_rows: np.ndarray, blk_rows: np.ndarray, t: int,
               seq: int | None = None) -> PoolState:
    """Lay the live ``blk_rows`` into the live ``seg_rows`` and measure the gaps.

    A block is pending free once its free was requested: at or before event ``seq`` where
    given (exact), else at or before time ``t``.

    Blocks that are themselves segments (a segments ``block_id`` column names them, as
    msMemScope's HAL blocks) are left out: they are the segments, not blocks inside them.
    """
    return pool_state_placed(index, seg_rows, blk_rows, t, seq)[0]


def pool_state_placed(index: DeviceIndex, seg_rows: np.ndarray, blk_rows: np.ndarray, t: int,
                      seq: int | None = None) -> tuple[PoolState, np.ndarray]:
    """:func:`pool_state`, and where each of its blocks was in ``blk_rows`` (``blk_row ==
    blk_rows[placed]``): what :mod:`.pool_walk` carries along to step to the next event."""
    placed = np.flatnonzero(~index.is_segment[blk_rows])
    blk_rows = blk_rows[placed]
    seg_rows = seg_rows[np.argsort(index.seg_addr[seg_rows], kind="stable")]
    piece_id = index.seg_id[seg_rows]
    seg_rows, seg_addr, seg_size, piece_segment = _join_expandable(index, seg_rows)
    seg_end = seg_addr + seg_size
    blk_addr = index.addr[blk_rows]
    # place each block in the segment that holds its address, then sort by (segment, addr)
    where = np.searchsorted(seg_addr, blk_addr, side="right") - 1
    inside = where >= 0
    inside[inside] = blk_addr[inside] < seg_end[where[inside]]
    where = np.where(inside, where, -1)
    order = np.lexsort((blk_addr, where))
    blk_rows, where, blk_addr = blk_rows[order], where[order], blk_addr[order]
    placed = placed[order]
    blk_size = index.size[blk_rows]
    if seq is not None:
        pending = index.seq_free_requested[blk_rows] <= seq
    else:
        pending = index.t_free_requested[blk_rows] <= t
    blk_requested = index.requested[blk_rows]
    measures = segment_measures(where, blk_addr, blk_size, pending, blk_requested, seg_addr,
                                seg_end)
    return PoolState(
        t=t, seg_row=seg_rows, seg_id=index.seg_id[seg_rows], seg_addr=seg_addr,
        seg_size=seg_size, **measures,
        blk_row=blk_rows, blk_id=index.block_id[blk_rows], blk_addr=blk_addr,
        blk_size=blk_size, blk_pending=pending, blk_requested=blk_requested,
        blk_segment=where, piece_id=piece_id, piece_segment=piece_segment,
    ), placed


def segment_measures(where: np.ndarray, blk_addr: np.ndarray, blk_size: np.ndarray,
                     pending: np.ndarray, requested: np.ndarray, seg_addr: np.ndarray,
                     seg_end: np.ndarray) -> dict[str, np.ndarray]:
    """The :class:`PoolState` fields measured per segment (``seg_allocated`` ...
    ``seg_blocks``) and its gaps (``gap_*``), from the blocks sorted by (segment index
    ``where``, address) and the segments ``seg_addr``/``seg_end`` that ``where`` counts."""
    n_seg = seg_addr.size
    inside = where >= 0

    def per_segment(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        keep = mask & inside
        return np.bincount(where[keep], weights=values[keep], minlength=n_seg).astype(np.int64)

    gap_seg, gap_addr, gap_size = _gaps(where, blk_addr, blk_addr + blk_size, seg_addr, seg_end)
    largest = np.zeros(n_seg, dtype=np.int64)
    np.maximum.at(largest, gap_seg, gap_size)
    return {
        "seg_allocated": per_segment(blk_size, ~pending),
        "seg_pending": per_segment(blk_size, pending),
        "seg_requested": per_segment(requested, inside),
        "seg_free": np.bincount(gap_seg, weights=gap_size, minlength=n_seg).astype(np.int64),
        "seg_largest_gap": largest,
        "seg_blocks": np.bincount(where[inside], minlength=n_seg).astype(np.int64),
        "gap_segment": gap_seg, "gap_addr": gap_addr, "gap_size": gap_size,
    }


def _join_expandable(index: DeviceIndex, seg_rows: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The live segments (sorted by address) with the adjacent mapped ranges of one
    expandable segment (same stream and pool) joined into the one segment the allocator
    dumps: (first piece's row, address, size, per piece: its joined segment's index)."""
    addr, size = index.seg_addr[seg_rows], index.seg_size[seg_rows]
    key = index.seg_expandable_key[seg_rows]
    joins = np.zeros(seg_rows.size, dtype=bool)
    if seg_rows.size > 1:
        joins[1:] = (key[1:] >= 0) & (key[1:] == key[:-1]) & (addr[1:] == addr[:-1] + size[:-1])
    if not joins.any():
        return seg_rows, addr, size, np.arange(seg_rows.size)
    first = np.flatnonzero(~joins)
    return (seg_rows[first], addr[first], np.add.reduceat(size, first),
            np.cumsum(~joins) - 1)


def _gaps(
    where: np.ndarray, start: np.ndarray, end: np.ndarray, seg_addr: np.ndarray,
    seg_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Free ranges of every segment: before each block, and after the last one.

    ``where``/``start``/``end`` are the blocks sorted by (segment, address); blocks in no
    segment (``where == -1``) are skipped.  Overlapping blocks (a broken trace) leave no
    gap between them.
    """
    keep = where >= 0
    where, start, end = where[keep], start[keep], end[keep]
    first_in_segment = np.ones(where.size, dtype=bool)
    first_in_segment[1:] = where[1:] != where[:-1]
    # the end of what precedes each block: the segment start, or the furthest end so far
    prev_end = np.empty(where.size, dtype=np.int64)
    if where.size:
        running = _running_end(where, end, seg_addr)
        prev_end[1:] = running[:-1]
        prev_end[first_in_segment] = seg_addr[where[first_in_segment]]
    before = start - prev_end
    # after the last block of each segment (or the whole of a segment with no block)
    tail_end = np.maximum(seg_addr, _last_end_per_segment(where, end, seg_addr.size))
    after = seg_end - tail_end
    gap_seg = np.concatenate([where, np.arange(seg_addr.size)])
    gap_addr = np.concatenate([prev_end, tail_end])
    gap_size = np.concatenate([before, after])
    positive = gap_size > 0
    order = np.lexsort((gap_addr[positive], gap_seg[positive]))
    return (gap_seg[positive][order], gap_addr[positive][order],
            gap_size[positive][order].astype(np.int64))


def _running_end(where: np.ndarray, end: np.ndarray, seg_addr: np.ndarray) -> np.ndarray:
    """The furthest block end so far within each segment (blocks sorted by segment).

    One ``maximum.accumulate`` over ``segment * 2**bits + offset in segment``: the
    segment number dominates, so the maximum never leaks from one segment to the next.
    """
    offset = end - seg_addr[where]
    bits = max(int(offset.max()).bit_length(), 1)
    if (int(where.max()) + 1).bit_length() + bits < 63:
        key = (where.astype(np.int64) << bits) + offset
        return (np.maximum.accumulate(key) & ((1 << bits) - 1)) + seg_addr[where]
    out = end.copy()  # pragma: no cover - segments too many and too large to pack
    for part in np.split(np.arange(end.size), np.flatnonzero(np.diff(where)) + 1):
        out[part] = np.maximum.accumulate(end[part])
    return out


def _last_end_per_segment(where: np.ndarray, end: np.ndarray, n_seg: int) -> np.ndarray:
    last = np.full(n_seg, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last, where, end)
    return last


@dataclass(frozen=True)
class OomExplanation:
    """Why an allocation failed, from the pool at the ``oom`` event."""

    t: int
    requested: int
    stream: int | None
    reserved: int
    free: int
    largest_gap: int  # over every live segment
    largest_usable_gap: int  # over segments of the request's stream and size class
    message: str  # the source's own words (marker name), if any

    @property
    def device_free(self) -> int | None:
        """What the device still had free, where the source's message says it (PyTorch's
        ``... N free on the device``)."""
        found = re.search(r"(\d+) free on the device", self.message or "")
        return int(found.group(1)) if found else None

    @property
    def verdict(self) -> str:
        from memtui.units import format_bytes as fb

        if self.requested > self.free:
            return (f"the pool had only {fb(self.free)} free of {fb(self.reserved)} reserved: "
                    f"the request of {fb(self.requested)} needed a new segment, and the device "
                    "could not provide one")
        if self.requested > self.largest_usable_gap:
            return (f"fragmentation: {fb(self.free)} free in the pool, but the largest usable "
                    f"free gap is {fb(self.largest_usable_gap)}, smaller than the request of "
                    f"{fb(self.requested)}")
        return (f"a free gap of {fb(self.largest_usable_gap)} could hold the request of "
                f"{fb(self.requested)}: the device itself ran out (another process, or memory "
                "outside this allocator)")


def oom_events(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """The device's ``oom`` events (t, seq, size, stream), in order."""
    return trace.device_events(device).filter(pl.col("action") == "oom").select(
        "t", "seq", "size", "stream")


def explain_oom(trace: MemoryTrace, device: str, seq: int,
                state: PoolState | None = None) -> OomExplanation:
    """The pool at the ``oom`` event ``seq`` of ``device``, against its request
    (``state``: that pool where the caller has it, else :func:`state_at_seq`)."""
    index = device_index(trace, device)
    event = trace.device_events(device).filter(pl.col("seq") == seq).row(0, named=True)
    if state is None:
        state = state_at_seq(trace, device, seq)
    requested = int(event["size"] or 0)
    stream = event["stream"]
    usable = np.ones(state.seg_id.size, dtype=bool)
    if stream is not None:
        usable &= index.seg_stream[state.seg_row] == stream
    kinds = index.segments["kind"].to_numpy()[state.seg_row] if state.seg_row.size else []
    small = np.array([k == "small" for k in kinds], dtype=bool)
    usable &= small if requested <= SMALL_REQUEST else ~small
    largest_usable = int(state.seg_largest_gap[usable].max()) if usable.any() else 0
    markers = trace.markers.filter(
        (pl.col("device") == device) & (pl.col("kind") == "oom") & (pl.col("t") == event["t"])
    )
    return OomExplanation(
        t=int(event["t"]), requested=requested, stream=stream, reserved=state.reserved,
        free=state.free, largest_gap=state.largest_gap, largest_usable_gap=largest_usable,
        message=markers["name"][0] if markers.height else "",
    )
