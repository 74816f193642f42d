"""One event axis on every source (model.py "One event axis"): ``seq`` follows time.

On every real capture of ../shared/data and on tiny files whose right answer is worked
out here: events in ``t`` order, ``seq`` rising along each device's events, every block's
``seq_alloc``/``seq_free`` the ``seq`` of its own events (so its positions bracket its
life), and a source's own row order kept beside the axis, never as it.
"""

from __future__ import annotations

import pickle

import numpy as np
import polars as pl
import pytest

from memtui.analysis.timeline.at_time import block_positions
from memtui.model import ModelError, validate
from memtui.sources import open_capture
from tests.conftest import REPO, shared_files
from tests.helpers.memscope_files import SCENARIO, T0, write_db
from tests.sources.test_ascend_profiler import make_pytorch_db

REAL = (shared_files("msmemscope") + shared_files("profiler")
        + shared_files("torch_snapshots") + sorted((REPO / "tests" / "data").glob("*.pickle")))


def assert_axis(trace) -> None:
    """The invariant, checked directly (not only through validate)."""
    validate(trace)
    for device in trace.meta.device_names:
        events = trace.device_events(device)
        if events.is_empty():
            continue
        t = events["t"].to_numpy()
        seq = events["seq"].to_numpy()
        assert np.all(np.diff(t) >= 0), "positions ordered by t"
        assert np.all(np.diff(seq) > 0), "seq in the order of positions"
        blocks = trace.device_blocks(device)
        at = block_positions(trace, device).join(
            blocks.select("block_id", "t_alloc", "t_free", "seq_alloc", "seq_free"),
            on="block_id")
        traced = at.filter(pl.col("seq_alloc").is_not_null())
        # the alloc's position holds an event at the block's t_alloc, before its free
        pos = traced["pos_alloc"].to_numpy()
        assert np.array_equal(t[pos], traced["t_alloc"].to_numpy())
        assert np.array_equal(seq[pos], traced["seq_alloc"].to_numpy())
        freed = at.filter(pl.col("seq_free").is_not_null())
        pos_free = freed["pos_free"].to_numpy()
        assert np.array_equal(seq[pos_free], freed["seq_free"].to_numpy())
        assert np.array_equal(t[pos_free], freed["t_free"].to_numpy())
        both = at.filter(pl.col("seq_alloc").is_not_null() & pl.col("seq_free").is_not_null())
        assert (both["pos_alloc"] < both["pos_free"]).all()


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_every_real_capture_has_one_time_ordered_axis(path):
    assert_axis(open_capture(path))


def test_memscope_rows_written_at_free_time_get_the_time_order(tmp_path):
    """SCENARIO's memory rows (test_memscope_small.py) in time order are, by hand:
    0 1100 MALLOC HAL aid1 (file row 21), 1 1200 MALLOC aid2 (row 6), 2 1220 ACCESS,
    3 1400 MALLOC aid3 (row 13), 4 1580 ACCESS, 5 1600 FREE aid2 (row 9), 6-8 ACCESS,
    9 2900 FREE aid4 (ghost, row 11), 10 3000 MALLOC aid5 (row 22), 11 3010 ACCESS,
    12 3100 FREE aid3 (row 17)."""
    trace = open_capture(write_db(tmp_path / "memscope_dump_1.db", SCENARIO))
    assert_axis(trace)
    events = trace.events
    assert events["seq"].to_list() == list(range(13))
    assert (events["t"] - T0).to_list() == [1100, 1200, 1220, 1400, 1580, 1600, 2500, 2600,
                                            2700, 2900, 3000, 3010, 3100]
    assert events["row"].to_list() == [21, 6, 7, 13, 8, 9, 14, 15, 16, 11, 22, 23, 17]
    assert events["id"].to_list() == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 24, 13]
    blocks = trace.blocks.with_columns(t=pl.col("t_alloc") - T0).sort("t", "seq_free")
    assert blocks.select("size", "seq_alloc", "seq_free").rows() == [
        (512, None, 9), (4096, 0, None), (1024, 1, 5), (2048, 3, 12), (256, 10, None)]


def test_memscope_rows_of_two_files_share_one_axis(tmp_path):
    """A result folder of two DBs (two processes, on devices 0 and 1, the second 5 ns
    later): one axis across both, by time."""
    folder = tmp_path / "result"
    first = [r for r in SCENARIO if r[7] != "N/A"]
    second = [(*r[:4], r[4] + 5, 200, 200, "1", *r[8:]) for r in first]
    for device, rows in (("0", first), ("1", second)):
        dump = folder / f"device_{device}" / "dump"
        dump.mkdir(parents=True)
        write_db(dump / "memscope_dump_1.db", rows)
    trace = open_capture(folder)
    assert_axis(trace)
    assert trace.events["seq"].to_list() == list(range(trace.events.height))


def test_ascend_tables_numbered_one_by_one_get_one_axis(tmp_path):
    """MEMORY_RECORD rows (t 1000, 1000, 1500, 1500) and NPU_MEM app rows (900, 1900)
    are numbered table by table; on the axis the app row at 900 comes first."""
    trace = open_capture(make_pytorch_db(tmp_path / "ascend_pytorch_profiler_3.db"))
    assert_axis(trace)
    events = trace.events
    assert events["seq"].to_list() == list(range(6))
    assert events["t"].to_list() == [0, 100, 100, 600, 600, 1000]
    assert events["row"].to_list()[0] > events["row"].to_list()[1]  # its own order differs


def test_snapshot_whose_clock_goes_back_keeps_the_allocators_order(tmp_path):
    """Trace entries 0 alloc A (t 1 us), 1 alloc B (3 us), 2-3 free A (2 us): the trace's
    order is the allocator's, so it stays the axis and the late clock reading is held at
    3 us; A lives from seq 0 to its free_completed, seq 3."""
    frames = [{"name": "f", "filename": "/x.py", "line": 1}]
    trace_entries = [
        {"action": "alloc", "addr": 0x1000, "size": 512, "stream": 0, "time_us": 1,
         "frames": frames},
        {"action": "alloc", "addr": 0x1200, "size": 512, "stream": 0, "time_us": 3,
         "frames": frames},
        {"action": "free_requested", "addr": 0x1000, "size": 512, "stream": 0, "time_us": 2},
        {"action": "free_completed", "addr": 0x1000, "size": 512, "stream": 0, "time_us": 2},
    ]
    segments = [{"device": 0, "address": 0x1000, "total_size": 2048, "stream": 0,
                 "segment_type": "small", "allocated_size": 512, "active_size": 512,
                 "blocks": [{"address": 0x1000, "size": 512, "requested_size": 512,
                             "state": "inactive", "frames": []},
                            {"address": 0x1200, "size": 512, "requested_size": 512,
                             "state": "active_allocated", "frames": frames},
                            {"address": 0x1400, "size": 1024, "requested_size": 1024,
                             "state": "inactive", "frames": []}]}]
    path = tmp_path / "back.pickle"
    path.write_bytes(pickle.dumps({"segments": segments, "device_traces": [trace_entries]}))
    trace = open_capture(path)
    assert_axis(trace)
    assert trace.events["t"].to_list() == [1000, 3000, 3000, 3000]
    assert trace.events["seq"].to_list() == [0, 1, 2, 3]
    assert trace.blocks.sort("addr").select("addr", "seq_alloc", "seq_free").rows() == [
        (0x1000, 0, 3), (0x1200, 1, None)]


def test_validate_refuses_an_axis_that_is_not_time_order():
    """A trace whose seq is the writer's row order (not time order) breaks the contract."""
    from tests.helpers.hand_snapshot import blocks_trace

    trace = blocks_trace([{"block_id": 0, "addr": 0, "size": 8, "t_alloc": 1, "t_free": None,
                           "ghost": False}], [1, 2, 3])
    validate(trace)
    backwards = trace.events.with_columns(seq=pl.Series([0, 2, 1]))
    with pytest.raises(ModelError, match="does not rise"):
        validate(type(trace)(meta=trace.meta, events=backwards, blocks=trace.blocks))
    wrong = trace.blocks.with_columns(seq_alloc=pl.lit(7, pl.Int64))
    with pytest.raises(ModelError, match="name no event"):
        validate(type(trace)(meta=trace.meta, events=trace.events, blocks=wrong))


@pytest.mark.parametrize("numbers", [[5, 3, 9], [10**15, 5, 10**12]], ids=["dense", "sparse"])
def test_axis_translates_block_numbers(numbers):
    """Events already in time order carrying their own numbers: seq becomes 0, 1, 2; a
    block's number of an event becomes that event's place; -1 (before the trace) stays;
    a number naming no event becomes null."""
    from memtui.sources.common.event_axis import time_ordered_axis

    events = pl.DataFrame({"t": [1, 2, 3], "seq": numbers, "device": ["d"] * 3})
    blocks = pl.DataFrame({"device": ["d"] * 4,
                           "seq_alloc": [numbers[1], None, -1, 7],
                           "seq_free": [numbers[2], numbers[0], None, None]})
    events, blocks = time_ordered_axis(events, blocks)
    assert events["seq"].to_list() == [0, 1, 2]
    assert events["row"].to_list() == numbers
    assert blocks["seq_alloc"].to_list() == [1, None, -1, None]
    assert blocks["seq_free"].to_list() == [2, 0, None, None]


def test_axis_per_device_numbers_collide():
    """Two ranks' files both number their rows from 0: a block finds its own device's."""
    from memtui.sources.common.event_axis import time_ordered_axis

    events = pl.DataFrame({"t": [1, 2, 3, 4], "seq": [0, 0, 1, 1],
                           "device": ["a", "b", "b", "a"]})
    blocks = pl.DataFrame({"device": ["a", "b"], "seq_alloc": [0, 0], "seq_free": [1, 1]})
    events, blocks = time_ordered_axis(events, blocks, per_device=True)
    assert blocks.rows() == [("a", 0, 3), ("b", 1, 2)]
