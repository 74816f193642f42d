"""Fragmentation: reserved but unallocated bytes, split into what they are, and what helps.

Only a capture with a segment layout (snapshots, msMemScope's driver segments) gets this
finding: without segments nothing says where the free bytes lie (profiler captures).

The measures are the pool's one definition (:class:`~memtui.analysis.layout.pool_state.
Fragmentation`): *fragmented* (free inside partly used segments), *cached* (wholly free
segments: reusable, not fragmentation) and *rounding*.  The pool is measured where it
matters: at the allocated peak, at the reserved peak (the first time reserved reaches its
highest, just after the allocation that needed it: where ``memtui whatif`` measures its
runs) and at each out-of-memory error.  The finding names the moment with the most
fragmented bytes beyond its largest gap (:func:`crumbs`: one gap, however large, serves
any request up to its size), or the out-of-memory error it explains, and lists every
moment in ``detail["moments"]``.

Severity follows what the user can do about it.  ``medium`` only where it explains an
out-of-memory error (an OOM finding's cause is fragmentation and the fragmented bytes were
needed to hold the request: the cached bytes alone were not enough), or where a proven replay
of the allocator predicts that ``expandable_segments:True`` lowers the reserved peak by
at least :data:`MEDIUM_SAVING_SHARE` of it (:func:`with_prediction`, called by the
findings' what-if hook, :mod:`memtui.analysis.findings.quote`): the title then says the
setting and how much it saves.  Without such a replay the title recommends nothing; the
advice names the setting as a thing to try (``memtui whatif`` says what it would do), and
``predicted_saving_bytes`` stays None: no estimate stands in for the replay.  ``low``
where the fragmented bytes beyond the largest gap, or the cached bytes, are large, else
``info``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.allocator import MIN_ADVICE_BYTES, AllocatorSettings, settings_of
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.oom import find_ooms
from memtui.analysis.findings.pool import pool_at_seq
from memtui.analysis.layout.pool_state import FRAGMENTED_MEANS, Fragmentation
from memtui.model import MemoryTrace
from memtui.units import format_bytes

MiB = 1 << 20
GiB = 1 << 30
#: Fragmented bytes worth a (low) finding: this many bytes and this share of reserved.
LOW_BYTES = 64 * MiB
LOW_SHARE = 0.10
#: Cached (wholly free) bytes worth a (low) mention: this many bytes, this share.
LOW_CACHED_BYTES = 1 * GiB
LOW_CACHED_SHARE = 0.5
#: Fragmented bytes beyond the largest gap worth trying the setting on (and replaying it,
#: where a replay can be proven): MIN_ADVICE_BYTES, or this share of reserved (a small
#: pool's few MiB are as much of it as a large one's hundreds).
ADVICE_SHARE = 0.10
#: A proven replay's saving on the reserved peak that makes the finding ``medium``.
MEDIUM_SAVING_SHARE = 0.05
#: The setting that lets fragmented segments merge and be given back.
SETTING = "expandable_segments:True"


@dataclass(frozen=True)
class Moment:
    """The pool measured at one event: ``at`` names it (allocated peak, reserved peak,
    out-of-memory error)."""

    at: str
    t: int
    seq: int
    measures: Fragmentation
    allocated: int

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "t": self.t, "seq": self.seq, "allocated_bytes": self.allocated,
                **self.measures.to_dict()}


def find_fragmentation(trace: MemoryTrace, device: str) -> list[Finding]:
    """One ``fragmentation`` finding for ``device`` where its pool ever held unused bytes."""
    if trace.device_segments(device).is_empty():
        return []  # no segment layout: nothing says where free bytes lie
    events = trace.device_events(device).select("t", "seq", "action", "allocated",
                                                "reserved")
    if events["seq"].null_count():  # else no copy of every event
        events = events.filter(pl.col("seq").is_not_null())
    if events.is_empty():
        return []
    moments = measure_moments(trace, device, events)
    if not moments or not any(m.measures.fragmented or m.measures.cached for m in moments):
        return []
    settings = settings_of(trace)
    oom, at_oom = _oom_explained(trace, device, moments)
    worst = at_oom if at_oom is not None else max(
        moments, key=lambda m: (crumbs(m.measures), m.measures.fragmented,
                                m.measures.cached, -m.seq))
    severity = _severity(worst.measures, moments, oom)
    advice = _advice(worst.measures, settings)
    detail: dict[str, Any] = {
        **worst.measures.to_dict(),
        "measured_at": worst.at,
        "moments": [m.to_dict() for m in moments],
        "advice": advice,
        "predicted_saving_bytes": None,
        "explains_oom_t": oom.evidence.t if oom is not None else None,
    }
    if _no_requested_sizes(trace, device):
        detail.pop("rounding_bytes")
    return [Finding(kind="fragmentation", severity=severity,
                    title=title_of(worst, oom is not None), device=device,
                    bytes=worst.measures.fragmented or worst.measures.cached,
                    detail=detail, evidence=Evidence(t=worst.t, seq=worst.seq))]


def measure_moments(trace: MemoryTrace, device: str, events: pl.DataFrame) -> list[Moment]:
    """The pool at the allocated peak, the reserved peak and each out-of-memory error of
    ``device`` (``events``: its t, seq, action, allocated and reserved), in event order,
    one per event."""
    picks: dict[int, str] = {}
    allocated = events["allocated"]
    if allocated.null_count() < allocated.len():
        picks.setdefault(int(allocated.fill_null(-1).arg_max()), "allocated peak")
    reserved_row = reserved_peak_row(events)
    if reserved_row is not None:
        picks[reserved_row] = ("reserved peak" if reserved_row not in picks
                               else "allocated and reserved peak")
    for row in _oom_rows(trace, device, events):
        picks[row] = "out-of-memory error" if row not in picks else \
            f"{picks[row]}, out-of-memory error"
    out = []
    for row in sorted(picks):
        seq, t = int(events["seq"][row]), int(events["t"][row])
        state = pool_at_seq(trace, device, seq, t)
        level = events["reserved"][row]  # the device's reserved (a layer's may exceed
        out.append(Moment(at=picks[row], t=t, seq=seq,  # the segments listed)
                          measures=state.fragmentation_of(level),
                          allocated=state.allocated + state.pending))
    return out


def reserved_peak_row(events: pl.DataFrame) -> int | None:
    """The row at which reserved first reaches its highest, moved past the segment event
    to the allocation that needed it (a ``segment_alloc`` or ``segment_map`` comes just
    before its alloc, at the same level): where ``memtui whatif`` measures its runs."""
    reserved = events["reserved"]
    if reserved.null_count() == reserved.len():
        return None
    values = reserved.fill_null(-1).to_numpy()
    row = int(np.argmax(values))
    actions = events["action"]  # (each row read as text: no column of texts made)
    while row + 1 < values.size and values[row + 1] == values[row] and \
            actions[row] in ("segment_alloc", "segment_map"):
        row += 1
    return row


def crumbs(measures: Fragmentation) -> int:
    """The fragmented bytes beyond the largest gap: what no single request can use whole
    (a segment being filled has one gap beside its first blocks: no crumbs).  It picks
    the moment a finding names and its severity; the figures said stay the measures."""
    return measures.fragmented - measures.largest_gap


def _oom_rows(trace: MemoryTrace, device: str, events: pl.DataFrame) -> list[int]:
    """Rows of the device's out-of-memory errors: its ``oom`` events, else (msMemScope)
    the event at or before each ``oom`` marker."""
    rows = np.flatnonzero((events["action"] == "oom").fill_null(False).to_numpy()).tolist()
    if rows:
        return rows
    markers = trace.markers.filter((pl.col("kind") == "oom") & (
        pl.col("device").is_null() | (pl.col("device") == device)))
    if markers.is_empty():
        return []
    times = events["t"].to_numpy()
    at = np.searchsorted(times, markers["t"].to_numpy(), side="right") - 1
    return sorted({int(r) for r in at if r >= 0})


def _oom_explained(trace: MemoryTrace, device: str,
                   moments: list[Moment]) -> tuple[Finding | None, Moment | None]:
    """The first OOM finding of ``device`` that fragmentation explains, with the pool
    measured at it; (None, None) where none.  The OOM finding's cause says fragmentation
    where the pool's free bytes would hold the request but no gap does; it is *this*
    fragmentation only where the fragmented bytes are needed for it: the request is more
    than the cached bytes (wholly free segments, which the allocator gives back and asks
    again before it fails)."""
    if trace.device_events(device).filter(pl.col("action") == "oom").is_empty() \
            and trace.markers.filter(pl.col("kind") == "oom").is_empty():
        return None, None
    for finding in find_ooms(trace, device):
        if finding.detail.get("cause_kind") != "fragmentation":
            continue
        moment = _moment_of_oom(moments, finding)
        requested = finding.detail.get("requested_bytes")
        if moment is None or requested is None:
            continue
        m = moment.measures
        if m.fragmented and m.cached < requested:
            return finding, moment
    return None, None


def _moment_of_oom(moments: list[Moment], oom: Finding) -> Moment | None:
    """The moment measured at ``oom``: the last out-of-memory moment at or before its
    evidence, else the first out-of-memory moment."""
    at_ooms = [m for m in moments if "out-of-memory error" in m.at]
    before = [m for m in at_ooms if oom.evidence.t is None or m.t <= oom.evidence.t]
    return before[-1] if before else (at_ooms[0] if at_ooms else None)


def _severity(worst: Fragmentation, moments: list[Moment], oom: Finding | None) -> str:
    """``medium`` where it explains an OOM; ``low`` where the fragmented or the cached
    bytes are large; else ``info`` (a proven replay may raise it later)."""
    if oom is not None:
        return "medium"
    if crumbs(worst) >= LOW_BYTES and worst.share >= LOW_SHARE:
        return "low"
    cached = max(moments, key=lambda m: m.measures.cached).measures
    if cached.cached >= LOW_CACHED_BYTES and cached.reserved and \
            cached.cached / cached.reserved >= LOW_CACHED_SHARE:
        return "low"
    return "info"


def _advice(worst: Fragmentation, settings: AllocatorSettings) -> str | None:
    """What to try against the fragmented bytes (not a claim: a proven replay, where one
    can be made, replaces it with what the setting does on this capture)."""
    if settings.expandable_segments or (crumbs(worst) < MIN_ADVICE_BYTES and
                                         crumbs(worst) < ADVICE_SHARE * worst.reserved):
        return None
    return (f"try {settings.env}={SETTING}: it lets the {format_bytes(worst.fragmented)} "
            f"{FRAGMENTED_MEANS} merge and be given back; `memtui whatif --set {SETTING}` "
            "says what it does on this capture where a replay of it can be proven")


def title_of(moment: Moment, explains_oom: bool) -> str:
    """The title: the moment's measures, one name each (no recommendation: see
    :func:`with_prediction`)."""
    m = moment.measures
    parts = []
    if m.fragmented:
        parts.append(f"{format_bytes(m.fragmented)} fragmented (free inside "
                     f"{_segments(m.fragmented_segments, 'partly used')}; {m.share:.0%} of "
                     f"{format_bytes(m.reserved)} reserved; largest gap "
                     f"{format_bytes(m.largest_gap)})")
    if m.cached:
        parts.append(f"{format_bytes(m.cached)} cached (in "
                     f"{_segments(m.cached_segments, 'wholly free')}: reusable, not "
                     "fragmentation)")
    title = f"at the {moment.at}: " + "; ".join(parts)
    if explains_oom:
        title += "; explains the out-of-memory error"
    return title


def _segments(count: int, kind: str) -> str:
    """``"1 partly used segment"``, ``"41 partly used segments"``."""
    return f"{count} {kind} segment" + ("" if count == 1 else "s")


def with_prediction(finding: Finding, reserved_peak: int, predicted_peak: int,
                    env: str, avoids_oom: bool) -> Finding:
    """``finding`` once a proven replay predicted ``expandable_segments:True``: the title
    recommends it, and the finding is ``medium`` at least, only where it lowers the
    reserved peak by :data:`MEDIUM_SAVING_SHARE` of it or more, or avoids the OOM this
    finding explains; it says how much.  Otherwise the title recommends nothing."""
    saving = reserved_peak - predicted_peak
    share = saving / reserved_peak if reserved_peak else 0.0
    explains = finding.detail.get("explains_oom_t") is not None
    helps = share >= MEDIUM_SAVING_SHARE or (explains and avoids_oom)
    if not helps:
        return finding
    severity = finding.severity if finding.severity in ("high", "medium") else "medium"
    what = (f"saves {format_bytes(saving)} ({share:.0%}) of the {format_bytes(reserved_peak)} "
            "reserved peak" if saving > 0 else "the reserved peak does not grow")
    if explains and avoids_oom:
        what += " and avoids the out-of-memory error"
    return replace(finding, severity=severity,
                   title=f"{finding.title}; set {env}={SETTING}: a proven replay {what}")


def _no_requested_sizes(trace: MemoryTrace, device: str) -> bool:
    blocks = trace.device_blocks(device)
    return blocks["requested_size"].null_count() == blocks.height


__all__ = ["MEDIUM_SAVING_SHARE", "Moment", "find_fragmentation", "measure_moments",
           "reserved_peak_row", "title_of", "with_prediction"]
