"""Findings: the answers memtui gives by itself (issue 16).

Each module finds one kind over a :class:`~memtui.model.MemoryTrace` with polars and
numpy (no loop over events) and returns typed :class:`Finding` objects:

* :mod:`.leak`: code or owners whose live bytes grow step after step (steps from
  markers, else from the trace's own rhythm: :mod:`.steps`);
* :mod:`.peak`: what held memory at the peak, by stack, owner and pool;
* :mod:`.oom`: why each out-of-memory happened, with the allocator setting that helps;
* :mod:`.fragmentation`: reserved but unused bytes, free gaps, rounding;
* :mod:`.inefficient`: Insight's early allocation / late deallocation / idleness;
* :mod:`.capture`: what the capture lacks (history, stacks, clock, rows).

:func:`find_all` runs them all; :func:`findings_json` is the ``memtui findings --json``
object; :func:`format_findings` its text form.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from memtui.analysis.findings.capture import find_capture_limits, find_capture_wide
from memtui.analysis.findings.fragmentation import find_fragmentation
from memtui.analysis.findings.inefficient import find_inefficient
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.findings.model import KINDS, Evidence, Finding, StackFrame, ranked
from memtui.analysis.findings.oom import find_ooms
from memtui.analysis.findings.peak import find_peak
from memtui.model import MemoryTrace
from memtui.units import counted, format_bytes

FINDERS = (find_ooms, find_leaks, find_peak, find_fragmentation, find_inefficient,
           find_capture_limits)


def device_findings(trace: MemoryTrace, device: str) -> list[Finding]:
    """Every finding of one device, most severe first."""
    found: list[Finding] = []
    for finder in FINDERS:
        found.extend(finder(trace, device))
    return ranked(found)


def find_all(trace: MemoryTrace) -> dict[str, list[Finding]]:
    """Findings per device (every device of ``meta.devices``), most severe first."""
    result = {name: device_findings(trace, name) for name in trace.meta.device_names}
    for finding in find_capture_wide(trace):
        result[finding.device] = ranked(result[finding.device] + [finding])
    return result


def flat(findings: dict[str, list[Finding]]) -> list[Finding]:
    """All devices' findings in one list, most severe first."""
    return ranked([f for found in findings.values() for f in found])


def counts_by_kind(findings: dict[str, list[Finding]]) -> dict[str, int]:
    """How many findings of each kind (every kind listed, zeros included)."""
    counts = Counter(f.kind for found in findings.values() for f in found)
    return {kind: counts.get(kind, 0) for kind in KINDS}


def findings_json(trace: MemoryTrace,
                  findings: dict[str, list[Finding]] | None = None) -> dict[str, Any]:
    """The ``memtui findings --json`` object."""
    findings = find_all(trace) if findings is None else findings
    return {
        "source": trace.meta.source,
        "path": trace.meta.path,
        "devices": [{"device": name, "findings": [f.to_json() for f in found]}
                    for name, found in findings.items()],
        "warnings": list(trace.meta.warnings),
    }


def format_findings(trace: MemoryTrace, findings: dict[str, list[Finding]]) -> str:
    """The human text of ``memtui findings``: every finding by severity, per device."""
    lines = [f"{trace.meta.path}  ({trace.meta.source})"]
    for device, found in findings.items():
        lines.append(f"  {device}: {counted(len(found), 'finding')}")
        for finding in found:
            lines.append(f"    [{finding.severity}] {finding.kind}: {finding.title}")
            for key in ("cause", "advice"):
                if finding.detail.get(key) and finding.detail[key] not in finding.title:
                    lines.append(f"        {key}: {finding.detail[key]}")
            for conflict in finding.detail.get("conflicts") or []:
                lines.append(f"        conflict: {conflict}")
            if finding.kind == "leak":
                lines.append(f"        steps from {finding.detail['steps_from']}; "
                             f"{counted(finding.detail['blocks'], 'block')}, "
                             f"{format_bytes(finding.detail['total_bytes'])} in all")
    if not findings:
        lines.append("  no device has events or blocks")
    return "\n".join(lines)


__all__ = ["FINDERS", "KINDS", "Evidence", "Finding", "StackFrame", "counts_by_kind",
           "device_findings", "find_all", "findings_json", "flat", "format_findings"]
