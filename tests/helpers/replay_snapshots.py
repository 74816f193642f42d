"""Snapshots written by the replayed allocator itself: a list of operations (alloc,
free, a free that completes later, empty_cache) is run through
:class:`memtui.analysis.replay.allocator.CachingAllocator`, and what it did is written as
PyTorch writes it (trace entries in the allocator's order, the final segments with their
blocks).  Operations before ``record_from`` happen before the history starts, so the
replay must begin from the pool memtui walks back from the dump."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from memtui.analysis.replay.allocator import Block, CachingAllocator
from memtui.analysis.replay.settings import NO_MAX_SPLIT, Settings

#: Where the generated cudaMallocs land (a real-looking device address).
BASE = 0x7F0000000000


def run_ops(ops: list[tuple], settings: Settings | None = None,
            record_from: int = 0) -> dict:
    """The snapshot dict of ``ops``: ``("alloc", size, stream)``, ``("free", k)`` (the k-th
    live block, modulo), ``("free_late", k)`` (requested now, completed at the next op),
    ``("empty_cache",)``."""
    allocator = CachingAllocator(settings or Settings())
    allocator._invented = BASE
    trace: list[dict] = []
    live: list[Block] = []
    late: list[Block] = []
    asked: dict[int, int] = {}  # id(block) -> requested size (the trace's sizes)
    for index, op in enumerate(ops):
        recording = index >= record_from
        out: list[dict] = []
        for block in late:  # process_events: the late frees complete first
            out.append(_entry("free_completed", block.addr, asked[id(block)], block.stream))
            allocator.free_block(block)
        late.clear()
        before = len(allocator.segment_events)
        kind = op[0]
        if kind == "alloc":
            block = allocator.malloc(op[1], op[2])
            out += _segment_entries(allocator, before)
            out.append(_entry("alloc", block.addr, op[1], block.stream))
            asked[id(block)] = op[1]
            live.append(block)
        elif kind in ("free", "free_late") and live:
            block = live.pop(op[1] % len(live))
            out.append(_entry("free_requested", block.addr, asked[id(block)], block.stream))
            if kind == "free":  # free_block writes FREE_COMPLETED before it merges
                out.append(_entry("free_completed", block.addr, asked[id(block)],
                                  block.stream))
                allocator.free_block(block)
            else:
                allocator.free(block, completes=False)
                late.append(block)
        elif kind == "empty_cache":
            for block in list(allocator.pending):
                out.append(_entry("free_completed", block.addr, asked[id(block)],
                                  block.stream))
            late.clear()
            allocator.empty_cache()
            out += _segment_entries(allocator, before)
        if recording:
            trace += out
    for i, entry in enumerate(trace):
        entry["time_us"] = i + 1
    snapshot = {"segments": _segments(allocator, live, late, asked), "device_traces": [trace]}
    if settings is not None:
        snapshot["allocator_settings"] = _recorded_settings(settings)
    return snapshot


def _recorded_settings(settings: Settings) -> dict:
    """``allocator_settings`` as torch 2.4+ writes it (max_split_size -1: no limit)."""
    return {
        "PYTORCH_CUDA_ALLOC_CONF": settings.describe(),
        "max_split_size": -1 if settings.max_split_size == NO_MAX_SPLIT
        else settings.max_split_size,
        "garbage_collection_threshold": settings.garbage_collection_threshold,
        "expandable_segments": settings.expandable_segments,
        "roundup_power2_divisions": {str(1 << i): d for i, d in
                                     enumerate(settings.roundup_power2_divisions)},
    }


def write_ops(path: Path, ops: list[tuple], settings: Settings | None = None,
              record_from: int = 0) -> Path:
    with open(path, "wb") as f:
        pickle.dump(run_ops(ops, settings, record_from), f, protocol=4)
    return path


def _entry(action: str, addr: int, size: int, stream: int) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": stream}


def _segment_entries(allocator: CachingAllocator, before: int) -> list[dict]:
    return [_entry(e.action, e.addr, e.size, e.stream)
            for e in allocator.segment_events[before:]]


def _segments(allocator: CachingAllocator, live: list[Block], late: list[Block],
              asked: dict[int, int]) -> list[dict]:
    blocks: list[tuple[Block, str]] = [(b, "active_allocated") for b in live]
    blocks += [(b, "active_pending_free") for b in late]
    for pool in (allocator.small, allocator.large):
        blocks += [(pool.by_key[k], "inactive") for k in pool.blocks]
    by_segment: dict[int, list[tuple[Block, str]]] = {}
    for block, state in blocks:
        by_segment.setdefault(block.segment.addr, []).append((block, state))
    out = []
    for addr, segment in sorted(allocator.segments.items()):
        rows = sorted(by_segment.get(addr, []), key=lambda bs: bs[0].addr)
        allocated = sum(b.size for b, s in rows if s == "active_allocated")
        out.append({
            "device": 0, "address": addr, "total_size": segment.size,
            "stream": segment.stream, "segment_type": "small" if segment.is_small else "large",
            "allocated_size": allocated,
            "active_size": sum(b.size for b, s in rows if s != "inactive"),
            "blocks": [{"address": b.addr, "size": b.size,
                        "requested_size": asked.get(id(b), b.size),
                        "state": s, "frames": []} for b, s in rows],
        })
    return out


def damage(entries: list[dict], data: Any) -> None:
    """Damage a trace in place as a hand-made or truncated file would be: one to four of
    its entries dropped, duplicated or moved (``data``: hypothesis' ``st.data()``), then
    the times numbered again in the new order."""
    from hypothesis import strategies as st

    for _ in range(data.draw(st.integers(1, 4))):
        if not entries:
            break
        i = data.draw(st.integers(0, len(entries) - 1))
        how = data.draw(st.sampled_from(["drop", "duplicate", "move"]))
        entry = entries.pop(i) if how != "duplicate" else dict(entries[i])
        if how != "drop":
            entries.insert(data.draw(st.integers(0, len(entries))), entry)
    for i, entry in enumerate(entries):
        entry["time_us"] = i + 1
