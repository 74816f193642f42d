"""The time-axis call flame (analysis.call_flame) on a tiny hand-made python trace."""

from __future__ import annotations

import polars as pl

from memtui.analysis.stacks.call_flame import NONE, CallFlame, threads
from memtui.model import DeviceInfo, MemoryTrace, TraceMeta, conform

# thread 7: main [0, 100) > step [10, 60) > fwd [10, 30), bwd [30, 60) > tiny [40, 41);
# main > save [70, 90).  thread 8: one call.
CALLS = [
    ("7", 0, 100, 0, "main"), ("7", 10, 60, 1, "step"), ("7", 70, 90, 1, "save"),
    ("7", 10, 30, 2, "fwd"), ("7", 30, 60, 2, "bwd"), ("7", 40, 41, 3, "tiny"),
    ("8", 5, 6, 0, "other"),
]


def _trace() -> MemoryTrace:
    calls = pl.DataFrame(CALLS, schema=["thread", "t_start", "t_end", "depth", "name"],
                         orient="row").with_columns(device=pl.lit("npu:0"))
    meta = TraceMeta(source="test", path="test", devices=[DeviceInfo(name="npu:0")])
    return MemoryTrace(meta=meta, calls=conform(calls, "calls"))


def test_threads_busiest_first():
    assert threads(_trace(), "npu:0") == ["7", "8"]


def test_rasterise_ten_columns():
    flame = CallFlame(_trace(), "7", "npu:0")
    assert flame.max_depth == 4
    grid = flame.rasterise(0, 100, width=10, first_depth=0, rows=5)  # 10 ns a column
    names = [[flame.label(c) if c != NONE else "." for c in row] for row in grid.tolist()]
    assert names[0] == ["main"] * 10
    assert names[1] == [".", "step", "step", "step", "step", "step", ".", "save", "save", "."]
    assert names[2] == [".", "fwd", "fwd", "bwd", "bwd", "bwd", ".", ".", ".", "."]
    assert names[3] == [".", ".", ".", ".", "tiny", ".", ".", ".", ".", "."]  # 1 ns shows
    assert names[4] == ["."] * 10


def test_stack_at_the_cursor():
    flame = CallFlame(_trace(), "7", "npu:0")
    assert [flame.label(c) for c in flame.stack_at(40)] == ["main", "step", "bwd", "tiny"]
    assert [flame.label(c) for c in flame.stack_at(75)] == ["main", "save"]
    assert flame.stack_at(100) == []
    assert flame.t_range == (0, 100)
