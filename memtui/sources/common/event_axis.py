"""The one event axis: ``seq`` numbers the events in time order, on every source.

A source whose own order is not time order (msMemScope writes a block's rows when the
block is freed; the Ascend profiler's tables are numbered table by table) sorts its events
by time and then calls :func:`time_ordered_axis`: each event's ``seq`` becomes its place in
that order (0, 1, 2, ... over the frame), its own number moves to a separate column
(``row``), and the ``seq_*`` columns of blocks and segments, which named events by their
own number, are translated to the new one.  Everything is columnar: one gather through a
lookup table (a dense array where the source's numbers are row numbers, else a sorted
search), no join, no Python loop.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: The column a source's own event numbers move to.
RAW_COLUMN = "row"
#: ``seq_*`` columns that name an event, in blocks and segments.
SEQ_COLUMNS = ("seq_alloc", "seq_free", "seq_free_requested")


def time_ordered_axis(events: pl.DataFrame, *others: pl.DataFrame, raw: str = RAW_COLUMN,
                      per_device: bool = False) -> tuple[pl.DataFrame, ...]:
    """``events`` (already in time order) numbered 0.. in frame order, their old ``seq``
    kept as ``raw``; then each frame of ``others`` with its ``seq_*`` columns translated.

    ``per_device``: the old numbers are unique only within a device (one file per rank),
    so a block's numbers are looked up among its own device's events.  An old number below
    every event's (a "before the trace" sentinel such as -1) is kept; one that names no
    event becomes null.
    """
    old = events["seq"].to_numpy().astype(np.int64, copy=False)
    renumbered = events.with_columns(
        pl.col("seq").alias(raw), seq=pl.int_range(0, pl.len(), dtype=pl.Int64))
    devices = (events["device"].drop_nulls().unique().sort().to_list()
               if per_device else [])
    if len(devices) > 1:
        codes = {name: i for i, name in enumerate(devices)}
        low = int(old.min())
        span = int(old.max()) - low + 1

        def keyed(frame: pl.DataFrame, values: pl.Series) -> pl.Series:
            code = frame["device"].replace_strict(codes, default=None, return_dtype=pl.Int64)
            below = values < low  # sentinels stay themselves
            return pl.select(pl.when(below).then(values).otherwise(
                code * span + values)).to_series().alias(values.name)

        translate_key = _translator(keyed(events, events["seq"]).to_numpy())

        def translate(frame: pl.DataFrame, column: str) -> pl.Series:
            return translate_key(keyed(frame, frame[column]))
    else:
        plain = _translator(old)

        def translate(frame: pl.DataFrame, column: str) -> pl.Series:
            return plain(frame[column])
    out = [renumbered]
    for frame in others:
        present = [c for c in SEQ_COLUMNS if c in frame.columns]
        out.append(frame.with_columns(**{c: translate(frame, c) for c in present})
                   if present else frame)
    return tuple(out)


def _translator(old: np.ndarray):
    """old number -> its event's place in ``old`` (a function of a Series)."""
    n = old.size
    low = int(old.min()) if n else 0
    high = int(old.max()) if n else -1
    dense = n and high - low < 4 * n + 1024
    if dense:
        table = np.full(high - low + 1, -1, dtype=np.int32 if n < 2**31 else np.int64)
        table[old - low] = np.arange(n, dtype=table.dtype)
    else:
        order = np.argsort(old, kind="stable")
        ordered = old[order]

    def translate(values: pl.Series) -> pl.Series:
        missing = values.is_null().to_numpy()
        v = values.fill_null(low).to_numpy().astype(np.int64, copy=False)
        inside = (v >= low) & (v <= high)
        found = np.full(v.size, -1, dtype=np.int64)
        if dense:
            found[inside] = table[v[inside] - low]
        elif n:
            at = np.searchsorted(ordered, v[inside])
            at = np.minimum(at, n - 1)
            hit = ordered[at] == v[inside]
            found[np.flatnonzero(inside)[hit]] = order[at[hit]]
        result = np.where(v < low, v, found)
        null = missing | ((v >= low) & (found < 0))
        series = pl.Series(values.name, result, dtype=pl.Int64)
        return series.scatter(np.flatnonzero(null), None) if null.any() else series

    return translate


__all__ = ["RAW_COLUMN", "SEQ_COLUMNS", "time_ordered_axis"]
