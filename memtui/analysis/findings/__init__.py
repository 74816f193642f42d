"""Findings: the answers memtui gives by itself (issue 16).

Each module finds one kind over a :class:`~memtui.model.MemoryTrace` with polars and
numpy (no loop over events) and returns typed :class:`Finding` objects:

* :mod:`.leak`: code or owners whose live bytes grow step after step (steps from
  markers, else from the trace's own rhythm: :mod:`.steps`);
* :mod:`.peak`: what held memory at the peak, by stack, owner and pool;
* :mod:`.oom`: why each out-of-memory happened, with the allocator setting that helps;
* :mod:`.fragmentation`: reserved but unused bytes, free gaps, rounding;
* :mod:`.inefficient`: Insight's early allocation / late deallocation / idleness;
* :mod:`.capture`: what the capture lacks (history, stacks, clock, rows);
* :mod:`.savings`: what each change would save, read from the memory by role at the
  peak (activation checkpointing, sharding the optimizer state, bf16, a smaller
  micro-batch, gradients freed between steps).

:func:`find_all` runs them all; :func:`findings_json` is the ``memtui findings --json``
object; :func:`format_findings` its text form.  With ``stacks`` both give the full call
stack of each finding's evidence and of each of the peak's stack groups (``findings
--stacks``, as pt-snap-cli's peak report prints them).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import numpy as np

from memtui.analysis.findings.capture import find_capture_limits, find_capture_wide
from memtui.analysis.findings.fragmentation import find_fragmentation
from memtui.analysis.findings.frames import full_stack_frames
from memtui.analysis.findings.inefficient import find_inefficient
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.findings.model import KINDS, Evidence, Finding, StackFrame, ranked
from memtui.analysis.findings.oom import find_ooms
from memtui.analysis.findings.peak import find_peak
from memtui.analysis.findings.savings import find_savings
from memtui.model import MemoryTrace

FINDERS = (find_ooms, find_leaks, find_peak, find_fragmentation, find_inefficient,
           find_capture_limits, find_savings)


def device_findings(trace: MemoryTrace, device: str) -> list[Finding]:
    """Every finding of one device, most severe first."""
    found: list[Finding] = []
    for finder in FINDERS:
        found.extend(finder(trace, device))
    return ranked(with_event_numbers(trace, device, found))


def with_event_numbers(trace: MemoryTrace, device: str,
                       found: list[Finding]) -> list[Finding]:
    """``found`` with each evidence's ``event``: the position of its ``seq`` in the
    device's events (the event number of the status bar and the Tables' ``#``)."""
    wanted = {f.evidence.seq for f in found if f.evidence.seq is not None}
    if not wanted:
        return found
    seq = trace.device_events(device)["seq"].to_numpy()
    where = {value: int(hits[0]) for value in wanted
             if (hits := np.flatnonzero(seq == value)).size}
    return [dataclasses.replace(f, evidence=dataclasses.replace(
        f.evidence, event=where.get(f.evidence.seq))) if f.evidence.seq is not None else f
        for f in found]


def find_all(trace: MemoryTrace, what_if: bool = True) -> dict[str, list[Finding]]:
    """Findings per device (every device of ``meta.devices``), most severe first.

    ``what_if``: OOM and fragmentation advice quotes a proven replay's prediction
    (:mod:`memtui.analysis.findings.quote`, a replay per device: seconds); callers that only
    count findings pass False."""
    result = {name: device_findings(trace, name) for name in trace.meta.device_names}
    for finding in find_capture_wide(trace):
        result[finding.device] = ranked(result[finding.device] + [finding])
    if not what_if:
        return result
    # the what-if hook (issue 26): a proven replay's prediction replaces the general advice
    from memtui.analysis.findings.quote import quote_predictions

    return quote_predictions(trace, result)


def flat(findings: dict[str, list[Finding]]) -> list[Finding]:
    """All devices' findings in one list, most severe first."""
    return ranked([f for found in findings.values() for f in found])


def counts_by_kind(findings: dict[str, list[Finding]]) -> dict[str, int]:
    """How many findings of each kind (every kind listed, zeros included)."""
    counts = Counter(f.kind for found in findings.values() for f in found)
    return {kind: counts.get(kind, 0) for kind in KINDS}


def full_stack(trace: MemoryTrace, stack_id: int | None) -> tuple[StackFrame, ...]:
    """Every frame of ``stack_id``, innermost first (the internals that never name a
    stack left out, unless they are all it has)."""
    return full_stack_frames(trace, stack_id)


def _with_stacks(trace: MemoryTrace, finding: Finding) -> dict[str, Any]:
    """A finding's JSON with the full stack of its evidence and of each stack group."""
    out = finding.to_json()
    if finding.evidence.stack_id is not None:
        out["evidence"]["stack"] = [f.to_json() for f in
                                    full_stack(trace, finding.evidence.stack_id)]
    for key in ("by_stack", "reserved_peak_by_stack"):
        rows = out["detail"].get(key)
        if rows:
            out["detail"][key] = [{**row, "stack": [f.to_json() for f in full_stack(
                trace, row.get("stack_id"))]} for row in rows]
    return out


def findings_json(trace: MemoryTrace, findings: dict[str, list[Finding]] | None = None,
                  stacks: bool = False) -> dict[str, Any]:
    """The ``memtui findings --json`` object (``stacks``: with full call stacks); each
    device carries ``by_role``, its bytes by role at the allocated peak."""
    findings = find_all(trace) if findings is None else findings
    def one(f: Finding) -> dict[str, Any]:
        return _with_stacks(trace, f) if stacks else f.to_json()
    return {
        "source": trace.meta.source,
        "path": trace.meta.path,
        "devices": [{"device": name, "findings": [one(f) for f in found],
                     "by_role": peak_roles(trace, name)}
                    for name, found in findings.items()],
        "warnings": list(trace.meta.warnings),
    }


def peak_roles(trace: MemoryTrace, device: str) -> dict[str, int]:
    """Bytes by role at the device's allocated peak (summing to it)."""
    from memtui.analysis.roles import by_role_at
    from memtui.analysis.timeline.at_time import Timeline

    timeline = Timeline.build(trace, device)
    return by_role_at(trace, device, -1 if timeline.peak_at_start else timeline.peak_event)


__all__ = ["FINDERS", "KINDS", "Evidence", "Finding", "StackFrame", "counts_by_kind", "peak_roles",
           "device_findings", "find_all", "findings_json", "flat", "full_stack",
           "with_event_numbers"]
