"""The demo captures are what benchmarks/generate.py writes, and show what they promise."""

from __future__ import annotations

import numpy as np
import polars as pl

from benchmarks.generate import write_snapshot
from memtui.analysis.timeline.levels import allocated_level
from memtui.commands.paths import demo_path
from memtui.sources import open_capture
from tests.conftest import REPO


def test_demos_are_reproducible(tmp_path):
    assert write_snapshot(tmp_path / "d.pickle").read_bytes() == demo_path().read_bytes()
    oom = write_snapshot(tmp_path / "o.pickle", 6_000, 1, oom=True)
    assert oom.read_bytes() == (REPO / "snapshots" / "demo_oom.pickle").read_bytes()


def test_demo_has_a_leak_a_peak_and_a_fragmented_pool():
    trace = open_capture(demo_path())
    steps = trace.markers.filter(pl.col("kind") == "annotation").sort("t")
    level = allocated_level(trace, "cuda:0")
    # the level at the end of each step grows by the leaked tensor, step after step
    ends = level.values[np.searchsorted(level.t, steps["t_end"].to_numpy(), side="right") - 1]
    assert (np.diff(ends) > 0).mean() > 0.9
    # a clear peak in the middle of the run
    peak, index = level.peak()
    t_peak = level.t[index]
    assert steps["t"][0] < t_peak < steps["t_end"][-1]
    middle = steps["t"][steps.height // 2]
    assert abs(int(t_peak) - int(middle)) < (steps["t_end"][-1] - steps["t"][0]) / 10
    assert peak > 1.5 * np.median(level.values)
    # fragmented: free space split across many segments, far from all of it in one gap
    alive = trace.segments.filter(pl.col("t_free").is_null())
    assert alive["size"].sum() > 2 * trace.meta.devices[0].allocated_at_end


def test_oom_demo_ends_in_an_oom_larger_than_any_gap():
    trace = open_capture(REPO / "snapshots" / "demo_oom.pickle")
    oom = trace.events.filter(pl.col("action") == "oom")
    assert oom.height == 1 and trace.events["action"][-1] == "oom"
