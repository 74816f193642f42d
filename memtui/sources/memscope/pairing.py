"""msMemScope memory rows paired into blocks: where each block starts and ends.

msMemScope pairs a block's rows by ``allocation_id`` within a process, or by (process,
device, pointer, pool) where a row has none (../shared/formats/msmemscope.md 2.5).  Walking
the rows of one such key in time order, a block starts at the key's first row, at each
MALLOC and after each FREE: a FREE closes the open block or, with none open, is a block
from before the capture; ACCESS rows belong to the block open at their time (or to the one
the next FREE closes).

:func:`block_runs` takes the rows in time order, each with its key (:func:`row_keys`: the
fields a key is made of, and which of its values are null), and gives each row's block,
numbered in the order of the blocks' first rows, and per block its first and last row and its
ACCESS times.  Two paths with identical results (``tests/sources/test_memscope_pairing.py``):
the compiled pass (``_rows.c``: a hash table from key to its open block, walked once, each
key made from its fields as its row is read; a FREE takes its key out, so the table holds
the blocks alive at a time), and the numpy reference (a stable sort by key: the rows of a
block are then a run), used where the pass is not built or ``MEMTUI_PURE_PYTHON=1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from memtui.sources.common.compiled import pure_python_forced


def usable_pass(module: Any) -> Any:
    """``module`` (the compiled ``_rows``) where its ``runs`` makes the keys from their
    fields, else None: a stale in-place build from before took other arguments."""
    return module if getattr(module, "RUNS_KEYS_BY_FIELD", 0) else None


try:
    from memtui.sources.memscope import _rows
except ImportError:  # built without a compiler: the numpy reference only
    _rows = None
_rows = usable_pass(_rows)

#: Event codes of the pairing.
MALLOC, FREE, ACCESS = 0, 1, 2
EVENT_CODES = {"MALLOC": MALLOC, "FREE": FREE, "ACCESS": ACCESS}
_NO_KEY = np.int64(0)


@dataclass
class Runs:
    """Each row's block, and per block: its first and last row, its first and last ACCESS
    time and the longest time between two of them in a row (0 where it has none), and its
    count of ACCESS rows."""

    block: np.ndarray
    first_row: np.ndarray
    last_row: np.ndarray
    first_access: np.ndarray
    last_access: np.ndarray
    max_gap: np.ndarray
    accesses: np.ndarray


@dataclass
class RowKeys:
    """Each row's key, as its fields: ``family`` (uint8) is 1 where the row has an
    ``allocation_id`` (its key: 1, process, id, 0, 0), else 0 (its key: 0, process, device,
    pointer, pool, the texts as category codes); the values are int64 (0 where null), and
    ``nulls`` a byte a row whose bits say which of the key's values are null."""

    family: np.ndarray
    pid: np.ndarray
    aid: np.ndarray
    device: np.ndarray
    addr: np.ndarray
    pool: np.ndarray
    nulls: np.ndarray

    def matrix(self) -> np.ndarray:
        """The keys as five int64 a row (the numpy reference sorts by them)."""
        has_aid = self.family.astype(bool)
        keys = np.empty((self.family.size, 5), dtype=np.int64, order="F")
        keys[:, 0] = has_aid
        keys[:, 1] = self.pid
        keys[:, 2] = np.where(has_aid, self.aid, self.device)
        keys[:, 3] = np.where(has_aid, _NO_KEY, self.addr)
        keys[:, 4] = np.where(has_aid, _NO_KEY, self.pool)
        return keys


def row_keys(memory: pl.DataFrame) -> RowKeys:
    """Each row's key (:class:`RowKeys`), read from ``memory``'s columns (without a copy
    where they are whole numbers without nulls)."""
    has_aid = memory["aid"].is_not_null().to_numpy()

    def values(series: pl.Series) -> tuple[np.ndarray, np.ndarray]:
        null = series.is_null().to_numpy()
        if series.dtype in (pl.String, pl.Categorical):
            series = series.cast(pl.Categorical).to_physical()
        filled = series.fill_null(0).to_numpy()
        return filled.view(np.int64) if filled.dtype == np.uint64 else filled.astype(
            np.int64, copy=False), null

    pid, pid_null = values(memory["pid"])
    aid, aid_null = values(memory["aid"])
    device, device_null = values(memory["device"])
    addr, addr_null = values(memory["addr"])
    pool, pool_null = values(memory["pool"])
    nulls = (pid_null.astype(np.uint8)
             | (np.where(has_aid, aid_null, device_null).astype(np.uint8) << 1)
             | ((~has_aid & addr_null).astype(np.uint8) << 2)
             | ((~has_aid & pool_null).astype(np.uint8) << 3))
    return RowKeys(has_aid.view(np.uint8), pid, aid, device, addr, pool, nulls)


def block_runs(keys: RowKeys, event: np.ndarray, t: np.ndarray) -> Runs:
    """The blocks of rows in time order (see the module docstring)."""
    event = np.ascontiguousarray(event, dtype=np.uint8)
    t = np.ascontiguousarray(t, dtype=np.int64)
    nulls = np.ascontiguousarray(keys.nulls, dtype=np.uint8)
    if _rows is not None and not pure_python_forced():
        fields = [np.ascontiguousarray(keys.family, dtype=np.uint8),
                  *(np.ascontiguousarray(values, dtype=np.int64) for values in
                    (keys.pid, keys.aid, keys.device, keys.addr, keys.pool))]
        return Runs(*(np.frombuffer(part, dtype=np.int64)
                      for part in _rows.runs(*fields, nulls, event, t)))
    return _runs_by_sorting(keys.matrix(), nulls, event, t)


def _runs_by_sorting(keys: np.ndarray, nulls: np.ndarray, event: np.ndarray,
                     t: np.ndarray) -> Runs:
    """The numpy reference: rows stably sorted by key, a block is a run of them."""
    n = event.size
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Runs(empty, empty, empty, empty, empty, empty, empty)
    columns = [keys[:, i] for i in range(keys.shape[1])] + [nulls.astype(np.int64)]
    order = np.lexsort([np.arange(n), *reversed(columns)])  # by key, then time order
    new_key = np.zeros(n, dtype=bool)
    new_key[0] = True
    for column in columns:
        ordered = column[order]
        new_key[1:] |= ordered[1:] != ordered[:-1]
    ev = event[order]
    boundary = new_key | (ev == MALLOC)
    boundary[1:] |= ev[:-1] == FREE
    starts = np.flatnonzero(boundary)
    ends = np.append(starts[1:], n) - 1
    run_sorted = np.cumsum(boundary) - 1
    # blocks numbered by their first row (in time order)
    first_row = order[starts]
    by_first = np.argsort(first_row, kind="stable")
    number = np.empty(starts.size, dtype=np.int64)
    number[by_first] = np.arange(starts.size)
    block = np.empty(n, dtype=np.int64)
    block[order] = number[run_sorted]
    last_row = np.empty(starts.size, dtype=np.int64)
    last_row[number] = order[ends]
    first = np.empty(starts.size, dtype=np.int64)
    first[number] = first_row
    stats = _access_times(t[order], run_sorted, ev == ACCESS, starts.size)
    return Runs(block, first, last_row, *(s[by_first] for s in stats))


def _access_times(t: np.ndarray, run: np.ndarray, is_access: np.ndarray,
                  blocks: int) -> tuple[np.ndarray, ...]:
    """Per run (rows in run order, each run's rows in time order): first and last ACCESS
    time, the longest gap between two in a row, and how many there are."""
    first = np.zeros(blocks, dtype=np.int64)
    last, longest = first.copy(), first.copy()
    counts = np.bincount(run[is_access], minlength=blocks).astype(np.int64)
    t, run = t[is_access], run[is_access]
    if t.size:
        new = np.ones(t.size, dtype=bool)
        new[1:] = run[1:] != run[:-1]
        begins = np.flatnonzero(new)
        ends = np.append(begins[1:], t.size) - 1
        gaps = np.zeros(t.size, dtype=np.int64)
        gaps[1:] = np.where(new[1:], 0, np.diff(t))
        first[run[begins]] = t[begins]
        last[run[begins]] = t[ends]
        longest[run[begins]] = np.maximum.reduceat(gaps, begins)
    return first, last, longest, counts
