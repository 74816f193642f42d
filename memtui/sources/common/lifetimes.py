"""Pairing open and close events on the same address into lifetimes, vectorised.

Used by sources whose events carry an address but no allocation id (PyTorch snapshots,
msprof GE rows): within one address, events in order form *lifetimes*: each open event
(``alloc``, ``segment_alloc``) starts one, and the close events after it (``free``...) up
to the next open belong to it.  Closes before the first open of an address form one more
lifetime: it began before the trace did (a ghost).

Two paths find the lifetimes, with identical results (tests hold them to it):

* the compiled pass (``_pairing.c``, built at install where a compiler was found, unless
  ``MEMTUI_PURE_PYTHON=1``): a hash table from address to its open lifetime, walked once
  in the events' order;
* the numpy reference, everywhere else and for null addresses: in the rows' stable order by
  address the rows of one lifetime are contiguous, so a lifetime is a *run* of rows (runs
  start at each new address and at each open), found with numpy over runs; no hashing, no
  Python loop.

Both number lifetimes in the order of their first event, so the rows gathered for them
(their open, first close and first request) mostly increase: the gathers read the trace
front to back rather than at random.  ``order="address"`` puts the lifetimes in (address,
first event) order instead, for callers that want it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from memtui.sources.common.compiled import pure_python_forced

try:
    from memtui.sources.common import _pairing
except ImportError:  # built without a compiler: the numpy reference only
    _pairing = None

_FROM_OPEN = {"seq_alloc": "seq", "t_alloc": "t", "size": "size", "stack_id": "stack_id",
              "stream": "stream"}
_FROM_CLOSE = {"seq_free": "seq", "t_free": "t", "free_size": "size",
               "free_stack_id": "stack_id", "free_stream": "stream"}

#: Event kinds as the pairing sees them.
_OTHER, _OPEN, _CLOSE, _REQUEST = 0, 1, 2, 3


@dataclass
class Runs:
    """Lifetimes as rows of the events, numbered in the order of their first event:
    ``lifetime`` per event; per lifetime the row of its open, first close and first request
    (-1 where none) and its count of closes."""

    lifetime: np.ndarray
    open_row: np.ndarray
    close_row: np.ndarray
    request_row: np.ndarray
    closes: np.ndarray

    def first_row(self) -> np.ndarray:
        """Each lifetime's first event: the earliest of its open, first close and first
        request, or (a lifetime of other events only) its first event of any kind."""
        none = np.iinfo(np.int64).max
        first = np.full(len(self.open_row), none, dtype=np.int64)
        for rows in (self.open_row, self.close_row, self.request_row):
            np.minimum(first, np.where(rows >= 0, rows, none), out=first)
        missing = np.flatnonzero(first == none)
        if missing.size:
            starts = np.full(len(first), none, dtype=np.int64)
            np.minimum.at(starts, self.lifetime, np.arange(len(self.lifetime)))
            first[missing] = starts[missing]
        return first


def pair_by_address(
    ops: pl.DataFrame,
    open_actions: Sequence[str],
    close_actions: Sequence[str],
    request_actions: Sequence[str] = (),
    *,
    order: Literal["first", "address"] = "address",
    rows: np.ndarray | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Group ``ops`` (one device, in ``seq`` order) into lifetimes.

    ``ops`` needs ``addr, seq, t, action, size, stack_id, stream``.  Returns
    ``(lifetimes, ops)``.  One lifetime per row, keyed by ``lifetime`` (0..n-1 in the
    order of the rows), with ``addr``; ``seq_alloc, t_alloc, size, stack_id, stream``
    from its open event (null for a ghost); ``seq_free, t_free, free_size,
    free_stack_id, free_stream`` from its first close (null while alive);
    ``t_free_requested``, ``seq_free_requested`` from its first request; ``extra_closes``
    (closes after the first: a broken trace).  Lifetimes come in the order of their first
    event (``order="first"``) or in (addr, seq) order (``"address"``, null addresses
    first).  ``ops`` comes back in its own order with its ``lifetime`` column, for joining
    ids back.

    ``rows`` (ascending positions in ``ops``): only those rows take part, as if ``ops`` had
    been filtered to them, without the filtered copy of every column (at millions of
    events the open's peak); the second frame is then ``row`` (those positions) and
    ``lifetime``.
    """
    action, addr = ops["action"], ops["addr"]
    if rows is not None:
        taken = pl.Series(rows, dtype=pl.Int64)
        action, addr = action.gather(taken), addr.gather(taken)
    kind = _kinds(action, open_actions, close_actions, request_actions)
    runs = find_runs(addr, kind)
    if order == "address":
        runs = _by_address_order(runs, addr)
    if rows is not None:
        runs = _rows_of(runs, rows)
    n_runs = len(runs.open_row)
    first = runs.first_row()
    columns: dict[str, pl.Series] = {
        "lifetime": pl.Series(np.arange(n_runs, dtype=np.int64)),
        "addr": _gather(ops, first, {"addr": "addr"})["addr"],
    }
    columns |= _gather(ops, runs.open_row, _FROM_OPEN)
    columns |= _gather(ops, runs.close_row, _FROM_CLOSE)
    columns |= _gather(ops, runs.request_row,
                       {"t_free_requested": "t", "seq_free_requested": "seq"})
    columns["extra_closes"] = pl.Series(np.maximum(runs.closes - 1, 0).astype(np.int64))
    lifetimes = pl.DataFrame(columns)
    if rows is not None:
        return lifetimes, pl.DataFrame({"row": pl.Series(rows, dtype=pl.Int64),
                                        "lifetime": runs.lifetime})
    return lifetimes, ops.with_columns(lifetime=pl.Series(runs.lifetime))


def _rows_of(runs: Runs, rows: np.ndarray) -> Runs:
    """``runs`` found over the rows taken, with their rows as positions in the frame."""
    def mapped(found: np.ndarray) -> np.ndarray:
        if not rows.size:
            return np.full_like(found, -1)
        out = rows.take(found, mode="wrap")  # (-1 wraps: set below; no temporaries)
        out[found < 0] = -1
        return out

    return Runs(runs.lifetime, mapped(runs.open_row), mapped(runs.close_row),
                mapped(runs.request_row), runs.closes)


def _kinds(action: pl.Series, open_actions: Sequence[str], close_actions: Sequence[str],
           request_actions: Sequence[str]) -> np.ndarray:
    """Each event's kind (:data:`_OPEN`, ...) as uint8, in one expression (an open's
    name wins over a close's, a close's over a request's)."""
    kind: pl.Expr | None = None
    for code, names in ((_REQUEST, request_actions), (_CLOSE, close_actions),
                        (_OPEN, open_actions)):
        if names:
            kind = pl.when(pl.col("action").is_in(list(names))).then(
                pl.lit(code, pl.UInt8)).otherwise(kind if kind is not None else _OTHER)
    if kind is None:
        return np.full(len(action), _OTHER, dtype=np.uint8)
    return action.rename("action").to_frame().select(kind.cast(pl.UInt8)).to_series(
        ).to_numpy()


def compiled_pairing() -> bool:
    """Whether the compiled pass pairs here (built, and not switched off)."""
    return _pairing is not None and not pure_python_forced()


def find_runs(addr: pl.Series, kind: np.ndarray, *, compiled: bool = True) -> Runs:
    """The lifetimes of events with ``addr`` and ``kind``, numbered in the order of their
    first event: by the compiled pass where it was built (and ``compiled``, and
    ``MEMTUI_PURE_PYTHON`` is not set) and no address is null, else by the numpy
    reference."""
    if compiled and compiled_pairing() and addr.null_count() == 0:
        values = np.ascontiguousarray(addr.cast(pl.UInt64).to_numpy())
        columns = _pairing.pair(values, np.ascontiguousarray(kind))
        return Runs(*(np.frombuffer(column, dtype=np.int64) for column in columns))
    return _numpy_runs(addr, kind)


def _numpy_runs(addr: pl.Series, kind: np.ndarray) -> Runs:
    """The reference: runs of the stable order by address, renumbered by first event."""
    order = _by_address(addr)
    sorted_kind = kind[order]
    is_open = sorted_kind == _OPEN
    # the addresses as integers: with a null among them to_numpy would give float64,
    # where neighbours above 2**53 compare equal (nulls are told apart by ``valid``)
    values = addr.fill_null(0).to_numpy()[order]
    new_address = np.ones(len(values), dtype=bool)
    if addr.null_count():  # each null address a lifetime of its own
        valid = addr.is_not_null().to_numpy()[order]
        new_address[1:] = (values[1:] != values[:-1]) | ~valid[1:] | ~valid[:-1]
    else:
        new_address[1:] = values[1:] != values[:-1]
    starts = new_address | is_open
    run_starts = np.flatnonzero(starts)
    run = np.cumsum(starts) - 1
    n_runs = len(run_starts)
    # renumber the runs (address order) by their first event (rows increase within a run)
    renumber = np.empty(n_runs, dtype=np.int64)
    renumber[np.argsort(order[run_starts], kind="stable")] = np.arange(n_runs)
    lifetime = np.empty(len(run), dtype=np.int64)
    lifetime[order] = renumber[run]

    def per_run(rows: np.ndarray) -> np.ndarray:
        out = np.empty(n_runs, dtype=np.int64)
        out[renumber] = _unsorted(rows, order)
        return out

    open_rows = np.where(is_open[run_starts], run_starts, -1)
    closes = np.empty(n_runs, dtype=np.int64)
    closes[renumber] = np.bincount(run[sorted_kind == _CLOSE], minlength=n_runs)
    return Runs(lifetime, per_run(open_rows),
                per_run(_first_row_per_run(sorted_kind == _CLOSE, run, n_runs)),
                per_run(_first_row_per_run(sorted_kind == _REQUEST, run, n_runs)), closes)


def _by_address_order(runs: Runs, addr: pl.Series) -> Runs:
    """``runs`` renumbered in (address, first event) order, null addresses first."""
    first = runs.first_row()
    keys = addr.gather(pl.Series(first, dtype=pl.Int64)) if len(first) else addr.clear()
    order = keys.to_frame().select(
        pl.arg_sort_by(keys.name, maintain_order=True)).to_series().to_numpy()
    renumber = np.empty(len(order), dtype=np.int64)
    renumber[order] = np.arange(len(order))
    return Runs(renumber[runs.lifetime] if len(order) else runs.lifetime,
                runs.open_row[order], runs.close_row[order], runs.request_row[order],
                runs.closes[order])


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
    # a null index gathers a null: one column written per column taken (a gather, then
    # a when/then over it, wrote two, all columns at once)
    index = pl.Series(rows, dtype=pl.Int64).to_frame("row").select(
        pl.when(pl.col("row") >= 0).then(pl.col("row"))).to_series()
    taken = ops.select(pl.col(src).gather(index).alias(dst) for dst, src in names.items())
    return {dst: taken[dst] for dst in names}
