"""Leaks: code (or an msMemScope owner) whose live bytes grow and are never given back.

The blocks of a device are grouped by memory pool, owner and the frame that names their
call stack (:mod:`memtui.analysis.findings.frames`).

Where the device has steps (:mod:`memtui.analysis.timeline.steps`: markers, a stack that
keeps the loop's time, or the period of the allocation signal), each group's live bytes
are taken at every step boundary with one ``bincount`` over all blocks, so a group's
level ``L[k]`` is what it held when step ``k`` began, and, where the last step finished, at
its end too.  Blocks allocated in a last step that did not finish are never counted: a
capture that stopped mid-step leaves its activations alive, and they are not leaks.  A
group leaks when its level rises at three boundaries or more, falls back by at most a
quarter of what it rose, and still grows in the second half of the steps (a warm-up that
stops is not a leak).  Without markers the steps must also free most of what they
allocate (a loop does; the layers of one pass do not).

Bytes per step are what the code keeps (the sizes it asked for, where the capture knows
them, else the allocator's): where every occurrence keeps the same bytes at a whole
number of steps apart (``every_steps``), that figure over that number, exact to the block
(3 MiB a step, 128 KiB every 2nd step); else the mean of what each step that grew kept,
over their period.  ``held_bytes_per_step`` is what the allocator's blocks grow by (a
free block handed out whole holds more than was asked), from the levels.

Where the device has no steps (nothing recurs: the equal slices of
:func:`memtui.analysis.timeline.steps.find_steps`), never-freed bytes that grow steadily
through the trace are a leak all the same (:mod:`memtui.analysis.findings.leak_growth`),
said per occurrence and per second.  Every leak says its rate: occurrences (count,
bytes, regularity, first and last time) and bytes per second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.findings.frames import NO_STACK, evidence_stack, stack_frames
from memtui.analysis.findings.leak_growth import (
    SAME_SHARE,
    occurrences,
    rate_figures,
    steady_groups,
    typical_bytes,
)
from memtui.analysis.findings.model import Evidence, Finding
from memtui.analysis.timeline.intervals import INT64_MAX, INT64_MIN
from memtui.analysis.timeline.steps import Steps, find_steps
from memtui.model import MemoryTrace, column_where, distinct_values, one_value_columns
from memtui.units import format_bytes

MIN_RISES = 3
MIN_STEPS_FOR_LEAK = MIN_RISES + 1
MAX_FALL_SHARE = 0.25
MIN_LATE_SHARE = 0.25
MAX_GROUPS = 64
HIGH_CONFIDENCE = 0.7
HIGH_BYTES = 1 << 20
#: Without step markers, the share of bytes a step must free again for the trace to be
#: a loop at all (a training step frees its activations, gradients and temporaries).
MIN_CHURN = 0.5
#: How much a leak found without steps is trusted, against one found at step boundaries.
WITHOUT_STEPS = 0.85


@dataclass(frozen=True)
class _Blocks:
    """The device's blocks that count for leaks, as arrays, with their group."""

    block_id: np.ndarray
    start: np.ndarray  # seq (or t) of the alloc; INT64_MIN for ghosts
    end: np.ndarray  # seq (or t) of the free; INT64_MAX where never freed
    size: np.ndarray
    requested: np.ndarray | None  # requested sizes, where the source knows them
    t_alloc: np.ndarray
    seq_alloc: np.ndarray
    stack_id: np.ndarray
    group: np.ndarray
    groups: pl.DataFrame  # group -> pool, owner, frame_id, label, filename, line, name


def find_leaks(trace: MemoryTrace, device: str, steps: Steps | None = None) -> list[Finding]:
    """Leak findings of ``device``, largest growth first (none on a flat capture)."""
    steps = steps if steps is not None else find_steps(trace, device)
    axis = steps.axis if steps is not None else "t"
    blocks = _leak_blocks(trace, device, axis)
    if blocks is None:
        return []
    if steps is None or steps.sliced or steps.count < MIN_STEPS_FOR_LEAK:
        found = _leaks_without_steps(trace, device, blocks, steps)
    else:
        found = _leaks_by_step(trace, device, blocks, steps)
    found.sort(key=lambda f: -(f.detail["total_bytes"]))
    return found


def _leaks_by_step(trace: MemoryTrace, device: str, blocks: _Blocks,
                   steps: Steps) -> list[Finding]:
    """The groups whose level grows at the step boundaries (module docstring)."""
    bounds, times = steps.edges()
    n_bounds = bounds.size
    # boundary k sees a block when start < bounds[k] <= end: k in [k_first, k_end)
    k_first = np.searchsorted(bounds, blocks.start, side="right")
    k_end = np.searchsorted(bounds, blocks.end, side="right")
    k_end = np.where(blocks.end == INT64_MAX, n_bounds, k_end)
    seen = k_end > k_first
    if not steps.by_markers and _churn_share(blocks, n_bounds, k_first, k_end) < MIN_CHURN:
        return []  # not a loop: the "steps" are layers of one pass, whose blocks all stay
    grows = seen & (k_first > 0) & (k_end == n_bounds)
    shrinks = seen & (k_first == 0) & (k_end < n_bounds)
    n_groups = blocks.groups.height
    net = (np.bincount(blocks.group[grows], weights=blocks.size[grows], minlength=n_groups)
           - np.bincount(blocks.group[shrinks], weights=blocks.size[shrinks],
                         minlength=n_groups))
    candidates = np.flatnonzero(net > 0)
    candidates = candidates[np.argsort(-net[candidates], kind="stable")][:MAX_GROUPS]
    if candidates.size == 0:
        return []
    levels = _levels(blocks, candidates, k_first, k_end, seen, n_bounds)
    findings = []
    for row, group in enumerate(candidates):
        finding = _judge(trace, device, steps, times, blocks, int(group), levels[row], k_first,
                         k_end)
        if finding is not None:
            findings.append(finding)
    return findings


def leak_rate(finding: Finding) -> int:
    """A leak's bytes per step where its device has steps, else per occurrence (what one
    occurrence of it keeps: the nearest there is to a step in a loop without one)."""
    detail = finding.detail
    value = detail.get("bytes_per_step")
    if value is None:
        value = detail.get("bytes_per_occurrence")
    return int(value if value is not None else finding.bytes or 0)


def _leak_blocks(trace: MemoryTrace, device: str, axis: str) -> _Blocks | None:
    blocks = trace.device_blocks(device)
    if blocks.is_empty():
        return None
    pools = distinct_values(blocks, "pool")
    if len(pools) > 1 and "HAL" in pools:  # HAL holds the segments of the pools above it
        blocks = blocks.filter(pl.col("pool").fill_null("") != "HAL")
    names = stack_frames(trace)
    start_col = "seq_alloc" if axis == "seq" else "t_alloc"
    end_col = "seq_free" if axis == "seq" else "t_free"
    # Blocks take their group's keys by stack id alone (an array lookup); the naming
    # frame's texts are joined per group (its first block's stack), never on every block.
    # (pool and owner are read by expressions: a column of one value stays one value;
    # a key of one value in every block is left out: it parts no group)
    keyed = blocks.with_columns(pool=pl.col("pool").fill_null(""))
    one_value = one_value_columns(blocks, ("pool", "owner"))
    group, firsts = _groups_by_first_block([
        *(column_where(blocks, pl.col(name).fill_null(""))
          for name in ("pool", "owner") if name not in one_value),
        pl.Series(_frame_of_stack(blocks["stack_id"], names))])
    info = keyed[firsts].select("pool", "owner", "stack_id").with_row_index("group").join(
        names, on="stack_id", how="left", maintain_order="left").select(
        "group", "pool", "owner", "frame_id", "label", "filename", "line", "name", "user")
    ghost = keyed["ghost"].fill_null(False).to_numpy()
    start = keyed[start_col].fill_null(INT64_MIN).to_numpy().astype(np.int64, copy=False)
    start = np.where(ghost, INT64_MIN, start)
    end = keyed[end_col].fill_null(INT64_MAX).to_numpy().astype(np.int64, copy=False)
    return _Blocks(
        block_id=keyed["block_id"].to_numpy(), start=start, end=end,
        size=keyed["size"].fill_null(0).to_numpy().astype(np.int64, copy=False),
        requested=None if keyed["requested_size"].null_count() == keyed.height else
        keyed["requested_size"].fill_null(keyed["size"]).fill_null(0).to_numpy()
        .astype(np.int64, copy=False),
        t_alloc=keyed["t_alloc"].fill_null(0).to_numpy().astype(np.int64, copy=False),
        seq_alloc=keyed["seq_alloc"].fill_null(-1).to_numpy().astype(np.int64, copy=False),
        stack_id=keyed["stack_id"].fill_null(-1).to_numpy().astype(np.int64, copy=False),
        group=group, groups=info,
    )


def _frame_of_stack(stack_id: pl.Series, names: pl.DataFrame) -> np.ndarray:
    """The naming frame of each block's stack (-1 where none), by array lookup."""
    ids = stack_id.fill_null(-1).to_numpy().astype(np.int64, copy=False)
    known = names.filter(pl.col("stack_id").is_not_null() & pl.col("frame_id").is_not_null())
    size = max(int(ids.max(initial=-1)), int(known["stack_id"].max() or 0)) + 2
    frame_of = np.full(size, -1, dtype=np.int64)  # index stack_id + 1: -1 (none) at 0
    frame_of[known["stack_id"].to_numpy().astype(np.int64) + 1] = known["frame_id"].to_numpy()
    return frame_of[ids + 1]


def _groups_by_first_block(keys: list[pl.Series]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (the distinct tuples of ``keys``, numbered in the order they first
    appear) and each group's first row."""
    rows = keys[0].len()
    codes, span = np.zeros(rows, dtype=np.int64), 1
    for column in keys:
        distinct = column.unique(maintain_order=True)
        if distinct.len() <= 1:
            continue
        if span > (1 << 62) // distinct.len():  # keep the combined code in int64
            span, codes = _dense(codes)
        codes = codes * distinct.len() + column.replace_strict(
            distinct, pl.int_range(distinct.len(), eager=True), return_dtype=pl.Int64
        ).to_numpy()
        span *= distinct.len()
    if span > 4 * rows + 1024:
        span, codes = _dense(codes)
    first = np.full(span, rows, dtype=np.int64)
    first[codes[::-1]] = np.arange(rows - 1, -1, -1)  # the earliest row is written last
    present = np.flatnonzero(first < rows)
    order = present[np.argsort(first[present], kind="stable")]
    number = np.empty(span, dtype=np.int64)
    number[order] = np.arange(order.size)
    return number[codes], first[order]


def _dense(codes: np.ndarray) -> tuple[int, np.ndarray]:
    """``codes`` renumbered 0..k-1 (k distinct), and k."""
    distinct, dense = np.unique(codes, return_inverse=True)
    return distinct.size, dense.reshape(-1)


def _churn_share(blocks: _Blocks, n_bounds: int, k_first: np.ndarray,
                 k_end: np.ndarray) -> float:
    """Share of the bytes allocated between the first and the last boundary that are
    freed by the boundary after next (a step boundary may fall inside the step, so a
    block may straddle one): near 1 in a training loop, low in one long pass."""
    inside = (k_first > 0) & (k_first < n_bounds)
    total = blocks.size[inside].sum()
    if total <= 0:
        return 0.0
    return float(blocks.size[inside & (k_end - k_first <= 1)].sum() / total)


def _levels(blocks: _Blocks, candidates: np.ndarray, k_first: np.ndarray,
            k_end: np.ndarray, seen: np.ndarray, n_bounds: int) -> np.ndarray:
    """Live bytes of each candidate group at each boundary, shape (groups, bounds)."""
    row_of = np.full(blocks.groups.height, -1, dtype=np.int64)
    row_of[candidates] = np.arange(candidates.size)
    rows = row_of[blocks.group]
    keep = seen & (rows >= 0)
    width = n_bounds + 1
    size = blocks.size[keep].astype(np.float64)
    diff = (np.bincount(rows[keep] * width + k_first[keep], weights=size,
                        minlength=candidates.size * width)
            - np.bincount(rows[keep] * width + k_end[keep], weights=size,
                          minlength=candidates.size * width))
    return np.cumsum(diff.reshape(candidates.size, width), axis=1)[:, :n_bounds]


def _judge(trace: MemoryTrace, device: str, steps: Steps, times: np.ndarray,
           blocks: _Blocks, group: int, level: np.ndarray, k_first: np.ndarray,
           k_end: np.ndarray) -> Finding | None:
    """A leak finding for ``group`` with levels ``level`` at the boundaries, or None."""
    level = np.rint(level).astype(np.int64)
    diffs = np.diff(level)
    rises = np.flatnonzero(diffs > 0)
    rise_total = int(diffs[diffs > 0].sum())
    fall_total = int(-diffs[diffs < 0].sum())
    net = int(level[-1] - level[0])
    mid = level.size // 2
    if rises.size < MIN_RISES or net <= 0 or fall_total > MAX_FALL_SHARE * rise_total:
        return None
    if level[-1] - level[mid] < MIN_LATE_SHARE * net:
        return None
    first = int(rises[0])
    total = int(level[-1] - level[first])
    confidence = _confidence(level[first:], rises.size, rise_total, fall_total,
                             steps.by_markers)
    n_bounds = times.size
    leaked = (blocks.group == group) & (k_first > first) & (k_first < n_bounds) \
        & (k_end == n_bounds)
    per_step, every, occurrence = _per_step_figures(blocks, leaked, k_first, level, rises)
    grown_over = n_bounds - 1 - first  # steps from the first that grew to the last seen
    rate = f"{format_bytes(int(round(per_step)))} per step" if every in (None, 1) else \
        f"{format_bytes(int(round(occurrence)))} every {_ordinal(every)} step"
    detail = {
        "bytes_per_step": int(round(per_step)),
        "held_bytes_per_step": int(round(_per_step(level, rises))),
        "every_steps": every,
        "steps": steps.count,
        "steps_grown": int(rises.size),
        "first_step": first,
        "first_step_name": steps.name(first),
        "steps_from": _steps_source(trace, steps),
        "level_at_steps": [int(v) for v in level[:: max(1, level.size // 200)]],
    }

    def title(who: str) -> str:
        return (f"{who} leaks {rate} since {steps.name(first)} "
                f"({format_bytes(total)} in {grown_over} steps)")

    return _finding(trace, device, blocks, group, np.flatnonzero(leaked), total, confidence,
                    title, detail, window=(int(times[first]), int(times[-1])))


def _per_step_figures(blocks: _Blocks, leaked: np.ndarray, k_first: np.ndarray,
                      level: np.ndarray, rises: np.ndarray) -> tuple[float, int | None, float]:
    """(bytes per step, every how many steps it keeps where that is a whole number, what
    one occurrence keeps) of the blocks ``leaked`` (module docstring): one block of the
    same size every ``k`` steps on average (a step boundary may fall either side of one
    of them now and then), or the same bytes kept every ``k`` steps, is exact; else the
    mean of what the steps that grew kept.  Where those blocks do not explain the growth
    (one buffer re-allocated larger, the old one freed: only the last is never freed)
    the levels' growth is the figure."""
    level_rate = _per_step(level, rises)
    rows = np.flatnonzero(leaked)
    if rows.size == 0:
        return level_rate, None, level_rate
    step = k_first[rows] - 1  # boundary k first sees a block of step k - 1
    sizes = _rate_sizes(blocks)[rows]
    keeping, position = np.unique(step, return_inverse=True)
    if keeping.size < max(2, rises.size // 2):
        return level_rate, None, level_rate
    block = typical_bytes(sizes)
    spacing = (keeping[-1] - keeping[0]) / (rows.size - 1) if rows.size > 1 else 0.0
    if _whole(spacing) and np.mean(sizes == block) >= SAME_SHARE:
        return block / round(spacing), round(spacing), block
    kept = np.bincount(position, weights=sizes).astype(np.int64)
    period = (keeping[-1] - keeping[0]) / (keeping.size - 1)
    typical = typical_bytes(kept)
    if _whole(period) and np.mean(kept == typical) >= SAME_SHARE:
        return typical / round(period), round(period), typical
    return float(kept.sum()) / (keeping.size * period), None, typical


def _whole(steps: float) -> bool:
    """Whether ``steps`` is a whole number of steps, 1 or more (within 5%)."""
    return round(steps) >= 1 and abs(steps - round(steps)) <= 0.05 * round(steps)


def _rate_sizes(blocks: _Blocks) -> np.ndarray:
    """The sizes a leak's rate is counted in: what the code asked, where known."""
    return blocks.requested if blocks.requested is not None else blocks.size


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _finding(trace: MemoryTrace, device: str, blocks: _Blocks, group: int, rows: np.ndarray,
             total: int, confidence: float, title: Callable[[str], str],
             figures: dict[str, Any], window: tuple[int, int] | None) -> Finding:
    """The leak finding of ``group`` whose never-freed blocks are ``rows``: who leaks,
    the rate of its occurrences (:func:`rate_figures`), the evidence."""
    order = rows[np.argsort(blocks.start[rows], kind="stable")]
    info = blocks.groups.row(group, named=True)
    stacks = blocks.stack_id[order]
    stack_id = int(np.bincount(stacks[stacks >= 0]).argmax()) if (stacks >= 0).any() else None
    first_block = order[0] if order.size else None
    pool = f"{info['pool']} blocks" if info["pool"] else "blocks"
    where = info["label"] or info["owner"] or f"{pool} {NO_STACK}"
    owner = info["owner"]
    who = f"{owner} in {where}" if owner and info["label"] else where
    severity = "high" if confidence >= HIGH_CONFIDENCE and total >= HIGH_BYTES else "medium"
    occurrence = occurrences(blocks.start[order], np.zeros(order.size, dtype=np.int64))
    starts = np.flatnonzero(np.diff(occurrence, prepend=-1) > 0)
    kept = np.add.reduceat(_rate_sizes(blocks)[order], starts) if order.size else order
    detail = {
        "function": info["name"],
        "file": info["filename"],
        "line": info["line"],
        "frame_is_user_code": bool(info["user"]) if info["user"] is not None else False,
        "owner": owner,
        "pool": info["pool"] or None,
        **figures,
        **rate_figures(blocks.t_alloc[order][starts], kept, trace.meta.time_unit == "ns"),
        "blocks": int(order.size),
        "total_bytes": total,
        "confidence": round(float(confidence), 2),
    }
    evidence = Evidence(
        t=int(blocks.t_alloc[first_block]) if first_block is not None else None,
        seq=int(blocks.seq_alloc[first_block]) if first_block is not None
        and blocks.seq_alloc[first_block] >= 0 else None,
        block_ids=tuple(int(b) for b in blocks.block_id[order]),
        stack=evidence_stack(trace, stack_id), owner=owner, stack_id=stack_id,
        window=window,
    )
    return Finding(kind="leak", severity=severity, title=title(who), device=device,
                   bytes=total, detail=detail, evidence=evidence)


def _leaks_without_steps(trace: MemoryTrace, device: str, blocks: _Blocks,
                         steps: Steps | None) -> list[Finding]:
    """Groups whose never-freed bytes grow steadily through a trace without steps
    (:func:`memtui.analysis.findings.leak_growth.steady_groups`)."""
    axis = steps.axis if steps is not None else "t"
    span = trace.device_events(device).select(
        low=pl.col(axis).min(), high=pl.col(axis).max()).row(0)
    if span[0] is None:
        return []
    found = []
    for steady in steady_groups(
            blocks.group, blocks.start, blocks.end == INT64_MAX, blocks.start == INT64_MIN,
            blocks.size, _rate_sizes(blocks), (int(span[0]), int(span[1])))[:MAX_GROUPS]:
        rows = steady.rows
        total = int(blocks.size[rows].sum())
        count = steady.occurrence_rows.size
        confidence = steady.linear * min(1.0, count / 6.0) * WITHOUT_STEPS
        occurrence = typical_bytes(steady.occurrence_bytes)
        t = blocks.t_alloc[rows]
        figures = {"kept_at_occurrences": [int(v) for v in np.cumsum(
                       blocks.size[rows])[:: max(1, rows.size // 200)]]}

        def title(who: str, occurrence: float = occurrence, count: int = count,
                  total: int = total) -> str:
            return (f"{who} leaks {format_bytes(int(round(occurrence)))} {count} times "
                    f"over the capture and never frees it ({format_bytes(total)}; no steps "
                    "found)")

        found.append(_finding(trace, device, blocks, steady.group, rows, total, confidence,
                              title, figures, window=(int(t.min()), int(t.max()))))
    return found


def _per_step(level: np.ndarray, rises: np.ndarray) -> float:
    """Bytes per step: the growth over all ``rises`` (from before the first to after the
    last) over their number times their period (the steps from the first rise to the
    last, over the rises between): the mean of what each rise kept, spread over its
    period.  Exact for a leak every step and every k-th step alike, and for blocks whose
    sizes vary (the allocator may hand out a larger block than asked)."""
    first, last = int(rises[0]), int(rises[-1])
    growth = float(level[last + 1] - level[first])
    if rises.size < 2 or last == first:
        return growth / rises.size
    period = (last - first) / (rises.size - 1)
    return growth / (rises.size * period)


def _confidence(level: np.ndarray, rises: int, rise_total: int, fall_total: int,
                by_markers: bool) -> float:
    """0..1: how steady the growth is (monotone, linear, seen often, steps known)."""
    monotone = 1.0 - fall_total / rise_total if rise_total else 0.0
    x = np.arange(level.size, dtype=np.float64)
    y = level.astype(np.float64)
    linear = 1.0
    if level.size > 2 and y.std() > 0:
        linear = float(np.corrcoef(x, y)[0, 1]) ** 2
    often = min(1.0, rises / 6.0)
    known = 1.0 if by_markers else 0.9
    return max(0.0, monotone * linear * often * known)


def _steps_source(trace: MemoryTrace, steps: Steps) -> str:
    if steps.anchor_stack is None:
        return steps.source
    names = stack_frames(trace).filter(pl.col("stack_id") == steps.anchor_stack)
    label = names["label"][0] if names.height else f"stack {steps.anchor_stack}"
    return f"the recurring allocations of {label}"


__all__ = ["find_leaks", "leak_rate"]
