"""The paths that skip a copy or a sort where the frames need none, worked out by hand:
they must still give what the copying path gave where the frames do need it."""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.fragmentation import _rows_to_measure
from memtui.analysis.timeline.live import sorted_by


def test_sorted_by_keeps_a_sorted_frame_and_sorts_the_others():
    ordered = pl.DataFrame({"block_id": [0, 1, 2], "size": [5, 6, 7]})
    assert sorted_by(ordered, "block_id") is ordered  # no sort, no copy
    shuffled = ordered[[2, 0, 1]]
    assert sorted_by(shuffled, "block_id").equals(ordered)


def test_rows_to_measure_skips_rows_without_levels():
    # rows 1 and 3 lack a level: the picks are rows of the frame as given
    events = pl.DataFrame({
        "allocated": [10, None, 50, 70, 20],
        "reserved": [100, 999, 60, None, 100],
    })
    # most unused: row 0 (90), allocated peak: row 2 (50 of the known), last reserved
    # peak: row 4 (100, later than row 0), then the end
    assert _rows_to_measure(events) == [0, 2, 4]
    full = pl.DataFrame({"allocated": [10, 50, 20], "reserved": [100, 60, 100]})
    assert _rows_to_measure(full) == [0, 1, 2]
    empty = pl.DataFrame({"allocated": [None, None], "reserved": [1, 2]},
                         schema={"allocated": pl.Int64, "reserved": pl.Int64})
    assert _rows_to_measure(empty) == [1]


def test_allocations_without_stacks_are_said_by_count():
    from memtui.analysis.findings.capture import find_capture_limits
    from tests.helpers.findings_traces import TraceBuilder

    builder = TraceBuilder()
    builder.segment(0x100000, 1 << 20)
    for _ in range(3):  # three allocs of four have no stack; the free does not count
        builder.free(builder.alloc(None, 256))
    builder.alloc("model", 256)
    found = [f for f in find_capture_limits(builder.build(), "cuda:0")
             if f.detail.get("problem") == "no_stacks"]
    assert len(found) == 1
    assert found[0].detail["without_stack"] == 3 and found[0].detail["allocations"] == 4
    assert found[0].title == "75% of allocations have no call stack"
