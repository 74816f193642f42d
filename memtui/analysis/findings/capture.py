"""What limits the capture itself: missing history, missing stacks, no clock, bad rows.

* a PyTorch history ring buffer that was full (``max_entries`` reached: the trace starts
  by freeing blocks whose alloc fell out, and its length is a round number, or it holds
  a single event as the legacy / ``enabled='state'`` recorder keeps);
* history started late: blocks freed in the trace without their alloc (ghosts), as a
  share of the blocks and bytes;
* allocations without call stacks, or with C++ frames only;
* no clock (torch < 2.2 writes no ``time_us``: times are event numbers);
* rows skipped or repaired by the loader (``meta.warnings``).
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.model import Evidence, Finding
from memtui.model import MemoryTrace
from memtui.units import counted, format_bytes


def find_capture_limits(trace: MemoryTrace, device: str) -> list[Finding]:
    """The capture findings of ``device``."""
    findings = []
    findings += _history(trace, device)
    findings += _stacks(trace, device)
    return findings


def find_capture_wide(trace: MemoryTrace) -> list[Finding]:
    """Findings about the whole capture, listed under its first device."""
    if not trace.meta.devices:
        return []
    device = trace.meta.device_names[0]
    findings = []
    if trace.meta.time_unit == "event":
        findings.append(Finding(
            kind="capture", severity="info", device=device,
            title="no clock in this capture (torch < 2.2): times are event numbers",
            detail={"problem": "no_clock"}))
    if trace.meta.warnings:
        findings.append(Finding(
            kind="capture", severity="low", device=device,
            title=f"{len(trace.meta.warnings)} loader warnings: {trace.meta.warnings[0]}",
            detail={"problem": "skipped_rows", "warnings": list(trace.meta.warnings)}))
    return findings


def _is_round(n: int) -> bool:
    return n > 0 and (n % 1000 == 0 or n & (n - 1) == 0)


def _history(trace: MemoryTrace, device: str) -> list[Finding]:
    if trace.meta.source != "torch_snapshot" and trace.device_events(device).is_empty():
        return []
    events = trace.device_events(device)
    blocks = trace.device_blocks(device)
    n_events = events.height
    if blocks.is_empty():
        return []
    ghost = blocks["ghost"].fill_null(False)
    freed_ghosts = blocks.filter(ghost & pl.col("t_free").is_not_null())
    ghost_bytes = int(blocks.filter(ghost)["size"].sum() or 0)
    total_bytes = int(blocks["size"].sum() or 0)
    detail = {
        "events": n_events,
        "ghost_blocks": int(ghost.sum()),
        "ghost_share": round(float(ghost.mean() or 0.0), 4),
        "ghost_bytes": ghost_bytes,
        "ghost_bytes_share": round(ghost_bytes / total_bytes, 4) if total_bytes else 0.0,
        "freed_without_alloc": freed_ghosts.height,
    }
    if trace.meta.source == "torch_snapshot" and n_events <= 1:
        return [Finding(
            kind="capture", severity="medium", device=device,
            title=(f"no allocation history ({counted(n_events, 'event')}): only the state at "
                   "the dump; record with _record_memory_history(enabled='all') for a timeline"),
            detail={**detail, "problem": "state_only"})]
    if freed_ghosts.is_empty():
        return []
    first = freed_ghosts.sort("t_free").row(0, named=True)
    evidence = Evidence(t=first["t_free"], seq=first["seq_free"],
                        block_ids=tuple(freed_ghosts["block_id"].to_list()))
    if trace.meta.source == "torch_snapshot" and _is_round(n_events):
        return [Finding(
            kind="capture", severity="medium", device=device,
            title=(f"the history ring buffer was full ({counted(n_events, 'event')}, "
                   f"max_entries): the start is missing, {counted(freed_ghosts.height, 'block')} "
                   "freed without their alloc"),
            detail={**detail, "problem": "ring_buffer_full", "max_entries": n_events},
            evidence=evidence)]
    return [Finding(
        kind="capture", severity="low", device=device,
        title=(f"history started late: {detail['ghost_share']:.0%} of blocks "
               f"({format_bytes(ghost_bytes)}) were allocated before it"),
        detail={**detail, "problem": "late_start"}, evidence=evidence)]


def _stacks(trace: MemoryTrace, device: str) -> list[Finding]:
    stack_ids = trace.device_events(device).select(   # the one column, not every event's
        pl.col("stack_id").filter(pl.col("action") == "alloc"))["stack_id"]
    if stack_ids.is_empty():
        return []
    missing = stack_ids.null_count()
    share = missing / stack_ids.len()
    if share >= 0.5:
        return [Finding(
            kind="capture", severity="low", device=device,
            title=f"{share:.0%} of allocations have no call stack",
            detail={"problem": "no_stacks", "without_stack": missing,
                    "allocations": stack_ids.len()})]
    used = stack_ids.drop_nulls().unique()
    stacks = trace.stacks.filter(pl.col("stack_id").is_in(used.to_list()))
    if stacks.is_empty() or trace.frames.is_empty():
        return []
    python = trace.frames.filter(pl.col("filename").fill_null("").str.ends_with(".py"))
    has_python = stacks.explode("frame_ids")["frame_ids"].is_in(
        python["frame_id"].to_list()).any()
    if not has_python:
        return [Finding(
            kind="capture", severity="low", device=device,
            title="call stacks hold C++ frames only: no Python line names the allocations",
            detail={"problem": "cpp_only_stacks"})]
    return []


__all__ = ["find_capture_limits", "find_capture_wide"]
