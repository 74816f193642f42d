"""The per-device figures of ``memtui summary`` (DESIGN.md section 3 definitions).

Besides the peak and the end, each device gets the figures ``ptmem`` prints (the
time-weighted average level, the least level, the bytes allocated in all and the median
block size, :func:`level_figures`) and what was alive before the capture began
(``before_capture``: pt-snap-cli's "static" blocks, those freed during the capture, and the
start level no block explains, :mod:`memtui.analysis.timeline.attribution`), and its memory by
role (``by_role``: bytes per role at the peak, summing to ``peak_allocated_bytes``;
``roles``: the same at the end, each role's own peak, what the phases were read from:
:mod:`memtui.analysis.roles.figures`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.timeline.levels import Level, allocated_level, reserved_level, seed_levels
from memtui.model import MemoryTrace
from memtui.units import format_bytes


def device_summary(trace: MemoryTrace, device: str) -> dict[str, Any]:
    """One device's entry of the summary object."""
    info = trace.meta.device(device)
    blocks = trace.device_blocks(device)
    allocated = allocated_level(trace, device)
    peak, peak_index = allocated.peak()
    peak_time = None
    if trace.meta.time_unit == "ns" and peak > 0 and peak_index >= 0:
        peak_time = int(allocated.t[peak_index])  # events, blocks only, or curves
    if info.allocated_at_end is not None:
        allocated_at_end = info.allocated_at_end
    else:
        allocated_at_end = int(allocated.values[-1]) if allocated.values.size else 0
    reserved_at_end = info.reserved_at_end
    reserved = reserved_level(trace, device)
    if reserved_at_end is None and reserved is not None and reserved.values.size:
        reserved_at_end = int(reserved.values[-1])
    peak_reserved = reserved.peak()[0] if reserved is not None and reserved.values.size \
        else None
    from memtui.analysis.roles.figures import device_roles_summary
    from memtui.analysis.timeline.attribution import before_capture

    roles = device_roles_summary(trace, device)
    return {
        "device": device,
        "events": trace.device_events(device).height,
        "segments": info.segments_at_end if info.has_segments else None,
        "blocks": blocks.height,
        "ghost_blocks": int(blocks["ghost"].fill_null(False).sum()),
        "peak_allocated_bytes": peak,
        "peak_time_ns": peak_time,
        "allocated_at_end_bytes": allocated_at_end,
        "reserved_at_end_bytes": reserved_at_end,
        "peak_reserved_bytes": peak_reserved,
        # where the file contradicts itself, the reserved figures are only the least they
        # can be: why (None: exact), and the most they can be where the file says
        "reserved_floor": info.reserved_floor,
        "reserved_ceiling_bytes": info.reserved_ceiling,
        **level_figures(allocated, blocks, trace.meta.time_unit),
        "before_capture": before_capture(trace, device).to_dict(),
        "by_role": roles["at_peak"],
        "roles": roles,
    }


def level_figures(allocated: Level, blocks: pl.DataFrame, unit: str) -> dict[str, int | None]:
    """The time-weighted average and the least of the allocated level (by events where the
    capture has no clock, or all its events share one time), the bytes and the number of
    blocks allocated during the capture (ghosts, allocated before it, left out) and their
    median size (None where there is none)."""
    values = allocated.values.astype(np.int64, copy=False)
    average = least = None
    if values.size:
        least = int(values.min())
        times = allocated.t.astype(np.int64, copy=False)
        span = int(times[-1] - times[0]) if unit == "ns" else 0  # the sum of the steps
        if span > 0:
            average = int(round(_time_weighted_sum(values, times) / span))
        else:
            average = int(round(float(values.mean())))
    made = blocks.filter(~blocks["ghost"].fill_null(False))["size"].drop_nulls()
    return {
        "average_allocated_bytes": average,
        "min_allocated_bytes": least,
        "allocated_in_all_bytes": int(made.sum() or 0),
        "allocations": made.len(),
        "median_block_bytes": int(made.median()) if made.len() else None,
    }


#: Steps of the level weighed at a time: three float arrays of this many values at most,
#: not three of the whole level (0.5 GB at 20M events).
_WEIGHED_AT_ONCE = 1 << 20


def _time_weighted_sum(values: np.ndarray, times: np.ndarray) -> float:
    """The sum of each value times the time to the next (floats: no int64 overflow), a
    slice of steps at a time."""
    total = 0.0
    for start in range(0, values.size - 1, _WEIGHED_AT_ONCE):
        stop = min(start + _WEIGHED_AT_ONCE, values.size - 1)
        span = np.diff(times[start:stop + 1]).astype(np.float64)
        total += float((values[start:stop] * span).sum())
    return total


def summary(trace: MemoryTrace, findings: dict | None = None) -> dict[str, Any]:
    """The whole ``memtui summary --json`` object.

    Each device gets ``findings``, its count of findings per kind
    (:mod:`memtui.analysis.findings`), computed here once unless ``findings``
    (per device, as :func:`~memtui.analysis.findings.find_all` returns them) is given.
    A layered capture (msMemScope) is summed up per device in its default memory layer
    (:mod:`memtui.analysis.timeline.layers`), the one the UI opens on.
    """
    from memtui.analysis.findings import KINDS, find_all
    from memtui.analysis.timeline.layers import has_layers, layer_view

    if has_layers(trace) and "layers" not in trace.meta.extra:
        trace = layer_view(trace)  # each device's default memory layer, as the UI opens
    if findings is None:
        for name in trace.meta.device_names:  # made once: the findings and the figures
            seed_levels(trace, name, allocated_level(trace, name),  # both read them
                        reserved_level(trace, name))
        findings = find_all(trace, what_if=False)  # counted only: no replay for advice
    devices = []
    for name in trace.meta.device_names:
        entry = device_summary(trace, name)
        kinds = [f.kind for f in findings.get(name, [])]
        entry["findings"] = {kind: kinds.count(kind) for kind in KINDS}
        devices.append(entry)
    return {
        "source": trace.meta.source,
        "path": trace.meta.path,
        "devices": devices,
        "warnings": list(trace.meta.warnings),
    }


def device_start(trace: MemoryTrace, device: str) -> int:
    """Where a device's times count from: its first event, else (a block-only or
    curves-only profiler capture) its first block or sample, as ``state`` and the UI count."""
    events = trace.device_events(device)
    if events.height:
        return int(events["t"].min())
    firsts = [trace.device_blocks(device)["t_alloc"].min()]
    if not trace.curves.is_empty():
        firsts.append(trace.curves.filter(trace.curves["device"] == device)["t"].min())
    known = [int(t) for t in firsts if t is not None]
    return min(known) if known else 0


__all__ = ["device_summary", "format_bytes", "summary"]
