"""The roles' lean paths (issue 34) against the plain computations they stand for:
positions taken as they are where they line up with the blocks, a role's steps, and the
event positions of block seqs."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.roles.assign import aligned_positions
from memtui.analysis.roles.levels import _NEVER, _steps, _steps_by_position, _steps_by_sort
from memtui.analysis.timeline import at_time
from memtui.analysis.timeline.at_time import _seq_finder


def positions_of_ids(ids: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"block_id": ids, "pos_alloc": [i * 2 for i in ids],
                         "pos_free": [i * 2 + 1 for i in ids]})


def test_positions_made_from_the_blocks_are_taken_as_they_are():
    blocks = pl.DataFrame({"block_id": [0, 1, 2, 3]})
    positions = positions_of_ids([0, 1, 2, 3])
    assert aligned_positions(blocks, positions) is positions


def test_positions_in_another_order_are_joined_row_for_row():
    blocks = pl.DataFrame({"block_id": [3, 1, 0, 2]})
    got = aligned_positions(blocks, positions_of_ids([0, 1, 2, 3]))
    assert got["block_id"].to_list() == [3, 1, 0, 2]
    assert got["pos_alloc"].to_list() == [6, 2, 0, 4]
    missing = aligned_positions(pl.DataFrame({"block_id": [0, 9]}), positions_of_ids([0, 1]))
    assert missing["pos_free"].to_list() == [1, None]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 30), st.integers(0, 40), st.integers(1, 1 << 40)),
                min_size=1, max_size=60))
def test_a_roles_steps_are_the_bytes_alive_after_each_event(blocks):
    """Both ways (a sum per position, a sort of the changes) give the bytes alive after
    every event, and the same points: one per position where a change is."""
    start = np.array([b[0] for b in blocks], dtype=np.int64)
    end = np.array([b[1] if b[1] > b[0] else _NEVER for b in blocks], dtype=np.int64)
    size = np.array([b[2] for b in blocks], dtype=np.int64)
    freed = end != _NEVER
    span = max(int(start.max()), int(end[freed].max(initial=-1))) + 2
    made = [_steps(start, end, size), _steps_by_sort(start, end, size, freed),
            _steps_by_position(start, end, size, freed, span)]
    changes = np.unique(np.concatenate([start, end[freed]]))
    for steps in made:
        assert steps.pos.tolist() == changes.tolist()
        assert steps.pos.dtype == steps.values.dtype == np.int64
        for event in range(-1, 42):
            alive = (start <= event) & (end > event)
            assert int(steps.at(event)) == int(size[alive].sum()), event
    assert made[1].values.tolist() == made[2].values.tolist()


def test_steps_worked_example():
    """Blocks: A 10 bytes from before the first event (-1) to 2; B 5 from 0, never freed;
    C 7 from 2 to 2 (alloc and free at one event: a point, no change).  After -1: 10; 0:
    15; 2: A out, C in and out: 5."""
    start = np.array([-1, 0, 2])
    end = np.array([2, _NEVER, 2])
    size = np.array([10, 5, 7])
    freed = end != _NEVER
    for steps in (_steps_by_sort(start, end, size, freed),
                  _steps_by_position(start, end, size, freed, 4)):
        assert (steps.pos.tolist(), steps.values.tolist()) == ([-1, 0, 2], [10, 15, 5])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 200), min_size=0, max_size=50, unique=True),
       st.lists(st.one_of(st.none(), st.integers(-5, 210)), max_size=50))
def test_seqs_are_found_at_their_events(seqs, wanted):
    """By a binary search, and by a table of seq to position (whatever the span)."""
    seqs = sorted(seqs)
    events = pl.DataFrame({"seq": seqs}, schema={"seq": pl.Int64})
    where = {s: i for i, s in enumerate(seqs)}
    for dense_span in (0, 10**6):
        spans, at_time._DENSE_SPAN = at_time._DENSE_SPAN, dense_span
        try:
            found = _seq_finder(events)(pl.Series(wanted, dtype=pl.Int64))
        finally:
            at_time._DENSE_SPAN = spans
        assert found.tolist() == [where.get(w, -1) if w is not None else -1 for w in wanted]
        assert found.dtype == np.int64 and found.flags.writeable



@settings(max_examples=150, deadline=None)
@given(st.integers(-3, 1 << 40), st.integers(0, 40),
       st.lists(st.one_of(st.none(), st.integers(-5, 50)), max_size=50))
def test_seqs_rising_by_one_are_found_by_their_distance(first, count, offsets):
    """Events whose seq rises by one (a snapshot's device) are found without a search: the
    same positions as the search gives, -1 outside them."""
    seqs = list(range(first, first + count))
    events = pl.DataFrame({"seq": seqs}, schema={"seq": pl.Int64})
    wanted = [None if o is None else first + o for o in offsets]
    found = _seq_finder(events)(pl.Series(wanted, dtype=pl.Int64))
    where = {s: i for i, s in enumerate(seqs)}
    assert found.tolist() == [where.get(w, -1) if w is not None else -1 for w in wanted]
    assert found.dtype == np.int64 and found.flags.writeable
