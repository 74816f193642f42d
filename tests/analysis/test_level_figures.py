"""The summary's time-weighted average of the allocated level, worked out by hand, and the
same when the level is weighed a slice at a time (as it is at millions of events)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from memtui.analysis import summary as summary_module
from memtui.analysis.summary import level_figures
from memtui.analysis.timeline.levels import Level

BLOCKS = pl.DataFrame({"size": [1], "ghost": [False]})


def _average(t, values, unit="ns") -> int | None:
    level = Level(np.array(t, dtype=np.int64), np.array(values, dtype=np.int64))
    return level_figures(level, BLOCKS, unit)["average_allocated_bytes"]


def test_the_average_weighs_each_value_by_the_time_to_the_next():
    # 10 B for 1 ns, 40 B for 3 ns, then 0 B at the end: (10 + 120) / 4
    assert _average([0, 1, 4], [10, 40, 0]) == round(130 / 4)
    assert _average([5], [7]) == 7  # one value: itself
    assert _average([3, 3, 3], [1, 2, 6]) == 3  # no time passes: the plain mean
    assert _average([0, 1, 4], [10, 40, 0], unit="event") == round(50 / 3)


@pytest.mark.parametrize("at_once", [1, 2, 3, 7, 1 << 20])
def test_slices_give_the_whole_sum(monkeypatch, at_once):
    monkeypatch.setattr(summary_module, "_WEIGHED_AT_ONCE", at_once)
    rng = np.random.default_rng(at_once)
    t = np.cumsum(rng.integers(0, 1_000_000, 50)) + 10**18  # nanosecond clocks
    values = rng.integers(0, 2**40, 50)
    expected = float((values[:-1] * np.diff(t).astype(np.float64)).sum()) / (t[-1] - t[0])
    assert _average(t, values) == pytest.approx(round(expected), abs=1)
    assert _average(t[:2], values[:2]) == values[0]
