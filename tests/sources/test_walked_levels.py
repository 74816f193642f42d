"""A snapshot's levels are walked once by its source and held once (issue 34).

The source writes each device's times, allocated and reserved levels into arrays with the
level's start point first (``MemoryTrace.walked_levels``); the events' columns view their
tails, and :func:`memtui.loading.load_trace` hands the arrays to the levels instead of
letting them be copied out of the columns.  These tests hold the arrays to what the
levels would be made of the columns (``allocated_level`` on the source's trace copies
them), on hand-made files whose levels are worked out here and on every real snapshot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memtui.analysis.timeline.levels import allocated_level, reserved_level
from memtui.loading import load_trace
from memtui.model import segment_level, segment_level_from_start
from memtui.sources import open_capture
from tests.conftest import shared_files
from tests.sources.test_torch_snapshot_small import (
    SEG,
    MiB,
    basic_snapshot,
    block,
    entry,
    segment,
    write,
)

REAL = shared_files("torch_snapshots", "*.p*")
SHIPPED = sorted((Path(__file__).parents[1] / "data").glob("*.pickle"))


def _two_devices():
    """basic_snapshot's device 0, and a device 1 whose one block (1 MiB at OTHER) is
    allocated at 150 us and alive at the dump: its levels are 0 then 1 MiB, in a 2 MiB
    segment from before the trace."""
    data = basic_snapshot()
    other = SEG + 64 * MiB
    data["segments"].append(segment(other, [block(other, MiB, "active_allocated"),
                                            block(other + MiB, MiB, "inactive")], device=1))
    data["device_traces"].append([entry("alloc", other, MiB, 150)])
    return data


def _same_as_the_columns(trace):
    """Each device's walked arrays equal the levels made from the events' columns."""
    assert set(trace.walked_levels) == set(trace.meta.device_names)
    for device, (t, allocated, reserved) in trace.walked_levels.items():
        if t.size == 1:  # no events: the levels are the analyses' own (from the blocks)
            continue
        made = allocated_level(trace, device)
        assert np.array_equal(made.t, t) and np.array_equal(made.values, allocated)
        made_reserved = reserved_level(trace, device)
        assert made_reserved is not None and reserved is not None
        assert np.array_equal(made_reserved.t, t)
        assert np.array_equal(made_reserved.values, reserved)
        for array in (t, allocated, reserved):
            assert array.dtype == np.int64


def test_hand_levels_and_the_columns_view_them(tmp_path):
    trace = open_capture(write(tmp_path, basic_snapshot()))
    t, allocated, reserved = trace.walked_levels["cuda:0"]
    # worked out in basic_snapshot's docstring: start 0, then 1, 3, 3, 2 MiB; the start
    # point at the first event's time; the ghost 4 MiB segment throughout
    assert t.tolist() == [100_000, 100_000, 200_000, 300_000, 400_000]
    assert allocated.tolist() == [0, MiB, 3 * MiB, 3 * MiB, 2 * MiB]
    assert reserved.tolist() == [4 * MiB] * 5
    events = trace.events
    for column, array in (("t", t), ("allocated", allocated), ("active", allocated),
                          ("reserved", reserved)):
        assert np.shares_memory(events[column].to_numpy(), array), column
    _same_as_the_columns(trace)


def test_two_devices(tmp_path):
    trace = open_capture(write(tmp_path, _two_devices()))
    t, allocated, reserved = trace.walked_levels["cuda:1"]
    assert t.tolist() == [150_000, 150_000]
    assert allocated.tolist() == [0, MiB]
    assert reserved.tolist() == [2 * MiB, 2 * MiB]
    _same_as_the_columns(trace)


@pytest.mark.parametrize("use_cache", [False, True])
def test_load_trace_hands_the_arrays_to_the_levels(tmp_path, monkeypatch, use_cache):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = write(tmp_path, _two_devices())
    walked = open_capture(path).walked_levels
    trace = load_trace(path, use_cache=use_cache)
    assert trace.walked_levels == {}  # handed over, not carried along
    for device, (t, allocated, reserved) in walked.items():
        level = allocated_level(trace, device)
        assert np.array_equal(level.values, allocated) and np.array_equal(level.t, t)
        assert np.array_equal(reserved_level(trace, device).values, reserved)
    reopened = load_trace(path, use_cache=use_cache)  # from the cache where there is one
    for device in walked:
        assert np.array_equal(allocated_level(reopened, device).values, walked[device][1])


def test_one_device_levels_are_held_once(tmp_path, monkeypatch):
    """The levels of a one-device trace are the arrays its columns view (of several
    devices, the merged events are copies, and the levels are the source's arrays)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    trace = load_trace(write(tmp_path, basic_snapshot()))
    events = trace.device_events("cuda:0")
    level, reserved = allocated_level(trace, "cuda:0"), reserved_level(trace, "cuda:0")
    assert np.shares_memory(level.values, events["allocated"].to_numpy())
    assert np.shares_memory(level.t, events["t"].to_numpy())
    assert reserved is not None and reserved.t is level.t
    assert np.shares_memory(reserved.values, events["reserved"].to_numpy())


def test_segment_level_from_start_worked_example():
    """Events at seqs 10, 20, 30.  Segments: A (100 bytes) from before the trace (no
    seq_alloc), freed at 20; B (10) allocated at 15, between two events (counts from the
    event at 20 on); C (1) allocated at 30 and freed after the last event (at 99).  Before
    the first event: A alone, 100; after 10: 100; after 20: B in, A out, 10; after 30:
    C in, 11."""
    seq = np.array([10, 20, 30])
    segments = pl.DataFrame({"size": [100, 10, 1], "seq_alloc": [None, 15, 30],
                             "seq_free": [20, None, 99]},
                            schema={"size": pl.Int64, "seq_alloc": pl.Int64,
                                    "seq_free": pl.Int64})
    assert segment_level_from_start(seq, segments).tolist() == [100, 100, 10, 11]
    level, start = segment_level(seq, segments)
    assert (level.tolist(), start) == ([100, 10, 11], 100)
    empty = segment_level_from_start(np.zeros(0, dtype=np.int64), segments)
    assert empty.tolist() == [100]


@pytest.mark.skipif(not REAL, reason="../shared/data/torch_snapshots is absent (real "
                    "captures live beside the checkout)")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_snapshots(path):
    _same_as_the_columns(open_capture(path))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_snapshots(path):
    _same_as_the_columns(open_capture(path))
