"""Pairing open and close events on the same address into lifetimes, vectorised.

Used by sources whose events carry an address but no allocation id (PyTorch snapshots):
within one (device, address), events in order form *generations*: each open event
(``alloc``, ``segment_alloc``) starts one, and the close events after it (``free``...) up
to the next open belong to it.  Closes before the first open of an address form one more
generation: the lifetime began before the trace did (a ghost).

Every generation gets one integer ``lifetime`` key: the running count of opens for those
started by an open (unique across addresses), and a negative number per address for the
ghost generation, so pairing is a sort, two cumulative sums and single-key joins.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def pair_by_address(
    ops: pl.DataFrame,
    open_actions: Sequence[str],
    close_actions: Sequence[str],
    request_actions: Sequence[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group ``ops`` into lifetimes.

    ``ops`` needs ``device, addr, seq, t, action, size, stack_id, stream``, in ``seq``
    order, all of one device (pairing is per device).  Returns
    ``(lifetimes, ops)``.  One lifetime per generation, keyed by ``lifetime``, with
    ``device, addr``; ``open_action, seq_alloc, t_alloc, size, stack_id, stream`` from its
    open event (null for a ghost); ``seq_free, t_free, free_size, free_stack_id,
    free_stream`` from its first close (null while alive); ``t_free_requested`` from its
    first request; ``extra_closes`` (closes after the first: a broken trace).  ``ops`` comes
    back sorted by (addr, seq) with its ``lifetime`` column, for joining ids back.
    """
    action = pl.col("action").cast(pl.String)
    is_open = action.is_in(list(open_actions))
    ops = ops.sort("addr", maintain_order=True).with_columns(  # stable: seq order kept
        _open=is_open,
        _first=(pl.col("addr") != pl.col("addr").shift(1)).fill_null(True),
    ).with_columns(
        _opens=pl.col("_open").cum_sum(),
        _group=pl.col("_first").cum_sum(),
    ).with_columns(
        # opens seen in this address group so far: 0 before its first open (a ghost)
        _local=pl.col("_opens") - pl.when(pl.col("_first"))
        .then(pl.col("_opens") - pl.col("_open").cast(pl.UInt32))
        .forward_fill(),
    ).with_columns(
        lifetime=pl.when(pl.col("_local") > 0)
        .then(pl.col("_opens").cast(pl.Int64))
        .otherwise(-pl.col("_group").cast(pl.Int64))
    ).drop("_open", "_first", "_opens", "_group", "_local")

    def first_of(actions: Sequence[str], **columns: str) -> pl.DataFrame:
        rows = ops.filter(action.is_in(list(actions)))
        return rows.filter(pl.col("lifetime").is_first_distinct()).select(
            "lifetime", *(pl.col(src).alias(dst) for dst, src in columns.items())
        )

    keys = ops.filter(pl.col("lifetime").is_first_distinct()).select("lifetime", "addr")
    opens = first_of(open_actions, open_action="action", seq_alloc="seq", t_alloc="t",
                     size="size", stack_id="stack_id", stream="stream")
    closes = first_of(close_actions, seq_free="seq", t_free="t", free_size="size",
                      free_stack_id="stack_id", free_stream="stream")
    requests = first_of(request_actions, t_free_requested="t")
    extra = ops.filter(action.is_in(list(close_actions))).group_by("lifetime").agg(
        extra_closes=pl.len().cast(pl.Int64) - 1
    )
    lifetimes = (
        keys.join(opens, on="lifetime", how="left")
        .join(closes, on="lifetime", how="left")
        .join(requests, on="lifetime", how="left")
        .join(extra, on="lifetime", how="left")
        .with_columns(pl.col("extra_closes").fill_null(0),
                      pl.col("open_action").cast(pl.String))
    )
    return lifetimes, ops
