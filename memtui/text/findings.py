"""``memtui findings``'s text: every finding by severity, per device."""

from __future__ import annotations

from memtui.analysis.findings import Finding
from memtui.analysis.findings.frames import evidence_stack
from memtui.analysis.timeline.attribution import BEFORE_CAPTURE
from memtui.errors import safe_text
from memtui.model import MemoryTrace
from memtui.units import counted, format_bytes


def _stack_lines(trace: MemoryTrace, finding: Finding) -> list[str]:
    """The call stacks of a finding, for ``findings --stacks``: each of the peak's stack
    groups (its commonest stack), else the evidence's stack; each from the frame that
    names it outward (the user's line first; every frame is in ``--json --stacks``)."""
    def frames(stack_id: int | None, indent: str, before: bool = False) -> list[str]:
        stack = evidence_stack(trace, stack_id, limit=1 << 30)
        if not stack and before:
            return [f"{indent}(allocated before the capture: no allocation stack)"]
        if not stack:
            return [f"{indent}(no stack recorded)"]
        return [f"{indent}{f.filename or '?'}:{f.line if f.line is not None else '?'}:"
                f"{f.name or '?'}" for f in stack]

    groups = finding.detail.get("by_stack") or []
    if finding.kind == "peak" and groups:
        lines = []
        for row in groups:
            lines.append(f"        {row['label']}: {format_bytes(row['bytes'])} "
                         f"({row['share']:.0%}) in {row['blocks']} blocks")
            if "stack_id" in row:
                lines += frames(row["stack_id"], "          ", row["label"] == BEFORE_CAPTURE)
        return lines
    if finding.evidence.stack_id is not None:
        return ["        stack:", *frames(finding.evidence.stack_id, "          ")]
    return []


def format_findings(trace: MemoryTrace, findings: dict[str, list[Finding]],
                    stacks: bool = False) -> str:
    """The human text of ``memtui findings``: every finding by severity, per device
    (``stacks``: each followed by its full call stacks)."""
    from memtui.analysis.findings import peak_roles
    from memtui.text.roles import roles_text

    lines = [f"{trace.meta.path}  ({trace.meta.source})"]
    for device, found in findings.items():
        lines.append(f"  {device}: {counted(len(found), 'finding')}")
        lines.append(f"    by role at the peak: {roles_text(peak_roles(trace, device))}")
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
            if stacks:
                lines += _stack_lines(trace, finding)
    if not findings:
        lines.append("  no device has events or blocks")
    return safe_text(lines)
