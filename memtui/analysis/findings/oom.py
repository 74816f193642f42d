"""Out-of-memory findings: for each OOM, the request against the pool and the device.

For every ``oom`` event the pool state at that event
(:func:`memtui.analysis.pool_state.explain_oom`) gives reserved, allocated, pending-free
and free bytes and the largest free gap the request could have used.  The cause is
*fragmentation* when the pool's free bytes plus what the device still had free would have
held the request but no single gap could, and *the device is full* otherwise.  The advice
knows the capture's allocator settings (:mod:`memtui.analysis.findings.allocator`).

A capture dumped after an OOM without its ``oom`` event (an OOM observer calling
``_snapshot()``; file names with "oom") gets a finding that says what the final pool
state shows and that the failed request itself is not in the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from memtui.analysis.findings.allocator import advice, settings_of
from memtui.analysis.findings.frames import evidence_stack
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.live import device_index
from memtui.analysis.pool_state import explain_oom, state_at, state_at_seq
from memtui.analysis.summary import format_bytes
from memtui.model import MemoryTrace

_DEVICE_FREE = re.compile(r"(\d+) free on the device")


def find_ooms(trace: MemoryTrace, device: str) -> list[Finding]:
    """One finding per OOM of ``device``, or one for an OOM dump without its event."""
    events = trace.device_events(device).filter(pl.col("action") == "oom")
    findings = [_oom_finding(trace, device, row) for row in events.iter_rows(named=True)]
    if not findings and _looks_like_oom_dump(trace, device):
        findings.append(_dump_finding(trace, device))
    return findings


def _oom_finding(trace: MemoryTrace, device: str, event: dict[str, Any]) -> Finding:
    seq = int(event["seq"])
    why = explain_oom(trace, device, seq)
    state = state_at_seq(trace, device, seq)
    match = _DEVICE_FREE.search(why.message or "")
    device_free = int(match.group(1)) if match else None
    settings = settings_of(trace)
    requested = why.requested
    available = why.free + (device_free or 0)
    if requested > available:
        cause_kind = "full"
        cause = (f"the device is full: {format_bytes(requested)} asked, but the pool had "
                 f"{format_bytes(why.free)} free of {format_bytes(why.reserved)} reserved"
                 + (f" and the device {format_bytes(device_free)} more"
                    if device_free is not None else ""))
    elif requested > why.largest_usable_gap:
        cause_kind = "fragmentation"
        cause = (f"fragmentation: {format_bytes(why.free)} free in the pool but the largest "
                 f"gap is {format_bytes(why.largest_usable_gap)}, less than the "
                 f"{format_bytes(requested)} asked")
    else:
        cause_kind = "outside"
        cause = (f"a free gap of {format_bytes(why.largest_usable_gap)} could have held the "
                 f"{format_bytes(requested)} asked: the device ran out outside this pool")
    detail = {
        "requested_bytes": requested,
        "stream": why.stream,
        "pool": event.get("pool"),
        "device_free_bytes": device_free,
        "reserved_bytes": why.reserved,
        "allocated_bytes": state.allocated,
        "pending_free_bytes": state.pending,
        "pool_free_bytes": why.free,
        "largest_gap_bytes": why.largest_usable_gap,
        "largest_gap_any_segment_bytes": why.largest_gap,
        "cause_kind": cause_kind,
        "cause": cause,
        "advice": advice(settings, cause_kind, requested, why.free),
        "conflicts": settings.conflicts(),
        "allocator_settings_known": settings.known,
    }
    stack_id = event.get("stack_id")
    return Finding(
        kind="oom", severity="high", device=device, bytes=requested,
        title=f"out of memory asking {format_bytes(requested)}: {cause}",
        detail=detail,
        evidence=Evidence(t=int(event["t"]), seq=seq, stack_id=stack_id,
                          stack=evidence_stack(trace, stack_id)),
    )


def _looks_like_oom_dump(trace: MemoryTrace, device: str) -> bool:
    if "oom" not in Path(trace.meta.path).name.lower():
        return False
    has_oom_marker = trace.markers.filter(
        (pl.col("kind") == "oom") & (pl.col("device").is_null() | (pl.col("device") == device))
    ).height > 0
    return not has_oom_marker and trace.device_segments(device).height > 0


def _dump_finding(trace: MemoryTrace, device: str) -> Finding:
    index = device_index(trace, device)
    state = state_at(trace, device, index.t_end)
    settings = settings_of(trace)
    gap = state.largest_gap
    cause = (f"this capture holds no oom event, so the failed request and its size are not in "
             f"the file; at the dump the pool had {format_bytes(state.free)} free in "
             f"{format_bytes(state.reserved)} reserved ({format_bytes(state.allocated)} "
             f"allocated, largest free gap {format_bytes(gap)}): any request above "
             f"{format_bytes(gap)} needed a new segment from the device")
    fragmented = state.free >= 0.05 * state.reserved and state.total_fragmentation > 0.5
    detail = {
        "requested_bytes": None,
        "reserved_bytes": state.reserved,
        "allocated_bytes": state.allocated,
        "pending_free_bytes": state.pending,
        "pool_free_bytes": state.free,
        "largest_gap_bytes": gap,
        "fragmentation": round(float(state.total_fragmentation), 4),
        "cause_kind": "unknown",
        "cause": cause,
        "advice": advice(settings, "fragmentation" if fragmented else "full", None, state.free),
        "conflicts": settings.conflicts(),
        "allocator_settings_known": settings.known,
    }
    return Finding(
        kind="oom", severity="medium", device=device, bytes=state.reserved,
        title=(f"dumped after an out-of-memory error? the request is not in the file; "
               f"{format_bytes(state.allocated)} allocated of {format_bytes(state.reserved)} "
               f"reserved, largest free gap {format_bytes(gap)}"),
        detail=detail, evidence=Evidence(t=state.t),
    )


__all__ = ["find_ooms"]
