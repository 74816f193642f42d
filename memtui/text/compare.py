"""``memtui compare`` without ``--json``: the comparison as a short report for people."""

from __future__ import annotations

import polars as pl

from memtui.analysis.across.compare import Comparison, DeviceComparison
from memtui.errors import safe_text
from memtui.units import counted, format_bytes, signed_bytes


def _figure(name: str, triple: tuple[int | None, int | None]) -> str:
    a, b = triple
    delta = None if a is None or b is None else b - a
    return (f"    {name:<16} {format_bytes(a):>11} {format_bytes(b):>11} "
            f"{signed_bytes(delta):>12}")


def _only(value: str | None) -> str:
    return {"a": "  (only in A)", "b": "  (only in B)"}.get(value or "", "")


def merge_peak_and_end(frame: pl.DataFrame, label: str) -> pl.DataFrame:
    """One row for a key whose change is the same at the peak and at the end (the same
    bytes in A and in B): its ``at`` reads ``end and peak``, instead of the key said twice
    with one delta.  Rows keep their order (the first of the two stays)."""
    if frame.is_empty() or "at" not in frame.columns:
        return frame
    same = [label, "only_in", "a_bytes", "b_bytes", "delta"]
    said = frame.with_row_index("_row").with_columns(
        pl.col("at").unique(maintain_order=True).str.join(" and ")
        .over(same, mapping_strategy="group_to_rows").alias("_at"))
    return (said.unique(subset=same, keep="first", maintain_order=True)
            .with_columns(at=pl.col("_at")).drop("_row", "_at"))


def _rows(title: str, frame: pl.DataFrame, label: str, top: int, launches: bool = False):
    if frame.is_empty():
        return []
    frame = merge_peak_and_end(frame, label)
    lines = [f"  {title}:"]
    for row in frame.head(top).iter_rows(named=True):
        extra = ""
        if launches and row["a_launches"] != row["b_launches"]:
            extra = f"  launches {row['a_launches']} -> {row['b_launches']}"
        if launches and not row["delta"]:
            lines.append(f"    {'0 B':>12} launched {row['a_launches']} -> "
                         f"{row['b_launches']} times, none of its bytes live at the peaks or "
                         f"ends  {row[label]}{_only(row['only_in'])}")
            continue
        lines.append(
            f"    {signed_bytes(row['delta']):>12} at {row['at']:<4} "
            f"({format_bytes(row['a_bytes'])} -> {format_bytes(row['b_bytes'])})  "
            f"{row[label]}{_only(row['only_in'])}{extra}")
    if frame.height > top:
        lines.append(f"    ... {frame.height - top} more (--top N, or --json)")
    return lines


def _role_rows(d: DeviceComparison, top: int) -> list[str]:
    """By role at the peaks and ends, the largest change first (``optimizer state
    +3.2 GiB at peak``); one line where no role changed."""
    from memtui.text.roles import role_deltas_text, role_name

    moved = [r for r in d.by_role if r["delta"]]
    if not d.by_role:
        return []
    if not moved:
        return ["  by role: the same at both peaks and ends"]
    at_peak = {r["role"]: r["delta"] for r in d.by_role if r["at"] == "peak"}
    lines = [f"  by role at the peak: {role_deltas_text(at_peak)}"]
    for row in moved[:top]:
        lines.append(f"    {signed_bytes(row['delta']):>12} at {row['at']:<4} "
                     f"({format_bytes(row['a_bytes'])} -> {format_bytes(row['b_bytes'])})  "
                     f"{role_name(row['role'])}")
    return lines


def format_device(d: DeviceComparison, top: int = 10) -> list[str]:
    align = d.alignment
    shift = f", B shifted by {align.shift}" if align.shift else ""
    lines = [f"  {d.device_a} (A) against {d.device_b} (B), aligned by {align.mode}{shift}",
             f"    {'':<16} {'A':>11} {'B':>11} {'B - A':>12}",
             _figure("peak allocated", (d.a.peak, d.b.peak)),
             _figure("peak reserved", (d.a.peak_reserved, d.b.peak_reserved)),
             _figure("allocated at end", (d.a.end_allocated, d.b.end_allocated))]
    lines += _role_rows(d, top)
    if d.by_stack.is_empty() and d.by_owner.is_empty() and d.by_op.is_empty():
        lines.append("  the same bytes by stack, owner and op at both peaks and ends")
    lines += _rows("by stack (innermost user frame)", d.by_stack, "label", top)
    owners = d.by_owner.filter(pl.col("owner") != "(no owner)")
    lines += _rows("by owner", owners, "owner", top)
    ops = d.by_op.filter(pl.col("op") != "(outside any op)")
    lines += _rows("by op", ops, "op", top, launches=True)
    if d.steps and not any(s["delta"] for s in d.steps):
        lines.append(f"  steps ({len(d.steps)} aligned): the same peak in every step")
    elif d.steps:
        worst = sorted(d.steps, key=lambda s: -abs(s["delta"]))[:top]
        lines.append(f"  steps ({len(d.steps)} aligned), largest peak changes:")
        lines += [f"    step {s['step']:>4}: {format_bytes(s['a_peak']):>11} -> "
                  f"{format_bytes(s['b_peak']):>11} {signed_bytes(s['delta']):>12}"
                  for s in worst]
    if d.new_blocks.height:
        total = int(d.new_blocks["bytes"].sum())
        lines.append(f"  alive at B's end without a counterpart in A: "
                     f"{counted(int(d.new_blocks['count'].sum()), 'block')}, {format_bytes(total)}")
        for row in d.new_blocks.head(top).iter_rows(named=True):
            lines.append(f"    {row['count']:>6} x {format_bytes(row['size']):>10}  {row['label']}")
    return lines


def format_comparison(result: Comparison, top: int = 10) -> str:
    a, b = result.a.meta, result.b.meta
    lines = [f"A: {a.path}  ({a.source})", f"B: {b.path}  ({b.source})"]
    for device in result.devices:
        lines += format_device(device, top)
    if not result.devices:
        lines.append("  no device to compare: one of the captures has none")
    return safe_text(lines)


__all__ = ["format_comparison", "format_device", "signed_bytes"]
