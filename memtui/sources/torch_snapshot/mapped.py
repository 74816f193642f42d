"""Expandable segments as PyTorch keeps them: the mapped ranges over time.

With ``expandable_segments:True`` the allocator reserves one large virtual range per
stream and maps physical pages into it as the pool grows (``segment_map``), unmapping
them when it gives memory back (``segment_unmap``: ``empty_cache()``, or malloc's retry
before an out-of-memory error).  A map and the unmap that later gives the same bytes back
need not cover the same range: pages mapped by several maps go back in one unmap, one
map's pages go back in pieces.  The dump lists each contiguous mapped range as one
segment.  So pairing a map with an unmap by address (as a ``segment_alloc`` is paired
with its ``segment_free``) is wrong for them.

:func:`mapped_pieces` finds what was mapped when as PyTorch's own viewer does
(MemoryViz.js, *Allocator State History*): it starts from the ranges mapped at the dump
and undoes the trace's maps and unmaps from the last back to the first (an undone map
takes its range out, an undone unmap puts its range back).  What is left at the start
was mapped before the history began.  Each range thus gets a birth (the map that made it,
or the start) and a death (the unmap that gave it back, or none): the ranges are cut at
every boundary a map or an unmap draws, so a piece is born and dies whole.  The pieces
alive just after any event are exactly the viewer's mapped ranges there; adjacent pieces
of one stream are the one segment the dump (and the viewer) shows
(:func:`memtui.analysis.layout.pool_state.pool_state` joins them).

A trace that maps bytes no later state holds, or unmaps bytes that were not mapped (a
ring buffer that lost events, a dump taken out of step) cannot be undone exactly: those
bytes are left out or kept as found, and counted (:class:`MappedPieces.unexplained`).
The loop runs over the segment events only (a few per cudaMalloc-sized growth), never
over the allocations.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import polars as pl

#: The columns of a piece, as the segments frame takes them.
PIECE_SCHEMA = {
    "addr": pl.UInt64, "size": pl.Int64, "seq_alloc": pl.Int64, "seq_free": pl.Int64,
    "t_alloc": pl.Int64, "t_free": pl.Int64, "stream": pl.Int64, "pool_id": pl.String,
    "kind": pl.String, "ghost": pl.Boolean,
}


@dataclass
class _Range:
    """A mapped range while the trace is undone: its end, death and attributes."""

    end: int
    seq_free: int | None
    t_free: int | None
    stream: int | None
    pool_id: str | None
    kind: str | None


@dataclass
class MappedPieces:
    """The pieces (rows of :data:`PIECE_SCHEMA`) and the bytes the trace could not
    explain: mapped by a map but held by no later state, unmapped twice."""

    frame: pl.DataFrame
    unexplained_map: int = 0
    unexplained_unmap: int = 0
    events: list[int] = field(default_factory=list)  # seq of the events that did not fit

    @property
    def unexplained(self) -> int:
        return self.unexplained_map + self.unexplained_unmap


class _Mapped:
    """Disjoint mapped ranges by start address (a sorted list of starts, a dict of
    ranges): few ranges, few events."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ranges: dict[int, _Range] = {}

    def add(self, start: int, item: _Range) -> None:
        bisect.insort(self.starts, start)
        self.ranges[start] = item

    def remove(self, start: int) -> _Range:
        self.starts.pop(bisect.bisect_left(self.starts, start))
        return self.ranges.pop(start)

    def overlapping(self, start: int, end: int) -> list[int]:
        """Starts of the ranges that overlap ``[start, end)``, in address order."""
        first = max(bisect.bisect_right(self.starts, start) - 1, 0)
        out = []
        for s in self.starts[first:]:
            if s >= end:
                break
            if self.ranges[s].end > start:
                out.append(s)
        return out

    def cut(self, start: int, end: int) -> list[tuple[int, _Range]]:
        """Take ``[start, end)`` out: the parts taken (start, range narrowed to the part),
        the parts outside it kept."""
        taken = []
        for s in self.overlapping(start, end):
            item = self.remove(s)
            lo, hi = max(s, start), min(item.end, end)
            if s < lo:
                self.add(s, _narrowed(item, lo))
            if hi < item.end:
                self.add(hi, _narrowed(item, item.end))
            taken.append((lo, _narrowed(item, hi)))
        return taken

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` no range covers."""
        out, at = [], start
        for s in self.overlapping(start, end):
            if s > at:
                out.append((at, s))
            at = max(at, self.ranges[s].end)
        if at < end:
            out.append((at, end))
        return out


def _narrowed(item: _Range, end: int) -> _Range:
    return _Range(end, item.seq_free, item.t_free, item.stream, item.pool_id, item.kind)


def mapped_pieces(at_end: pl.DataFrame, ops: pl.DataFrame, start: int,
                  holders: pl.DataFrame | None = None,
                  event_pools: dict[int, str] | None = None) -> MappedPieces:
    """The mapped pieces of one device (see the module docstring).

    ``at_end``: the ranges mapped at the dump that no ``segment_alloc`` explains (``addr``,
    ``size``, ``stream``, ``pool_id``, ``kind``); ``ops``: the device's ``segment_map``
    and ``segment_unmap`` events (``seq``, ``t``, ``action``, ``addr``, ``size``,
    ``stream``) in order; ``start``: the time of the device's first event (a piece mapped
    before the history began is born then).  A range the trace unmaps takes its pool and
    kind from the dumped segment holding its address (``holders``: ``addr``, ``end``,
    ``pool_id``, ``kind``), else its pool from its event (``event_pools``: seq -> pool).
    """
    live = _Mapped()
    for addr, size, stream, pool, kind in at_end.select(
            "addr", "size", "stream", "pool_id", "kind").iter_rows():
        if size:
            live.add(int(addr), _Range(int(addr) + int(size), None, None, stream, pool, kind))
    rows: list[tuple] = []
    result = MappedPieces(frame=pl.DataFrame(schema=PIECE_SCHEMA))
    holder = _Holders(holders)
    pools = event_pools or {}
    for seq, t, action, addr, size, stream in reversed(ops.select(
            "seq", "t", pl.col("action").cast(pl.String), "addr", "size", "stream").rows()):
        lo, hi = int(addr or 0), int(addr or 0) + int(size or 0)
        if hi <= lo:
            continue
        if action == "segment_map":  # undone: its bytes were not mapped before it
            taken = live.cut(lo, hi)
            for part_start, item in taken:
                rows.append((part_start, item.end - part_start, seq, item.seq_free, t,
                             item.t_free, item.stream, item.pool_id, item.kind, False))
            missing = (hi - lo) - sum(item.end - s for s, item in taken)
            if missing:
                result.unexplained_map += missing
                result.events.append(seq)
        else:  # segment_unmap undone: its bytes were mapped until it
            pool, kind = holder.of(lo)
            pool = pool if pool is not None else pools.get(seq)
            gaps = live.gaps(lo, hi)
            for g_lo, g_hi in gaps:
                live.add(g_lo, _Range(g_hi, seq, t, stream, pool, kind or "expandable"))
            doubled = (hi - lo) - sum(g_hi - g_lo for g_lo, g_hi in gaps)
            if doubled:
                result.unexplained_unmap += doubled
                result.events.append(seq)
    for s in live.starts:  # mapped before the history began
        item = live.ranges[s]
        rows.append((s, item.end - s, None, item.seq_free, start, item.t_free, item.stream,
                     item.pool_id, item.kind, True))
    result.frame = pl.DataFrame(rows, schema=PIECE_SCHEMA, orient="row")
    result.events.sort()
    return result


class _Holders:
    """The dumped segments, to name the pool and kind of a range the trace unmaps."""

    def __init__(self, holders: pl.DataFrame | None) -> None:
        if holders is None or holders.is_empty():
            self.starts: list[int] = []
            return
        rows = holders.sort("addr").select("addr", "end", "pool_id", "kind").rows()
        self.starts = [int(r[0]) for r in rows]
        self.rows = rows

    def of(self, addr: int) -> tuple[str | None, str | None]:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < int(self.rows[i][1]):
            return self.rows[i][2], self.rows[i][3]
        return None, None


__all__ = ["PIECE_SCHEMA", "MappedPieces", "mapped_pieces"]
