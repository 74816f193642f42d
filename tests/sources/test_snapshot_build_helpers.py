"""The snapshot builder's helpers that stand where joins, sorts and loops were: worked out by
hand.

The whole models are held to their old selves by the readers' tests and the real captures'
tests; here each helper meets the cases a whole capture rarely has (gaps in ``seq``, a
``seq`` no event holds, blocks outside every segment, traced blocks out of alloc order).
"""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from memtui.sources.torch_snapshot.build import (
    _entry_texts,
    _gather_rows,
    _in_alloc_order,
    _rows_of_seq,
    _with_block_pools,
    annotation_ranges,
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


# -- annotations as ranges ----------------------------------------------------------------


def _note(stage, name, time_us, device=0):
    return {"stage": stage, "name": name, "device": device, "time_us": time_us}


def _in_order(row):
    return (row[0], row[1] is None, row[1] or 0, row[2], row[3])


def _ranges(notes):
    return sorted(annotation_ranges(notes, "cuda:").select("t", "t_end", "device", "name")
                  .iter_rows(), key=_in_order)


def test_nested_and_interleaved_scopes_pair_by_hand():
    notes = [_note("START", "step", 1), _note("START", "fwd", 2), _note("START", "fwd", 3),
             _note("END", "fwd", 4), _note("START", "opt", 5, device=1), _note("END", "fwd", 6),
             _note("END", "step", 7), _note("END", "opt", 8)]
    assert _ranges(notes) == [(1000, 7000, "cuda:0", "step"), (2000, 6000, "cuda:0", "fwd"),
                              (3000, 4000, "cuda:0", "fwd"), (5000, None, "cuda:1", "opt")]


def test_an_end_with_nothing_open_is_ignored_and_a_start_never_closed_stays_open():
    notes = [_note("END", "a", 1), _note("END", "a", 2), _note("START", "a", 3),
             _note("END", "a", 4), _note("END", "a", 5), _note("START", "a", 6),
             _note("START", "a", 7), _note("other", "a", 8)]
    assert _ranges(notes) == [(3000, 4000, "cuda:0", "a"), (6000, None, "cuda:0", "a"),
                              (7000, 8000, "cuda:0", "a")]


def test_a_note_without_a_time_is_left_out_and_defaults_fill_the_rest():
    notes = [_note("START", "a", None), {"stage": "START", "time_us": 2},
             {"stage": "END", "time_us": 3}, _note("START", "b", 4, device=None)]
    assert _ranges(notes) == [(2000, 3000, "cuda:0", ""), (4000, None, "cuda:None", "b")]
    assert annotation_ranges([], "cuda:").height == 0


def _ranges_by_a_stack(notes):
    """The rule the columns follow, one note at a time (the builder's old loop)."""
    open_starts: dict[tuple, list[int]] = {}
    rows = []
    for note in notes:
        key = (f"cuda:{note.get('device', 0)}", note.get("name", ""))
        if note.get("time_us") is None:
            continue
        t = note["time_us"] * 1000
        if note.get("stage") == "START":
            open_starts.setdefault(key, []).append(t)
        elif open_starts.get(key):
            rows.append((open_starts[key].pop(), t, *key))
    rows.extend((t, None, *key) for key, ts in open_starts.items() for t in ts)
    return sorted(rows, key=_in_order)


@pytest.mark.parametrize("seed", range(200))
def test_random_notes_pair_as_a_stack_per_scope_would(seed):
    rnd = random.Random(seed)
    notes = []
    for i in range(rnd.randint(0, 60)):
        note = {"time_us": rnd.choice([i, rnd.randint(0, 30), None])}
        if rnd.random() < 0.95:
            note["stage"] = rnd.choice(["START", "START", "END", "END", "other"])
        if rnd.random() < 0.95:
            note["name"] = rnd.choice("abc")
        if rnd.random() < 0.9:
            note["device"] = rnd.choice([0, 1, None])
        notes.append(note)
    assert _ranges(notes) == _ranges_by_a_stack(notes)


# -- entry texts --------------------------------------------------------------------------


def test_entry_texts_of_one_value_and_of_many():
    def trace(**columns):
        n = len(next(iter(columns.values())))
        return [{key: values[i] for key, values in columns.items()} for i in range(n)]

    none = _entry_texts(trace(compile_context=["N/A"] * 3, user_metadata=[""] * 3))
    assert none == []
    one = _entry_texts(trace(user_metadata=["x" * 2000] * 3,
                             forward_frames=[["a.py:1\n", "b.py:2\n"]] * 3))
    assert [(s.name, s.to_list()) for s in one] == [
        ("user_metadata", ["x" * 1000] * 3), ("forward_frames", ["a.py:1\nb.py:2"] * 3)]
    many = _entry_texts(trace(compile_context=["N/A", "g.py:4", "N/A"],
                              user_metadata=["", "w", 7]))
    assert [(s.name, s.to_list()) for s in many] == [
        ("user_metadata", [None, "w", None]), ("compile_context", [None, "g.py:4", None])]
