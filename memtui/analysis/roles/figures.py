"""The role figures the outputs carry (JSON-ready), the same for every command and the API.

* :func:`by_role` — bytes per role at one event (every role, summing to allocated there);
* :func:`by_role_detail` — the same bytes split further by the capture's own labels where
  it has them (``user_metadata``, ``compile_context``: grouped by them too);
* :func:`role_peaks` — each role's highest bytes over the trace, and the event of it;
* :func:`device_roles_summary` — a device's roles at its peak and its last event, and
  what the phases were read from;
* :func:`roles_json` — every block's role for ``--json`` consumers that want them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.roles import block_roles, by_role_at, levels_by_role
from memtui.analysis.roles.assign import positions_of
from memtui.analysis.roles.model import ROLES
from memtui.analysis.timeline.at_time import Timeline
from memtui.model import MemoryTrace

#: The capture's own labels the roles are also grouped by, where a block carries one.
LABELS = ("user_metadata", "compile_context")


def by_role(trace: MemoryTrace, device: str, event: int) -> dict[str, int]:
    """Bytes per role just after ``event`` (-1: before the first event)."""
    return by_role_at(trace, device, event)


def by_role_detail(trace: MemoryTrace, device: str, event: int) -> list[dict[str, Any]]:
    """Rows ``{role, user_metadata, compile_context, bytes}`` of the blocks alive just after
    ``event``, grouped by role and by each of :data:`LABELS` the capture has (an empty
    list where it has none), largest first."""
    blocks = trace.device_blocks(device)
    labels = [c for c in LABELS if c in blocks.columns and blocks[c].null_count() < blocks.height]
    if not labels or blocks.is_empty():
        return []
    pos = positions_of(trace, device)
    roles = block_roles(trace, device).frame.select("block_id", "role")
    frame = (blocks.select("block_id", "size", "ghost", *labels)
             .join(pos, on="block_id", how="left").join(roles, on="block_id", how="left"))
    start = pl.when(pl.col("ghost").fill_null(False)).then(-1).otherwise(pl.col("pos_alloc"))
    alive = frame.filter((start <= event) & (pl.col("pos_free") > event))
    rows = (alive.group_by("role", *labels).agg(bytes=pl.col("size").sum())
            .sort("bytes", descending=True))
    return [{"role": str(r["role"]), **{c: r[c] for c in labels}, "bytes": int(r["bytes"])}
            for r in rows.iter_rows(named=True)]


def role_peaks(trace: MemoryTrace, device: str) -> dict[str, dict[str, int]]:
    """Per role present: ``{"bytes": highest, "event": position after which it is}``."""
    levels = levels_by_role(trace, device)
    out: dict[str, dict[str, int]] = {}
    for role in levels.present():
        if levels.level is None and role in levels.steps:
            steps = levels.steps[role]
            i = int(np.argmax(steps.values))
            out[role] = {"bytes": int(steps.values[i]), "event": int(max(steps.pos[i], -1))}
            continue
        values = levels.at_positions(role, np.arange(levels.positions))
        if values.size:
            i = int(np.argmax(values))
            out[role] = {"bytes": int(values[i]), "event": i}
    return out


def device_roles_summary(trace: MemoryTrace, device: str,
                         timeline: Timeline | None = None) -> dict[str, Any]:
    """A device's ``roles``: at the peak, at the last event, each role's own peak, what
    the phases were found from (null: no phase found), and how many blocks were named by
    inference (pairing) rather than their own evidence."""
    tl = timeline if timeline is not None else Timeline.build(trace, device)
    peak = -1 if tl.peak_at_start else tl.peak_event
    roles = block_roles(trace, device)
    return {
        "at_peak": by_role(trace, device, peak),
        # of `other` at the peak: the level no operator row explains (profiler folders)
        "other_outside_rows_at_peak": levels_by_role(trace, device).outside_rows(peak),
        "at_end": by_role(trace, device, tl.positions - 1),
        "peaks": role_peaks(trace, device),
        "phases_from": roles.phases,
        "inferred_blocks": int(roles.frame["inferred"].sum()),
    }


def annotate_state(trace: MemoryTrace, device: str, data: dict[str, Any]) -> dict[str, Any]:
    """``memtui state``'s object with the roles at its event: ``by_role`` (summing to
    ``level.allocated``), ``by_role_other_outside_rows`` (the part of ``other`` outside
    any operator row, where a profiler's level has one), ``by_role_detail`` where the
    capture labels its blocks, and each block's ``role``."""
    event = data["event"] if data.get("event") is not None else -1
    data["by_role"] = by_role(trace, device, event)
    outside = levels_by_role(trace, device).outside_rows(event)
    if outside:  # of `other`: a profiler's level outside any operator row
        data["by_role_other_outside_rows"] = outside
    detail = by_role_detail(trace, device, event)
    if detail:
        data["by_role_detail"] = detail
    ids = [b["block_id"] for s in data.get("segments", []) for b in s["blocks"]
           if b.get("block_id") is not None]
    if ids:
        from memtui.analysis.roles import role_of_blocks

        roles = dict(zip(ids, role_of_blocks(trace, device, np.asarray(ids)).tolist(),
                         strict=True))
        for segment in data["segments"]:
            for block in segment["blocks"]:
                if block.get("block_id") is not None:
                    block["role"] = roles.get(block["block_id"])
    return data


def roles_json(trace: MemoryTrace, device: str) -> list[dict[str, Any]]:
    """Every block's ``{block_id, role, rule, inferred}``."""
    frame = block_roles(trace, device).frame
    return [{"block_id": int(b), "role": str(r), "rule": str(u), "inferred": bool(i)}
            for b, r, u, i in frame.iter_rows()]


def nonzero(roles: dict[str, int]) -> dict[str, int]:
    """``roles`` without the roles holding nothing, in the order of ROLES."""
    return {r: roles[r] for r in ROLES if roles.get(r)}


__all__ = ["LABELS", "annotate_state", "by_role", "by_role_detail", "device_roles_summary",
           "nonzero", "role_peaks", "roles_json"]
