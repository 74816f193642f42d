"""The peak: what held memory when allocated was highest, and the peak of reserved.

The blocks alive at the event of the allocated peak (ghosts included) are summed by the
frame that names their stack (the innermost user frame: see
:mod:`memtui.analysis.findings.frames`), by owner where the source has owners
(msMemScope ``PTA@weight``, ``@gradient``, ...; profiler operators) and by memory pool
(layer), and by ``user_metadata`` (PyTorch 2.10+ ``_set_memory_metadata``) where any
block has it; the blocks alive at the peak of reserved, by stack.  Sources with only curves
(the Ascend profiler) give the peaks' sizes and times.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.frames import NO_STACK, evidence_stack, stack_frames
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.pool import alive_block_rows
from memtui.analysis.levels import allocated_level, reserved_level
from memtui.analysis.live import device_index
from memtui.model import MemoryTrace
from memtui.units import format_bytes

TOP = 10


def find_peak(trace: MemoryTrace, device: str) -> list[Finding]:
    """One ``peak`` finding for ``device`` (none where nothing was ever allocated)."""
    allocated = allocated_level(trace, device)
    peak, at = allocated.peak()
    if at < 0 or peak <= 0:
        return []
    peak_t = int(allocated.t[at])
    seq = _level_seq(trace, device, at, allocated.t.size)
    alive = _alive_at(trace, device, peak_t, seq)
    by_stack = _by(alive, "label", peak)
    by_owner = _by(alive.filter(pl.col("owner").is_not_null()), "owner", peak)
    by_pool = _by(alive.filter(pl.col("pool").is_not_null()), "pool", peak)
    detail: dict[str, Any] = {
        "peak_allocated_bytes": peak,
        "peak_t": peak_t,
        "blocks_alive": alive.height,
        "by_stack": by_stack,
        "by_owner": by_owner,
        "by_pool": by_pool,
    }
    if "user_metadata" in alive.columns and alive["user_metadata"].null_count() < alive.height:
        detail["by_metadata"] = _by(alive.filter(pl.col("user_metadata").is_not_null()),
                                    "user_metadata", peak)
    reserved = reserved_level(trace, device)
    if reserved is not None and reserved.values.size:
        r_peak, r_at = reserved.peak()
        detail["peak_reserved_bytes"] = r_peak
        detail["peak_reserved_t"] = int(reserved.t[r_at])
        detail["reserved_at_allocated_peak_bytes"] = int(
            reserved.values[np.searchsorted(reserved.t, peak_t, side="right") - 1]
        ) if reserved.t[0] <= peak_t else None
        r_seq = _level_seq(trace, device, r_at, reserved.t.size, "reserved")
        at_reserved = _alive_at(trace, device, int(reserved.t[r_at]), r_seq)
        detail["reserved_peak_by_stack"] = _by(at_reserved, "label", r_peak)
    stack_id, block_ids = _top_blocks(alive)
    title = f"peak {format_bytes(peak)} allocated"
    if by_stack:
        first = by_stack[0]
        title += f": {first['label']} holds {format_bytes(first['bytes'])} ({first['share']:.0%})"
    elif by_owner:
        first = by_owner[0]
        title += f": {first['label']} holds {format_bytes(first['bytes'])} ({first['share']:.0%})"
    if "peak_reserved_bytes" in detail:
        title += f"; reserved peaks at {format_bytes(detail['peak_reserved_bytes'])}"
    evidence = Evidence(t=peak_t, seq=seq, block_ids=block_ids,
                        stack=evidence_stack(trace, stack_id), stack_id=stack_id,
                        owner=by_owner[0]["label"] if by_owner else None)
    return [Finding(kind="peak", severity="info", title=title, device=device, bytes=peak,
                    detail=detail, evidence=evidence)]


def _level_seq(trace: MemoryTrace, device: str, at: int, levels: int,
               column: str = "allocated") -> int | None:
    """``seq`` of the event after which the level peaked (None: the start level, or a
    level from profiler curves rather than events)."""
    if at == 0:
        return None
    levelled = trace.device_events(device).select("seq", column).drop_nulls(column)
    if levelled.height + 1 != levels:
        return None
    value = levelled["seq"][at - 1]
    return int(value) if value is not None else None


def _alive_at(trace: MemoryTrace, device: str, t: int, seq: int | None) -> pl.DataFrame:
    """The device's blocks alive just after the peak event, with their naming frame."""
    index = device_index(trace, device)
    if seq is not None and index.blocks["seq_alloc"].null_count() < index.blocks.height:
        rows = alive_block_rows(trace, device, seq)
    else:
        rows = index.blocks_at(t)
    rows = rows[~index.is_segment[rows]]
    blocks = index.blocks[np.sort(rows)] if rows.size else index.blocks.clear()
    names = stack_frames(trace).select("stack_id", "label")
    return blocks.join(names, on="stack_id", how="left").with_columns(
        label=pl.col("label").fill_null(NO_STACK))


def _by(alive: pl.DataFrame, column: str, total: int) -> list[dict[str, Any]]:
    if alive.is_empty():
        return []
    grouped = (alive.group_by(column).agg(bytes=pl.col("size").sum(), blocks=pl.len())
               .sort(["bytes", column], descending=[True, False]).head(TOP))
    return [{"label": label, "bytes": int(size), "blocks": int(count),
             "share": round(size / total, 4) if total else 0.0}
            for label, size, count in grouped.iter_rows()]


def _top_blocks(alive: pl.DataFrame) -> tuple[int | None, tuple[int, ...]]:
    """The commonest stack of the label holding most at the peak, and its blocks."""
    if alive.is_empty():
        return None, ()
    top = alive.group_by("label").agg(bytes=pl.col("size").sum()).sort(
        ["bytes", "label"], descending=[True, False])["label"][0]
    rows = alive.filter(pl.col("label") == top)
    stacks = rows["stack_id"].drop_nulls()
    stack_id = int(stacks.mode().sort()[0]) if stacks.len() else None
    return stack_id, tuple(int(b) for b in rows["block_id"].to_list())


__all__ = ["find_peak"]
