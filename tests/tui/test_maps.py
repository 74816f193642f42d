"""The Blocks, Pool and Stacks screens driven with Pilot at 80x24 and 120x40.

They run in MemtuiApp (opened on a MemoryTrace, the screen shown with its key after the
cursor goes to the end: tests/helpers/map_pilot.py), on the hand trace
(tests/helpers/hand_snapshot.py, whose
states are worked out by hand), the demo capture, and every real capture in
../shared/data that a source reads (in the short profile, CI's, one representative capture
of each kind: tests/helpers/run_profile.py; ``MEMTUI_TEST_PROFILE=long`` for all).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from textual import events

from memtui.analysis.layout.block_map import bands_at
from memtui.analysis.timeline.live import device_index
from memtui.errors import CaptureError
from memtui.model import conform
from memtui.sources import open_capture
from tests.helpers.hand_snapshot import DATA, us, write_hand_snapshot
from tests.helpers.map_pilot import maps_app, open_screen, screen_text
from tests.helpers.run_profile import real_captures, sizes

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    return open_capture(write_hand_snapshot(tmp_path_factory.mktemp("tui") / "hand.pickle"))


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def block_id_at(trace, address: int) -> int:
    blocks = trace.blocks.filter(pl.col("addr") == address).sort("t_alloc")
    return int(blocks["block_id"][-1])


# -- Blocks --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_blocks_map_fills_the_screen_and_follows_the_cursor(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "blocks")
        screen = app.screen
        raster = screen.map.raster
        assert raster.width == size[0] - 7
        assert raster.drawn.size == 1024
        assert "detail 1,024/10,122" in str(screen.query_one("#status-line").render())
        # on opening, the block of the event under the cursor (the last one) is selected
        events = demo.events.sort("t")
        assert app.cursor.block_id == events["block_id"][-1]
        # moving the cursor onto an event selects its block
        row = events.filter(pl.col("action") == "alloc").row(500, named=True)
        app.move_cursor(t=row["t"])
        await pilot.pause()
        assert app.cursor.block_id == row["block_id"]
        assert screen.map.selected_row == screen.index.row_of_block(row["block_id"])
        # one block, one name (issue 23): the block id the Tables' ID column shows
        detail = str(screen.query_one("#detail").render())
        assert detail.startswith(f"block {row['block_id']} at {row['addr']:#x}")
        assert screen.book.block_name(screen.map.selected_row) not in detail


async def test_blocks_up_down_walk_the_stack_at_the_cursor(demo):
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        screen = app.screen
        rows, _ = bands_at(screen.index, screen.data.rank, app.cursor.t)
        at = list(rows).index(screen.index.row_of_block(app.cursor.block_id))
        await pilot.press("down")
        assert app.cursor.block_id == screen.index.block_id[rows[at - 1]]
        await pilot.press("k", "k")
        assert app.cursor.block_id == screen.index.block_id[rows[min(at + 1, rows.size - 1)]]


async def test_blocks_detail_keys(demo):
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        await pilot.press("plus")
        assert app.screen.map.raster.drawn.size == 2048
        await pilot.press("minus", "minus")
        assert app.screen.map.raster.drawn.size == 512


async def test_clicking_a_band_selects_its_block_and_moves_the_cursor(demo):
    app = maps_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "blocks")
        screen = app.screen
        raster = screen.map.raster
        x, y = 30, screen.map.size.height - 2  # low in the map: a big long-lived block
        band = raster.band_at(x, 2 * y)
        assert band >= 0
        await pilot.click("#block-map", offset=(x + 7, y))
        await pilot.pause()
        assert app.cursor.t == int(raster.times[x])
        assert app.cursor.block_id == int(screen.index.block_id[band])


async def test_wheel_zooms_the_view(demo):
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        t0, t1 = app.cursor.view
        block_map = app.screen.map
        block_map.post_message(events.MouseScrollUp(block_map, 40, 3, 0, -1, 0, False, False,
                                                    False))
        await pilot.pause()
        a, b = app.cursor.view
        assert t0 <= a < b <= t1 and (b - a) == pytest.approx((t1 - t0) / 2, rel=0.01)
        assert app.screen.slider.cursor.view == (a, b)


async def test_dragging_the_slider_pans_the_view_and_dragging_the_map_sets_a_window(demo):
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        t0, t1 = app.cursor.view
        quarter = (t1 - t0) // 4
        app.move_cursor(view=(t0, t0 + quarter), t=t0)
        await pilot.pause()
        slider = app.screen.slider
        start = slider.column_of(t0 + quarter // 2)
        await pilot.mouse_down("TrendSlider", offset=(7 + start, 1))
        await pilot.hover("TrendSlider", offset=(7 + start + 20, 1))
        await pilot.mouse_up("TrendSlider", offset=(7 + start + 20, 1))
        await pilot.pause()
        a, b = app.cursor.view
        assert b - a == quarter and a == t0 + slider.column_time(start + 20) - \
            slider.column_time(start)
        # a drag across the map selects a window of the columns it spans
        await pilot.mouse_down("#block-map", offset=(7 + 10, 3))
        await pilot.hover("#block-map", offset=(7 + 30, 3))
        await pilot.mouse_up("#block-map", offset=(7 + 30, 3))
        await pilot.pause()
        w0, w1 = app.cursor.window
        span = (b - a) / app.screen.map.raster.width
        assert (w0, w1) == (int(a + 10 * span), int(a + 31 * span))


# -- address search, both ways -------------------------------------------------------------

async def test_address_search_selects_in_the_block_map_and_the_pool(hand):
    app = maps_app(hand)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        await pilot.press("slash", *"b1400_1", "enter")
        await pilot.pause()
        b4 = block_id_at(hand, 0x1400)
        assert app.cursor.block_id == b4 and app.cursor.t >= us(9)
        await pilot.press("3")
        await pilot.pause()
        pool = app.screen
        assert pool.map.selected_block == pool.index.row_of_block(b4)
        assert pool.state.seg_addr[pool.map.selected_segment] == 0x1000
        # and from the pool back to the blocks: a decimal address inside b1
        await pilot.press("slash", *str(0x1000 + 10), "enter")
        await pilot.pause()
        b1 = block_id_at(hand, 0x1000)
        assert app.cursor.block_id == b1
        await pilot.press("2")
        await pilot.pause()
        assert app.screen.map.selected_row == app.screen.index.row_of_block(b1)


async def test_search_for_nothing_says_so(hand):
    app = maps_app(hand)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        before = app.cursor
        await pilot.press("slash", *"0xdead", "enter")
        await pilot.pause()
        assert app.cursor == before
        assert any("no block or segment" in n.message for n in app._notifications)


# -- Pool ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_pool_shows_the_state_at_the_cursor(hand, size):
    app = maps_app(hand)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=us(6), block_id=None)
        await pilot.pause()
        screen = app.screen
        header = str(screen.query_one("#status-line").render())
        # by hand: A has 2560 free in two gaps, G 512: 3072 free, largest 1536; both hold
        # blocks, so all of it is fragmented: half of the 6 KiB reserved
        assert "free 3.0 KiB in 3 gaps" in header
        assert "fragmented 3.0 KiB (50% of reserved, largest gap 1.5 KiB)" in header
        # the pixels of segment A: b1, free (b2 freed), b3, free
        ids = screen.map.pixel_ids(screen.state, 0, 16)
        assert ids[:4].tolist() == [ids[0]] * 4 and ids[0] >= 4  # b1
        assert ids[4:8].tolist() == [0] * 4  # the gap b2 left
        assert ids[10:].tolist() == [0] * 6  # the free tail


async def test_pool_keys_select_segments_and_blocks(hand):
    app = maps_app(hand)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=us(4), block_id=None, segment_id=None)
        await pilot.pause()
        await pilot.press("up")  # to the first segment
        screen = app.screen
        assert screen.selected_segment == 0 and app.cursor.block_id is None
        await pilot.press("full_stop")
        assert screen.index.addr[screen.index.row_of_block(app.cursor.block_id)] == 0x1000
        await pilot.press("full_stop", "full_stop")
        assert screen.index.addr[screen.index.row_of_block(app.cursor.block_id)] == 0x1800
        await pilot.press("comma")
        assert screen.index.addr[screen.index.row_of_block(app.cursor.block_id)] == 0x1400
        await pilot.press("down")
        assert screen.selected_segment == 1 and app.cursor.block_id is None
        await pilot.press("w")
        assert screen.map.proportional


async def test_pool_oom_is_marked_and_explained(hand):
    app = maps_app(hand)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=us(1))
        await pilot.pause()
        screen = app.screen
        assert "1 OOM" in str(screen.query_one("#status-line").render())
        await pilot.press("o")
        await pilot.pause()
        assert app.cursor.t == us(11)
        banner = screen.query_one("#oom")
        assert banner.has_class("-shown")
        text = str(banner.render())
        assert "OUT OF MEMORY" in text and "fragmentation" in text and "1.5 KiB" in text
        # the largest usable gap (A's tail, 1536 bytes) is green
        assert screen.map.gap_floor == 1536
        assert 3 in screen.map.pixel_ids(screen.state, 0, 16).tolist()


async def test_clicking_the_pool_map_selects_a_block(hand):
    app = maps_app(hand)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=us(4), block_id=None)
        await pilot.pause()
        screen = app.screen
        await pilot.click("#pool-map", offset=(screen.map.label_width() + 1, 1))
        await pilot.pause()
        assert screen.index.addr[screen.index.row_of_block(app.cursor.block_id)] == 0x1000


# -- Stacks --------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_stack_tree_follows_the_cursor_and_modes(hand, size):
    app = maps_app(hand)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "stacks")
        screen = app.screen
        view = screen.tree_view
        assert view.figures.total == 3072  # live at the dump (cursor at the end)
        app.move_cursor(t=us(4))
        await pilot.pause()
        assert view.figures.total == 4096
        await pilot.press("m")
        assert "live at the peak" in str(screen.query_one("#status-line").render())
        assert view.figures.total == 4096
        await pilot.press("m")  # allocated in the window (the whole view here)
        assert view.figures.total == 1024 + 1024 + 512 + 512


async def test_stack_tree_search_open_and_filter(hand):
    app = maps_app(hand)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "stacks")
        screen = app.screen
        view = screen.tree_view
        await pilot.press("slash", *"alloc_b", "enter")
        await pilot.pause()
        assert len(screen.match_list) == 3
        assert view.stack_tree.label(view.selected).startswith("alloc_b1")  # largest first
        await pilot.press("n")
        assert view.stack_tree.label(view.selected).startswith("alloc_b2")
        await pilot.press("up", "up")  # past alloc_b1 to forward
        assert view.stack_tree.label(view.selected).startswith("forward")
        before = len(view.rows)
        await pilot.press("enter")  # close it
        assert len(view.rows) == before - 2


async def test_f_filters_the_block_table_to_a_nodes_blocks(hand):
    app = maps_app(hand)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "stacks")
        await pilot.press("slash", *"alloc_b2", "enter", "f")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.current_mode == "tables"
        model = app.screen.model("blocks")
        shown = model.frame["block_id"].gather(model.rows).to_list()
        assert shown == [block_id_at(hand, 0x1400)]  # b4, live at the end under alloc_b2
        assert "stack alloc_b2" in str(app.screen.query_one("#tables-header").render())
        await pilot.press("F")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert model.rows.size == model.total


async def test_call_flame_of_a_python_trace(hand):
    calls = pl.DataFrame({
        "device": ["cuda:0"] * 3, "thread": ["11", "11", "12"],
        "t_start": [us(1), us(2), us(3)], "t_end": [us(11), us(5), us(4)],
        "depth": [0, 1, 0], "name": ["train_step", "forward", "other"]})
    trace = dataclasses.replace(hand, calls=conform(calls, "calls"))
    app = maps_app(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "stacks")
        app.move_cursor(t=us(3))
        await pilot.press("v")
        await pilot.pause()
        screen = app.screen
        assert screen.has_class("-flame")
        detail = str(screen.query_one("#detail").render())
        assert "train_step > forward" in detail
        grid = screen.flame_view.grid()
        assert {screen.flame.label(c) for c in grid[0].tolist() if c >= 0} == {"train_step"}
        # the window is shaded where no call is drawn
        t0, t1 = app.cursor.view
        app.move_cursor(window=(t0, t0 + (t1 - t0) // 2))
        await pilot.pause()
        a, b = screen.flame_view.window_columns()
        strip = screen.flame_view.render_line(3)  # depth 3: no call
        shaded = [seg for seg in strip if seg.style and seg.style.bgcolor]
        cursor_inside = a <= screen.flame_view.cursor_column() < b  # the cursor's cell
        assert a == 0 and sum(len(seg.text) for seg in shaded) == b - a - cursor_inside
        assert "e: next" in str(screen.query_one("#status-line").render())  # not t (layer)
        await pilot.press("e")
        assert screen.flame.thread == "12"
        await pilot.click("#call-flame", offset=(4 + 10, 0))
        await pilot.pause()
        t0, t1 = app.cursor.view
        assert app.cursor.t == int(t0 + 10.5 * (t1 - t0) / screen.flame_view.plot_width)


# -- one cursor for every screen -----------------------------------------------------------

async def test_moving_the_cursor_anywhere_moves_it_everywhere(demo):
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        t = int(demo.events["t"][15000])
        app.move_cursor(t=t)
        await pilot.pause()
        stacks = app.screen
        index = device_index(demo, "cuda:0")
        assert stacks.tree_view.figures.total == index.size[index.blocks_at(t)].sum()
        await pilot.press("2")
        await pilot.pause()
        assert app.screen.map.cursor.t == t
        await pilot.press("3")
        await pilot.pause()
        assert app.screen.state.t == t


# -- every real capture --------------------------------------------------------------------

REAL = real_captures(p for folder in ("torch_snapshots", "msmemscope", "profiler")
                     if (DATA / folder).is_dir()
                     for p in (DATA / folder).iterdir()
                     if p.suffix in (".pickle", ".pkl", ".db", ".csv", ".dat"))


@pytest.mark.slow
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
async def test_every_real_capture_opens_on_the_three_screens(path):
    try:
        trace = open_capture(path)
    except CaptureError as exc:
        pytest.skip(f"no source reads it yet: {exc}")
    if not trace.meta.device_names:
        pytest.skip("no device in this capture")
    app = maps_app(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        app.move_cursor(t=app.cursor.view[0])
        await pilot.pause()
        for key in ("up", "3", "down", "full_stop", "4", "enter", "m", "2"):
            await pilot.press(key)
            await pilot.pause()
        index = device_index(trace, app.cursor.device)
        if index.block_id.size:
            assert app.screen.map.raster.totals.max() > 0
        assert np.all(app.screen.map.raster.totals >= 0)


async def test_switching_device_rebuilds_the_screens(tmp_path):
    import copy
    import pickle

    from tests.helpers.hand_snapshot import HAND_SEGMENTS, HAND_TRACE
    second = copy.deepcopy(HAND_SEGMENTS[:1])
    second[0]["device"] = 1
    path = tmp_path / "two.pickle"
    path.write_bytes(pickle.dumps({"segments": HAND_SEGMENTS + second,
                                   "device_traces": [HAND_TRACE, []]}, protocol=4))
    trace = open_capture(path)
    app = maps_app(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        assert app.screen.state.seg_id.size == 2
        app.move_cursor(device="cuda:1", block_id=None, segment_id=None)
        await pilot.pause()
        assert app.screen.device == "cuda:1" and app.screen.state.seg_id.size == 1
        await pilot.press("2")
        await pilot.pause()
        assert app.screen.index.device == "cuda:1"
        assert app.screen.map.raster.totals.max() == 2048  # b1 pending, b4, b3: ghosts here


def test_block_details_of_a_block_without_stream_say_dash(tmp_path):
    """msMemScope blocks have no stream: the Slice Detail said ``stream None``."""
    from types import SimpleNamespace

    from memtui.tui.screens.linked import block_details

    trace = open_capture(write_hand_snapshot(tmp_path / "hand.pickle"))
    blocks = trace.frame("blocks")
    blocks = blocks.with_columns(pl.lit(None, dtype=blocks["stream"].dtype).alias("stream"))
    streamless = dataclasses.replace(trace, blocks=blocks)
    device = streamless.meta.device_names[0]
    index = device_index(streamless, device)
    screen = SimpleNamespace(index=index, trace=streamless,
                             book=SimpleNamespace(block_name=lambda row: "b0"))
    cursor = SimpleNamespace(block_id=int(index.blocks["block_id"][0]))
    text = block_details(screen, cursor)
    assert "stream -" in text and "stream None" not in text


async def test_blocks_up_down_walk_the_blocks_alive_at_the_cursors_event():
    """Issue 15: events 1 and 2 allocate at the same t=20; at event 1 the walk meets only
    the blocks alive just after it (0 and 1), never the block of event 2."""
    from memtui.analysis.layout.pool_state import event_seq
    from tests.tui.test_app import shared_time_trace

    trace = shared_time_trace()
    index = device_index(trace, "cuda:0")
    rank = np.arange(3)
    assert bands_at(index, rank, 20)[0].tolist() == [0, 1, 2]  # by time: wrong at event 1
    assert bands_at(index, rank, 20, event_seq(trace, "cuda:0", 1))[0].tolist() == [0, 1]
    app = maps_app(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks")
        app.move_cursor(event=1)
        await pilot.pause()
        seen = set()
        for key in ("j", "j", "j", "k", "k", "k", "j", "j"):
            await pilot.press(key)
            seen.add(app.cursor.block_id)
            assert app.cursor.event == 1
        assert seen == {0, 1}


async def test_a_click_on_a_band_puts_the_cursor_on_an_event_showing_that_block():
    """QA: Blocks' band click moved the cursor by time: on the last event at the clicked
    time, after which the clicked block (freed at that same time) is gone."""
    from memtui.tui.widgets.requests import CursorRequest
    from tests.analysis.test_pool import _brief_block_trace

    app = maps_app(_brief_block_trace())
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "blocks", at_end=False)
        app.screen.map.post_message(CursorRequest(t=20, block_id=1))
        await pilot.pause()
        await pilot.pause()
        assert (app.cursor.event, app.cursor.block_id) == (1, 1)
        assert "alloc 110 B" in str(app.screen.query_one("StatusBar").render())


async def test_the_pool_draws_an_expandable_segment_as_one(tmp_path):
    """QA: the Pool map drew each mapped range of an expandable segment as a segment of
    its own; the allocator (and ``state``) has one segment there."""
    from memtui.loading import load_trace
    from tests.cli.test_state import expandable_in_two_pieces

    path, base = expandable_in_two_pieces(tmp_path)
    trace = load_trace(path)
    second_piece = int(trace.segments.sort("addr")["segment_id"][1])
    app = maps_app(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "pool")
        state = app.screen.state
        assert state.seg_id.size == 1 and int(state.seg_size[0]) == 1000
        assert int(state.seg_free[0]) == 400
        assert "1 segments" in screen_text(app)
        app.move_cursor(segment_id=second_piece)  # the second range names the same one
        await pilot.pause()
        assert app.screen.selected_segment == 0


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_slice_detail_shows_metadata_compile_region_and_forward_frames(tmp_path, size):
    """Issue 17: the Slice Detail of a block shows its alloc entry's user_metadata,
    compile_context and forward frames (torch 2.11 keys)."""
    from memtui.sources import open_capture
    from tests.sources.test_torch_snapshot_small import SEG, compiled_snapshot, write

    trace = open_capture(write(tmp_path, compiled_snapshot()))
    block_a = int(trace.blocks.filter(pl.col("addr") == SEG)["block_id"][0])
    app = maps_app(trace)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "blocks", at_end=False)
        app.move_cursor(event=0, block_id=block_a)
        await pilot.pause()
        detail = str(app.screen.query_one("#detail").render())
        assert 'metadata {"layer": 3}' in detail
        assert "compiled region Torch-Compiled Region: 0/1" in detail
        assert "forward pass forward model.py:10" in detail  # on the first lines
        assert "y = self.lin(x)" in detail
        await pilot.press("3")  # the Pool's Slice Detail: the same lines
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert "compiled region" in str(app.screen.query_one("#detail").render())


async def test_pool_says_the_reserved_bytes_in_no_listed_segment(tmp_path):
    """msMemScope: an 8 KiB HAL allocation holds a 4 KiB PTA block; a 1 KiB PTA block lies
    in no allocation the file lists; the pool says it holds 4 MiB + 8 KiB.  The header
    says the 4 MiB beyond the listed segment are in unlisted segments (``memtui state``'s
    unplaced_bytes), not free: free is the listed segment's 4 KiB."""
    import csv
    import io

    from tests.helpers.memscope_files import COLUMNS, mem, write_text

    total = (4 << 20) + 8192
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows([
        mem(1, "MALLOC", "HAL", 100, 1, 0x10000, 8192, owner=""),
        mem(2, "MALLOC", "PTA", 200, 2, 0x10000, 4096, total=total, used=4096, owner=""),
        mem(3, "MALLOC", "PTA", 300, 3, 0x50000, 1024, total=total, used=5120, owner=""),
    ])
    trace = open_capture(write_text(tmp_path / "memscope_dump_1.csv", out.getvalue()))
    app = maps_app(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "pool")
        app.move_cursor(t=trace.device_events("npu:0")["t"].max(), block_id=None)
        await pilot.pause()
        header = str(app.screen.query_one("#status-line").render())
        assert "free 4.0 KiB" in header
        assert "4.0 MiB in unlisted segments" in header
