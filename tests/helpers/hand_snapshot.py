"""Tiny traces for the tests of the pool map, block map, stack tree and their screens.

``hand_snapshot`` is a PyTorch snapshot written out by hand (one device, two segments,
a pending free, a ghost segment with a ghost block freed in the trace, a reused
address, an OOM); the expected pool states, stack trees and addresses in the tests were
worked out from the comments here.  ``reference_replay`` is memory_viz's Allocator State
History in plain Python (undo the trace from the dump back to an event), used on the
real files.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import polars as pl

from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SNAPSHOTS = DATA / "torch_snapshots"


def _frames(*names: tuple[str, str, int]) -> list[dict]:
    return [{"name": n, "filename": f, "line": line} for n, f, line in names]


MAIN = ("main", "/src/train.py", 1)
FORWARD = ("forward", "/src/model.py", 5)
STACK_B1 = _frames(("alloc_b1", "/src/model.py", 10), FORWARD, MAIN)
STACK_B2 = _frames(("alloc_b2", "/src/model.py", 11), FORWARD, MAIN)
STACK_B3 = _frames(("alloc_b3", "/src/opt.py", 3), ("step", "/src/opt.py", 1), MAIN)

# Segment A 0x1000 (4096 bytes) is allocated at t=1; segment G 0x10000 (2048 bytes)
# existed before the trace, with ghost blocks g1 (0x10000, 512) and g2 (0x10200, 1024).
# t (us): 1 segment_alloc A; 2 alloc b1 0x1000 1024; 3 alloc b2 0x1400 1024;
# 4 alloc b3 0x1800 512; 5 free_requested b2; 6 free_completed b2;
# 7 free_requested g1; 8 free_completed g1; 9 alloc b4 0x1400 (500 requested, a
# 512-byte block); 10 free_requested b1 (pending at the dump); 11 oom of 2048 bytes.
HAND_TRACE = [
    {"action": "segment_alloc", "addr": 0x1000, "size": 4096, "stream": 0, "time_us": 1},
    {"action": "alloc", "addr": 0x1000, "size": 1024, "stream": 0, "time_us": 2,
     "frames": STACK_B1},
    {"action": "alloc", "addr": 0x1400, "size": 1024, "stream": 0, "time_us": 3,
     "frames": STACK_B2},
    {"action": "alloc", "addr": 0x1800, "size": 512, "stream": 0, "time_us": 4,
     "frames": STACK_B3},
    {"action": "free_requested", "addr": 0x1400, "size": 1024, "stream": 0, "time_us": 5},
    {"action": "free_completed", "addr": 0x1400, "size": 1024, "stream": 0, "time_us": 6},
    {"action": "free_requested", "addr": 0x10000, "size": 512, "stream": 0, "time_us": 7},
    {"action": "free_completed", "addr": 0x10000, "size": 512, "stream": 0, "time_us": 8},
    {"action": "alloc", "addr": 0x1400, "size": 500, "stream": 0, "time_us": 9,
     "frames": STACK_B2},
    {"action": "free_requested", "addr": 0x1000, "size": 1024, "stream": 0, "time_us": 10},
    {"action": "oom", "size": 2048, "device_free": 100, "stream": 0, "time_us": 11},
]


def _block(address: int, size: int, state: str, requested: int | None = None,
           frames: list | None = None) -> dict:
    return {"address": address, "size": size, "requested_size": requested or size,
            "state": state, "frames": frames or []}


HAND_SEGMENTS = [
    {"device": 0, "address": 0x1000, "total_size": 4096, "stream": 0,
     "segment_type": "small", "allocated_size": 1024, "active_size": 2048,
     "blocks": [
         _block(0x1000, 1024, "active_pending_free", frames=STACK_B1),
         _block(0x1400, 512, "active_allocated", 500, STACK_B2),
         _block(0x1600, 512, "inactive"),
         _block(0x1800, 512, "active_allocated", frames=STACK_B3),
         _block(0x1A00, 1536, "inactive"),
     ]},
    {"device": 0, "address": 0x10000, "total_size": 2048, "stream": 0,
     "segment_type": "small", "allocated_size": 1024, "active_size": 1024,
     "blocks": [
         _block(0x10000, 512, "inactive"),
         _block(0x10200, 1024, "active_allocated"),
         _block(0x10600, 512, "inactive"),
     ]},
]


def write_hand_snapshot(path: Path) -> Path:
    with open(path, "wb") as f:
        pickle.dump({"segments": HAND_SEGMENTS, "device_traces": [HAND_TRACE]}, f, protocol=4)
    return path


def us(t: int) -> int:
    """The trace time (ns) of ``time_us`` t."""
    return t * 1000


def blocks_trace(rows: list[dict], events_t: list[int], levels: list[int] | None = None,
                 device: str = "cuda:0") -> MemoryTrace:
    """A trace made of ``blocks`` rows (block_id, addr, size, t_alloc, t_free, ghost) and
    one ``alloc`` event per time in ``events_t`` (levels in ``allocated``)."""
    blocks = pl.DataFrame(rows).with_columns(device=pl.lit(device))
    n = len(events_t)
    events = pl.DataFrame({
        "t": events_t, "seq": list(range(n)), "device": [device] * n,
        "action": ["alloc"] * n, "allocated": levels or [0] * n,
    })
    meta = TraceMeta(source="test", path="test", devices=[DeviceInfo(name=device)])
    return MemoryTrace(meta=meta, events=conform(events, "events"),
                       blocks=conform(blocks, "blocks"))


# -- memory_viz's Allocator State History, in plain Python ----------------------------------

def reference_replay(snapshot: dict, device: int, index: int) -> tuple[set, set]:
    """Segments ``{(addr, size)}`` and blocks ``{(addr, size, pending)}`` just after
    event ``index`` of ``device``, undoing the trace from the dump as MemoryViz.js does
    (``MemoryView.simulate_memory``): an undone ``segment_free`` puts its segment back, an
    undone ``segment_alloc`` takes the segment at its address out; an undone
    ``segment_unmap`` puts its range back, merged with an adjacent range of the same
    stream on either side; an undone ``segment_map`` takes its range out of the range
    holding it (shrinking it at either end or splitting it in two).  A map whose range no
    range holds is a trace the viewer cannot undo: AssertionError."""
    segments = sorted(([s["address"], s["total_size"], s.get("stream", 0)]
                       for s in snapshot["segments"] if s.get("device", 0) == device),
                      key=lambda seg: seg[0])
    blocks: dict[int, tuple[int, bool]] = {}
    for s in snapshot["segments"]:
        if s.get("device", 0) != device:
            continue
        addr = s["address"]
        for b in s["blocks"]:
            if b["state"] in ("active_allocated", "active_pending_free"):
                blocks[b.get("address", addr)] = (b["size"], b["state"] == "active_pending_free")
            addr += b["size"]
    events = snapshot["device_traces"][device]
    for event in reversed(events[index + 1:]):
        action, addr = event["action"], event.get("addr")
        if action == "alloc":
            blocks.pop(addr, None)
        elif action == "free_requested":
            if addr in blocks:
                blocks[addr] = (blocks[addr][0], False)
        elif action == "free_completed":
            blocks[addr] = (event["size"], True)
        elif action in ("segment_free", "segment_unmap"):
            _viewer_put_back(segments, [addr, event["size"], event.get("stream", 0)],
                             merge=action == "segment_unmap")
        elif action in ("segment_alloc", "segment_map"):
            _viewer_take_out(segments, addr, event["size"], merge=action == "segment_map")
    return ({(a, size) for a, size, _ in segments},
            {(a, size, pending) for a, (size, pending) in blocks.items()})


def _viewer_put_back(segments: list[list[int]], seg: list[int], merge: bool) -> None:
    """MemoryViz.js ``map_segment``: insert in address order; with ``merge``, join an
    adjacent range of the same stream after it, then before it."""
    idx = next((i for i, s in enumerate(segments) if s[0] > seg[0]), len(segments))
    segments.insert(idx, seg)
    if not merge:
        return
    if idx + 1 < len(segments):
        after = segments[idx + 1]
        if seg[0] + seg[1] == after[0] and seg[2] == after[2]:
            seg[1] += after[1]
            del segments[idx + 1]
    if idx > 0:
        before = segments[idx - 1]
        if before[0] + before[1] == seg[0] and before[2] == seg[2]:
            before[1] += seg[1]
            del segments[idx]


def _viewer_take_out(segments: list[list[int]], addr: int, size: int, merge: bool) -> None:
    """MemoryViz.js ``unmap_segment``: without ``merge`` remove the segment at ``addr``;
    with it, cut ``[addr, addr + size)`` out of the range holding it."""
    if not merge:
        segments[:] = [s for s in segments if s[0] != addr] if any(
            s[0] == addr for s in segments) else segments
        return
    end = addr + size
    idx = next((i for i, s in enumerate(segments) if s[0] <= addr and end <= s[0] + s[1]),
               None)
    assert idx is not None, f"the viewer cannot undo a map of {addr:#x}+{size}"
    seg = segments[idx]
    seg_end = seg[0] + seg[1]
    if seg[0] == addr:
        seg[0], seg[1] = addr + size, seg[1] - size
        if seg[1] == 0:
            del segments[idx]
    elif seg_end == end:
        seg[1] -= size
    else:
        seg[1] = addr - seg[0]
        segments.insert(idx + 1, [end, seg_end - end, seg[2]])
