"""The Pool on msMemScope captures: HAL blocks are the segments PTA blocks lie in.

Hand-worked DB (times are ns after T0, addresses relative to 0x10000 / 0x20000):

    1050 MALLOC HOST_PINNED aid 7  0x90000  256  never freed: in no segment (an orphan)
    1100 MALLOC HAL  aid 1  S = 0x10000  4096  never freed
    1200 MALLOC PTA  aid 2  S+0      1024  freed 1600
    1300 MALLOC PTA  aid 3  S+2048   1024  never freed
    1400 MALLOC PTA  aid 4  S+3072    512  freed 1800
    1500 MALLOC HAL  aid 5  T = 0x20000  2048  freed 1900
    1550 MALLOC PTA  aid 6  T+1024    512  freed 1700

At 1450: one segment S (4096); blocks 2, 3, 4 in it: allocated 2560, gaps [1024, 2048)
and [3584, 4096): free 1536, largest 1024, fragmentation 1 - 1024/1536 = 1/3.  The HAL
block is the segment, not a block in it; the pinned block is the one orphan (256 bytes,
counted in ``allocated`` as orphans always are).

At 1650: S holds 3 and 4: allocated 1536, gaps [0, 2048) and [3584, 4096): free 2560,
largest 2048, fragmentation 0.2.  T holds 6: allocated 512, gaps [0, 1024) and
[1536, 2048): free 1536, largest 1024, fragmentation 1/3.  In all: reserved 6144,
free 4096, largest 2048, fragmentation 0.5.  At the end only S is alive: 1 segment.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.layout.pool_state import state_at
from memtui.analysis.summary import summary
from memtui.model import validate
from memtui.sources import open_capture
from memtui.sources.memscope.build import FRAMEWORK_POOLS
from tests.helpers.map_pilot import maps_app, open_screen
from tests.helpers.memscope_files import T0, mem, row, write_db

S, T = 0x10000, 0x20000
POOL_ROWS = [
    row(1, "SYSTEM", "START_TRACE", 1000, dev="N/A"),
    mem(2, "MALLOC", "HOST_PINNED", 1050, 7, 0x90000, 256),
    mem(3, "MALLOC", "HAL", 1100, 1, S, 4096),
    mem(4, "MALLOC", "PTA", 1200, 2, S, 1024),
    mem(5, "MALLOC", "PTA", 1300, 3, S + 2048, 1024),
    mem(6, "MALLOC", "PTA", 1400, 4, S + 3072, 512),
    mem(7, "MALLOC", "HAL", 1500, 5, T, 2048),
    mem(8, "MALLOC", "PTA", 1550, 6, T + 1024, 512),
    mem(9, "FREE", "PTA", 1600, 2, S, 1024),
    mem(10, "FREE", "PTA", 1700, 6, T + 1024, 512),
    mem(11, "FREE", "PTA", 1800, 4, S + 3072, 512),
    mem(12, "FREE", "HAL", 1900, 5, T, 2048),
    row(13, "SYSTEM", "STOP_TRACE", 2000, dev="N/A"),
]
REAL = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "msmemscope"
        / "msinsight_mirror__full_db__leaks_dump_2025.dat")


@pytest.fixture
def pool_trace(tmp_path):
    trace = open_capture(write_db(tmp_path / "memscope_dump_20260101000000.db", POOL_ROWS))
    validate(trace)
    return trace


def test_hal_blocks_are_segments(pool_trace):
    segs = pool_trace.segments
    hal = pool_trace.blocks.filter(pl.col("pool") == "HAL").sort("block_id")
    assert segs.columns[-1] == "block_id"  # an extension after the contract columns
    assert segs["block_id"].to_list() == hal["block_id"].to_list()
    assert segs["addr"].to_list() == [S, T]
    assert segs["size"].to_list() == [4096, 2048]
    assert (segs["t_alloc"] - T0).to_list() == [1100, 1500]
    assert [None if t is None else t - T0 for t in segs["t_free"].to_list()] == [None, 1900]
    assert segs["kind"].to_list() == ["driver", "driver"]
    assert segs["stream"].null_count() == 2 and segs["pool_id"].null_count() == 2
    assert segs["ghost"].to_list() == [False, False]
    assert segs["seq_alloc"].null_count() == 0
    info = pool_trace.meta.device("npu:0")
    assert info.has_segments and info.segments_at_end == 1
    assert summary(pool_trace)["devices"][0]["segments"] == 1
    assert pool_trace.blocks.height == 7  # the HAL blocks stay in blocks


def test_pool_at_1450(pool_trace):
    state = state_at(pool_trace, "npu:0", T0 + 1450)
    assert state.seg_addr.tolist() == [S]
    assert state.seg_allocated.tolist() == [2560]
    assert state.seg_blocks.tolist() == [3]
    assert state.gap_addr.tolist() == [S + 1024, S + 3584]
    assert state.gap_size.tolist() == [1024, 512]
    assert (state.free, state.largest_gap) == (1536, 1024)
    assert state.fragmentation.fragmented == 1536  # the segment holds blocks
    assert state.orphans == 1  # the pinned block; the HAL block is no orphan
    assert state.allocated == 2560 + 256


def test_pool_at_1650(pool_trace):
    state = state_at(pool_trace, "npu:0", T0 + 1650)
    assert state.seg_addr.tolist() == [S, T]
    assert state.reserved == 6144
    assert state.seg_allocated.tolist() == [1536, 512]
    assert state.seg_free.tolist() == [2560, 1536]
    assert state.seg_largest_gap.tolist() == [2048, 1024]
    assert state.gap_addr.tolist() == [S, S + 3584, T, T + 1536]
    assert state.gap_size.tolist() == [2048, 512, 1024, 512]
    assert (state.free, state.largest_gap) == (4096, 2048)
    assert (state.fragmentation.fragmented, state.fragmentation.largest_gap) == (4096, 2048)
    assert state.allocated == 2048 + 256


def _framework_in_hal(blocks: pl.DataFrame, t: int) -> int:
    """Bytes of framework-pool blocks alive at ``t`` inside a HAL block alive at ``t``."""
    alive = (pl.col("t_alloc") <= t) & (pl.col("t_free").is_null() | (pl.col("t_free") > t))
    hal = blocks.filter(alive & (pl.col("pool") == "HAL")).select(
        pl.col("addr").cast(pl.Int64).alias("seg"), end=pl.col("addr").cast(pl.Int64)
        + pl.col("size")).sort("seg")
    framework = blocks.filter(alive & pl.col("pool").is_in(FRAMEWORK_POOLS)).select(
        pl.col("addr").cast(pl.Int64), "size").sort("addr")
    placed = framework.join_asof(hal, left_on="addr", right_on="seg", strategy="backward")
    return int(placed.filter(pl.col("addr") < pl.col("end"))["size"].sum())


def test_real_pool_at_peak():
    if not REAL.exists():
        pytest.skip(f"{REAL} absent (../shared/data is not checked out)")
    trace = open_capture(REAL)
    for device in ("npu:0", "npu:1"):
        peak = summary(trace)["devices"]
        t = next(d["peak_time_ns"] for d in peak if d["device"] == device)
        state = state_at(trace, device, t)
        assert state.seg_id.size > 0
        expected = _framework_in_hal(trace.device_blocks(device), t)
        assert expected > 0
        assert state.allocated == expected


async def test_pool_screen_shows_hal_segments(pool_trace):
    app = maps_app(pool_trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=T0 + 1650, block_id=None, segment_id=None)
        await pilot.pause()
        await pilot.press("up")  # to the first segment
        await pilot.pause()
        screen = app.screen
        header = str(screen.query_one("#status-line").render())
        assert "2 segments" in header and "no pool segments" not in header
        # both segments hold blocks: the 4 KiB free is fragmented, 2 KiB the largest gap
        assert "fragmented 4.0 KiB (67% of reserved, largest gap 2.0 KiB)" in header
        detail = str(screen.query_one("#detail").render())
        assert "driver segment, stream -, pool -" in detail
