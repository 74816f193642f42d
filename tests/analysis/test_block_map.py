"""The block-lifetime map's stacking and rasterisation (analysis.block_map).

The picture of a four-block trace is worked out by hand, pixel by pixel; the peak
finder is checked against a brute force; on real files, every column's stack must add up
to the live bytes at the column's time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtui.analysis.layout.block_map import (
    EMPTY,
    KIND_GHOST,
    KIND_NEVER_FREED,
    KIND_NORMAL,
    SUMMARIZED,
    BlockMapData,
    PeakFinder,
    bands_at,
    block_kinds,
    rasterise,
    stack_rank,
)
from memtui.analysis.timeline.levels import Level, allocated_level
from memtui.analysis.timeline.live import device_index
from memtui.sources import open_capture
from tests.helpers.hand_snapshot import SNAPSHOTS, blocks_trace

# G: a ghost of 100 bytes alive throughout; b1 150 bytes over [0, 8); b2 200 over [2, 6);
# b3 50 from 4 to the end.  Events at 0, 2, 4, 6, 8; five columns over [0, 10] show the
# moments 0, 2, 4, 6, 8.  Totals: 250, 450, 500, 300, 150.
ROWS = [
    {"block_id": 0, "addr": 0x100, "size": 100, "t_alloc": 0, "t_free": None, "ghost": True},
    {"block_id": 1, "addr": 0x200, "size": 150, "t_alloc": 0, "t_free": 8, "ghost": False},
    {"block_id": 2, "addr": 0x300, "size": 200, "t_alloc": 2, "t_free": 6, "ghost": False},
    {"block_id": 3, "addr": 0x400, "size": 50, "t_alloc": 4, "t_free": None, "ghost": False},
]
LEVELS = [250, 450, 500, 300, 150]
G, B1, B2, B3 = 0, 1, 2, 3  # rows of the DeviceIndex (block_id order)


@pytest.fixture()
def index():
    trace = blocks_trace(ROWS, [0, 2, 4, 6, 8], LEVELS)
    return trace, device_index(trace, "cuda:0")


def _raster(trace, index, detail):
    peaks = PeakFinder(allocated_level(trace, "cuda:0"))
    return rasterise(BlockMapData(index), peaks, 0, 10, width=5, height=5, detail=detail)


def _column(raster, x):
    """Pixels of column ``x`` bottom-up."""
    return raster.pixels[::-1, x].tolist()


def test_stacking_order_puts_ghosts_first(index):
    _, ix = index
    assert np.argsort(stack_rank(ix)).tolist() == [G, B1, B2, B3]
    assert block_kinds(ix).tolist() == [KIND_GHOST, KIND_NORMAL, KIND_NORMAL, KIND_NEVER_FREED]


def test_every_block_drawn(index):
    trace, ix = index
    raster = _raster(trace, ix, detail=10)
    assert raster.times.tolist() == [0, 2, 4, 6, 8]
    assert raster.totals.tolist() == [250, 450, 500, 300, 150]
    assert raster.ymax == 500  # 10 pixels of 50 bytes: centres at 25, 75, ... 475
    E = EMPTY
    assert _column(raster, 2) == [G, G, B1, B1, B1, B2, B2, B2, B2, B3]
    # at 6, b2 is gone and b3 slid down onto b1
    assert _column(raster, 3) == [G, G, B1, B1, B1, B3, E, E, E, E]
    assert _column(raster, 4) == [G, G, B3, E, E, E, E, E, E, E]
    assert sorted(raster.drawn.tolist()) == [G, B1, B2, B3]


def test_small_blocks_are_summed_on_top(index):
    trace, ix = index
    raster = _raster(trace, ix, detail=2)
    S = SUMMARIZED
    assert sorted(raster.drawn.tolist()) == [B1, B2]
    # b1 [0, 150), b2 [150, 350), then G + b3 summed [350, 500)
    assert _column(raster, 2) == [B1, B1, B1, B2, B2, B2, B2, S, S, S]
    assert raster.candidates == 4
    assert raster.totals.tolist() == [250, 450, 500, 300, 150]


def test_live_bytes_and_largest_in_a_window(index):
    _, ix = index
    data = BlockMapData(ix)
    assert data.live_bytes(np.array([0, 2, 4, 6, 8, 100])).tolist() == [
        250, 450, 500, 300, 150, 150]
    assert data.count_overlapping(6, 7) == 3  # G, b1, b3
    assert data.largest_overlapping(6, 7, 2).tolist() == [B1, G]
    assert data.largest_overlapping(0, 10, 1).tolist() == [B2]


def test_the_maps_own_level(index):
    _, ix = index
    level = BlockMapData(ix).level()
    assert level.t.tolist() == [0, 2, 4, 6, 8]
    assert level.values.tolist() == [250, 450, 500, 300, 150]


def test_the_maps_level_is_allocated_on_the_demo():
    demo = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
    trace = open_capture(demo)
    level = BlockMapData(device_index(trace, "cuda:0")).level()
    allocated = allocated_level(trace, "cuda:0")
    assert level.peak()[0] == allocated.peak()[0]
    at = np.searchsorted(allocated.t, level.t, side="right") - 1
    assert np.array_equal(allocated.values[at], level.values)


def test_hit_testing_and_columns(index):
    trace, ix = index
    raster = _raster(trace, ix, detail=10)
    assert raster.column_of(0) == 0 and raster.column_of(10) == 4
    assert raster.column_of(11) is None
    assert raster.band_at(2, 0) == B3  # top pixel row of column 2
    assert raster.band_at(7, 0) == EMPTY


def test_bands_at_a_time(index):
    _, ix = index
    rows, bottoms = bands_at(ix, stack_rank(ix), 4)
    assert rows.tolist() == [G, B1, B2, B3]
    assert bottoms.tolist() == [0, 100, 250, 450]


def test_fixed_scale(index):
    trace, ix = index
    peaks = PeakFinder(allocated_level(trace, "cuda:0"))
    raster = rasterise(BlockMapData(ix), peaks, 0, 10, 5, 5, 10, ymax=1000)
    # 100 bytes a pixel: G [0, 100) and b1 [100, 250) hold the centres 50 and 150 only
    assert _column(raster, 0)[:4] == [G, B1, EMPTY, EMPTY]


def test_column_shows_its_highest_moment():
    level = Level(t=np.array([0, 0, 1, 2, 3, 10, 11]), values=np.array([5, 6, 9, 7, 1, 2, 3]))
    times = PeakFinder(level).column_times(0, 19, 2)  # columns [0, 10) and [10, 20)
    assert times.tolist() == [1, 11]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=5000), st.data())
def test_peak_finder_matches_argmax(values, data):
    PeakFinder.BUCKET = 16
    try:
        finder = PeakFinder(Level(t=np.arange(len(values)), values=np.array(values)))
        a = data.draw(st.integers(0, len(values) - 1))
        b = data.draw(st.integers(a + 1, len(values)))
        assert finder.argmax(a, b) == a + int(np.argmax(values[a:b]))
    finally:
        PeakFinder.BUCKET = 1024


REAL = [SNAPSHOTS / n for n in ("t26_cs336_kk_ctx512_fullstep.pickle",
                                "t21_select_n_snapshot_1f2f548.pickle")]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_columns_stack_the_live_bytes(path):
    if not path.exists():
        pytest.skip(f"{path} is absent")
    trace = open_capture(path)
    device = trace.meta.device_names[0]
    ix = device_index(trace, device)
    peaks = PeakFinder(allocated_level(trace, device))
    data = BlockMapData(ix)
    raster = rasterise(data, peaks, ix.t_start, ix.t_end, 60, 12, detail=50)
    for x, t in enumerate(raster.times.tolist()):
        assert raster.totals[x] == ix.size[ix.blocks_at(t)].sum()
    assert raster.drawn.size == 50
    assert raster.candidates == ix.block_id.size  # the whole trace is in view
    # the drawn blocks: a quarter the largest, the rest the most bytes x time in view
    drawn = set(raster.drawn.tolist())
    by_size = set(data.largest_overlapping(ix.t_start, ix.t_end, 12).tolist())
    assert by_size <= drawn
    begin = np.maximum(ix.t_alloc, ix.t_start).astype(float)
    area = ix.size * (np.minimum(ix.t_free, ix.t_end).astype(float) - begin + 1)
    chosen = np.array(sorted(drawn - by_size))
    others = np.setdiff1d(np.arange(ix.size.size), raster.drawn)
    assert others.size == 0 or area[chosen].min() >= area[others].max()
    assert set(np.unique(raster.pixels)) <= set(raster.drawn.tolist()) | {EMPTY, SUMMARIZED}
    # the tallest column fills the map
    tallest = int(np.argmax(raster.totals))
    assert raster.pixels[0, tallest] != EMPTY


def test_the_drawn_blocks_are_those_that_explain_the_picture():
    """Issue 17: a leak's long-lived small blocks were summed grey while short big ones
    got bands.  Three 100-byte blocks alive throughout (ids 0-2), a 1000-byte spike over
    [5, 6) (id 3), 300 bytes over [5, 7) (id 4).  Detail 2 over [0, 10]: a quarter by
    size (the spike), the rest by bytes x time in view: a long-lived block (100 x 11 =
    1100) beats the 300-byte one (300 x 3 = 900)."""
    rows = [{"block_id": i, "addr": 0x100 * (i + 1), "size": 100, "t_alloc": 0,
             "t_free": None, "ghost": False} for i in range(3)]
    rows += [{"block_id": 3, "addr": 0x1000, "size": 1000, "t_alloc": 5, "t_free": 6,
              "ghost": False},
             {"block_id": 4, "addr": 0x2000, "size": 300, "t_alloc": 5, "t_free": 7,
              "ghost": False}]
    trace = blocks_trace(rows, [0, 5, 6, 7], [300, 1600, 600, 300])
    ix = device_index(trace, "cuda:0")
    data = BlockMapData(ix)
    drawn = data.weightiest_overlapping(0, 10, 2)
    ids = sorted(ix.block_id[drawn].tolist())
    assert ids[-1] == 3 and ids[0] in (0, 1, 2) and 4 not in ids
    assert data.largest_overlapping(0, 10, 2).tolist() != drawn.tolist()  # size alone differs
    # a view of the spike only: every block alive there fits, all drawn
    assert sorted(ix.block_id[data.weightiest_overlapping(5, 6, 8)].tolist()) == [0, 1, 2, 3, 4]
