"""What a capture says about how it was recorded: source, devices, history kept, call
stacks, allocator settings, warnings (the Capture facts view, ``A``).

Pure: a list of sections of ``(name, value)`` text pairs from a MemoryTrace; the values
come from files and are escaped by whoever shows them.
"""

from __future__ import annotations

import polars as pl

from memtui.model import MemoryTrace
from memtui.units import format_bytes

Section = tuple[str, list[tuple[str, str]]]


def capture_facts(trace: MemoryTrace) -> list[Section]:
    """The sections of the Capture facts view (see the module docstring)."""
    meta = trace.meta
    sections: list[Section] = [("Capture", [
        ("source", meta.source),
        ("path", meta.path),
        ("time", "event numbers (no clock: a snapshot before torch 2.2)"
         if meta.time_unit == "event" else "nanoseconds"),
        ("host", meta.host or "-"),
        ("call stacks", stack_mode(trace)),
    ])]
    for info in meta.devices:
        events = trace.device_events(info.name)
        blocks = trace.device_blocks(info.name)
        ghosts = int(blocks["ghost"].fill_null(False).sum()) if blocks.height else 0
        rows = [
            ("kind", info.kind or "-"),
            ("events kept", f"{events.height:,}" + ring_note(events, ghosts)),
            ("blocks", f"{blocks.height:,} ({ghosts:,} alive before the history began)"),
            ("segments", "recorded" if info.has_segments else "not recorded"),
        ]
        for label, value in (("allocated at start", info.start_allocated),
                             ("reserved at start", info.start_reserved),
                             ("allocated at end", info.allocated_at_end),
                             ("reserved at end", info.reserved_at_end)):
            if value is not None:
                rows.append((label, format_bytes(int(value))))
        if info.rank is not None:
            rows.append(("rank", str(info.rank)))
        sections.append((f"Device {info.name}", rows))
    settings = meta.extra.get("allocator_settings")
    if isinstance(settings, dict) and settings:
        sections.append(("Allocator settings", flatten(settings)))
    other = {k: v for k, v in meta.extra.items()
             if k not in ("allocator_settings", "thresholds", "files")}
    if other:
        sections.append(("Other facts", flatten(other)))
    if "thresholds" in meta.extra:
        sections.append(("Inefficient-block thresholds", [("set", str(meta.extra["thresholds"]))]))
    if meta.warnings:
        sections.append(("Warnings", [(str(i + 1), w) for i, w in enumerate(meta.warnings)]))
    return sections


def stack_mode(trace: MemoryTrace) -> str:
    """How the capture recorded call stacks: none, Python only, or with C++ frames."""
    frames = trace.frames
    if frames.is_empty():
        return "none recorded"
    python = frames["filename"].fill_null("").str.ends_with(".py")
    cpp = int((~python).sum())
    if cpp == 0:
        return f"Python frames only ({frames.height:,} frames)"
    return (f"Python and C++ frames (stacks='all': {int(python.sum()):,} Python, {cpp:,} "
            "other)")


def ring_note(events: pl.DataFrame, ghosts: int) -> str:
    """Whether the history looks cut by the allocator's ring buffer (max_entries)."""
    if ghosts and events.height:
        return " (older history fell out of the ring buffer, or began before recording)"
    return ""


def flatten(values: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Nested settings as ``a.b = value`` rows, in order."""
    rows: list[tuple[str, str]] = []
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows += flatten(value, name + ".")
        else:
            rows.append((name, str(value)))
    return rows


__all__ = ["capture_facts", "flatten", "stack_mode"]
