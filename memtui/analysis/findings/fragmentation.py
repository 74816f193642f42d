"""Fragmentation: reserved but unallocated bytes, split into what they are, and what helps.

Only a capture with a segment layout (snapshots, msMemScope's driver segments) gets this
finding: without segments nothing says where the free bytes lie (profiler captures).

Reserved minus allocated is split three ways (:attr:`PoolState.unused`): *wholly free*
cached segments (no live block in them: the next requests that fit reuse them, and
``empty_cache()`` or an out-of-memory retry gives them back: not fragmentation), free
space inside *partly used* segments (external fragmentation: the figure this finding
calls fragmentation) and the allocator's rounding inside the blocks (internal).  The pool
is measured where fragmentation costs: where the most bytes sat reserved but
unallocated, at the allocated peak, at the (last) reserved peak and at the end; the
finding reports the one of those with the most external fragmentation (a segment being
filled has free space beside its first blocks for a while: only these moments count).
Its ``fragmentation`` figure is ``1 - largest gap / free`` over the partly used segments
only (a wholly free segment is one gap, reusable whole).

Severity follows what the user can do about it.  ``medium`` only when the finding is
actionable: it explains an out-of-memory error (an OOM finding's cause is
fragmentation), or external fragmentation is at least ``MEDIUM_BYTES`` and
``MEDIUM_SHARE`` of reserved, and the allocator setting that merges split segments
(``expandable_segments``) is not on yet: the finding then names the setting and the
bytes it acts on (``saving_bytes``: the free bytes of the partly used segments, an
estimate, not a bound: the allocator's other choices change too; a proven replay of the
allocator fills ``predicted_saving_bytes`` and its own figure).  Advice is given only
above ``MIN_ADVICE_BYTES``; wholly free segments make a ``low`` finding at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.allocator import MIN_ADVICE_BYTES, AllocatorSettings, settings_of
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.oom import find_ooms
from memtui.analysis.findings.pool import pool_at_seq
from memtui.analysis.layout.pool_state import PoolState, UnusedSplit, fragmentation
from memtui.model import MemoryTrace
from memtui.units import format_bytes

MiB = 1 << 20
GiB = 1 << 30
#: External fragmentation worth a setting: this many bytes and this share of reserved.
MEDIUM_BYTES = 256 * MiB
MEDIUM_SHARE = 0.25
LOW_BYTES = 64 * MiB
LOW_SHARE = 0.10
#: Wholly free cached segments worth a (low) mention: this many bytes, this share.
LOW_CACHED_BYTES = 1 * GiB
LOW_CACHED_SHARE = 0.5


@dataclass(frozen=True)
class _Moment:
    t: int
    seq: int
    state: PoolState
    split: UnusedSplit


def find_fragmentation(trace: MemoryTrace, device: str) -> list[Finding]:
    """One ``fragmentation`` finding for ``device`` where its pool ever held unused bytes."""
    if trace.device_segments(device).is_empty():
        return []  # no segment layout: nothing says where free bytes lie
    events = trace.device_events(device).select("t", "seq", "allocated", "reserved")
    if events["seq"].null_count():  # else no copy of every event
        events = events.filter(pl.col("seq").is_not_null())
    if events.is_empty():
        return []
    rows = _rows_to_measure(events)
    moments = {row: _measure(trace, device, events, row) for row in rows}
    unused = {row: m.state.free for row, m in moments.items()}  # free inside segments
    most_unused = moments[max(rows, key=lambda r: (unused[r], -r))]
    if max(unused.values()) <= 0:
        return []
    worst = moments[max(rows, key=lambda r: (moments[r].split.external, unused[r], -r))]
    end = moments[events.height - 1]
    settings = settings_of(trace)
    oom = _oom_explained(trace, device)
    severity, action, saving = _judge(worst, most_unused, settings, oom)
    detail = _detail(trace, device, most_unused, worst, end)
    detail.update(advice=action, saving_bytes=saving, predicted_saving_bytes=None,
                  explains_oom_t=oom.evidence.t if oom is not None else None)
    return [Finding(kind="fragmentation", severity=severity,
                    title=_title(worst, most_unused, severity, action, oom), device=device,
                    bytes=worst.split.external or most_unused.split.wholly_free,
                    detail=detail, evidence=Evidence(t=worst.t, seq=worst.seq))]


def _rows_to_measure(events: pl.DataFrame) -> list[int]:
    """Rows of ``events`` to measure the pool at: where the most bytes sat reserved but
    unallocated (by the levels the source reports), the allocated peak, the last reserved
    peak and the end."""
    n = events.height
    known = (events["allocated"].is_not_null() & events["reserved"].is_not_null()).to_numpy()
    rows = np.flatnonzero(known)  # the rows with both levels, read without a copy of them
    picks: list[int] = []
    if rows.size:
        allocated = events["allocated"].to_numpy()[rows] if rows.size < n else \
            events["allocated"].to_numpy()
        reserved = events["reserved"].to_numpy()[rows] if rows.size < n else \
            events["reserved"].to_numpy()
        last_reserved_peak = reserved.size - 1 - int(np.argmax(reserved[::-1]))
        picks = [int(rows[i]) for i in (
            int(np.argmax(reserved - allocated)), int(np.argmax(allocated)),
            last_reserved_peak)]
    return list(dict.fromkeys([*picks, n - 1]))


def _measure(trace: MemoryTrace, device: str, events: pl.DataFrame, row: int) -> _Moment:
    seq, t = int(events["seq"][row]), int(events["t"][row])
    state = pool_at_seq(trace, device, seq, t)
    return _Moment(t=t, seq=seq, state=state, split=state.unused)


def _oom_explained(trace: MemoryTrace, device: str) -> Finding | None:
    """The first OOM finding of ``device`` whose cause is fragmentation, if any."""
    if trace.device_events(device).filter(pl.col("action") == "oom").is_empty() \
            and trace.markers.filter(pl.col("kind") == "oom").is_empty():
        return None
    for finding in find_ooms(trace, device):
        if finding.detail.get("cause_kind") == "fragmentation":
            return finding
    return None


def _judge(worst: _Moment, most_unused: _Moment, settings: AllocatorSettings,
           oom: Finding | None) -> tuple[str, str | None, int | None]:
    """(severity, what to do, the bytes it acts on)."""
    external, reserved = worst.split.external, worst.state.reserved
    share = external / reserved if reserved else 0.0
    action = _action(worst.split, settings) if external >= MIN_ADVICE_BYTES else None
    if oom is not None:
        return "medium", action or oom.detail.get("advice"), external or None
    if external >= MEDIUM_BYTES and share >= MEDIUM_SHARE and not settings.expandable_segments:
        return "medium", action, external
    cached = most_unused.split.wholly_free
    cached_share = cached / most_unused.state.reserved if most_unused.state.reserved else 0.0
    if (external >= LOW_BYTES and share >= LOW_SHARE) or \
            (cached >= LOW_CACHED_BYTES and cached_share >= LOW_CACHED_SHARE):
        return "low", action, external if action else None
    return "info", None, None


def _action(split: UnusedSplit, settings: AllocatorSettings) -> str | None:
    """What the user can set against ``split``'s external fragmentation, or None."""
    if settings.expandable_segments:
        return None  # the setting that merges split segments is on already
    free = format_bytes(split.external)
    return (f"set {settings.env}=expandable_segments:True so that the {free} free in "
            f"{_segments(split.external_segments, 'partly used')} can merge and be given "
            "back")


def _segments(count: int, kind: str) -> str:
    """``"1 partly used segment"``, ``"41 partly used segments"``."""
    return f"{count} {kind} segment" + ("" if count == 1 else "s")


def _title(worst: _Moment, most_unused: _Moment, severity: str, action: str | None,
           oom: Finding | None) -> str:
    split, reserved = worst.split, worst.state.reserved
    cached = most_unused.split
    if split.external:
        title = (f"{format_bytes(split.external)} free inside "
                 f"{_segments(split.external_segments, 'partly used')} "
                 f"({split.external / reserved:.0%} of {format_bytes(reserved)} reserved; "
                 "largest gap "
                 f"{format_bytes(split.external_largest_gap)})")
        if cached.wholly_free:
            title += (f"; {format_bytes(cached.wholly_free)} more sat in "
                      f"{_segments(cached.wholly_free_segments, 'wholly free')} "
                      "(cached: reusable, not fragmentation)")
    else:
        title = (f"{format_bytes(cached.wholly_free)} reserved but unused, all in "
                 f"{_segments(cached.wholly_free_segments, 'wholly free')} "
                 "(cached: reusable, not fragmentation)")
    if oom is not None:
        title += "; explains the out-of-memory error"
    elif action and severity in ("high", "medium"):
        title += f"; {action}"
    return title


def _detail(trace: MemoryTrace, device: str, most_unused: _Moment, worst: _Moment,
            end: _Moment) -> dict[str, Any]:
    state = most_unused.state
    detail: dict[str, Any] = {
        "max_unused_bytes": state.free,  # wholly free + external: outside blocks apart
        "max_unused_t": most_unused.t,
        "reserved_bytes": state.reserved,
        "allocated_bytes": state.allocated,
        "unused_share": round(state.free / state.reserved, 4) if state.reserved else 0.0,
        "wholly_free_bytes": most_unused.split.wholly_free,
        "wholly_free_segments": most_unused.split.wholly_free_segments,
        "external_fragmentation_bytes": worst.split.external,
        "external_fragmentation_segments": worst.split.external_segments,
        "external_largest_gap_bytes": worst.split.external_largest_gap,
        "external_fragmentation_t": worst.t,
        "external_reserved_bytes": worst.state.reserved,
        "external_share": round(worst.split.external / worst.state.reserved, 4)
        if worst.state.reserved else 0.0,
        "fragmentation": _gap_ratio(worst.split),
        "end_external_fragmentation_bytes": end.split.external,
        "end_wholly_free_bytes": end.split.wholly_free,
        "end_fragmentation": _gap_ratio(end.split),
    }
    if not _no_requested_sizes(trace, device):
        detail["internal_fragmentation_bytes"] = worst.split.internal
    return detail


def _gap_ratio(split: UnusedSplit) -> float:
    """``1 - largest gap / free`` over the partly used segments."""
    return round(float(fragmentation(split.external_largest_gap, split.external)), 4)


def _no_requested_sizes(trace: MemoryTrace, device: str) -> bool:
    blocks = trace.device_blocks(device)
    return blocks["requested_size"].null_count() == blocks.height


__all__ = ["find_fragmentation"]
