"""Memory layers of msMemScope captures: one layer per device, never two added up.

An msMemScope capture records several layers of the same memory, as MindStudio Insight's
"Type" column names them: the driver's allocations (``HAL``, and ``HOST_PINNED`` on the
host) and the framework caching allocators that carve their blocks out of them (``PTA``,
``PTA_WORKSPACE``, ``ATB``, ``MINDSPORE``).  Adding the layers counts the same bytes twice.
So every figure, curve, table and map shows one layer per device, chosen by the user
(``t`` in the UI), by default the framework pool, else the driver.

:func:`layer_view` is the capture as one layer shows it: the layer's blocks and events,
its levels recomputed from them (allocated from the blocks, one size per block, starting
from its ghosts; reserved the pool's reported ``total`` for a framework layer, unknown for
the driver layer, whose allocations are themselves the reservation), and as segments,
for a framework layer, the driver allocations its blocks live in (the Pool screen shows
them as the containers of the pool).  Everything else (stacks, markers, calls) is shared.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from memtui.model import DeviceInfo, MemoryTrace, conform, segment_level
from memtui.units import counted, format_bytes

FRAMEWORK_LAYERS = ("PTA", "PTA_WORKSPACE", "ATB", "MINDSPORE")
DRIVER_LAYERS = ("HAL", "HOST_PINNED")
LAYERED_SOURCES = ("msmemscope",)


def has_layers(trace: MemoryTrace) -> bool:
    """Whether ``trace`` comes from a source whose figures are per layer."""
    return trace.meta.source in LAYERED_SOURCES


def layers_of(trace: MemoryTrace, device: str) -> list[str]:
    """The layers ``device`` has blocks in: framework pools first, then the driver's."""
    return _ordered(list(_block_counts(trace, device)))


def _ordered(pools: list[str]) -> list[str]:
    order = list(FRAMEWORK_LAYERS) + list(DRIVER_LAYERS)
    known = [p for p in order if p in pools]
    return known + sorted(set(pools) - set(order))


def _block_counts(trace: MemoryTrace, device: str) -> dict[str, int]:
    """How many blocks ``device`` has in each pool (one pass over the blocks)."""
    counts = trace.device_blocks(device).group_by("pool").len().drop_nulls("pool")
    return dict(counts.iter_rows())


def default_layers(trace: MemoryTrace) -> dict[str, str]:
    """Per device: the framework pool (the one with the most blocks), else the driver."""
    chosen = {}
    for device in trace.meta.device_names:
        counts = _block_counts(trace, device)
        layers = _ordered(list(counts))
        if not layers:
            continue
        framework = [p for p in layers if p in FRAMEWORK_LAYERS]
        if framework:
            chosen[device] = max(framework, key=lambda p: (counts[p], -framework.index(p)))
        else:
            chosen[device] = layers[0]
    return chosen


def layer_view(trace: MemoryTrace, layers: dict[str, str] | None = None) -> MemoryTrace:
    """``trace`` as the chosen layer of each device shows it (see the module docstring);
    devices without a choice are kept whole.  ``meta.extra["layers"]`` records the choice."""
    layers = default_layers(trace) if layers is None else layers
    blocks = _in_layer(trace.blocks, layers).drop("layer")
    events = _in_layer(trace.events, layers)
    segments, contained = _containers(trace.segments, blocks, layers)
    outside = blocks.filter(pl.col("device").is_in(list(contained))
                            & ~pl.col("block_id").is_in(sorted(
                                {b for ids in contained.values() for b in ids})))
    events = _with_levels(events, blocks, trace.curves, segments, outside)
    curves = trace.curves.filter(~pl.col("device").is_in(list(layers)))
    devices = [_device_info(info, layers.get(info.name), events, blocks, segments)
               for info in trace.meta.devices]
    warnings = list(trace.meta.warnings)
    for info in devices:
        layer = layers.get(info.name)
        if layer in FRAMEWORK_LAYERS:
            _bound_reserved(trace, info, layer, events)
            if info.reserved_floor:
                warnings.append(f"{Path(trace.meta.path).name} {info.name} {layer}: "
                                f"{info.reserved_floor}")
    events = events.drop("reported")
    meta = replace(trace.meta, devices=devices, warnings=warnings,
                   extra={**trace.meta.extra, "layers": dict(layers)})
    return replace(trace, meta=meta, events=conform(events, "events"),
                   blocks=conform(blocks, "blocks"), segments=conform(segments, "segments"),
                   curves=conform(curves, "curves"))


def _in_layer(rows: pl.DataFrame, layers: dict[str, str]) -> pl.DataFrame:
    """The rows (events or blocks) of each device's chosen layer, every row of a device
    without a choice, with the device's ``layer`` (null: none chosen).  No copy of the
    rows where every one is kept (a capture with one layer per device).  Compared device
    by device (a device held as one value is compared once, not per row)."""
    chosen = pl.lit(False)
    keep = pl.lit(True)
    for device, layer in layers.items():
        on_device = (pl.col("device") == device).fill_null(False)
        chosen = chosen | on_device
        keep = keep & (~on_device | (pl.col("pool") == layer).fill_null(False))
    if not rows.select(keep.all()).item():
        rows = _kept_rows(rows, keep)
    # (a kept row of a device with a choice is in the chosen layer: its pool)
    return rows.with_columns(layer=pl.when(chosen).then(pl.col("pool")))


#: Rows of other layers that a view drops by slicing around them (no copy of the rows it
#: keeps) rather than by a filter (a copy of every column).
_FEW_DROPPED = 1024


def _kept_rows(rows: pl.DataFrame, keep: pl.Expr) -> pl.DataFrame:
    """``rows.filter(keep)``; where only a few rows go (a device's other layer: tens of
    driver allocations among millions of the framework's), the runs of rows between them
    as slices of ``rows``, which share its buffers instead of copying every column."""
    dropped = rows.select(pl.arg_where(~keep)).to_series().to_numpy()
    if dropped.size > _FEW_DROPPED:
        return rows.filter(keep)
    starts = np.concatenate([[0], dropped + 1])
    ends = np.concatenate([dropped, [rows.height]])
    parts = [rows.slice(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True) if b > a]
    return pl.concat(parts, rechunk=False) if parts else rows.clear()


def _block_sizes(events: pl.DataFrame, blocks: pl.DataFrame) -> pl.Series:
    """Each event's block's size (0 where null, or where its block is not in ``blocks``),
    by a lookup indexed by ``block_id`` (a join where the ids are not small and
    non-negative)."""
    ids, sizes = blocks["block_id"], blocks["size"].fill_null(0)
    top = ids.max() if ids.len() else None
    if ids.null_count() or (top is not None and (ids.min() < 0 or top > 4 * ids.len() + 1024)):
        return events.select("block_id").join(
            blocks.select("block_id", block_size=sizes), on="block_id", how="left",
            maintain_order="left")["block_size"].fill_null(0)
    lookup = np.zeros((0 if top is None else int(top)) + 2, dtype=np.int64)
    lookup[ids.to_numpy()] = sizes.to_numpy()
    wanted = events["block_id"].cast(pl.Int64)
    index = wanted.fill_null(-1).to_numpy()
    index = np.where((index < 0) | (index >= lookup.size - 1), lookup.size - 1, index)
    return pl.Series("block_size", lookup[index], dtype=pl.Int64)


#: The event columns :func:`_levels` reads, and those it writes.
_LEVEL_INPUTS = ("t", "seq", "device", "action", "block_id", "reserved", "layer")
_LEVEL_OUTPUTS = ("allocated", "reserved", "reported", "active")


def _with_levels(events: pl.DataFrame, blocks: pl.DataFrame, curves: pl.DataFrame,
                 segments: pl.DataFrame, outside: pl.DataFrame) -> pl.DataFrame:
    """:func:`_levels` of ``events``, computed from the columns it reads alone and put
    beside the others in their own chunks: the rows :func:`_kept_rows` sliced are never
    copied (polars makes a frame of unequal chunks one chunk, every column copied, at
    its next expression over several columns)."""
    chunks = events["t"].chunk_lengths() if events.width else []
    if len(chunks) <= 1 or events["t"].null_count() or not events["t"].is_sorted():
        return _levels(events, blocks, curves, segments, outside)  # (may sort the rows)
    levels = _levels(events.select(_LEVEL_INPUTS).rechunk(), blocks, curves, segments,
                     outside)
    return events.drop("layer", *(c for c in _LEVEL_OUTPUTS if c in events.columns)
                       ).with_columns(_chunked_as(levels[c], chunks) for c in _LEVEL_OUTPUTS)


def _chunked_as(column: pl.Series, lengths: list[int]) -> pl.Series:
    """``column`` (one chunk) as chunks of ``lengths``: slices, nothing copied."""
    starts = np.cumsum([0, *lengths[:-1]])
    return pl.concat([column.slice(int(start), int(length))
                      for start, length in zip(starts, lengths, strict=True)], rechunk=False)


def _levels(events: pl.DataFrame, blocks: pl.DataFrame, curves: pl.DataFrame,
            segments: pl.DataFrame, outside: pl.DataFrame) -> pl.DataFrame:
    """allocated (from the layer's blocks, starting from its ghosts) and reserved after
    each of the layer's events: for a framework pool its reported total, but never less
    than what is known to be its own: its live blocks, and the driver allocations holding
    them (``_containers``) plus the blocks no driver allocation holds (``outside``: they
    live in one the capture does not show); ``reported`` keeps the pool's own figure
    (dropped by :func:`layer_view` once :func:`_bound_reserved` has read it)."""
    allocated = _allocated(events, blocks)
    # (outside is some of the blocks: all of them where no driver allocation holds one,
    # as in a capture without the driver's rows; none where every block is held)
    events = events.with_columns(
        allocated=allocated,
        outside=allocated if outside.height == blocks.height
        else pl.lit(0, pl.Int64) if outside.is_empty() else _allocated(events, outside))
    reported = curves.filter(pl.col("series") == "Reserved").select(
        "device", "t", layer=pl.col("component"), pool_total=pl.col("bytes")).sort("t")
    if events.height and reported.height:
        # (events come in time order: no sort, no copy)
        if events["t"].null_count() or not events["t"].is_sorted():
            events = events.sort("t", maintain_order=True)
        events = _join_asof_by(events, reported, on="t", by=["device", "layer"])
    else:
        events = events.with_columns(pool_total=pl.lit(None, pl.Int64))
    framework = pl.col("layer").is_in(list(FRAMEWORK_LAYERS))
    events = events.with_columns(held=_containers_level(events, segments) + pl.col("outside"))
    known = pl.max_horizontal("pool_total", "allocated", "held")
    return events.with_columns(
        reserved=pl.when(pl.col("layer").is_null()).then(pl.col("reserved"))
        .when(framework).then(
            pl.when(pl.col("pool_total").is_null() & (known <= 0)).then(None)
            .otherwise(known)),
        reported=pl.when(framework).then(pl.col("pool_total")),
        active=pl.col("allocated"),
    ).drop("layer", "outside", "pool_total", "held")


def _allocated(events: pl.DataFrame, blocks: pl.DataFrame) -> pl.Series:
    """The bytes of ``blocks`` alive after each event (their ghosts from the start; an
    event of a block not in ``blocks`` moves nothing)."""
    starts = {device: start for device, start in blocks.filter(pl.col("ghost").fill_null(False))
              .group_by("device").agg(start=pl.col("size").sum()).iter_rows()
              if device is not None}  # (as a join: a null device has no start)
    action = pl.col("action")
    sign = pl.when(action == "alloc").then(1).when(action == "free").then(-1).otherwise(0)
    start = pl.col("device").replace_strict(starts, default=0, return_dtype=pl.Int64) \
        if starts else pl.lit(0, pl.Int64)
    running = (sign * pl.col("block_size")).cum_sum()
    return events.with_columns(block_size=_block_sizes(events, blocks)).select(
        start.fill_null(0) + (running.over("device") if _several(events["device"])
                              else running)).to_series()


def _several(column: pl.Series) -> bool:
    """Whether ``column`` holds more than one value (a null is a value): a window over
    one group costs about twice the plain expression."""
    nulls = column.null_count()
    if nulls:
        return nulls != column.len()
    physical = column.to_physical()
    return column.len() > 0 and physical.min() != physical.max()


def _containers_level(events: pl.DataFrame, segments: pl.DataFrame) -> pl.Series:
    """The bytes of the driver allocations holding a framework layer's blocks alive just
    after each of the layer's events (0 on a device without any), by the event axis."""
    out = np.zeros(events.height, dtype=np.int64)
    if segments.is_empty() or events.is_empty():
        return pl.Series("held", out)
    devices = events["device"].to_numpy()
    for device in segments["device"].unique().to_list():
        rows = np.flatnonzero(devices == device)
        if not rows.size:
            continue
        seq = events["seq"].to_numpy()[rows]
        order = np.argsort(seq, kind="stable")
        level, _ = segment_level(seq[order], segments.filter(pl.col("device") == device))
        out[rows[order]] = level
    return pl.Series("held", out)


def _bound_reserved(trace: MemoryTrace, info: DeviceInfo, layer: str,
                    events: pl.DataFrame) -> None:
    """Where the pool's own total is below what it is known to hold, say so on ``info``:
    the reserved figures are then a floor (``reserved_floor``), and the driver layer's
    peak is their ceiling (``reserved_ceiling``): the driver rows do not say which pool
    each allocation serves."""
    mine = events.filter(pl.col("device") == info.name)
    if mine.is_empty() or "reported" not in mine.columns:
        return
    raised = mine.filter(pl.col("reserved").is_not_null() & (
        pl.col("reported").is_null() | (pl.col("reserved") > pl.col("reported"))))
    if raised.is_empty():
        return
    ids = raised["id" if "id" in raised.columns else "row" if "row" in raised.columns
                 else "seq"]
    worst = raised.row(int((raised["reserved"] - raised["reported"].fill_null(0)).arg_max()),
                       named=True)
    ceiling = _driver_peak(trace, info.name)
    info.reserved_ceiling = ceiling
    text = (f"the pool's own total (its reserved) is below the bytes its blocks and the "
            f"driver allocations holding them take at {counted(raised.height, 'row')} of "
            f"{mine.height} (rows {ids.min()} to {ids.max()}; at worst "
            f"{format_bytes(worst['reserved'])} held against a total of "
            f"{format_bytes(worst['reported'])}): reserved is shown as at least what is held")
    if ceiling is not None:
        text += (f"; at most the driver layer's {format_bytes(ceiling)}: its rows do not say "
                 "which pool each allocation serves")
    info.reserved_floor = text


def _driver_peak(trace: MemoryTrace, device: str) -> int | None:
    """The most bytes the device's driver layer (HAL) held at once, from its blocks."""
    hal = trace.device_blocks(device).filter(pl.col("pool").is_in(list(DRIVER_LAYERS)))
    if hal.is_empty():
        return None
    size = hal["size"].fill_null(0).to_numpy()
    start = np.where(hal["ghost"].fill_null(False).to_numpy(), np.iinfo(np.int64).min,
                     hal["t_alloc"].fill_null(np.iinfo(np.int64).min).to_numpy())
    end = hal["t_free"].fill_null(np.iinfo(np.int64).max).to_numpy()
    times = np.concatenate([start, end])
    steps = np.concatenate([size, -size])
    order = np.lexsort((steps, times))  # a free before an alloc at the same time
    return int(np.cumsum(steps[order]).max(initial=0))


def _containers(segments: pl.DataFrame, blocks: pl.DataFrame, layers: dict[str, str]
                ) -> tuple[pl.DataFrame, dict[str, set[int]]]:
    """For a framework layer, the driver allocations holding at least one of its blocks
    while both were alive (an address the driver gave out again later is another
    allocation); none for a driver layer (its allocations are the blocks).  Also, per
    framework device, the ids of the blocks some of them hold."""
    framework = [d for d, layer in layers.items() if layer in FRAMEWORK_LAYERS]
    untouched = segments.filter(~pl.col("device").is_in(list(layers)))
    candidates = segments.filter(pl.col("device").is_in(framework))
    contained: dict[str, set[int]] = {device: set() for device in framework}
    if candidates.is_empty():
        return untouched, contained
    held = []
    for device in candidates["device"].unique().to_list():
        mine = candidates.filter(pl.col("device") == device)
        theirs = blocks.filter((pl.col("device") == device) & pl.col("addr").is_not_null())
        rows, inside = _holding(mine, theirs)
        held.extend(mine["segment_id"].gather(rows).to_list())
        contained[device] = set(theirs["block_id"].filter(pl.Series(inside)).to_list())
    return pl.concat([untouched, candidates.filter(pl.col("segment_id").is_in(held))]), \
        contained


def _holding(segments: pl.DataFrame, blocks: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``segments`` whose address range holds a block of ``blocks`` allocated
    while the segment was alive (by the event axis; ghosts count from the start), and
    per block (in ``blocks``' order) whether one holds it.  One search per segment over
    the blocks sorted by address: segments are driver allocations, few; the blocks in a
    segment's range are one slice."""
    low = np.iinfo(np.int64).min
    order = np.argsort(blocks["addr"].to_numpy(), kind="stable")
    b_addr = blocks["addr"].to_numpy()[order].astype(np.int64)
    b_seq = blocks["seq_alloc"].fill_null(low).to_numpy()[order]
    s_addr = segments["addr"].to_numpy().astype(np.int64)
    s_end = s_addr + segments["size"].fill_null(0).to_numpy()
    s_born = segments["seq_alloc"].fill_null(low).to_numpy()
    s_died = segments["seq_free"].fill_null(np.iinfo(np.int64).max).to_numpy()
    lo = np.searchsorted(b_addr, s_addr, side="left")
    hi = np.searchsorted(b_addr, s_end, side="left")
    inside = np.zeros(b_addr.size, dtype=bool)
    rows = []
    for i in np.flatnonzero(hi > lo).tolist():
        alive = (b_seq[lo[i]:hi[i]] >= s_born[i]) & (b_seq[lo[i]:hi[i]] < s_died[i])
        if alive.any():
            rows.append(i)
            inside[lo[i]:hi[i]] |= alive
    by_block = np.zeros(b_addr.size, dtype=bool)
    by_block[order] = inside
    return np.asarray(rows, dtype=np.int64), by_block


def _join_asof_by(left: pl.DataFrame, right: pl.DataFrame, on: str,
                  by: list[str]) -> pl.DataFrame:
    """``left.join_asof(right, on=on, by=by, strategy="backward")``, both sorted by ``on``;
    where every row of ``left`` has the same ``by`` values (one device, one layer: the
    common capture) the rows of ``right`` with them are joined without ``by``, about four
    times faster on millions of rows."""
    first = left.select(by).row(0) if left.height else None
    match = None if first is None or None in first else pl.all_horizontal(
        [pl.col(k) == value for k, value in zip(by, first, strict=True)])
    if match is not None and left.select(match.fill_null(False).all()).item():
        return left.join_asof(right.filter(match).drop(by), on=on, strategy="backward",
                              check_sortedness=False)
    return left.join_asof(right, on=on, by=by, strategy="backward", check_sortedness=False)


def _device_info(info: DeviceInfo, layer: str | None, events: pl.DataFrame,
                 blocks: pl.DataFrame, segments: pl.DataFrame) -> DeviceInfo:
    if layer is None:
        return info
    mine = blocks.filter(pl.col("device") == info.name)
    start = int(mine.filter(pl.col("ghost").fill_null(False))["size"].sum() or 0)
    alive = int(mine.filter(pl.col("t_free").is_null())["size"].sum() or 0)
    reserved = events.filter(pl.col("device") == info.name)["reserved"].drop_nulls()
    own_segments = segments.filter(pl.col("device") == info.name)
    return replace(
        info, kind=info.kind, start_allocated=start, allocated_at_end=alive,
        start_reserved=None, reserved_at_end=int(reserved[-1]) if reserved.len() else None,
        has_segments=own_segments.height > 0,
        segments_at_end=int(own_segments["t_free"].is_null().sum()) if own_segments.height
        else None)


__all__ = ["DRIVER_LAYERS", "FRAMEWORK_LAYERS", "default_layers", "has_layers",
           "layer_view", "layers_of"]
