"""The peak: what held memory when allocated was highest, and the peak of reserved.

The blocks alive at the event of the allocated peak (ghosts included) are summed by the
frame that names their stack (the innermost user frame: see
:mod:`memtui.analysis.findings.frames`), by owner where the source has owners
(msMemScope ``PTA@weight``, ``@gradient``, ...; profiler operators) and by memory pool
(layer), and by ``user_metadata`` (PyTorch 2.10+ ``_set_memory_metadata``) where any
block has it; the blocks alive at the peak of reserved, by stack.  Sources with only curves
(the Ascend profiler) give the peaks' sizes and times.

Every list sums to the peak, its one denominator: the groups past the first ``TOP`` are
one "(N more)" row, blocks without an owner or pool one "(no owner)" / "(no pool)" row, and
the bytes of the level no block explains their own rows ("alive before the capture", "in
no operator": :mod:`memtui.analysis.timeline.attribution`).  Profiler captures are named by
operator (``grouped_by``: the owner list leads the title), others by stack; in the stack
list, ghost blocks (alive before the capture: pt-snap-cli's "static") are named so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.frames import NO_STACK, evidence_stack, stack_frames
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.findings.pool import alive_block_rows
from memtui.analysis.timeline.attribution import (
    BEFORE_CAPTURE,
    REMAINDER_LABELS,
    Remainder,
    groups_by_operator,
    remainder_rows,
)
from memtui.analysis.timeline.levels import allocated_level, reserved_level
from memtui.analysis.timeline.live import device_index
from memtui.model import MemoryTrace
from memtui.units import format_bytes

TOP = 10


def find_peak(trace: MemoryTrace, device: str) -> list[Finding]:
    """One ``peak`` finding for ``device`` (none where nothing was ever allocated)."""
    allocated = allocated_level(trace, device)
    peak, at = allocated.peak()
    if at < 0 or peak <= 0:
        return []
    peak_t = int(allocated.t[at])
    seq = _level_seq(trace, device, at, allocated.t.size)
    alive = _alive_at(trace, device, peak_t, seq)
    rest = remainder_rows(trace, device, peak, int(alive["size"].sum() or 0))
    by_stack = _by(alive, "label", peak, rest)
    has_owner = alive["owner"].null_count() < alive.height
    by_owner = _by(alive, "owner", peak, rest, "(no owner)") if has_owner else []
    by_pool = _by(alive, "pool", peak, rest, "(no pool)") \
        if alive["pool"].null_count() < alive.height else []
    by_operator = groups_by_operator(trace) and has_owner
    detail: dict[str, Any] = {
        "peak_allocated_bytes": peak,
        "peak_t": peak_t,
        "blocks_alive": alive.height,
        "grouped_by": "operator" if by_operator else "stack",
        "by_stack": by_stack,
        "by_owner": by_owner,
        "by_pool": by_pool,
        "unattributed": [{"label": r.label, "bytes": r.bytes} for r in rest],
    }
    if "user_metadata" in alive.columns and alive["user_metadata"].null_count() < alive.height:
        detail["by_metadata"] = _by(alive, "user_metadata", peak, rest, "(no metadata)")
    reserved = reserved_level(trace, device)
    if reserved is not None and reserved.values.size:
        r_peak, r_at = reserved.peak()
        detail["peak_reserved_bytes"] = r_peak
        detail["peak_reserved_t"] = int(reserved.t[r_at])
        detail["reserved_at_allocated_peak_bytes"] = int(
            reserved.values[np.searchsorted(reserved.t, peak_t, side="right") - 1]
        ) if reserved.t[0] <= peak_t else None
        r_seq = _level_seq(trace, device, r_at, reserved.t.size, "reserved")
        at_reserved = _alive_at(trace, device, int(reserved.t[r_at]), r_seq)
        detail["reserved_peak_by_stack"] = _by(at_reserved, "label", r_peak)
    key = "owner" if by_operator else "label"
    group, stack_id, block_ids = _evidence_blocks(alive, key)
    detail["evidence_group"] = group
    title = f"peak {format_bytes(peak)} allocated" + _headline(
        by_owner if by_operator else (by_stack or by_owner))
    if "peak_reserved_bytes" in detail:
        title += f"; reserved peaks at {format_bytes(detail['peak_reserved_bytes'])}"
    evidence = Evidence(t=peak_t, seq=seq, block_ids=block_ids,
                        stack=evidence_stack(trace, stack_id), stack_id=stack_id,
                        owner=_first_owner(by_owner))
    return [Finding(kind="peak", severity="info", title=title, device=device, bytes=peak,
                    detail=detail, evidence=evidence)]


def _first_owner(by_owner: list[dict[str, Any]]) -> str | None:
    for row in by_owner:
        if row["label"] not in REMAINDER_LABELS and not row["label"].startswith("("):
            return row["label"]
    return None


def _level_seq(trace: MemoryTrace, device: str, at: int, levels: int,
               column: str = "allocated") -> int | None:
    """``seq`` of the event after which the level peaked (None: the start level, or a
    level from profiler curves rather than events)."""
    if at == 0:
        return None
    levelled = trace.device_events(device).select("seq", column).drop_nulls(column)
    if levelled.height + 1 != levels:
        return None
    value = levelled["seq"][at - 1]
    return int(value) if value is not None else None


def _alive_at(trace: MemoryTrace, device: str, t: int, seq: int | None) -> pl.DataFrame:
    """The device's blocks alive just after the peak event, with their naming frame."""
    index = device_index(trace, device)
    if seq is not None and index.blocks["seq_alloc"].null_count() < index.blocks.height:
        rows = alive_block_rows(trace, device, seq)
    else:
        rows = index.blocks_at(t)
    rows = rows[~index.is_segment[rows]]
    blocks = index.blocks[np.sort(rows)] if rows.size else index.blocks.clear()
    names = stack_frames(trace).select("stack_id", "label", "user")
    ghost = pl.col("ghost").fill_null(False)
    return blocks.join(names, on="stack_id", how="left").with_columns(
        label=pl.when(ghost).then(pl.lit(BEFORE_CAPTURE)).otherwise(
            pl.col("label").fill_null(NO_STACK)),
        # a block from before the capture freed in it carries its free's stack
        # (``THPVariable_dealloc``): never evidence of what allocated it
        stack_known=~(ghost & pl.col("t_free").is_not_null()),
    ).with_columns(user=pl.col("user").fill_null(False) & pl.col("stack_known"))


def _headline(rows: list[dict[str, Any]]) -> str:
    """": X holds B (S%)" for the largest group a block's code explains, then the bytes
    alive before the capture (or in no operator, or of blocks with no stack) where they
    are more than that group."""
    unnamed = (*REMAINDER_LABELS, NO_STACK)
    named = [r for r in rows if r["label"] not in unnamed
             and not r["label"].endswith(" more)")]
    parts = []
    if named:
        first = named[0]
        parts.append(f"{first['label']} holds {format_bytes(first['bytes'])} "
                     f"({first['share']:.0%})")
    biggest = named[0]["bytes"] if named else 0
    for r in rows:
        if r["label"] in unnamed and r["bytes"] > biggest:
            words = "with no stack recorded" if r["label"] == NO_STACK else r["label"]
            parts.append(f"{format_bytes(r['bytes'])} ({r['share']:.0%}) {words}")
    return ": " + ", ".join(parts) if parts else ""


def _by(alive: pl.DataFrame, column: str, total: int, rest: list[Remainder] = (),
        missing: str | None = None) -> list[dict[str, Any]]:
    """The bytes alive by ``column``, largest first, summing to ``total``: the first
    ``TOP`` groups, the others as one "(N more)" row, null keys as ``missing``, then the
    named rows of bytes no block explains (``rest``)."""
    def row(label: str, size: int, count: int) -> dict[str, Any]:
        return {"label": label, "bytes": int(size), "blocks": int(count),
                "share": round(size / total, 4) if total else 0.0}

    out = []
    if not alive.is_empty():
        keyed = alive.drop_nulls(column)
        grouped = (keyed.group_by(column).agg(bytes=pl.col("size").sum(), blocks=pl.len())
                   .sort(["bytes", column], descending=[True, False]))
        out = [row(label, size, count)
               for label, size, count in grouped.head(TOP).iter_rows()]
        if column == "label":  # each stack group's commonest stack (findings --stacks)
            for entry, stack_id in zip(out, _commonest_stacks(keyed, out), strict=True):
                entry["stack_id"] = stack_id
        others = grouped.slice(TOP)
        if others.height:
            out.append(row(f"({others.height} more)", int(others["bytes"].sum()),
                           int(others["blocks"].sum())))
        unkeyed = alive.filter(pl.col(column).is_null())
        if unkeyed.height and missing:
            out.append(row(missing, int(unkeyed["size"].sum()), unkeyed.height))
    for r in rest:  # a remainder joins the group of the same name (ghosts: before)
        same = next((entry for entry in out if entry["label"] == r.label), None)
        if same is None:
            out.append(row(r.label, r.bytes, 0))
        else:
            same.update(row(r.label, same["bytes"] + r.bytes, same["blocks"]))
    return out


def _commonest_stacks(alive: pl.DataFrame, rows: list[dict[str, Any]]) -> list[int | None]:
    """The commonest ``stack_id`` of each group of ``rows`` (by ``label``)."""
    labels = [r["label"] for r in rows]
    modes = (alive.filter(pl.col("label").is_in(labels) & pl.col("stack_id").is_not_null()
                          & pl.col("stack_known"))
             .group_by("label", "stack_id").agg(n=pl.len())
             .sort(["label", "n", "stack_id"], descending=[False, True, False])
             .group_by("label", maintain_order=True).first())
    found = dict(zip(modes["label"].to_list(), modes["stack_id"].to_list(), strict=True))
    return [int(found[label]) if found.get(label) is not None else None for label in labels]


def _evidence_blocks(alive: pl.DataFrame, key: str = "label",
                     ) -> tuple[str | None, int | None, tuple[int, ...]]:
    """The group (by ``key``) a person acts on at the peak, its commonest stack and its
    blocks: the group holding most of the blocks named by the user's code, else of those
    with an allocation stack, else of all.  A block from before the capture freed in it
    never gives the stack (theirs is the stack of the free)."""
    if alive.is_empty() or alive[key].null_count() == alive.height:
        return None, None, ()
    keyed = alive.drop_nulls(key)
    stacked = keyed.filter(pl.col("stack_known") & pl.col("stack_id").is_not_null())
    for pool in (stacked.filter("user"), stacked, keyed):
        if not pool.is_empty():
            break
    top = pool.group_by(key).agg(bytes=pl.col("size").sum()).sort(
        ["bytes", key], descending=[True, False])[key][0]
    stacks = pool.filter(pl.col(key) == top)["stack_id"].drop_nulls() \
        if pool is not keyed else pl.Series([], dtype=pl.Int32)
    stack_id = int(stacks.mode().sort()[0]) if stacks.len() else None
    rows = keyed.filter(pl.col(key) == top)
    return str(top), stack_id, tuple(int(b) for b in rows["block_id"].to_list())


__all__ = ["find_peak"]
