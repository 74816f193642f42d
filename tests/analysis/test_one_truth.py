"""One truth on every screen (issue 15): the level, the pool state and the blocks agree.

Each defect of the issue has a tiny snapshot here whose answer is worked out by hand (each
failed before its fix), and every real snapshot of ../shared/data plus the demos is checked:
at every event the level equals the bytes of the blocks alive (allocated + pending free),
at sampled events it equals the Pool state's allocated + pending, and at the first, the
peak and the last event the Pool state equals memory_viz's Allocator State History.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from memtui.analysis.layout.pool_state import state_at_event, state_at_seq
from memtui.analysis.summary import summary
from memtui.analysis.tables import TableModel
from memtui.analysis.timeline.at_time import Timeline, block_positions
from memtui.analysis.timeline.layers import default_layers, has_layers, layer_view, layers_of
from memtui.loading import load_trace
from memtui.model import conform
from memtui.sources import open_capture
from memtui.sources.common.safe_pickle import load_pickle
from tests.conftest import REPO, shared_files
from tests.helpers.hand_snapshot import blocks_trace, reference_replay
from tests.sources.test_torch_snapshot_small import block, entry, segment, write

CAPTURES = shared_files("torch_snapshots", "*.p*") + sorted((REPO / "snapshots").glob("*.pickle"))
SEG = 0x7F00_0000_0000
MiB = 1 << 20


def _blocks(state) -> set[tuple[int, int, bool]]:
    return set(zip(state.blk_addr.tolist(), state.blk_size.tolist(),
                   state.blk_pending.tolist(), strict=True))


def _segments(state) -> set[tuple[int, int]]:
    return set(zip(state.seg_addr.tolist(), state.seg_size.tolist(), strict=True))


# -- defect 1: one size per block -----------------------------------------------------------

def test_a_rounded_block_moves_the_level_by_its_rounded_size(tmp_path):
    """500 bytes requested, a 512-byte block in the dump: the level is 0 before the alloc
    and 512 after it (before the fix: 12 before, 512 after)."""
    data = {"segments": [segment(SEG, [block(SEG, 512, "active_allocated", requested=500),
                                       block(SEG + 512, 1536, "inactive")])],
            "device_traces": [[entry("alloc", SEG, 500, t=1)]]}
    trace = open_capture(write(tmp_path, data))
    assert trace.meta.device("cuda:0").start_allocated == 0
    assert trace.events["allocated"].to_list() == [512]
    row = trace.blocks.row(0, named=True)
    assert (row["size"], row["requested_size"]) == (512, 500)
    assert summary(trace)["devices"][0]["allocated_at_end_bytes"] == 512


def test_a_freed_block_keeps_its_trace_size(tmp_path):
    """A block allocated and freed in the trace is not in the dump: its trace size counts."""
    data = {"segments": [segment(SEG, [block(SEG, 2048, "inactive")])],
            "device_traces": [[entry("alloc", SEG, 500, t=1),
                               entry("free_requested", SEG, 500, t=2),
                               entry("free_completed", SEG, 500, t=3)]]}
    trace = open_capture(write(tmp_path, data))
    assert trace.events["allocated"].to_list() == [500, 500, 0]


# -- defect 2: pending by event order -------------------------------------------------------

def test_a_free_requested_later_in_the_same_microsecond_is_not_pending_yet(tmp_path):
    data = {"segments": [segment(SEG, [block(SEG, 1024, "inactive"),
                                       block(SEG + 1024, 1024, "active_allocated")])],
            "device_traces": [[entry("alloc", SEG, 1024, t=1),
                               entry("alloc", SEG + 1024, 1024, t=5),
                               entry("free_requested", SEG, 1024, t=5),
                               entry("free_completed", SEG, 1024, t=6)]]}
    trace = open_capture(write(tmp_path, data))
    assert _blocks(state_at_seq(trace, "cuda:0", 1)) == {(SEG, 1024, False),
                                                         (SEG + 1024, 1024, False)}
    assert (SEG, 1024, True) in _blocks(state_at_seq(trace, "cuda:0", 2))


# -- defect 8: blocks the dump lacks --------------------------------------------------------

def test_blocks_the_dump_lacks_count_alive_to_the_end(tmp_path):
    """No segment in the dump, two allocs never freed: levels 1, 3 MiB, never negative."""
    data = {"segments": [], "device_traces": [[entry("alloc", SEG, MiB, t=1),
                                               entry("alloc", SEG + MiB, 2 * MiB, t=2)]]}
    trace = open_capture(write(tmp_path, data))
    assert trace.events["allocated"].to_list() == [MiB, 3 * MiB]
    device = summary(trace)["devices"][0]
    assert device["peak_allocated_bytes"] == 3 * MiB
    assert device["allocated_at_end_bytes"] == 3 * MiB
    assert any("disagree" in w for w in trace.meta.warnings)


# -- defect 7: no peak time without a peak --------------------------------------------------

def test_no_peak_time_for_a_zero_peak(tmp_path):
    data = {"segments": [], "device_traces": [[entry("snapshot", 0, 0, t=1)]]}
    device = summary(open_capture(write(tmp_path, data)))["devices"][0]
    assert (device["peak_allocated_bytes"], device["peak_time_ns"]) == (0, None)


# -- defect 9: expandable segments by containment -------------------------------------------

def test_segment_map_inside_a_dumped_segment_belongs_to_it(tmp_path):
    """The dump: one expandable segment of 1000 bytes in pool (1, 2); the trace maps its
    first 500.  After the last event the pool holds the dump's 1000 bytes; before the map,
    only the 500 the trace did not map (they existed before it began)."""
    dumped = segment(SEG, [block(SEG, 1000, "inactive")], expandable=True, pool=(1, 2))
    data = {"segments": [dumped],
            "device_traces": [[entry("segment_map", SEG, 500, t=1),
                               entry("snapshot", 0, 0, t=2)]]}
    trace = open_capture(write(tmp_path, data))
    end = state_at_seq(trace, "cuda:0", 1)
    assert end.reserved == 1000
    # two mapped ranges in the model, drawn as the one segment the allocator dumps
    assert set(trace.segments.select("addr", "size").rows()) == {(SEG, 500), (SEG + 500, 500)}
    assert _segments(end) == {(SEG, 1000)}
    assert end.segment_of_id(int(trace.segments["segment_id"][0])) == 0
    assert end.segment_of_id(int(trace.segments["segment_id"][1])) == 0
    assert state_at_seq(trace, "cuda:0", -1).reserved == 500
    assert set(trace.segments["pool_id"].to_list()) == {"1,2"}
    assert set(trace.segments["kind"].to_list()) == {"expandable"}
    assert trace.events["reserved"].to_list() == [1000, 1000]


def _segments(state) -> set[tuple[int, int]]:
    return set(zip(state.seg_addr.tolist(), state.seg_size.tolist(), strict=True))


# -- defect 10: segment_pool_id on trace events ---------------------------------------------

def test_segment_pool_id_of_a_trace_event_names_the_pool(tmp_path):
    data = {"segments": [], "device_traces": [[
        entry("segment_alloc", SEG, 2 * MiB, t=1, segment_pool_id=(3, 4)),
        entry("segment_free", SEG, 2 * MiB, t=2)]]}
    trace = open_capture(write(tmp_path, data))
    assert trace.segments["pool_id"].to_list() == ["3,4"]


# -- every real capture and the demos -------------------------------------------------------

def _live_bytes_per_event(trace, device) -> np.ndarray:
    """Bytes of the blocks alive (alloc done, free not completed) after each event."""
    blocks = trace.device_blocks(device)
    n = trace.device_events(device).height
    seq = trace.device_events(device)["seq"].to_numpy()
    size = blocks["size"].to_numpy()
    start = blocks["seq_alloc"].fill_null(-1).to_numpy()
    end = blocks["seq_free"].fill_null(1 << 62).to_numpy()
    start = np.where(blocks["ghost"].to_numpy(), -1, start)
    delta = np.zeros(n + 1, dtype=np.int64)
    pos = np.searchsorted(seq, start)
    np.add.at(delta, np.where(start < 0, 0, pos), size)
    closed = end < (1 << 62)
    np.add.at(delta, np.searchsorted(seq, end[closed]), -size[closed])
    return np.cumsum(delta)[:n]


@pytest.mark.skipif(not CAPTURES, reason="no real captures (../shared/data) and no demos")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_level_is_the_pool_state_at_every_event(path):
    trace = open_capture(path)
    for device in trace.meta.device_names:
        events = trace.device_events(device)
        if not events.height:
            continue
        level = events["allocated"].to_numpy()
        assert (level >= 0).all()
        assert np.array_equal(level, _live_bytes_per_event(trace, device))
        timeline = Timeline.build(trace, device)
        table = TableModel.for_blocks(trace.device_blocks(device), timeline.start, "ns",
                                      positions=block_positions(trace, device))
        sizes = table.frame["size"].to_numpy()
        picks = np.unique(np.linspace(0, events.height - 1, 60).astype(int))
        for k in picks.tolist():
            state = state_at_event(trace, device, k)
            trend = timeline.levels_at_event(k).allocated
            alive = int(sizes[table.alive_at_event(k)].sum())
            assert trend == state.allocated + state.pending == alive == level[k], k


@pytest.mark.skipif(not CAPTURES, reason="no real captures (../shared/data) and no demos")
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_first_peak_last_match_memory_viz(path):
    trace = open_capture(path)
    raw = load_pickle(path)
    if isinstance(raw, list):
        raw = {"segments": raw, "device_traces": []}
    for device in trace.meta.device_names:
        events = trace.device_events(device)
        if not events.height:
            continue
        number = int(device.split(":")[1])
        peak = int(np.argmax(events["allocated"].to_numpy()))
        for k in (0, peak, events.height - 1):
            state = state_at_seq(trace, device, k)
            segments, blocks = reference_replay(raw, number, k)
            assert _segments(state) == segments
            assert _blocks(state) == blocks


# -- defect 6: a profiler operator table alone ----------------------------------------------

def test_blocks_alone_make_the_curve_the_axis_and_the_range():
    """No events, no curves: the level comes from the blocks' lifetimes.  A ghost of 7
    bytes, 100 bytes over [10, 30), 50 bytes from 20 on: 7, 107, 157, 57."""
    trace = blocks_trace([
        {"block_id": 0, "addr": None, "size": 7, "t_alloc": None, "t_free": None,
         "ghost": True},
        {"block_id": 1, "addr": None, "size": 100, "t_alloc": 10, "t_free": 30,
         "ghost": False},
        {"block_id": 2, "addr": None, "size": 50, "t_alloc": 20, "t_free": None,
         "ghost": False}], events_t=[])
    timeline = Timeline.build(trace, "cuda:0")
    assert timeline.allocated.values.tolist() == [7, 107, 157, 57]
    assert (timeline.start, timeline.end, timeline.peak, timeline.peak_t) == (10, 30, 157, 20)
    assert timeline.times.tolist() == [10, 20, 30]
    assert timeline.levels_at_event(timeline.event_at(25)).allocated == 157
    assert summary(trace)["devices"][0]["allocated_at_end_bytes"] == 57


PROFILER = shared_files("profiler", "*operator_memory.csv")


@pytest.mark.skipif(not PROFILER, reason="../shared/data/profiler is absent")
@pytest.mark.parametrize("path", PROFILER, ids=lambda p: p.name)
def test_an_operator_table_alone_has_a_curve(path, tmp_path):
    alone = tmp_path / path.name  # (beside its memory_record.csv it opens with it)
    alone.write_bytes(path.read_bytes())
    trace = open_capture(alone)
    for device in trace.meta.device_names:
        if trace.device_blocks(device).is_empty():
            continue
        timeline = Timeline.build(trace, device)
        assert timeline.peak > 0 and timeline.end > timeline.start


# -- every msMemScope capture, per layer, and every profiler capture -------------------------

LAYERED = shared_files("msmemscope", "*") + shared_files("profiler", "*.csv") \
    + shared_files("profiler", "*.db")


@pytest.mark.skipif(not LAYERED, reason="../shared/data is absent")
@pytest.mark.parametrize("path", LAYERED, ids=lambda p: p.name)
def test_every_layer_agrees_on_every_screen(path):
    """Each device in each of its memory layers: the Trend's level, the Pool state's
    allocated + pending and the Tables' blocks alive at the cursor are the same bytes."""
    full = load_trace(path)
    views = [full]
    if has_layers(full):
        views = []
        for device in full.meta.device_names:
            for layer in layers_of(full, device):
                views.append(layer_view(full, {**default_layers(full), device: layer}))
    for trace in views:
        for device in trace.meta.device_names:
            timeline = Timeline.build(trace, device)
            if timeline.allocated.values.size <= 1 and trace.device_blocks(device).is_empty():
                continue
            if not trace.curves.filter(pl.col("device") == device).is_empty():
                continue  # profiler curves are sampled figures, not sums of blocks
            table = TableModel.for_blocks(trace.device_blocks(device), timeline.start, "ns",
                                          positions=block_positions(trace, device))
            sizes = table.frame["size"].fill_null(0).to_numpy()
            picks = np.unique(np.linspace(0, timeline.positions - 1, 40).astype(int))
            for k in picks.tolist():
                level = timeline.levels_at_event(k).allocated
                state = state_at_event(trace, device, k, timeline.time_of(k))
                alive = int(sizes[table.alive_at_event(k)].sum())
                assert level == state.allocated + state.pending == alive, (device, k)
                assert level >= 0


def test_layers_never_add_up():
    """A HAL allocation holding a PTA block: the PTA layer counts the block, the HAL layer
    the allocation, neither both; the PTA layer's segment is the HAL allocation."""
    trace = blocks_trace([
        {"block_id": 0, "addr": 0x1000, "size": 4096, "t_alloc": 10, "t_free": None,
         "ghost": False, "pool": "HAL", "seq_alloc": 0},
        {"block_id": 1, "addr": 0x1000, "size": 512, "t_alloc": 20, "t_free": None,
         "ghost": False, "pool": "PTA", "seq_alloc": 1}], events_t=[10, 20])
    trace.events = trace.events.with_columns(
        pool=pl.Series(["HAL", "PTA"]), block_id=pl.Series([0, 1]), size=pl.Series([4096, 512]))
    trace.segments = conform(pl.DataFrame({
        "segment_id": [0], "device": ["cuda:0"], "addr": [0x1000], "size": [4096],
        "t_alloc": [10], "kind": ["driver"], "block_id": [0]}), "segments").with_columns(
        block_id=pl.Series([0]))
    trace.meta.source = "msmemscope"
    assert default_layers(trace) == {"cuda:0": "PTA"}
    pta = layer_view(trace)
    assert pta.events["allocated"].to_list() == [512]
    assert state_at_event(pta, "cuda:0", 0).reserved == 4096
    hal = layer_view(trace, {"cuda:0": "HAL"})
    assert hal.events["allocated"].to_list() == [4096]
    assert hal.segments.is_empty()
    assert summary(trace)["devices"][0]["allocated_at_end_bytes"] == 512
