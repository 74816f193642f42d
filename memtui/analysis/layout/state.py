"""The allocator state just after one event, as plain data (``memtui state``).

What memory_viz's Allocator State History shows at an event, for scripts: the device's
levels at that event, every live segment with its blocks and free ranges in address
order (state ``allocated``, ``pending_free`` or ``free``), the free bytes, the largest
free gap, how many gaps, and the bytes lost to rounding; where the file does not place
every segment, the reserved bytes in none listed (``unplaced_bytes``); where its live
blocks share addresses (a FREE row missing), the bytes shared (``overlap_bytes``); and
``unattributed``, the bytes of the level no block explains, named
(:mod:`memtui.analysis.timeline.attribution`): with them the blocks allocated or pending
free sum to the level.  The pool comes from
:func:`memtui.analysis.layout.pool_state.state_at_event` and the levels from the device's
:class:`~memtui.analysis.timeline.at_time.Timeline`, the same two every screen reads, so the
numbers here are the ones on screen at that event.

An event is named by its position in the device's trace (0-based, as the cursor counts),
or ``first``, ``peak`` (after which allocated is highest), ``last``; or by a time (the
last event at or before it).  ``peak`` is where the level equals the summary's
``peak_allocated_bytes``: where that is the start level (blocks alive before the first
event, freed from the first event on), it is *the start*, :data:`START` (``"event":
null`` in the JSON), the state before the first event.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memtui.analysis.layout.pool_state import (
    PoolState,
    event_seq,
    state_at,
    state_at_event,
    state_at_seq,
)
from memtui.analysis.timeline.at_time import Timeline
from memtui.analysis.timeline.attribution import remainder_rows
from memtui.analysis.timeline.live import device_index
from memtui.model import MemoryTrace

EVENT_NAMES = ("first", "peak", "last")
#: The position :func:`resolve_event` gives for the start: before the first event.
START = -1


def busiest_device(trace: MemoryTrace) -> str | None:
    """The device with the most events, then the most blocks (the one the UI opens on)."""
    names = trace.meta.device_names
    if not names:
        return None
    return max(names, key=lambda name: (trace.device_events(name).height,
                                        trace.device_blocks(name).height))


def resolve_event(timeline: Timeline, event: int | str | None = None,
                  t: int | None = None) -> int:
    """The position named by ``event`` (an int, ``first``, ``peak``, ``last``) or by time
    ``t``; the last event without either; :data:`START` for a peak that is the start
    level.  Raises ValueError outside the trace."""
    if t is not None:
        return timeline.event_at(t)
    if event is None or event == "last":
        return timeline.positions - 1
    if event == "first":
        return 0
    if event == "peak":
        return START if timeline.peak_at_start else timeline.peak_event
    position = int(event)
    if not 0 <= position < timeline.positions:
        raise ValueError(f"event {position} is outside 0..{timeline.positions - 1}")
    return position


def allocator_state(trace: MemoryTrace, device: str, event: int | str | None = None,
                    t: int | None = None) -> dict[str, Any]:
    """The state of ``device`` just after the event named by ``event`` or ``t`` (see
    :func:`resolve_event`), as the JSON object of ``memtui state --json``."""
    timeline = Timeline.build(trace, device)
    info = trace.meta.device(device)
    position = resolve_event(timeline, event, t)
    if position == START:
        state = _state_before_first_event(trace, device, timeline)
        levels = timeline.start_levels()
    else:
        state = state_at_event(trace, device, position, timeline.time_of(position))
        levels = timeline.levels_at_event(position)
    segments = _join_expandable(_segments(trace, device, state))
    free = [b["size"] for s in segments for b in s["blocks"] if b["state"] == "free"]
    held = sum(b["size"] for s in segments for b in s["blocks"] if b["state"] != "free")
    return {
        "device": device,
        "event": None if position == START else position,
        "t": timeline.time_of(max(position, 0)),
        "level": {"allocated": levels.allocated, "active": levels.active,
                  "reserved": levels.reserved,
                  # the file contradicts itself: reserved is only the least it can be
                  "reserved_is_floor": bool(info.reserved_floor),
                  "reserved_ceiling": info.reserved_ceiling},
        "segments": segments,
        "free_bytes": int(sum(free)),
        "largest_gap_bytes": int(max(free, default=0)),
        "gaps": len(free),
        # the free bytes split as every output splits them (pool_state.Fragmentation)
        **{key: value for key, value in state.fragmentation_of(levels.reserved).to_dict()
           .items() if key not in ("reserved_bytes", "largest_gap_bytes")},
        "unplaced_bytes": unplaced_bytes(levels.reserved, segments),
        "overlap_bytes": overlap_bytes(segments),
        "unattributed": [{"label": r.label, "bytes": r.bytes}
                         for r in remainder_rows(trace, device, levels.allocated, held)],
    }


def overlap_bytes(segments: list[dict[str, Any]]) -> int:
    """The bytes that live blocks share with another live block: zero in a consistent
    file; above zero where the file holds a block at an address another block still holds
    (an msMemScope FREE row missing), so that a segment's blocks add up to more than it."""
    spans = [(b["addr"], b["size"]) for s in segments for b in s["blocks"]
             if b["state"] != "free" and b["addr"] is not None]
    if len(spans) < 2:
        return 0
    addr, size = np.array(spans, dtype=np.int64).T
    order = np.argsort(addr, kind="stable")
    addr, end = addr[order], addr[order] + size[order]
    reach = np.maximum.accumulate(end)
    start = np.maximum(addr[1:], reach[:-1])
    covered = int(end[0] - addr[0]) + int(np.clip(end[1:] - start, 0, None).sum())
    return int(size.sum()) - covered


def unplaced_bytes(reserved: int | None, segments: list[dict[str, Any]]) -> int | None:
    """The reserved bytes in no segment ``segments`` lists (a source that does not give
    every segment's address and size, as msMemScope's PTA rows): reserved less the listed
    segments' sizes, never negative; None where reserved is unknown.  Zero on a snapshot,
    whose segments add up to reserved (the invariants)."""
    if reserved is None:
        return None
    listed = sum(s["size"] for s in segments if s["size"] is not None)
    return max(int(reserved) - int(listed), 0)


def empty_state() -> dict[str, Any]:
    """The JSON of ``memtui state`` on a capture without any device (no memory data)."""
    return {"device": None, "event": None, "t": None, "level": None, "segments": [],
            "free_bytes": 0, "largest_gap_bytes": 0, "gaps": 0,
            "fragmented_bytes": 0, "fragmented_segments": 0, "fragmented_share": 0.0,
            "cached_bytes": 0, "cached_segments": 0, "rounding_bytes": 0,
            "unplaced_bytes": None, "overlap_bytes": 0}


def _state_before_first_event(trace: MemoryTrace, device: str,
                              timeline: Timeline) -> PoolState:
    """The pool before the device's first event: what was alive before the trace."""
    seq = event_seq(trace, device, 0)
    if seq is not None:
        return state_at_seq(trace, device, seq - 1)
    return state_at(trace, device, timeline.time_of(0) - 1)


def _segments(trace: MemoryTrace, device: str, state: PoolState) -> list[dict[str, Any]]:
    """Each live segment with its blocks and free ranges in address order; blocks in no
    segment (a source without segments) under one entry with a null address."""
    index = device_index(trace, device)
    segs = index.segments
    pool = segs["pool_id"].to_list() if "pool_id" in segs.columns else [None] * segs.height
    kind = segs["kind"].to_list() if "kind" in segs.columns else [None] * segs.height
    out = []
    for i in range(state.seg_id.size):
        row = int(state.seg_row[i])
        out.append({
            "addr": int(state.seg_addr[i]), "size": int(state.seg_size[i]),
            "stream": int(index.seg_stream[row]), "pool": _pool_of(state, index, pool, i),
            "kind": kind[row],
            "blocks": _blocks_of(state, state.blocks_of_segment(i), state.gaps_of_segment(i)),
        })
    orphans = np.flatnonzero(state.blk_segment < 0)
    if orphans.size:
        out.append({"addr": None, "size": None, "stream": None, "pool": None, "kind": None,
                    "blocks": _blocks_of(state, orphans, np.zeros(0, dtype=np.int64))})
    return out


def _pool_of(state: PoolState, index, pools: list, i: int) -> str | None:
    """The pool of segment ``i``: the first its pieces name (an expandable segment's range
    unmapped before the dump names none; the dumped ones do)."""
    for piece in state.piece_id[state.piece_segment == i].tolist():
        row = index.row_of_segment(int(piece))
        if row is not None and pools[row] is not None:
            return pools[row]
    return None


def _join_expandable(segments: list[dict]) -> list[dict]:
    """Adjacent mapped ranges of one expandable segment (same stream) as the one segment
    the allocator dumps, free ranges across the seam as one, its pool the first one a
    range names (a range unmapped before the dump names none); ``kind`` dropped."""
    out: list[dict] = []
    for seg in segments:
        prev = out[-1] if out else None
        if (prev is not None and seg.get("kind") == "expandable"
                and prev.get("kind") == "expandable"
                and prev["addr"] is not None and seg["addr"] == prev["addr"] + prev["size"]
                and seg["stream"] == prev["stream"]):
            prev["size"] += seg["size"]
            prev["pool"] = prev["pool"] if prev["pool"] is not None else seg["pool"]
            blocks = seg["blocks"]
            if prev["blocks"] and blocks and prev["blocks"][-1]["state"] == "free" \
                    and blocks[0]["state"] == "free":
                prev["blocks"][-1] = {**prev["blocks"][-1],
                                      "size": prev["blocks"][-1]["size"] + blocks[0]["size"]}
                blocks = blocks[1:]
            prev["blocks"] = prev["blocks"] + blocks
        else:
            out.append(dict(seg))
    for seg in out:
        seg.pop("kind", None)
    return out


def _blocks_of(state: PoolState, blocks: np.ndarray, gaps: np.ndarray) -> list[dict]:
    rows = [{"block_id": int(state.blk_id[b]),  # the id every screen and output gives it
             "addr": int(state.blk_addr[b]), "size": int(state.blk_size[b]),
             "requested_size": int(state.blk_requested[b]),
             "state": "pending_free" if state.blk_pending[b] else "allocated"}
            for b in blocks.tolist()]
    rows += [{"block_id": None, "addr": int(state.gap_addr[g]), "size": int(state.gap_size[g]),
              "requested_size": None, "state": "free"} for g in gaps.tolist()]
    return sorted(rows, key=lambda r: r["addr"])


__all__ = ["EVENT_NAMES", "START", "allocator_state", "busiest_device", "empty_state",
           "resolve_event"]
