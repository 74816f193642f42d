"""Pairing open and close events on the same address into lifetimes, vectorised.

Used by sources whose events carry an address but no allocation id (PyTorch snapshots,
msprof GE rows): within one address, events in order form *lifetimes*: each open event
(``alloc``, ``segment_alloc``) starts one, and the close events after it (``free``...) up
to the next open belong to it.  Closes before the first open of an address form one more
lifetime: it began before the trace did (a ghost).

In the rows' stable order by address the rows of one lifetime are contiguous, so a
lifetime is a *run* of rows: runs start at each new address and at each open.  Everything
is then numpy over runs (first close of a run, count of closes) and gathers; no hashing,
no Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

_FROM_OPEN = {"open_action": "action", "seq_alloc": "seq", "t_alloc": "t", "size": "size",
              "stack_id": "stack_id", "stream": "stream"}
_FROM_CLOSE = {"seq_free": "seq", "t_free": "t", "free_size": "size",
               "free_stack_id": "stack_id", "free_stream": "stream"}


def pair_by_address(
    ops: pl.DataFrame,
    open_actions: Sequence[str],
    close_actions: Sequence[str],
    request_actions: Sequence[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group ``ops`` (one device, in ``seq`` order) into lifetimes.

    ``ops`` needs ``addr, seq, t, action, size, stack_id, stream``.  Returns
    ``(lifetimes, ops)``.  One lifetime per run, keyed by ``lifetime``, with ``addr``;
    ``open_action, seq_alloc, t_alloc, size, stack_id, stream`` from its open event (null
    for a ghost); ``seq_free, t_free, free_size, free_stack_id, free_stream`` from its first
    close (null while alive); ``t_free_requested``, ``seq_free_requested`` from its first
    request; ``extra_closes``
    (closes after the first: a broken trace).  Lifetimes come in (addr, seq) order.
    ``ops`` comes back in its own order with its ``lifetime`` column, for joining ids back.

    Only the row order by address is sorted (not the rows): the runs are found on the
    sorted addresses and their rows gathered from ``ops`` where it lies.
    """
    order = _by_address(ops["addr"])
    action = ops["action"]
    is_open = action.is_in(list(open_actions)).to_numpy()[order]
    is_close = action.is_in(list(close_actions)).to_numpy()[order]
    is_request = action.is_in(list(request_actions)).to_numpy()[order]
    addr = ops["addr"].to_numpy()[order]
    new_address = np.ones(len(addr), dtype=bool)
    new_address[1:] = addr[1:] != addr[:-1]
    run_starts = np.flatnonzero(new_address | is_open)
    run = np.cumsum(new_address | is_open) - 1
    n_runs = len(run_starts)

    columns: dict[str, pl.Series] = {
        "lifetime": pl.Series(np.arange(n_runs, dtype=np.int64)),
        "addr": pl.Series(addr[run_starts], dtype=pl.UInt64),
    }
    opens = np.where(is_open[run_starts], run_starts, -1)
    columns |= _gather(ops, _unsorted(opens, order), _FROM_OPEN)
    columns |= _gather(ops, _unsorted(_first_row_per_run(is_close, run, n_runs), order),
                       _FROM_CLOSE)
    columns |= _gather(ops, _unsorted(_first_row_per_run(is_request, run, n_runs), order),
                       {"t_free_requested": "t", "seq_free_requested": "seq"})
    closes = np.bincount(run[is_close], minlength=n_runs)
    columns["extra_closes"] = pl.Series(np.maximum(closes - 1, 0).astype(np.int64))
    lifetimes = pl.DataFrame(columns).with_columns(pl.col("open_action").cast(pl.String))
    lifetime = np.empty(len(run), dtype=np.int64)
    lifetime[order] = run
    return lifetimes, ops.with_columns(lifetime=pl.Series(lifetime))


def _by_address(addr: pl.Series) -> np.ndarray:
    """Row order by address, stable (seq order kept within an address); null addresses
    first (each one a lifetime of its own)."""
    if addr.null_count() == 0:
        return np.argsort(addr.to_numpy(), kind="stable")
    return addr.to_frame().select(pl.arg_sort_by(addr.name, maintain_order=True)
                                  ).to_series().to_numpy().astype(np.int64)


def _unsorted(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rows of the address-sorted order (or -1) as rows of ``ops`` (or -1)."""
    return np.where(rows >= 0, order[np.maximum(rows, 0)] if order.size else 0, -1)


def _first_row_per_run(mask: np.ndarray, run: np.ndarray, n_runs: int) -> np.ndarray:
    """For each run, the index of its first row where ``mask`` holds, or -1."""
    rows = np.flatnonzero(mask)
    first = np.full(n_runs, -1, dtype=np.int64)
    # assign in reverse so the earliest row of each run is written last and wins
    first[run[rows][::-1]] = rows[::-1]
    return first


def _gather(ops: pl.DataFrame, rows: np.ndarray, names: dict[str, str]) -> dict[str, pl.Series]:
    """Columns of ``ops`` taken at ``rows`` (null where a row is -1), renamed."""
    if ops.is_empty():
        return {dst: pl.Series(dst, [], dtype=ops.schema[src]) for dst, src in names.items()}
    index = pl.Series(np.where(rows >= 0, rows, 0))
    valid = pl.Series(rows >= 0)
    taken = ops.select(
        pl.when(valid).then(pl.col(src).gather(index)).alias(dst) for dst, src in names.items()
    )
    return {dst: taken[dst] for dst in names}
