"""``memtui summary``'s text for several ranks: one line per rank and device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtui.analysis.across.ranks import RankRow
from memtui.errors import safe_text
from memtui.units import format_bytes


def format_peak_time(row: RankRow) -> str:
    """When the row's peak happened, relative to its start: ``+1.234 s`` or ``#N``."""
    if row.peak_time is None:
        return "-"
    if row.time_unit == "event":
        return f"#{row.peak_time}"
    return f"+{row.peak_time / 1e9:.3f} s"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def format_ranks(data: dict[str, Any], rows: Sequence[RankRow]) -> str:
    """The human ``memtui summary`` of several ranks: one line per rank and device, the
    outliers and why, the warnings."""
    lines = [f"{data['path']}  ({len(rows)} rank devices, {data['source']})",
             f"  {'':1} {'rank':>4}  {'device':<14} {'peak alloc':>10}  {'peak resv':>10}  "
             f"{'at end':>10}  {'peak at':>12}  {'leak/step':>10}  {'frag':>5}"]
    for row in rows:
        rank = "-" if row.rank is None else str(row.rank)
        lines.append(
            f"  {'!' if row.outlier else ' '} {rank:>4}  {row.device:<14} "
            f"{format_bytes(row.peak_allocated):>10}  {format_bytes(row.peak_reserved):>10}  "
            f"{format_bytes(row.allocated_at_end):>10}  {format_peak_time(row):>12}  "
            f"{format_bytes(row.leak_bytes_per_step):>10}  {_share(row.fragmentation):>5}  "
            f"{row.path}")
    for row in rows:
        if row.outlier:
            rank = "-" if row.rank is None else row.rank
            lines.append(f"  outlier: rank {rank} {row.device}: {row.why}")
    for warning in data["warnings"]:
        lines.append(f"  warning: {warning}")
    return safe_text(lines)
