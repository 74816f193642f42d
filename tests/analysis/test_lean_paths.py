"""The paths that skip a copy or a sort where the frames need none, worked out by hand:
they must still give what the copying path gave where the frames do need it."""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.fragmentation import reserved_peak_row
from memtui.analysis.timeline.live import sorted_by


def test_sorted_by_keeps_a_sorted_frame_and_sorts_the_others():
    ordered = pl.DataFrame({"block_id": [0, 1, 2], "size": [5, 6, 7]})
    assert sorted_by(ordered, "block_id") is ordered  # no sort, no copy
    shuffled = ordered[[2, 0, 1]]
    assert sorted_by(shuffled, "block_id").equals(ordered)


def _levels(reserved: list, actions: list) -> pl.DataFrame:
    return pl.DataFrame({"reserved": reserved, "action": actions},
                        schema={"reserved": pl.Int64, "action": pl.String})


def test_reserved_peak_row_moves_past_the_segment_event_to_its_alloc():
    """The reserved peak's moment is the alloc that needed the segment (where ``memtui
    whatif`` measures its runs), never the segment event before it; rows without a
    level are skipped; a frame without any has no reserved peak."""
    assert reserved_peak_row(_levels([100, 120, 120, 80],
                                      ["alloc", "segment_alloc", "alloc", "free"])) == 2
    assert reserved_peak_row(_levels([100, 120, 120],
                                      ["alloc", "segment_map", "segment_map"])) == 2
    assert reserved_peak_row(_levels([None, 5, None], ["alloc", "alloc", "free"])) == 1
    assert reserved_peak_row(_levels([120, 100, 120], ["alloc", "free", "alloc"])) == 0
    assert reserved_peak_row(_levels([None, None], ["alloc", "free"])) is None


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
