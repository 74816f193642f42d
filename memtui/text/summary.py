"""``memtui summary``'s text: the figures of each device, then the warnings."""

from __future__ import annotations

from typing import Any

from memtui.analysis.summary import device_start
from memtui.errors import safe_text
from memtui.model import MemoryTrace
from memtui.units import at_least, counted, format_bytes


def _level_lines(d: dict[str, Any]) -> list[str]:
    """The average / least / in-all line and the alive-before-the-capture line (entries
    kept by an older cache lack them: nothing is printed for them then)."""
    lines = []
    if d.get("average_allocated_bytes") is not None:
        median = d.get("median_block_bytes")
        count = d.get("allocations") or 0
        lines.append(
            f"    allocated on average {format_bytes(d['average_allocated_bytes'])} "
            f"(time-weighted), least {format_bytes(d['min_allocated_bytes'])}; "
            f"{format_bytes(d['allocated_in_all_bytes'])} allocated in all in {count:,} "
            f"block{'s' if count != 1 else ''}"
            + (f", median {format_bytes(median)}" if median is not None else ""))
    before = d.get("before_capture")
    if before and before.get("bytes"):
        parts = []
        if before["static_blocks"]:
            parts.append(f"{format_bytes(before['static_bytes'])} in "
                         f"{before['static_blocks']:,} blocks never freed (static)")
        if before["freed_blocks"]:
            parts.append(f"{format_bytes(before['freed_bytes'])} in "
                         f"{before['freed_blocks']:,} blocks freed during it")
        if before["no_block_bytes"]:
            parts.append(f"{format_bytes(before['no_block_bytes'])} in no block of the "
                         "capture")
        lines.append(f"    alive before the capture: {format_bytes(before['bytes'])}: "
                     + ", ".join(parts))
    return lines


def _role_lines(d: dict[str, Any]) -> list[str]:
    """The memory by role at the peak (entries kept by an older cache lack it)."""
    from memtui.text.roles import roles_text

    if not d.get("by_role"):
        return []
    roles = d.get("roles") or {}
    source = roles.get("phases_from")
    how = (f"phases from {source}" if source
           else "no forward or backward pass seen, roles not told apart")
    outside = roles.get("other_outside_rows_at_peak") or 0
    inferred = roles.get("inferred_blocks") or 0
    if inferred:
        how += (f"; {counted(inferred, 'block')} named by inference (paired by size and "
                "lifetime, not by their own stacks)")
    return [f"    by role at the peak: {roles_text(d['by_role'], outside)}; {how}"]


def _reserved(d: dict[str, Any], value: int | None) -> str:
    """A reserved figure as known: ``>= X`` (and ``at most Y``) where the file contradicts
    itself (its warning says how)."""
    text = at_least(value, bool(d.get("reserved_floor")))
    ceiling = d.get("reserved_ceiling_bytes")
    if d.get("reserved_floor") and ceiling is not None and value is not None:
        text += f" (at most {format_bytes(ceiling)})"
    return text


def format_summary(data: dict[str, Any], trace: MemoryTrace) -> str:
    """The short human summary printed by ``memtui summary`` without ``--json``.

    Peak times count from the device's first event in the memory layer the figures
    come from (as ``memtui state`` and the UI count them), not from another layer's.
    """
    from memtui.analysis.timeline.layers import has_layers, layer_view

    if has_layers(trace) and "layers" not in trace.meta.extra:
        trace = layer_view(trace)
    lines = [f"{data['path']}  ({data['source']})"]
    for d in data["devices"]:
        at = d["peak_time_ns"]
        when = ""
        if at is not None:
            when = f" at +{(at - device_start(trace, d['device'])) / 1e9:.6f} s"
        segments = "" if d["segments"] is None else f", {counted(d['segments'], 'segment')}"
        lines.append(
            f"  {d['device']}: {counted(d['events'], 'event')}, {counted(d['blocks'], 'block')} "
            f"({d['ghost_blocks']} ghost){segments}"
        )
        reserved_peak = d.get("peak_reserved_bytes")
        lines.append(
            f"    peak allocated {format_bytes(d['peak_allocated_bytes'])}{when}"
            + (f", peak reserved {format_bytes(reserved_peak)}"
               if reserved_peak is not None else "")
            + f"; at end: allocated {format_bytes(d['allocated_at_end_bytes'])}, "
            f"reserved {_reserved(d, d['reserved_at_end_bytes'])}"
        )
        lines += _level_lines(d)
        lines += _role_lines(d)
        found = [f"{n} {kind}" for kind, n in d.get("findings", {}).items() if n]
        if found:
            lines.append(f"    findings: {', '.join(found)} (memtui findings PATH)")
    if not data["devices"]:
        lines.append("  no device has events or segments")
    if trace.meta.time_unit == "event":
        lines.append("  (no clock in this capture: times are event numbers)")
    for warning in data["warnings"]:
        lines.append(f"  warning: {warning}")
    # Paths, device names and warnings come from files: no control character goes raw.
    return safe_text(lines)
