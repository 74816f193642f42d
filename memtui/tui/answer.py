"""The answer on the first screen (issue 23): where the cursor opens, and what the status
bar says of it.

A capture opens with the cursor at the peak of allocated (the Trend's panel shows what
held memory there), then, once the findings are in (at once where the reopen cache kept
them), at the top finding's evidence, unless the user has moved it meanwhile.
:func:`top_finding` picks that finding, :func:`evidence_changes` turns its evidence into
cursor changes (the Findings screen's Enter uses it too), and :class:`CursorNote` is what
the status bar says while the cursor stays on that event ("at leak", "at peak"; a zoom or a
window does not move it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memtui.analysis.findings.model import Finding
from memtui.model import MemoryTrace
from memtui.tui.cursor import CursorState

#: Findings that lead the first screen (at medium severity or above): they happen at one
#: place on the time axis.  Fragmentation, inefficient blocks and capture limits are
#: spread over the trace, and the peak is where the cursor opens anyway.
ANSWER_KINDS = ("oom", "leak")
ANSWER_SEVERITIES = ("high", "medium")


@dataclass(frozen=True)
class CursorNote:
    """What the status bar says of the cursor while it is still on ``cursor``'s event."""

    cursor: CursorState
    text: str

    def part(self, cursor: CursorState | None) -> str | None:
        """The status bar's part, None once the cursor moved to another event or device (a
        zoom, a window or a block chosen leave it where it was)."""
        if cursor is None:
            return None
        here = (cursor.device, cursor.event, cursor.t)
        return self.text if here == (self.cursor.device, self.cursor.event, self.cursor.t) \
            else None


def top_finding(findings: dict[str, list[Finding]] | None, device: str) -> Finding | None:
    """The most severe OOM or leak of ``device`` (medium severity or above) whose evidence
    has a place on the time axis; None where there is none (the cursor stays at the
    peak)."""
    for finding in (findings or {}).get(device, []):
        evidence = finding.evidence
        if finding.kind not in ANSWER_KINDS or finding.severity not in ANSWER_SEVERITIES:
            continue
        if evidence.t is not None or evidence.seq is not None or evidence.event is not None:
            return finding
    return None


def evidence_changes(trace: MemoryTrace, finding: Finding, cursor: CursorState) -> dict:
    """``app.move_cursor`` arguments that put the cursor on ``finding``'s evidence: its
    event (exact where several share a time), else its time; its first block; its window,
    selected and in view (a leak's steps: the Blocks map shows them, not the whole run)."""
    evidence = finding.evidence
    changes: dict[str, Any] = {}
    if finding.device != cursor.device:
        changes["device"] = finding.device
    if evidence.block_ids:
        changes["block_id"] = evidence.block_ids[0]
    if evidence.window is not None:
        changes["window"] = evidence.window
        if evidence.window[1] > evidence.window[0]:  # the screens show the evidence's span
            changes["view"] = evidence.window
    position = evidence.event if evidence.event is not None else event_position(
        trace, finding.device, evidence.seq)
    if position is not None:
        changes["event"] = position
    elif evidence.t is not None:
        changes["t"] = evidence.t
    return changes


def event_position(trace: MemoryTrace, device: str, seq: int | None) -> int | None:
    """Position (0-based, in the device's event order) of the event ``seq``."""
    if seq is None:
        return None
    hits = np.flatnonzero(trace.device_events(device)["seq"].to_numpy() == seq)
    return int(hits[0]) if hits.size else None


def finding_note(finding: Finding, cursor: CursorState) -> CursorNote:
    """The status bar's note for a cursor put on ``finding``'s evidence."""
    return CursorNote(cursor, f"at {finding.kind}")


def peak_note(cursor: CursorState) -> CursorNote:
    """The status bar's note for a cursor opened at the peak."""
    return CursorNote(cursor, "at peak")


__all__ = ["CursorNote", "evidence_changes", "event_position", "finding_note", "peak_note",
           "top_finding"]
