"""PyTorch's own memory-viewer test cases (pytorch/pytorch ``test/profiler/test_memory_viz.js``,
the tests of ``torch/utils/viz/process_alloc_data.js`` and of MemoryViz.js's unpickler),
as tiny snapshots with the figures the viewer's tests expect, for
``tests/sources/test_viewer_parity.py``.

Each case is written from the JS test of the same name: its trace and segments (keys as
the viewer reads them), whether the viewer ran with ``include_private_inactive`` (the
"Allocated Memory (incl. Private Pools)" tab) and the figures its assertions fix.  The
figures are the viewer's; where a JS assertion is about drawing only (a stripe's offset,
which of the blocks get their own polygon under ``max_entries``, a decimated polygon),
the figure kept is the memory it draws (the bytes of the blocks in the band).

:func:`viewer_footprint` is the viewer's own figure (``max_at_time``: the live blocks, a
private pool counted at its envelope, the high-water of its blocks and of its reserved
segments) computed from memtui's model of the capture: the blocks (their sizes, pools,
streams and lifetimes on the event axis) and the segments (pools, streams, lifetimes).
The viewer replays its actions one by one; this walks memtui's events in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memtui.model import MemoryTrace

S = 524288  # the full-snapshot cases' 512 KiB
MiB = 1 << 20


@dataclass
class Case:
    """One viewer test: the snapshot, the viewer mode and the figures it expects."""

    name: str
    traces: list[dict]
    segments: list[dict] = field(default_factory=list)
    private: bool = False  # include_private_inactive
    expect: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict:
        return {"segments": self.segments, "device_traces": [self.traces]}


def ev(action: str, addr: int, size: int, stream: int = 0, **extra) -> dict:
    return {"action": action, "addr": addr, "size": size, "frames": [], "stream": stream,
            **extra}


def seg(address: int, total: int, pool: tuple[int, int] = (0, 0), blocks: list | None = None,
        stream: int = 0) -> dict:
    return {"device": 0, "address": address, "total_size": total, "segment_pool_id": pool,
            "stream": stream, "blocks": blocks or []}


def blk(address: int, size: int, state: str = "active_allocated", frames: list | None = None
        ) -> dict:
    return {"address": address, "size": size, "requested_size": size, "state": state,
            "frames": frames or []}


def _free(addr: int, size: int, **extra) -> dict:
    return ev("free_completed", addr, size, **extra)


def _cases() -> list[Case]:
    pool = (1, 42)
    full_trace = [
        ev("segment_alloc", 0x7F08CDE00000, 2 * MiB), ev("alloc", 0x7F08CDE00000, S),
        ev("segment_alloc", 0x7F08D2800000, 2 * MiB), ev("alloc", 0x7F08D2800000, S),
        ev("free_requested", 0x7F08CDE00000, S), _free(0x7F08CDE00000, S),
        ev("free_requested", 0x7F08D2800000, S), _free(0x7F08D2800000, S),
        ev("alloc", 0x7F08CDE00000, S), ev("alloc", 0x7F08D2800000, S),
        ev("alloc", 0x7F08D2880000, S), ev("alloc", 0x7F08CDE80000, S)]
    small = [dict(e, size=1024) for e in full_trace]
    small[10] = dict(small[10], addr=0x7F08D2800400)
    small[11] = dict(small[11], addr=0x7F08CDE00400)
    for i in range(2):
        small[2 * i] = dict(small[2 * i], size=2 * MiB)
    two_segments = [seg(0x7F08CDE00000, 2 * MiB, (0, 0)), seg(0x7F08D2800000, 2 * MiB, (0, 1))]
    ghost_churn = [_free(0x6A00000, 4 * MiB), ev("alloc", 0x6A00000, 4 * MiB),
                   _free(0x6A00000, 4 * MiB), ev("alloc", 0x6A00000, 4 * MiB),
                   _free(0x6A00000, 4 * MiB)]
    return [
        Case("basic_alloc_free", [ev("alloc", 1000, 100), _free(1000, 100)],
             [seg(0, 4096)], expect={"peak": 100}),
        Case("free_completed_is_matched", [ev("alloc", 1000, 200), _free(1000, 200)],
             [seg(0, 4096)], expect={"peak": 200}),
        Case("pool_free_without_alloc_no_inflation",
             [_free(0x788C2000000, 94371840), ev("alloc", 0x788C2000000, 256)],
             [seg(0x788C0000000, 83886080, pool)], private=True,
             expect={"peak": 94371840, "elements": 2, "envelopes": {("1,42", 0)},
                     "pool_block_sizes": [94371840, 256]}),
        Case("pool_alloc_then_free_normal", [ev("alloc", 2000, 500), _free(2000, 500)],
             [seg(0, 8192, (1, 7))], private=True, expect={"peak": 8192}),
        Case("multiple_pool_frees_without_alloc",
             [_free(1000, 500), _free(2000, 500), _free(3000, 500)],
             [seg(0, 16384, (1, 99))], private=True, expect={"peak": 16384}),
        Case("non_pool_free_without_alloc", [_free(8000, 300)], [seg(0, 16384)],
             expect={"peak": 300}),  # max_at_time's peak (max_size is 0: set in the loop)
        Case("mixed_pool_and_nonpool",
             [ev("alloc", 100, 200), ev("alloc", 5000, 400), _free(100, 200), _free(5000, 400)],
             [seg(0, 4096), seg(4096, 8192, (1, 5))], private=True, expect={"peak": 8392}),
        Case("include_private_inactive_false_ignores_pools",
             [ev("alloc", 5000, 800), _free(5000, 800)], [seg(4096, 8192, (1, 10))],
             expect={"peak": 800}),
        Case("context_for_id_with_pool",
             [ev("alloc", 0xABC000, 2048, stream=3,
                 frames=[{"filename": "model.py", "line": 42, "name": "forward"}])],
             [seg(0xA00000, 0x200000, (2, 7))],
             expect={"pools": ["2,7"], "streams": [3], "sizes": [2048],
                     "frames": ["model.py:42:forward"]}),
        Case("context_for_id_unknown_pool", [ev("alloc", 0xFF0000, 512)],
             [seg(0x100000, 0x100000)], expect={"pools": [None], "sizes": [512]}),
        Case("context_for_id_free_without_alloc",
             [_free(0xDEAD00, 4096, frames=[{"filename": "fsdp.py", "line": 750,
                                            "name": "free_storage"}])],
             [seg(0xD00000, 0x100000)],
             expect={"pools": ["0,0"], "sizes": [4096], "frames": ["fsdp.py:750:free_storage"],
                     "alloc_not_recorded": [True]}),
        Case("post177717_pool_id_from_trace_event",
             [ev("alloc", 0xFF0000, 1024, segment_pool_id=(3, 15)),
              _free(0xFF0000, 1024, segment_pool_id=(3, 15))],
             [], private=True, expect={"peak": 1024, "pools": ["3,15"]}),
        Case("post177717_pool_free_without_alloc_no_segment",
             [_free(0xDEAD00, 2048, segment_pool_id=(1, 42))], [], private=True,
             expect={"peak": 2048, "pools": ["1,42"], "alloc_not_recorded": [True]}),
        Case("post177717_mixed_events_with_and_without_pool_id",
             [ev("alloc", 100, 300), ev("alloc", 0xF000, 500, segment_pool_id=(2, 8)),
              _free(100, 300), _free(0xF000, 500, segment_pool_id=(2, 8))],
             [seg(0, 4096)], private=True, expect={"peak": 800, "pools": ["0,0", "2,8"]}),
        Case("pool_grouped_by_stream",
             [ev("alloc", 1000, 500, stream=1), ev("alloc", 2000, 300, stream=2),
              _free(1000, 500, stream=1), _free(2000, 300, stream=2)],
             [seg(0, 4096, (1, 5))], private=True,
             expect={"envelopes": {("1,5", 1), ("1,5", 2)}}),
        Case("segment_snapshot_with_trace_history", [ev("alloc", 5000, 1000), _free(5000, 1000)],
             [seg(4096, 8192, pool, [blk(5000, 1000, "inactive")])], private=True,
             expect={"elements": 1}),
        Case("segment_snapshot_no_trace", [],
             [seg(4096, 8192, pool, [blk(5000, 1000, "inactive")])], expect={"elements": 0}),
        Case("default_pool_ghost_block", [], [seg(4096, 8192, (0, 0), [blk(5000, 1000)])],
             expect={"elements": 1, "ghost_sizes": [1000]}),
        Case("ghost_blocks", ghost_churn,
             [seg(0x1E00000, 2 * MiB, (0, 0), [blk(0x1E00000, MiB), blk(0x1F00000, MiB,
                                                                         "inactive")]),
              seg(0x6800000, 20 * MiB, (0, 0),
                  [blk(0x6800000, 2 * MiB, frames=[{"filename": "test.py", "line": 10,
                                                    "name": "early_alloc"}]),
                   blk(0x6A00000, 18 * MiB, "inactive")])],
             expect={"elements": 5, "ghost_sizes": [MiB, 2 * MiB]}),
        Case("ghost_blocks_not_created_for_traced_addrs", [ev("alloc", 1000, 512)],
             [seg(0, 4096, (0, 0), [blk(1000, 512)])], private=True,
             expect={"elements": 1, "ghost_sizes": []}),
        Case("ghost_blocks_default_pool_collected", [],
             [seg(0x1000, 8192, (0, 0), [blk(0x1000, 2048), blk(0x1800, 1024)])],
             expect={"ghost_sizes": [1024, 2048]}),
        Case("ghost_blocks_not_in_segment_mode", [],
             [seg(0, 4096, (0, 0), [blk(100, 512)])],
             expect={"segments": [(0, 4096)], "ghost_segments_only": True}),
        Case("ghost_blocks_private_pool",
             [ev("alloc", 0xE600000, 3 * MiB), ev("alloc", 0x6A00000, 4 * MiB)],
             [seg(0x1E00000, 2 * MiB, (0, 1), [blk(0x1E00000, MiB)]),
              seg(0x6800000, 20 * MiB, (0, 0), [blk(0x6800000, 2 * MiB),
                                                 blk(0x6A00000, 4 * MiB)]),
              seg(0xE600000, 20 * MiB, (0, 1), [blk(0xE600000, 3 * MiB)])],
             private=True,
             expect={"ghost_sizes": [MiB, 2 * MiB], "envelopes": {("0,1", 0)},
                     "envelope_sizes": {("0,1", 0): 2 * MiB + 20 * MiB},
                     "ghost_pools": {MiB: "0,1", 2 * MiB: "0,0"}}),
        Case("ghost_stripe_offset_with_multiple_pools", [ev("alloc", 0x100, 100)],
             [seg(0, 4096), seg(0x4000, 4096, (0, 3), [blk(0x4000, 3000)]),
              seg(0x10000, 8192, (0, 2), [blk(0x10000, 2000)]),
              seg(0x5000, 4096, (0, 3), [blk(0x5000, 1000)])],
             private=True,
             expect={"envelopes": {("0,3", 0), ("0,2", 0)}, "ghost_sizes": [1000, 2000, 3000],
                     "ghost_pools": {3000: "0,3", 2000: "0,2", 1000: "0,3"}}),
        Case("full_snapshot_private_pools", full_trace, two_segments, private=True,
             expect={"elements": 6, "peak": 2 * S + 2 * MiB, "envelopes": {("0,1", 0)},
                     "envelope_sizes": {("0,1", 0): 2 * MiB}, "pool_blocks": 3,
                     "other_blocks": 3, "pools_first": ["0,0", "0,1"], "last": 2 * S + 2 * MiB}),
        Case("full_snapshot_no_private_pools", small, two_segments,
             expect={"elements": 6, "peak": 4096, "pools_first": ["0,0"],
                     "after_first_alloc": 1024, "last": 4096}),
        Case("envelope_grows_on_segment_map",
             [ev("segment_map", 0x1000, 500), ev("alloc", 0x1000, 500), _free(0x1000, 500),
              ev("segment_map", 0x1200, 400), ev("alloc", 0x1200, 400)],
             [seg(0x1000, 900, (1, 10))], private=True,
             expect={"envelope_sizes": {("1,10", 0): 900}, "pool_block_sizes": [500, 400]}),
        Case("envelope_from_initial_reserved", [ev("alloc", 0x2000, 300)],
             [seg(0x2000, 2000, (1, 20))], private=True,
             expect={"envelope_sizes": {("1,20", 0): 2000}}),
        Case("envelope_segment_map_no_double_count",
             [ev("segment_map", 0x3000, 600), ev("alloc", 0x3000, 600)],
             [seg(0x3000, 600, (1, 30))], private=True,
             expect={"envelope_sizes": {("1,30", 0): 600}}),
        Case("envelope_active_exceeds_reserved",
             [ev("segment_map", 0x4000, 500), ev("alloc", 0x4000, 800),
              ev("alloc", 0x4400, 200)],
             [seg(0x4000, 1000, (1, 40))], private=True,
             expect={"envelope_sizes": {("1,40", 0): 1000}}),
        Case("envelope_default_pool_unaffected",
             [ev("segment_map", 100, 5000), ev("alloc", 100, 200), _free(100, 200)],
             [seg(0, 5000)], private=True, expect={"envelopes": set(), "peak": 200}),
        Case("per_pool_summarization",
             [ev("alloc", 0x1000 + i * 0x100, (i + 1) * 100) for i in range(10)]
             + [ev("alloc", 0x5000 + i * 0x100, (i + 1) * 200) for i in range(10)],
             [seg(0x1000, 0x1000), seg(0x5000, 0x1000, (1, 50))], private=True,
             expect={"elements": 20, "band": {"other": 5500, "pool_smallest": (5, 3000)}}),
        Case("per_pool_summarization_with_frees",
             [ev("alloc", 0x8100 + i * 0x100, (i + 1) * 100) for i in range(6)]
             + [_free(0x8600, 600), _free(0x8100, 100)],
             [seg(0x8000, 0x1000, (1, 60))], private=True,
             expect={"band": {"pool_smallest": (3, 600), "pool_smallest_end": (3, 500)}}),
        Case("per_pool_summarization_initially_allocated",
             [_free(0xA100 + i * 0x100, (i + 1) * 100) for i in range(4)],
             [seg(0xA000, 0x1000, (1, 70))], private=True,
             expect={"band": {"pool_smallest": (2, 300), "pool_smallest_end": (2, 0)}}),
        Case("per_pool_summarization_interleaved",
             [ev("alloc", 0xC000, 1800), ev("alloc", 0xC800, 200), ev("alloc", 0xD000, 1600),
              ev("alloc", 0xD800, 100)],
             [seg(0xC000, 0x2000, (1, 80))], private=True,
             expect={"band": {"pool_smallest_end": (2, 300)}}),
        Case("summarized_band_decimated_for_long_trace",
             [ev("alloc", 0x100000 + i * 1024, 1024) for i in range(120000)], [],
             expect={"elements": 120000, "last": 120000 * 1024, "events": 120000}),
    ]


CASES = _cases()


# -- the viewer's figure, from memtui's model ---------------------------------------------------

def _private(pool: str | None) -> bool:
    return pool is not None and pool not in ("0,0", "")


def viewer_footprint(trace: MemoryTrace, device: str, private: bool) -> list[int]:
    """The viewer's total after the start and after each event (``max_at_time``'s values
    without its animation steps): the live blocks, where ``private`` each private pool
    (by pool and stream) at its envelope instead: the high-water of its live blocks and
    of its reserved segments, from its first block on (a pool with no block has none)."""
    return _walk(trace, device, private)[0]


def viewer_envelopes(trace: MemoryTrace, device: str) -> dict[tuple[str, int], int]:
    """Each private pool's envelope (pool, stream) at the end: its highest (the viewer's
    grey rectangle never shrinks)."""
    return _walk(trace, device, True)[1]


def _walk(trace: MemoryTrace, device: str, private: bool
          ) -> tuple[list[int], dict[tuple[str, int], int]]:
    events = trace.device_events(device).select("seq", "action", "block_id")
    rows = {r["block_id"]: r for r in trace.device_blocks(device).iter_rows(named=True)}

    def key(row: dict) -> tuple[str, int] | None:
        return (row["pool_id"], int(row["stream"] or 0)) \
            if private and _private(row["pool_id"]) else None

    reserved: dict[tuple[str, int], int] = {}
    changes: dict[int, list[tuple[tuple[str, int], int]]] = {}
    segments = trace.device_segments(device)
    for r in segments.iter_rows(named=True) if private else []:
        if not _private(r["pool_id"]):
            continue
        k = (r["pool_id"], int(r["stream"] or 0))
        if r["seq_alloc"] is None:
            reserved[k] = reserved.get(k, 0) + r["size"]
        else:
            changes.setdefault(r["seq_alloc"], []).append((k, r["size"]))
        if r["seq_free"] is not None:
            changes.setdefault(r["seq_free"], []).append((k, -r["size"]))
    active: dict[tuple[str, int], int] = {}
    envelope: dict[tuple[str, int], int] = {}
    other = 0
    for row in rows.values():  # alive before the first event
        if row["ghost"]:
            k = key(row)
            if k is None:
                other += _size(row)
            else:
                active[k] = active.get(k, 0) + _size(row)
    for k in active:
        envelope[k] = max(active[k], reserved.get(k, 0))
    out = [other + sum(envelope.values())]
    for seq, action, block_id in events.iter_rows():
        for k, delta in changes.get(seq, []):
            reserved[k] = reserved.get(k, 0) + delta
            if k in envelope:
                envelope[k] = max(envelope[k], reserved[k])
        if action in ("alloc", "free") and block_id is not None:
            row = rows[block_id]
            size = _size(row) * (1 if action == "alloc" else -1)
            k = key(row)
            if k is None:
                other += size
            else:
                active[k] = active.get(k, 0) + size
                envelope[k] = max(envelope.get(k, 0), active[k], reserved.get(k, 0))
        out.append(other + sum(envelope.values()))
    return out, envelope


def _size(row: dict) -> int:
    """A block's size as the viewer has it: its trace event's, or for a block known only
    by the dump (a ghost never freed), its requested size."""
    if row["ghost"] and row["seq_free"] is None and row["requested_size"] is not None:
        return int(row["requested_size"])
    return int(row["size"])


__all__ = ["CASES", "Case", "viewer_envelopes", "viewer_footprint"]
