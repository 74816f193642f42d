"""Out-of-memory findings: for each OOM, the request against the pool and the device.

For every ``oom`` event the pool state at that event
(:func:`memtui.analysis.layout.pool_state.explain_oom`) gives reserved, allocated, pending-free
and free bytes and the largest free gap the request could have used.  The cause is
*fragmentation* when the pool's free bytes plus what the device still had free would have
held the request but no single gap could, and *the device is full* otherwise.  Where the
device still had room for a new segment of the request, the cause says why it did not help:
the process's own limit (:func:`process_limit_note`).  The advice
knows the capture's allocator settings (:mod:`memtui.analysis.findings.allocator`).

msMemScope writes no OOM memory event but ``OOM_DETAIL`` rows (markers of kind ``oom``):
each trigger, its ``req_size`` read from the marker's detail, is judged against the pool
state at the event before it.

A capture dumped after an OOM without its ``oom`` event (an OOM observer calling
``_snapshot()``; file names with "oom") gets a finding that says what the final pool
state shows and that the failed request itself is not in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from memtui.analysis.findings.allocator import advice, settings_of
from memtui.analysis.findings.frames import evidence_stack
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.pool import pool_at_seq
from memtui.analysis.layout.pool_state import (
    PoolState,
    explain_oom,
    state_at,
    state_at_seq,
    time_after_seq,
)
from memtui.analysis.timeline.live import device_index
from memtui.model import MemoryTrace
from memtui.units import format_bytes

_REQ_SIZE = re.compile(r"req_?size\W{0,3}(\d+)", re.IGNORECASE)


#: OOMs of a device read by masks over its blocks (findings.pool.pool_at_seq); more (an
#: OOM loop's thousands) read through the device's interval indexes, built once.
FEW_OOMS = 64


def find_ooms(trace: MemoryTrace, device: str) -> list[Finding]:
    """One finding per OOM of ``device``, or one for an OOM dump without its event."""
    events = trace.device_events(device).filter(pl.col("action") == "oom")
    stacks: dict[int | None, tuple] = {}  # one evidence stack per stack (an OOM loop's
    few = events.height <= FEW_OOMS  # thousands share a few)
    findings = [_oom_finding(trace, device, row, stacks, by_masks=few)
                for row in events.iter_rows(named=True)]
    findings += _marker_ooms(trace, device, set(events["t"].to_list()))
    if not findings and _looks_like_oom_dump(trace, device):
        findings.append(_dump_finding(trace, device))
    return findings


def oom_finding(trace: MemoryTrace, device: str, seq: int) -> Finding:
    """The finding of the ``oom`` event ``seq`` of ``device`` (the Pool screen's banner says
    its title, the same words as the Findings screen)."""
    event = trace.device_events(device).filter(pl.col("seq") == seq).row(0, named=True)
    return _oom_finding(trace, device, event)


def _oom_finding(trace: MemoryTrace, device: str, event: dict[str, Any],
                 stacks: dict[int | None, tuple] | None = None,
                 by_masks: bool = False) -> Finding:
    """``by_masks``: the pool read by masks over the blocks (a few OOMs: the interval
    indexes, a block's worth of arrays several times over, are not built for them), else
    through the indexes (many OOMs, or a screen's, whose indexes are there)."""
    seq = int(event["seq"])
    if by_masks:
        index = device_index(trace, device)
        state = pool_at_seq(trace, device, seq, time_after_seq(trace, device, seq,
                                                               index.t_start))
    else:
        state = state_at_seq(trace, device, seq)
    why = explain_oom(trace, device, seq, state)
    return _finding(trace, device, why.requested, why.stream, event.get("pool"), why.device_free,
                    state, why.largest_usable_gap, int(event["t"]), seq, event.get("stack_id"),
                    stacks)


def _marker_ooms(trace: MemoryTrace, device: str, event_times: set[int]) -> list[Finding]:
    """msMemScope ``OOM_DETAIL`` triggers (markers with the request in their detail)."""
    markers = trace.markers
    if markers.is_empty() or "detail" not in markers.columns:
        return []
    rows = markers.filter(
        (pl.col("kind") == "oom") & (pl.col("device").is_null() | (pl.col("device") == device))
        & pl.col("name").fill_null("").str.contains("(?i)trigger") & pl.col("t").is_not_null()
    )
    events = trace.device_events(device).select("t", "seq")
    found = []
    for row in rows.iter_rows(named=True):
        if row["t"] in event_times or events.is_empty():
            continue
        match = _REQ_SIZE.search(row.get("detail") or "")
        before = events.filter(pl.col("t") <= row["t"]).tail(1)
        if before.is_empty():
            continue
        seq, t = int(before["seq"][0]), int(row["t"])
        state = pool_at_seq(trace, device, seq, t)
        requested = int(match.group(1)) if match else 0
        found.append(_finding(trace, device, requested, None, None, None, state,
                              state.largest_gap, t, seq, None))
    return found


def _free_split(state: PoolState) -> str:
    """The pool's free bytes by the one definition every output uses (pool_state.
    Fragmentation), where some sit in wholly free segments: those are cached, not
    fragmentation (``"; of the free bytes 768.0 KiB are fragmented and 4.1 GiB cached
    (in 54 wholly free segments)"``); empty where none are."""
    m = state.fragmentation
    if not m.cached:
        return ""
    return (f"; of the free bytes {format_bytes(m.fragmented)} are fragmented and "
            f"{format_bytes(m.cached)} cached (in {m.cached_segments} wholly free segment"
            + ("" if m.cached_segments == 1 else "s") + ")")


def _finding(trace: MemoryTrace, device: str, requested: int, stream: int | None,
             pool: str | None, device_free: int | None, state: PoolState, largest_gap: int,
             t: int, seq: int, stack_id: int | None,
             stacks: dict[int | None, tuple] | None = None) -> Finding:
    """An OOM finding from the request and the pool state at it (``stacks``: evidence
    stacks already made, by stack id)."""
    why = _Why(free=state.free, reserved=state.reserved, largest_usable_gap=largest_gap,
               largest_gap=state.largest_gap, stream=stream)
    settings = settings_of(trace)
    available = why.free + (device_free or 0)
    if not requested:
        cause_kind = "unknown"
        cause = (f"the request's size is not in the capture; the pool had "
                 f"{format_bytes(why.free)} free of {format_bytes(why.reserved)} reserved, "
                 f"largest gap {format_bytes(why.largest_usable_gap)}")
    elif requested > available:
        cause_kind = "full"
        cause = (f"the device is full: {format_bytes(requested)} asked, but the pool had "
                 f"{format_bytes(why.free)} free of {format_bytes(why.reserved)} reserved"
                 + (f" and the device {format_bytes(device_free)} more"
                    if device_free is not None else ""))
    elif requested > why.largest_usable_gap:
        cause_kind = "fragmentation"
        cause = (f"fragmentation: {format_bytes(why.free)} free in the pool but the largest "
                 f"gap is {format_bytes(why.largest_usable_gap)}, less than the "
                 f"{format_bytes(requested)} asked" + _free_split(state))
        limited = process_limit_note(requested, why.reserved, device_free)
        if limited:
            cause += f"; {limited}"
    else:
        cause_kind = "outside"
        cause = (f"a free gap of {format_bytes(why.largest_usable_gap)} could have held the "
                 f"{format_bytes(requested)} asked: the device ran out outside this pool")
    detail = {
        "requested_bytes": requested or None,
        "stream": why.stream,
        "pool": pool,
        "device_free_bytes": device_free,
        "reserved_bytes": why.reserved,
        "allocated_bytes": state.allocated,
        "pending_free_bytes": state.pending,
        "pool_free_bytes": why.free,
        "largest_gap_bytes": why.largest_usable_gap,
        "largest_gap_any_segment_bytes": why.largest_gap,
        "cause_kind": cause_kind,
        "cause": cause,
        "advice": advice(settings, "fragmentation" if cause_kind == "unknown"
                         and why.free >= 0.05 * why.reserved else cause_kind,
                         requested, why.free),
        "conflicts": settings.conflicts(),
        "allocator_settings_known": settings.known,
    }
    asked = f"asking {format_bytes(requested)}" if requested else "(request size unknown)"
    return Finding(
        kind="oom", severity="high", device=device, bytes=requested,
        title=f"out of memory {asked}: {cause}",
        detail=detail,
        evidence=Evidence(t=t, seq=seq, stack_id=stack_id,
                          stack=_evidence(trace, stack_id, stacks)),
    )


def process_limit_note(requested: int, reserved: int, device_free: int | None) -> str | None:
    """Why the device's free memory did not help, where it could have held a new segment
    for the request: the process's own limit refused one (``set_per_process_memory_fraction``
    is PyTorch's; the limit lies between what was reserved and that plus the segment).
    None where the device's free memory is unknown or too small for the request."""
    if device_free is None or device_free < requested:
        return None
    return (f"the device still had {format_bytes(device_free)} free, so a new segment was "
            f"refused by a per-process limit (torch.cuda.set_per_process_memory_fraction) "
            f"just above the {format_bytes(reserved)} reserved")


def _evidence(trace: MemoryTrace, stack_id: int | None,
              stacks: dict[int | None, tuple] | None) -> tuple:
    if stacks is None:
        return evidence_stack(trace, stack_id)
    if stack_id not in stacks:
        stacks[stack_id] = evidence_stack(trace, stack_id)
    return stacks[stack_id]


@dataclass(frozen=True)
class _Why:
    free: int
    reserved: int
    largest_usable_gap: int
    largest_gap: int
    stream: int | None


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
    measures = state.fragmentation
    fragmented = measures.fragmented >= 0.05 * state.reserved
    detail = {
        "requested_bytes": None,
        "reserved_bytes": state.reserved,
        "allocated_bytes": state.allocated,
        "pending_free_bytes": state.pending,
        "pool_free_bytes": state.free,
        "largest_gap_bytes": gap,
        "fragmented_bytes": measures.fragmented,
        "fragmented_share": round(measures.share, 4),
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


__all__ = ["find_ooms", "oom_finding", "process_limit_note"]
