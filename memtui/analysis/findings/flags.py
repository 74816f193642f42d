"""Inefficient blocks as MindStudio Insight flags them, from access times and thresholds.

Insight (``MemScopeDatabase.cpp``, ``Build{LazyUsed,DelayedFree,LongIdle}ThresholdColumn``)
computes three flags per block at query time, each true when its interval passes a time
threshold *or* a share of the block's lifetime (end = free, or the end of the trace for a
block never freed), and only for blocks that were accessed after their alloc:

* early allocation (Insight "lazy used"): first access - alloc, where it is > 0;
* late deallocation ("delayed free"): free - last access, where last access > alloc;
* temporary idleness ("long idle"): the longest gap between two accesses, where > 0.
  (Insight's own parser measures the last access against the first here, a slip;
  memtui takes the longest gap between consecutive accesses, as the name says.)

A threshold of ``None`` turns that half of the test off.  Insight leaves all of them off
until the user sets some; memtui's defaults flag an interval that fills more than half of
the block's life, which catches the textbook cases without drowning short blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from memtui.model import (
    FLAG_EARLY_ALLOCATION,
    FLAG_LATE_DEALLOCATION,
    FLAG_TEMPORARY_IDLENESS,
    MemoryTrace,
    null_count,
)


@dataclass(frozen=True)
class Threshold:
    """Flag when the interval exceeds ``ns`` nanoseconds or ``percent`` % of the lifetime."""

    ns: int | None = None
    percent: float | None = 50.0


@dataclass(frozen=True)
class Thresholds:
    early_allocation: Threshold = Threshold()
    late_deallocation: Threshold = Threshold()
    temporary_idleness: Threshold = Threshold()


DEFAULT_THRESHOLDS = Thresholds()


#: The names a user types for each threshold (Insight's and memtui's).
THRESHOLD_NAMES = {"early": "early_allocation", "lazy": "early_allocation",
                   "late": "late_deallocation", "delayed": "late_deallocation",
                   "idle": "temporary_idleness", "long_idle": "temporary_idleness"}
_SHORT = {"early_allocation": "early", "late_deallocation": "late",
          "temporary_idleness": "idle"}
_TIME_UNITS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def format_thresholds(thresholds: Thresholds) -> str:
    """``early=50% late=50% idle=2s,10%`` (``off`` where both halves are off)."""
    parts = []
    for field_name, short in _SHORT.items():
        threshold: Threshold = getattr(thresholds, field_name)
        halves = []
        if threshold.ns is not None:
            halves.append(_format_ns(threshold.ns))
        if threshold.percent is not None:
            halves.append(f"{threshold.percent:g}%")
        parts.append(f"{short}={','.join(halves) or 'off'}")
    return " ".join(parts)


def _format_ns(ns: int) -> str:
    for unit in ("s", "ms", "us"):
        if ns >= _TIME_UNITS[unit] and ns % _TIME_UNITS[unit] == 0:
            return f"{ns // _TIME_UNITS[unit]}{unit}"
    return f"{ns}ns"


def parse_thresholds(text: str, current: Thresholds = DEFAULT_THRESHOLDS) -> Thresholds:
    """``early=50% late=2s idle=1s,20% ...`` -> Thresholds; a threshold not named keeps
    its ``current`` value; ``off`` turns one off.  ValueError on anything unreadable."""
    result = current
    for token in text.split():
        name, _, value = token.partition("=")
        field_name = THRESHOLD_NAMES.get(name.lower())
        if field_name is None or not value:
            raise ValueError(f"not a threshold: {token!r} (early=50% late=2s idle=1s,20%)")
        ns, percent = None, None
        for half in value.lower().split(","):
            if half == "off":
                continue
            if half.endswith("%"):
                percent = float(half[:-1])
                continue
            number = half.rstrip("smun")
            unit = half[len(number):] or "s"
            if unit not in _TIME_UNITS or not number:
                raise ValueError(f"not a time or a percentage: {half!r} in {token!r}")
            ns = int(round(float(number) * _TIME_UNITS[unit]))
        result = replace(result, **{field_name: Threshold(ns=ns, percent=percent)})
    return result


def _passes(interval: pl.Expr, lifetime: pl.Expr, threshold: Threshold,
            valid: pl.Expr) -> pl.Expr:
    test = pl.lit(False)
    if threshold.ns is not None:
        test = test | (interval > threshold.ns)
    if threshold.percent is not None:
        test = test | ((interval * 100.0) > (lifetime * threshold.percent))
    return (valid & test).fill_null(False)


def inefficient_flags(blocks: pl.DataFrame, end_t: int | None,
                      thresholds: Thresholds = DEFAULT_THRESHOLDS) -> pl.Series:
    """``flags`` (UInt8 bitmask of ``FLAG_*``) for ``blocks``.

    ``blocks`` needs ``t_alloc``, ``t_free``, ``first_access``, ``last_access`` and
    ``max_access_gap``; ``end_t`` stands in for the free of blocks still alive.
    """
    if blocks.is_empty():
        return pl.Series("flags", [], dtype=pl.UInt8)
    end = pl.col("t_free").fill_null(pl.lit(end_t, pl.Int64))
    lifetime = end - pl.col("t_alloc")
    to_first = pl.col("first_access") - pl.col("t_alloc")
    to_last = pl.col("last_access") - pl.col("t_alloc")
    gap = pl.col("max_access_gap")
    early = _passes(to_first, lifetime, thresholds.early_allocation, to_first > 0)
    late = _passes(end - pl.col("last_access"), lifetime, thresholds.late_deallocation,
                   to_last > 0)
    idle = _passes(gap, lifetime, thresholds.temporary_idleness, gap > 0)
    accessed = pl.col("first_access").is_not_null()
    flags = (
        pl.when(accessed & early).then(FLAG_EARLY_ALLOCATION).otherwise(0)
        + pl.when(accessed & late).then(FLAG_LATE_DEALLOCATION).otherwise(0)
        + pl.when(accessed & idle).then(FLAG_TEMPORARY_IDLENESS).otherwise(0)
    )
    return blocks.select(flags.cast(pl.UInt8).alias("flags")).to_series()


def with_inefficient_flags(trace: MemoryTrace,
                           thresholds: Thresholds = DEFAULT_THRESHOLDS) -> MemoryTrace:
    """``trace`` with ``blocks.flags`` computed under ``thresholds`` (kept in ``meta.extra``).

    Only blocks of a capture that records accesses can be flagged; other traces come back
    unchanged.  The end of a block still alive is the end of the trace
    (``meta.extra["trace_end_ns"]`` where the source knows it, else the last event).
    """
    blocks = trace.blocks
    if blocks.is_empty() or null_count(blocks, "first_access") == blocks.height:
        return trace
    end_t = trace.meta.extra.get("trace_end_ns")
    if end_t is None and trace.events.height:
        end_t = int(trace.events["t"].max())
    flags = inefficient_flags(blocks, end_t, thresholds)
    meta = replace(trace.meta, extra={**trace.meta.extra, "thresholds": thresholds})
    return replace(trace, meta=meta, blocks=blocks.with_columns(flags=flags))


__all__ = ["DEFAULT_THRESHOLDS", "Threshold", "Thresholds", "format_thresholds",
           "inefficient_flags", "parse_thresholds", "with_inefficient_flags"]
