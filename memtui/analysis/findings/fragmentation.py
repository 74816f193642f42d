"""Fragmentation: when the pool held most memory it did not use, and how scattered it was.

The moment where reserved minus allocated is largest (the cached but unused bytes),
the pool state there (free bytes, largest free gap, ``1 - largest gap / free``), the
same ratio at the end of the capture and where it is worst (over events sampled evenly:
a pool state costs one pass over the lifetimes), and the internal fragmentation of the
blocks alive at the first moment: block size minus requested size (the allocator's
rounding), where the capture gives both.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.pool import pool_at_seq
from memtui.analysis.pool_state import PoolState, state_at
from memtui.arrays import unique_sorted
from memtui.model import MemoryTrace
from memtui.units import format_bytes

MiB = 1 << 20
MEDIUM_WASTE = 256 * MiB
MEDIUM_SHARE = 0.25
LOW_SHARE = 0.10
#: Events at which the largest-gap ratio is measured (a pool state each).
SAMPLES = 32
MIN_FREE_SHARE = 0.05


def find_fragmentation(trace: MemoryTrace, device: str) -> list[Finding]:
    """One ``fragmentation`` finding for ``device`` where the pool ever cached free bytes."""
    events = trace.device_events(device).select("t", "seq", "allocated", "reserved") \
        .drop_nulls(["allocated", "reserved"])
    if events.is_empty():
        return []
    waste = (events["reserved"] - events["allocated"]).to_numpy()
    at = int(np.argmax(waste))
    worst = int(waste[at])
    if worst <= 0:
        return []
    t, seq = int(events["t"][at]), events["seq"][at]
    reserved = int(events["reserved"][at])
    has_pool = trace.device_segments(device).height > 0
    state = _state(trace, device, seq, t) if has_pool else None
    last = trace.device_events(device).select("t", "seq").tail(1)
    end_state = _state(trace, device, last["seq"][0], int(last["t"][0])) if has_pool else None
    detail = {
        "max_unused_bytes": worst,
        "max_unused_t": t,
        "reserved_bytes": reserved,
        "allocated_bytes": int(events["allocated"][at]),
        "unused_share": round(worst / reserved, 4) if reserved else 0.0,
    }
    title = (f"up to {format_bytes(worst)} reserved but unused "
             f"({worst / reserved:.0%} of {format_bytes(reserved)})" if reserved else
             f"up to {format_bytes(worst)} reserved but unused")
    if state is not None:
        detail.update(_pool_figures(state, ""))
        title += (f"; largest free gap then {format_bytes(state.largest_gap)}"
                  f" ({state.total_fragmentation:.0%} fragmented)")
    if end_state is not None:
        detail.update(_pool_figures(end_state, "end_"))
    if has_pool:
        detail.update(_worst(trace, device, events))
    internal = _internal(trace, device, state)
    if internal is not None:
        detail["internal_fragmentation_bytes"] = internal
    share = worst / reserved if reserved else 0.0
    severity = "info"
    if share >= MEDIUM_SHARE and worst >= MEDIUM_WASTE:
        severity = "medium"
    elif share >= LOW_SHARE:
        severity = "low"
    return [Finding(kind="fragmentation", severity=severity, title=title, device=device,
                    bytes=worst, detail=detail,
                    evidence=Evidence(t=t, seq=int(seq) if seq is not None else None))]


def _state(trace: MemoryTrace, device: str, seq: int | None, t: int) -> PoolState:
    if seq is not None:
        return pool_at_seq(trace, device, int(seq), t)
    return state_at(trace, device, t)


def _worst(trace: MemoryTrace, device: str, events: pl.DataFrame) -> dict:
    """Where ``1 - largest gap / free`` is worst, over ``SAMPLES`` events spread evenly
    over the trace (the pool's free bytes at least ``MIN_FREE_SHARE`` of reserved)."""
    rows = unique_sorted(np.linspace(0, events.height - 1, SAMPLES).astype(np.int64))
    worst: tuple[float, int, PoolState] | None = None
    for row in rows.tolist():
        seq, t = events["seq"][row], int(events["t"][row])
        state = _state(trace, device, seq, t)
        if state.free <= 0 or state.free < MIN_FREE_SHARE * state.reserved:
            continue
        ratio = float(state.total_fragmentation)
        if worst is None or ratio > worst[0]:
            worst = (ratio, t, state)
    if worst is None:
        return {}
    ratio, t, state = worst
    return {"worst_fragmentation": round(ratio, 4), "worst_fragmentation_t": t,
            "worst_largest_gap_bytes": state.largest_gap, "worst_pool_free_bytes": state.free}


def _pool_figures(state: PoolState, prefix: str) -> dict:
    return {
        f"{prefix}pool_free_bytes": state.free,
        f"{prefix}largest_gap_bytes": state.largest_gap,
        f"{prefix}fragmentation": round(float(state.total_fragmentation), 4),
        f"{prefix}segments": int(state.seg_id.size),
    }


def _internal(trace: MemoryTrace, device: str, state: PoolState | None) -> int | None:
    """Bytes of rounding (size - requested) in the blocks alive in ``state``."""
    blocks = trace.device_blocks(device)
    if blocks["requested_size"].null_count() == blocks.height:
        return None
    if state is not None:
        blocks = blocks.filter(pl.col("block_id").is_in(state.blk_id.tolist()))
    rounding = (blocks["size"] - blocks["requested_size"].fill_null(blocks["size"])).clip(0)
    return int(rounding.sum() or 0)


__all__ = ["find_fragmentation"]
