"""Two captures compared: alignment, per-device deltas, and where the difference sits.

Everything ``memtui compare`` prints and the compare-mode screens draw comes from here
(pure polars / numpy over two :class:`~memtui.model.MemoryTrace`, no Python loop over
events):

* **Device pairs** (:func:`device_pairs`): devices of the same name, then the rest in
  order (``cuda:0`` against ``npu:0``).
* **Alignment** (:func:`align`): a monotone map between A's time axis and B's, as knots
  interpolated linearly (slope 1 past the ends).  ``step``: step *k* of A against step
  *k + shift* of B (steps are msMemScope ``STEP`` rows, ``ProfilerStep#N`` annotations,
  ``step start`` mstx ranges, else the recurring allocation pattern the findings' step
  detector finds); ``time``: the same time since the first event, B shifted by
  ``shift`` (ns, or events without a clock); ``position``: event *i* of A against event
  *i + shift* of B.  The default is ``step`` where both have steps, else ``time`` where
  both have clocks, else ``position``.
* **Figures** (:func:`compare`): peak allocated and reserved, allocated at the end and
  their deltas; each aligned step's peak in both.
* **Attribution**: bytes of the blocks alive at each capture's peak and at its end, by
  stack (the innermost user frame: name, file, line), by owner (msMemScope ``owner``) and
  by op (the msMemScope ``OP_LAUNCH`` range the block was allocated in, the profiler's
  operator name), sorted by absolute delta.  A key that appears in only one capture is
  named ``only_in`` ``"a"`` or ``"b"``; ops also carry their launch counts, so an op that
  B launches more often than A shows even when it holds no device memory.
* **New blocks**: blocks alive at B's end without a counterpart (same stack and size)
  alive at A's end.
* **By role**: bytes by role (:mod:`memtui.analysis.roles`) at each run's peak and end,
  B against A (``optimizer state +3.2 GiB``).

A stack's identity across captures is its naming frame's (function, file base name,
line): the same code run on two machines or with two torch versions keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from memtui.analysis.stacks.callstack import stack_top_frames
from memtui.analysis.timeline.levels import Level, allocated_level, reserved_level
from memtui.model import MemoryTrace

ALIGNMENTS = ("step", "time", "position")
MOMENTS = ("peak", "end")
NO_STACK = "(no stack recorded)"
NO_OWNER = "(no owner)"
NO_OP = "(outside any op)"
#: Marker names that mark a training step (besides msMemScope's SYSTEM STEP rows).
STEP_NAME = r"(?i)^(ProfilerStep#\d+|step start|step \d+)$"
_FAR = np.int64(1) << np.int64(62)


# -- device pairs -------------------------------------------------------------------------


def device_pairs(a: MemoryTrace, b: MemoryTrace) -> list[tuple[str, str]]:
    """Matched devices: the same name in both, then the others of each in order."""
    names_a, names_b = a.meta.device_names, b.meta.device_names
    same = [(name, name) for name in names_a if name in names_b]
    rest_a = [name for name in names_a if name not in names_b]
    rest_b = [name for name in names_b if name not in names_a]
    return same + list(zip(rest_a, rest_b, strict=False))


# -- steps ------------------------------------------------------------------------------


def device_bounds(trace: MemoryTrace, device: str) -> tuple[int, int]:
    """First and last time of ``device``'s events (else of its allocated level)."""
    t = trace.device_events(device)["t"]
    if t.len():
        return int(t.min()), int(t.max())
    level = allocated_level(trace, device)
    if level.t.size:
        return int(level.t.min()), int(level.t.max())
    return 0, 0


def steps_of(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """The steps of ``device`` in time order: ``step`` (0-based), ``name``, ``t``, ``t_end``.

    A step ends at its own end or where the next one starts, whichever is first; the last
    one without an end of its own at the device's end.
    """
    schema = {"step": pl.Int64, "name": pl.String, "t": pl.Int64, "t_end": pl.Int64}
    markers = trace.markers
    name = pl.col("name").fill_null("")
    rows = markers.filter(
        (pl.col("device").is_null() | (pl.col("device") == device))
        & ((pl.col("kind") == "step") | name.str.contains(STEP_NAME))
    ).unique(subset=["t", "name"], keep="first").sort("t") if markers.height else markers
    if rows.is_empty():
        rows = _recurring_steps(trace, device)
    if rows.is_empty():
        return pl.DataFrame(schema=schema)
    end = device_bounds(trace, device)[1] + 1
    next_start = pl.col("t").shift(-1)
    return rows.select(
        step=pl.int_range(pl.len(), dtype=pl.Int64), name=name, t="t",
        t_end=pl.when(pl.col("t_end").is_not_null() & (pl.col("t_end") > pl.col("t")))
        .then(pl.min_horizontal("t_end", next_start)).otherwise(next_start.fill_null(end)),
    ).cast(schema)


def _recurring_steps(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """Steps found by the findings' detector where no marker names them (the recurring
    allocation pattern of a loop; not its fallback of equal slices)."""
    from memtui.analysis.timeline.steps import find_steps

    found = find_steps(trace, device)
    if found is None or found.sliced or found.count < 2:
        return pl.DataFrame(schema={"t": pl.Int64, "t_end": pl.Int64, "name": pl.String})
    names = [found.name(k) for k in range(found.count)]
    return pl.DataFrame({"t": found.times.astype(np.int64), "name": names},
                        schema={"t": pl.Int64, "name": pl.String}).with_columns(
        t_end=pl.lit(None, pl.Int64)).unique("t", keep="first", maintain_order=True)


# -- alignment --------------------------------------------------------------------------


def _interp(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Piecewise-linear through the knots, slope 1 past either end."""
    x = np.asarray(x, dtype=np.float64)
    out = np.interp(x, xp, fp)
    out = np.where(x < xp[0], fp[0] + (x - xp[0]), out)
    return np.where(x > xp[-1], fp[-1] + (x - xp[-1]), out)


@dataclass(frozen=True)
class Alignment:
    """A monotone map between A's time axis and B's (see the module docstring)."""

    mode: str
    shift: int
    knots_a: np.ndarray
    knots_b: np.ndarray
    steps: int = 0  # aligned step pairs (mode "step")

    def a_to_b(self, t: Any) -> np.ndarray:
        return np.rint(_interp(t, self.knots_a, self.knots_b)).astype(np.int64)

    def b_to_a(self, t: Any) -> np.ndarray:
        return np.rint(_interp(t, self.knots_b, self.knots_a)).astype(np.int64)


def default_mode(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str) -> str:
    if steps_of(a, dev_a).height and steps_of(b, dev_b).height:
        return "step"
    if a.meta.time_unit == b.meta.time_unit == "ns":
        return "time"
    return "position"


def align(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str,
          mode: str | None = None, shift: int = 0) -> Alignment:
    """The alignment of ``dev_b`` of B against ``dev_a`` of A; ``mode`` None: the default.

    A mode the pair cannot support falls back (``step`` without steps on both sides to
    ``time``; ``time`` between a clock and event numbers to ``position``).
    """
    mode = mode or default_mode(a, b, dev_a, dev_b)
    if mode not in ALIGNMENTS:
        raise ValueError(f"alignment {mode!r} is not one of {ALIGNMENTS}")
    if mode == "step":
        aligned = _step_alignment(a, b, dev_a, dev_b, shift)
        if aligned is not None:
            return aligned
        mode, shift = "time", 0
    if mode == "time" and a.meta.time_unit == b.meta.time_unit:
        a0, b0 = device_bounds(a, dev_a)[0], device_bounds(b, dev_b)[0] + shift
        return Alignment("time", shift, np.array([a0, a0 + 1], dtype=np.int64),
                         np.array([b0, b0 + 1], dtype=np.int64))
    if mode == "time":
        shift = 0
    return _position_alignment(a, b, dev_a, dev_b, shift)


def _step_alignment(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str,
                    shift: int) -> Alignment | None:
    sa, sb = steps_of(a, dev_a), steps_of(b, dev_b)
    first = max(0, -shift)
    last = min(sa.height, sb.height - shift)
    if last <= first:
        return None
    pa, pb = sa.slice(first, last - first), sb.slice(first + shift, last - first)
    knots_a = np.concatenate([pa["t"].to_numpy(), pa["t_end"].to_numpy()[-1:]])
    knots_b = np.concatenate([pb["t"].to_numpy(), pb["t_end"].to_numpy()[-1:]])
    return Alignment("step", shift, knots_a.astype(np.int64),
                     np.maximum.accumulate(knots_b).astype(np.int64), steps=last - first)


def _position_alignment(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str,
                        shift: int) -> Alignment:
    ta = a.device_events(dev_a)["t"].to_numpy().astype(np.int64)
    tb = b.device_events(dev_b)["t"].to_numpy().astype(np.int64)
    first, last = max(0, -shift), min(ta.size, tb.size - shift)
    if last <= first:
        a0, b0 = device_bounds(a, dev_a)[0], device_bounds(b, dev_b)[0]
        return Alignment("position", shift, np.array([a0, a0 + 1]), np.array([b0, b0 + 1]))
    return Alignment("position", shift, ta[first:last], tb[first + shift:last + shift])


# -- blocks at a moment ---------------------------------------------------------------------


@dataclass(frozen=True)
class Moments:
    """One device's peak and end, and which of its blocks are alive at each."""

    device: str
    allocated: Level
    peak: int
    peak_t: int | None
    end_allocated: int
    peak_reserved: int | None
    blocks: pl.DataFrame  # the device's counted blocks with their keys
    alive_peak: np.ndarray  # bool per row of blocks
    alive_end: np.ndarray


def counted_blocks(trace: MemoryTrace, device: str) -> pl.DataFrame:
    """The blocks allocated(t) counts: not the segments themselves (msMemScope HAL rows)
    nor the pools whose allocations never move the level (a layer outside allocated)."""
    blocks = trace.device_blocks(device)
    segments = trace.device_segments(device)
    if "block_id" in segments.columns and segments.height:
        blocks = blocks.filter(
            ~pl.col("block_id").is_in(segments["block_id"].drop_nulls().implode()))
    events = trace.device_events(device)
    if (events.height and events["pool"].null_count() < events.height
            and events["allocated"].null_count() == 0):
        moved = events.filter(pl.col("action") == "alloc").select(
            "pool", moved=pl.col("allocated").diff().fill_null(pl.col("allocated")) != 0,
        ).group_by("pool").agg(pl.col("moved").any())
        outside = moved.filter(~pl.col("moved"))["pool"].drop_nulls()
        blocks = blocks.filter(pl.col("pool").is_null() | ~pl.col("pool").is_in(outside.implode()))
    return blocks


def _alive(blocks: pl.DataFrame, at_seq: int | None, at_t: int | None) -> np.ndarray:
    ghost = pl.col("ghost").fill_null(False)
    if at_seq is not None:
        born = ghost | (pl.col("seq_alloc") <= at_seq) | (
            pl.col("seq_alloc").is_null() & (pl.col("t_alloc") <= at_t))
        alive = born & (pl.col("seq_free").is_null() | (pl.col("seq_free") > at_seq))
        alive = alive & (pl.col("seq_free").is_not_null() | pl.col("t_free").is_null()
                         | (pl.col("t_free") > at_t))
    elif at_t is not None:
        alive = (ghost | (pl.col("t_alloc") <= at_t)) & (
            pl.col("t_free").is_null() | (pl.col("t_free") > at_t))
    else:
        alive = pl.col("t_free").is_null()
    return blocks.select(alive.fill_null(False))[:, 0].to_numpy()


def _in_event_order(trace: MemoryTrace, device: str, blocks: pl.DataFrame) -> pl.DataFrame:
    """``blocks`` with ``seq_alloc``/``seq_free`` turned into positions in the device's
    events, where the source's ``seq`` is not already in time order (msMemScope CSV rows)."""
    seq = trace.device_events(device)["seq"]
    if seq.is_sorted():
        return blocks
    position = pl.DataFrame({"seq": seq, "pos": pl.int_range(seq.len(), eager=True)})
    lookup = dict(zip(["seq_alloc", "seq_free"], ["pos_alloc", "pos_free"], strict=True))
    for column, pos in lookup.items():
        blocks = blocks.join(position.rename({"seq": column, "pos": pos}), on=column,
                             how="left", maintain_order="left")
    return blocks.with_columns(seq_alloc="pos_alloc", seq_free="pos_free").drop(
        "pos_alloc", "pos_free")


def _has_no_level(level: Level) -> bool:
    return level.values.size == 0 or not level.values.any()


def blocks_level(blocks: pl.DataFrame) -> Level:
    """allocated(t) from the blocks' lifetimes alone: the bytes alive after each time a
    block is allocated or freed (ghosts and blocks without an allocation time from the
    start)."""
    size = blocks["size"].fill_null(0).to_numpy().astype(np.int64)
    t_alloc = blocks["t_alloc"].to_numpy()
    t_free = blocks["t_free"].to_numpy()
    known_alloc = ~blocks["t_alloc"].is_null().to_numpy() & ~blocks["ghost"].fill_null(
        False).to_numpy()
    known_free = ~blocks["t_free"].is_null().to_numpy()
    times = np.concatenate([t_alloc[known_alloc], t_free[known_free]]).astype(np.int64)
    deltas = np.concatenate([size[known_alloc], -size[known_free]])
    if times.size == 0:
        return Level(np.zeros(1, dtype=np.int64), np.array([int(size.sum())], dtype=np.int64))
    unique, inverse = np.unique(times, return_inverse=True)
    start = int(size[~known_alloc].sum())
    values = start + np.cumsum(np.bincount(inverse, weights=deltas).astype(np.int64))
    return Level(np.concatenate([unique[:1], unique]),
                 np.concatenate([[start], values]).astype(np.int64))


def moments(trace: MemoryTrace, device: str) -> Moments:
    """Peak and end of ``device`` and the blocks alive at each."""
    info = trace.meta.device(device)
    level = allocated_level(trace, device)
    blocks = counted_blocks(trace, device)
    from_blocks = _has_no_level(level) and blocks.height > 0
    if from_blocks:  # blocks without levels (a profiler operator table alone)
        level = blocks_level(blocks)
    peak, index = level.peak()
    at_t = at_seq = None
    if index >= 0:
        at_t = int(level.t[index])
        events = trace.device_events(device)
        from_events = not from_blocks and (
            trace.curves.is_empty() or events.height + 1 == level.values.size)
        if (from_events and events.height and events["seq"].null_count() == 0
                and events["allocated"].null_count() == 0):
            ordered = _in_event_order(trace, device, blocks)
            if ordered is blocks:
                seqs = events["seq"]
                at_seq = int(seqs[index - 1]) if index > 0 else int(seqs.min()) - 1
            else:
                at_seq = index - 1
            alive_peak = _alive(ordered, at_seq, at_t)
    if at_seq is None:
        alive_peak = _alive(blocks, None, at_t)
    if info.allocated_at_end is not None and not from_blocks:
        end = int(info.allocated_at_end)
    else:
        end = int(level.values[-1]) if level.values.size else 0
    reserved = reserved_level(trace, device)
    peak_reserved = reserved.peak()[0] if reserved is not None and reserved.values.size else None
    return Moments(device, level, int(peak), at_t, end, peak_reserved, blocks,
                   alive_peak, _alive(blocks, None, None))


# -- keys ---------------------------------------------------------------------------------


def _base(column: str) -> pl.Expr:
    return pl.col(column).fill_null("").str.split("/").list.last().str.split("\\").list.last()


def stack_keys(trace: MemoryTrace, blocks: pl.DataFrame) -> pl.DataFrame:
    """Per block: ``key`` (function, file base name, line), ``label``, ``file``, ``line``."""
    tops = stack_top_frames(trace).with_columns(
        key=pl.concat_str([pl.col("name").fill_null("?"), _base("filename"),
                           pl.col("line").fill_null(0).cast(pl.String)], separator="\x1f"))
    keyed = blocks.select(pl.col("stack_id").cast(pl.Int32)).join(
        tops, on="stack_id", how="left", maintain_order="left")
    return keyed.select(
        key=pl.col("key").fill_null(NO_STACK), label=pl.col("top").fill_null(NO_STACK),
        file="filename", line="line")


def op_names(trace: MemoryTrace, device: str, blocks: pl.DataFrame) -> pl.Series:
    """Per block: the op it was allocated in (innermost ``op`` marker range holding its
    allocation, on its thread where both know threads), else the profiler's operator
    name (its ``owner``) where the capture has no op markers; ``NO_OP`` otherwise."""
    ops = trace.markers.filter(
        (pl.col("kind") == "op") & (pl.col("device").is_null() | (pl.col("device") == device))
    ) if trace.markers.height else trace.markers
    if ops.is_empty():
        if trace.meta.source == "ascend_profiler":
            return blocks["owner"].fill_null(NO_OP).alias("op")
        return pl.Series("op", [NO_OP] * blocks.height, dtype=pl.String)
    by = ["thread"] if "thread" in ops.columns and "thread" in blocks.columns else None
    left = blocks.select(
        "t_alloc", *(by or []), row=pl.int_range(pl.len())).with_columns(
        pl.col("t_alloc").fill_null(np.iinfo(np.int64).min)).sort("t_alloc")
    right = ops.select(pl.col("t").alias("t_alloc"), "t_end", "name", *(by or [])).sort("t_alloc")
    if by:
        left = left.with_columns(pl.col("thread").cast(pl.Int64, strict=False))
        right = right.with_columns(pl.col("thread").cast(pl.Int64, strict=False))
    joined = left.join_asof(right, on="t_alloc", by=by, strategy="backward",
                            check_sortedness=False).sort("row")
    inside = pl.col("t_end").is_null() | (pl.col("t_alloc") <= pl.col("t_end"))
    return joined.select(
        op=pl.when(pl.col("name").is_not_null() & inside).then("name").otherwise(pl.lit(NO_OP))
    )["op"]


def _keyed(trace: MemoryTrace, m: Moments) -> pl.DataFrame:
    blocks = m.blocks
    stacks = stack_keys(trace, blocks)
    return pl.DataFrame({
        "size": blocks["size"].fill_null(0),
        "alive_peak": m.alive_peak, "alive_end": m.alive_end,
        "block_id": blocks["block_id"],
    }).with_columns(
        stacks["key"].alias("stack_key"), stacks["label"].alias("stack_label"),
        stacks["file"].alias("file"), stacks["line"].alias("line"),
        blocks["owner"].fill_null("").replace("", NO_OWNER).alias("owner"),
        op_names(trace, m.device, blocks).alias("op"),
    )


# -- attribution ----------------------------------------------------------------------------


def _by(frame: pl.DataFrame, key: str, moment: str) -> pl.DataFrame:
    alive = pl.col(f"alive_{moment}")
    return frame.group_by(key).agg(
        bytes=pl.col("size").filter(alive).sum(), blocks=alive.sum())


def attribute(ka: pl.DataFrame, kb: pl.DataFrame, key: str,
              extra: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows of ``key`` (one per key and moment) with ``a_bytes``, ``b_bytes``, ``delta``,
    ``only_in``; those whose bytes differ (or, with ``extra``, whose launches differ),
    largest absolute delta first."""
    parts = []
    seen_a = ka.select(key).unique().with_columns(in_a=pl.lit(True))
    seen_b = kb.select(key).unique().with_columns(in_b=pl.lit(True))
    for moment in MOMENTS:
        joined = _by(ka, key, moment).join(_by(kb, key, moment), on=key, how="full",
                                           coalesce=True, suffix="_b")
        if extra is not None:
            joined = joined.join(extra.select(key), on=key, how="full", coalesce=True)
        parts.append(joined.select(
            key, at=pl.lit(moment), a_bytes=pl.col("bytes").fill_null(0),
            b_bytes=pl.col("bytes_b").fill_null(0)))
    rows = pl.concat(parts).join(seen_a, on=key, how="left").join(seen_b, on=key, how="left")
    rows = rows.with_columns(
        delta=pl.col("b_bytes") - pl.col("a_bytes"),
        only_in=pl.when(pl.col("in_a").is_null()).then(pl.lit("b"))
        .when(pl.col("in_b").is_null()).then(pl.lit("a")),
    ).drop("in_a", "in_b")
    keep = pl.col("delta") != 0
    if extra is not None:
        rows = rows.join(extra, on=key, how="left").with_columns(
            pl.col("a_launches", "b_launches").fill_null(0))
        keep = keep | (pl.col("a_launches") != pl.col("b_launches"))
        rows = rows.with_columns(
            only_in=pl.when(pl.col("a_launches") + pl.col("a_bytes") == 0).then(pl.lit("b"))
            .when(pl.col("b_launches") + pl.col("b_bytes") == 0).then(pl.lit("a"))
            .otherwise("only_in"))
    rows = rows.filter(keep)
    if extra is not None:
        # An op launched a different number of times whose bytes are the same (none live
        # at either moment): one row, at the end, which says so (launch-only), rather than
        # a "0 B -> 0 B" row per moment; none at all where a row with bytes shows it.
        with_bytes = rows.filter(pl.col("delta") != 0).select(key).unique()
        rows = rows.filter((pl.col("delta") != 0) | (
            (pl.col("at") == "end") & ~pl.col(key).is_in(with_bytes[key].implode())))
        launch_gap = (pl.col("b_launches") - pl.col("a_launches")).abs()
        return rows.sort(pl.col("delta").abs(), launch_gap, "at", key,
                         descending=[True, True, False, False])
    return rows.sort(pl.col("delta").abs(), "at", key, descending=[True, False, False])


def launches(trace: MemoryTrace, device: str) -> pl.DataFrame:
    ops = trace.markers.filter(
        (pl.col("kind") == "op") & (pl.col("device").is_null() | (pl.col("device") == device))
    ) if trace.markers.height else trace.markers
    return ops.group_by("name").agg(launches=pl.len()).rename({"name": "op"})


def _stack_rows(ka: pl.DataFrame, kb: pl.DataFrame) -> pl.DataFrame:
    rows = attribute(ka, kb, "stack_key")
    names = pl.concat([kb.select("stack_key", "stack_label", "file", "line"),
                       ka.select("stack_key", "stack_label", "file", "line")]).unique(
        "stack_key", keep="first", maintain_order=True)
    return rows.join(names, on="stack_key", how="left", maintain_order="left").rename(
        {"stack_label": "label"})


def new_blocks(ka: pl.DataFrame, kb: pl.DataFrame, limit: int = 20) -> pl.DataFrame:
    """Blocks alive at B's end without a counterpart alive at A's end (same stack and
    size), grouped by stack and size: ``count``, ``bytes``, some ``block_ids`` of B."""
    group = ["stack_key", "size"]
    ends_a = ka.filter(pl.col("alive_end")).group_by(group).agg(a_count=pl.len())
    ends_b = kb.filter(pl.col("alive_end")).group_by(group).agg(
        b_count=pl.len(), block_ids=pl.col("block_id").sort(), label=pl.col("stack_label").first(),
        file=pl.col("file").first(), line=pl.col("line").first())
    rows = ends_b.join(ends_a, on=group, how="left").with_columns(
        count=pl.col("b_count").cast(pl.Int64) - pl.col("a_count").cast(pl.Int64).fill_null(0),
    ).filter(pl.col("count") > 0)
    return rows.select(
        "label", "file", "line", "size", "count", bytes=pl.col("size") * pl.col("count"),
        block_ids=pl.col("block_ids").list.tail(pl.col("count")).list.head(limit),
    ).sort("bytes", "label", descending=[True, False])


# -- steps ----------------------------------------------------------------------------------


def step_peaks(level: Level, steps: pl.DataFrame) -> np.ndarray:
    """The peak of ``level`` in each step ``[t, t_end)`` (the level holding at ``t`` too)."""
    t0, t1 = steps["t"].to_numpy(), steps["t_end"].to_numpy()
    if level.values.size == 0 or t0.size == 0:
        return np.zeros(t0.size, dtype=np.int64)
    lo = np.clip(np.searchsorted(level.t, t0, side="right") - 1, 0, level.values.size - 1)
    hi = np.maximum(np.searchsorted(level.t, t1, side="left"), lo + 1)
    # one reduceat over (lo, hi) pairs: the max of values[lo:hi] for each step (a padded
    # copy so that hi may be the end)
    padded = np.append(level.values, level.values[-1])
    bounds = np.column_stack([lo, hi]).ravel()
    return np.maximum.reduceat(padded, bounds)[::2].astype(np.int64)


def aligned_steps(a: MemoryTrace, b: MemoryTrace, ma: Moments, mb: Moments,
                  alignment: Alignment) -> list[dict[str, int]]:
    if alignment.mode != "step":
        return []
    sa, sb = steps_of(a, ma.device), steps_of(b, mb.device)
    peaks_a, peaks_b = step_peaks(ma.allocated, sa), step_peaks(mb.allocated, sb)
    shift = alignment.shift
    first, last = max(0, -shift), min(sa.height, sb.height - shift)
    return [{"step": k, "a_peak": int(peaks_a[k]), "b_peak": int(peaks_b[k + shift]),
             "delta": int(peaks_b[k + shift] - peaks_a[k])} for k in range(first, last)]


# -- the whole comparison -----------------------------------------------------------------


def _triple(a: int | None, b: int | None) -> list[int | None]:
    return [a, b, None if a is None or b is None else b - a]


@dataclass
class DeviceComparison:
    """One matched device pair: figures, attribution frames and the alignment."""

    device_a: str
    device_b: str
    alignment: Alignment
    a: Moments
    b: Moments
    by_stack: pl.DataFrame
    by_owner: pl.DataFrame
    by_op: pl.DataFrame
    steps: list[dict[str, int]]
    new_blocks: pl.DataFrame
    keyed_a: pl.DataFrame = field(repr=False)
    keyed_b: pl.DataFrame = field(repr=False)
    #: Bytes by role at each run's peak and end: ``{role, at, a_bytes, b_bytes, delta}``,
    #: the largest change first (memory by role, issue 32)
    by_role: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        stack_cols = ["label", "file", "line", "at", "a_bytes", "b_bytes", "delta", "only_in"]
        return {
            "device_a": self.device_a, "device_b": self.device_b,
            "peak_allocated": _triple(self.a.peak, self.b.peak),
            "peak_reserved": _triple(self.a.peak_reserved, self.b.peak_reserved),
            "end_allocated": _triple(self.a.end_allocated, self.b.end_allocated),
            "by_stack": self.by_stack.select(stack_cols).to_dicts(),
            "by_owner": self.by_owner.select(
                label="owner", at="at", a_bytes="a_bytes", b_bytes="b_bytes", delta="delta",
                only_in="only_in").to_dicts(),
            "by_op": self.by_op.select(
                label="op", at="at", a_bytes="a_bytes", b_bytes="b_bytes", delta="delta",
                a_launches="a_launches", b_launches="b_launches",
                only_in="only_in").to_dicts(),
            "steps": self.steps,
            "new_blocks_at_end": self.new_blocks.to_dicts(),
            "by_role": self.by_role,
        }


def compare_devices(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str,
                    mode: str | None = None, shift: int = 0) -> DeviceComparison:
    alignment = align(a, b, dev_a, dev_b, mode, shift)
    ma, mb = moments(a, dev_a), moments(b, dev_b)
    ka, kb = _keyed(a, ma), _keyed(b, mb)
    counts = launches(a, dev_a).join(launches(b, dev_b), on="op", how="full", coalesce=True,
                                     suffix="_b").select(
        "op", a_launches="launches", b_launches="launches_b")
    return DeviceComparison(
        device_a=dev_a, device_b=dev_b, alignment=alignment, a=ma, b=mb,
        by_stack=_stack_rows(ka, kb), by_owner=attribute(ka, kb, "owner"),
        by_op=attribute(ka, kb, "op", extra=counts),
        steps=aligned_steps(a, b, ma, mb, alignment), new_blocks=new_blocks(ka, kb),
        keyed_a=ka, keyed_b=kb, by_role=role_changes(a, b, dev_a, dev_b),
    )


def role_changes(a: MemoryTrace, b: MemoryTrace, dev_a: str, dev_b: str
                 ) -> list[dict[str, Any]]:
    """Bytes by role at each run's allocated peak and at its last event, B against A:
    ``{role, at, a_bytes, b_bytes, delta}`` for each role and moment where either run
    holds some, the largest change first (``optimizer_state +3.2 GiB at peak``)."""
    from memtui.analysis.roles import by_role_at
    from memtui.analysis.roles.model import ROLES
    from memtui.analysis.timeline.at_time import Timeline

    def at(trace: MemoryTrace, device: str) -> dict[str, dict[str, int]]:
        tl = Timeline.build(trace, device)
        peak = -1 if tl.peak_at_start else tl.peak_event
        return {"peak": by_role_at(trace, device, peak),
                "end": by_role_at(trace, device, tl.positions - 1)}

    ra, rb = at(a, dev_a), at(b, dev_b)
    rows = [{"role": role, "at": moment, "a_bytes": ra[moment][role],
             "b_bytes": rb[moment][role], "delta": rb[moment][role] - ra[moment][role]}
            for moment in MOMENTS for role in ROLES
            if ra[moment][role] or rb[moment][role]]
    return sorted(rows, key=lambda r: -abs(r["delta"]))


def realign(d: DeviceComparison, a: MemoryTrace, b: MemoryTrace, mode: str | None,
            shift: int) -> DeviceComparison:
    """``d`` with another alignment (and its steps); the attribution does not depend on it."""
    alignment = align(a, b, d.device_a, d.device_b, mode, shift)
    return replace(d, alignment=alignment, steps=aligned_steps(a, b, d.a, d.b, alignment))


def sample(level: Level, times: np.ndarray) -> np.ndarray:
    """``level`` at each of ``times`` (the value of the last point at or before each; the
    first value before the level starts)."""
    if level.values.size == 0:
        return np.zeros(np.asarray(times).size, dtype=np.int64)
    at = np.searchsorted(level.t, times, side="right") - 1
    return level.values[np.clip(at, 0, level.values.size - 1)]


def _merged(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The distinct values of two sorted arrays, sorted (a stable sort of two runs is a
    merge; ``np.union1d`` sorts from scratch)."""
    both = np.sort(np.concatenate([x, y]).astype(np.int64), kind="stable")
    keep = np.ones(both.size, dtype=bool)
    keep[1:] = both[1:] != both[:-1]
    return both[keep]


def on_axis(d: DeviceComparison, side: str) -> tuple[Level, Level, Level]:
    """For drawing on ``side``'s time axis (``"a"`` or ``"b"``): that side's allocated
    level, the other side's mapped onto the axis by the alignment, and B - A there."""
    if side == "a":
        this, other = d.a.allocated, d.b.allocated
        mapped = Level(d.alignment.b_to_a(other.t), other.values)
    else:
        this, other = d.b.allocated, d.a.allocated
        mapped = Level(d.alignment.a_to_b(other.t), other.values)
    times = _merged(this.t, mapped.t)
    delta = sample(mapped, times) - sample(this, times)
    if side == "b":
        delta = -delta
    return this, mapped, Level(times, delta.astype(np.int64))


#: The key column of each attribution's rows in the keyed block frames.
KEY_COLUMNS = {"stack": "stack_key", "owner": "owner", "op": "op"}


def diff_rows(d: DeviceComparison) -> pl.DataFrame:
    """Every attributed delta of ``d`` in one frame, largest change first: ``kind``
    (stack, owner, op), ``key``, ``label``, ``at``, ``a_bytes``, ``b_bytes``, ``delta``,
    ``only_in``, ``launches`` (``"0 -> 2"`` where an op's launch count changed)."""
    no_launch = pl.lit(None, pl.String)
    parts = [
        d.by_stack.select(kind=pl.lit("stack"), key="stack_key", label="label", at="at",
                          a_bytes="a_bytes", b_bytes="b_bytes", delta="delta",
                          only_in="only_in", launches=no_launch),
        d.by_owner.filter(pl.col("owner") != NO_OWNER).select(
            kind=pl.lit("owner"), key="owner", label="owner", at="at", a_bytes="a_bytes",
            b_bytes="b_bytes", delta="delta", only_in="only_in", launches=no_launch),
        d.by_op.filter(pl.col("op") != NO_OP).select(
            kind=pl.lit("op"), key="op", label="op", at="at", a_bytes="a_bytes",
            b_bytes="b_bytes", delta="delta", only_in="only_in",
            launches=pl.when(pl.col("a_launches") != pl.col("b_launches")).then(
                pl.format("{} -> {}", "a_launches", "b_launches"))),
    ]
    rows = pl.concat(parts, how="vertical_relaxed")
    return rows.sort(pl.col("delta").abs(), pl.col("launches").is_not_null(), "kind", "at",
                     descending=[True, True, False, False], maintain_order=True)


def blocks_of(d: DeviceComparison, kind: str, key: str, at: str | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Block ids of A and of B under one attribution key (alive at ``at`` if given)."""
    column = KEY_COLUMNS[kind]

    def pick(keyed: pl.DataFrame) -> np.ndarray:
        wanted = pl.col(column) == key
        if at is not None:
            wanted = wanted & pl.col(f"alive_{at}")
        return keyed.filter(wanted)["block_id"].to_numpy()

    return pick(d.keyed_a), pick(d.keyed_b)


@dataclass
class Comparison:
    """Two captures compared, device pair by device pair."""

    a: MemoryTrace
    b: MemoryTrace
    devices: list[DeviceComparison]
    mode: str

    def to_json(self) -> dict[str, Any]:
        return {
            "a": {"path": self.a.meta.path, "source": self.a.meta.source},
            "b": {"path": self.b.meta.path, "source": self.b.meta.source},
            "alignment": self.mode,
            "devices": [d.to_json() for d in self.devices],
        }


def compare(a: MemoryTrace, b: MemoryTrace, mode: str | None = None,
            shift: int = 0) -> Comparison:
    """Compare B against A (deltas are B - A) over every matched device pair."""
    devices = [compare_devices(a, b, da, db, mode, shift) for da, db in device_pairs(a, b)]
    chosen = devices[0].alignment.mode if devices else (mode or "position")
    return Comparison(a, b, devices, chosen)


__all__ = [
    "ALIGNMENTS", "Alignment", "Comparison", "DeviceComparison", "align", "attribute",
    "blocks_level", "blocks_of", "compare", "compare_devices", "counted_blocks", "device_bounds",
    "device_pairs", "diff_rows", "moments", "new_blocks", "on_axis", "op_names", "realign",
    "sample", "stack_keys", "step_peaks", "steps_of",
]
