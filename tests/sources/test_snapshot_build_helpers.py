"""The snapshot builder's gathers that stand where joins and sorts were: worked out by hand.

The whole models are held to their old selves by the readers' tests and the real captures'
tests; here each helper meets the cases a whole capture rarely has (gaps in ``seq``, a
``seq`` no event holds, blocks outside every segment, traced blocks out of alloc order).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from memtui.sources.torch_snapshot.build import (
    _gather_rows,
    _in_alloc_order,
    _rows_of_seq,
    _with_block_pools,
)


def test_rows_of_seq_finds_rows_and_says_minus_one_elsewhere():
    seq = pl.Series([0, 1, 4, 7], dtype=pl.Int64)  # a gap: unknown actions were dropped
    wanted = pl.Series([4, None, 7, 2, 9, 0], dtype=pl.Int64)
    assert _rows_of_seq(seq, wanted).tolist() == [2, -1, 3, -1, -1, 0]
    assert _rows_of_seq(seq.clear(), wanted).tolist() == [-1] * 6


def test_gather_rows_is_null_where_there_is_no_row():
    column = pl.Series("pool", ["a", None, "c"])
    assert _gather_rows(column, np.array([2, -1, 0, 1])).to_list() == ["c", None, "a", None]
    assert _gather_rows(column.clear(), np.array([-1, -1])).to_list() == [None, None]


def test_block_pools_from_events_then_holding_segments():
    events = pl.DataFrame({"seq": [0, 1, 2, 3], "event_pool_id": ["1,0", None, "2,5", None]})
    blocks = pl.DataFrame({
        "addr": pl.Series([100, 250, 900, 120], dtype=pl.UInt64),
        "seq_alloc": pl.Series([0, 1, None, None], dtype=pl.Int64),
        "seq_free": pl.Series([3, None, 2, None], dtype=pl.Int64),
    })
    segments = pl.DataFrame({
        "addr": pl.Series([200, 100], dtype=pl.UInt64), "size": [100, 50],
        "pool_id": ["7,7", "8,8"]})
    found = _with_block_pools(blocks, events, segments)["pool_id"].to_list()
    # its alloc's pool; no pool on its alloc, so the segment at 200..300 holding it; its
    # free's (no alloc); none of its own and 120 lies in the segment at 100..150
    assert found == ["1,0", "7,7", "2,5", "8,8"]


def _blocks(addr, seq_alloc, t_alloc):
    return pl.DataFrame({"addr": pl.Series(addr, dtype=pl.UInt64),
                         "seq_alloc": pl.Series(seq_alloc, dtype=pl.Int64),
                         "t_alloc": pl.Series(t_alloc, dtype=pl.Int64)})


def test_alloc_order_puts_traced_ghosts_by_address_then_the_dumps_then_the_rest():
    traced = _blocks([50, 30, 40, 10], [None, 3, None, 8], [0, 5, 0, 9])
    dumped = _blocks([99, 1], [None, None], [0, 0])
    expected = [40, 50, 99, 1, 30, 10]  # ghosts 40, 50; the dump's 99, 1; then allocs
    assert _in_alloc_order(traced, dumped)["addr"].to_list() == expected
    # traced blocks out of alloc order take the full sort and end the same way
    shuffled = traced[[3, 0, 1, 2]]
    assert _in_alloc_order(shuffled, dumped)["addr"].to_list() == expected
