"""Inefficient blocks summarised: MindStudio Insight's three kinds, counted and named.

The flags themselves are set by :mod:`memtui.analysis.findings.flags` (early allocation,
late deallocation, temporary idleness, with its thresholds); here each kind gets its
count, bytes and the stacks (named by their innermost user frame) holding most of it.
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.frames import NO_STACK, stack_frames
from memtui.analysis.findings.model import Evidence, Finding
from memtui.model import FLAG_NAMES, MemoryTrace
from memtui.units import counted, format_bytes

TOP = 5


def find_inefficient(trace: MemoryTrace, device: str) -> list[Finding]:
    """One finding per inefficient kind that flags any block of ``device``."""
    blocks = trace.device_blocks(device).filter(pl.col("flags").fill_null(0) > 0)
    if blocks.is_empty():
        return []
    names = stack_frames(trace).select("stack_id", "label")
    blocks = blocks.join(names, on="stack_id", how="left").with_columns(
        label=pl.coalesce(pl.col("label"), pl.col("owner"), pl.lit(NO_STACK)))
    findings = []
    for bit, kind in FLAG_NAMES.items():
        flagged = blocks.filter((pl.col("flags").cast(pl.Int64) & bit) > 0)
        if flagged.is_empty():
            continue
        total = int(flagged["size"].sum())
        top = (flagged.group_by("label").agg(bytes=pl.col("size").sum(), blocks=pl.len())
               .sort(["bytes", "label"], descending=[True, False]).head(TOP))
        by_stack = [{"label": label, "bytes": int(size), "blocks": int(count)}
                    for label, size, count in top.iter_rows()]
        first = flagged.sort("t_alloc").row(0, named=True)
        threshold = getattr((trace.meta.extra or {}).get("thresholds"), kind, None)
        words = kind.replace("_", " ")
        findings.append(Finding(
            kind="inefficient", severity="low", device=device, bytes=total,
            title=(f"{counted(flagged.height, 'block')} ({format_bytes(total)}) show {words}"
                   + (f", most from {by_stack[0]['label']}" if by_stack else "")),
            detail={"flag": kind, "blocks": flagged.height, "total_bytes": total,
                    "by_stack": by_stack,
                    "threshold": None if threshold is None else {
                        "ns": threshold.ns, "percent_of_lifetime": threshold.percent}},
            evidence=Evidence(t=first["t_alloc"], seq=first["seq_alloc"],
                              block_ids=tuple(flagged["block_id"].to_list()),
                              owner=first["owner"]),
        ))
    return findings


__all__ = ["find_inefficient"]
