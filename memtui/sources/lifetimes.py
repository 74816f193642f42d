"""Pairing open and close events on the same address into lifetimes, vectorised.

Used by sources whose events carry an address but no allocation id (PyTorch snapshots):
within one (device, address), events in order form *generations*: each open event
(``alloc``, ``segment_alloc``) starts one, and the close events after it (``free``...) up
to the next open belong to it.  Closes before the first open of an address form
generation 0: the lifetime began before the trace did (a ghost).
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

    ``ops`` needs ``device, addr, seq, t, action, size, stack_id, stream``.  Returns
    ``(lifetimes, ops_with_gen)``: one lifetime per (device, addr, gen) with ``open_action,
    seq_alloc, t_alloc, size, stack_id, stream`` from its open event (null for a ghost), ``seq_free,
    t_free, free_size, free_stack_id, free_stream`` from its first close (null while
    alive), ``t_free_requested`` from its first request event, and ``extra_closes``
    (closes beyond the first: a broken trace); and the input with its ``gen`` column, for
    joining lifetime ids back onto events.
    """
    action = pl.col("action").cast(pl.String)
    is_open = action.is_in(list(open_actions))
    is_close = action.is_in(list(close_actions))
    is_request = action.is_in(list(request_actions))
    ops = ops.sort("device", "addr", "seq").with_columns(
        gen=is_open.cast(pl.Int64).cum_sum().over("device", "addr")
    )
    lifetimes = ops.group_by("device", "addr", "gen", maintain_order=True).agg(
        open_action=action.filter(is_open).first(),
        seq_alloc=pl.col("seq").filter(is_open).first(),
        t_alloc=pl.col("t").filter(is_open).first(),
        size=pl.col("size").filter(is_open).first(),
        stack_id=pl.col("stack_id").filter(is_open).first(),
        stream=pl.col("stream").filter(is_open).first(),
        seq_free=pl.col("seq").filter(is_close).first(),
        t_free=pl.col("t").filter(is_close).first(),
        free_size=pl.col("size").filter(is_close).first(),
        free_stack_id=pl.col("stack_id").filter(is_close).first(),
        free_stream=pl.col("stream").filter(is_close).first(),
        t_free_requested=pl.col("t").filter(is_request).first(),
        extra_closes=(is_close.cast(pl.Int64).sum() - 1).clip(lower_bound=0),
    )
    return lifetimes, ops
