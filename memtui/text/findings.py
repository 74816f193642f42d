"""``memtui findings``'s text: the findings by severity, per device (the first
:data:`MAX_LISTED` of a device, then how many more)."""

from __future__ import annotations

from memtui.analysis.findings import Finding
from memtui.analysis.findings.frames import evidence_stack
from memtui.analysis.timeline.attribution import BEFORE_CAPTURE
from memtui.errors import safe_text
from memtui.model import MemoryTrace
from memtui.units import counted, format_bytes

#: Findings listed per device, the most severe first and each kind's first among them
#: (2,000 OOM events printed 4,000 lines; ``--json`` lists every one; the report lists 50).
MAX_LISTED = 50


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


def _leak_lines(detail: dict) -> list[str]:
    """A leak's steps and rate: where its steps come from, its blocks, its occurrences
    and bytes per second."""
    source = f"steps from {detail['steps_from']}" if detail.get("steps_from") else \
        "no steps found: the growth of its never-freed blocks"
    lines = [f"        {source}; {counted(detail['blocks'], 'block')}, "
             f"{format_bytes(detail['total_bytes'])} in all"]
    rate = []
    if detail.get("occurrences"):
        rate.append(f"{counted(detail['occurrences'], 'occurrence')} of "
                    f"{format_bytes(detail['bytes_per_occurrence'])}")
    if detail.get("regularity") is not None:
        rate.append(f"their spacing varies by {detail['regularity']:.0%}")
    if detail.get("bytes_per_second") is not None:
        rate.append(f"{format_bytes(detail['bytes_per_second'])}/s")
    if rate:
        lines.append("        " + ", ".join(rate))
    return lines


def format_findings(trace: MemoryTrace, findings: dict[str, list[Finding]],
                    stacks: bool = False) -> str:
    """The human text of ``memtui findings``: every finding by severity, per device
    (``stacks``: each followed by its full call stacks)."""
    from memtui.analysis.findings import peak_roles
    from memtui.text.roles import roles_text

    lines = [f"{trace.meta.path}  ({trace.meta.source})"]
    for device, found in findings.items():
        lines.append(f"  {device}: {counted(len(found), 'finding')}")
        lines.append("    by role at the peak: "
                     f"{roles_text(peak_roles(trace, device), _outside_rows(trace, device))}")
        for finding in _listed(found):  # a CI log stays readable
            lines.append(f"    [{finding.severity}] {finding.kind}: {finding.title}")
            for key in ("cause", "advice"):
                if finding.detail.get(key) and finding.detail[key] not in finding.title:
                    lines.append(f"        {key}: {finding.detail[key]}")
            for conflict in finding.detail.get("conflicts") or []:
                lines.append(f"        conflict: {conflict}")
            if finding.kind == "leak":
                lines += _leak_lines(finding.detail)
            if stacks:
                lines += _stack_lines(trace, finding)
        if len(found) > MAX_LISTED:
            lines.append(f"    ... and {len(found) - MAX_LISTED:,} more findings on {device} "
                         "(--json lists every one)")
    if not findings:
        lines.append("  no device has events or blocks")
    return safe_text(lines)


def _listed(found: list[Finding]) -> list[Finding]:
    """The findings listed, in their order (the most severe first): at most
    :data:`MAX_LISTED`, each kind's first among them (2,000 OOMs hide no leak)."""
    if len(found) <= MAX_LISTED:
        return found
    firsts = {id(f) for f in {f.kind: f for f in reversed(found)}.values()}
    room = MAX_LISTED - len(firsts)
    keep = set(firsts)
    for finding in found:
        if room <= 0:
            break
        if id(finding) not in keep:
            keep.add(id(finding))
            room -= 1
    return [f for f in found if id(f) in keep]


def _outside_rows(trace: MemoryTrace, device: str) -> int:
    """The level no operator row explains at the peak (profiler folders; 0 elsewhere)."""
    from memtui.analysis.roles import levels_by_role
    from memtui.analysis.timeline.at_time import Timeline

    timeline = Timeline.build(trace, device)
    peak = -1 if timeline.peak_at_start else timeline.peak_event
    return levels_by_role(trace, device).outside_rows(peak)
