"""Every byte attributed on every screen (issue 22), and the stack under a click (issue 23
point 10), driven with Pilot in the real app.

At the peak of a profiler folder the rows each screen shows sum to the status bar's level,
the bytes no operator row explains named: the hand folder of
tests/helpers/profiler_folders.py (135 MiB: aten::b 20, aten::a 10, 100 alive before the
capture, 5 in no operator) and the issue's real pt_st_l2 folder (10.0 GiB: 5.8 GiB in 623
blocks, 4.2 GiB alive before the capture).
"""

from __future__ import annotations

import pytest

from memtui.analysis.findings.peak import find_peak
from memtui.analysis.stacks.stack_tree import format_stack
from memtui.analysis.timeline.attribution import BEFORE_CAPTURE, IN_NO_OPERATOR
from memtui.loading import load_trace
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.findings import detail_text
from memtui.tui.screens.trend import live_rows
from memtui.tui.widgets.curve import TrendPlot
from tests.conftest import REPO
from tests.helpers.map_pilot import screen_text
from tests.helpers.profiler_folders import hand_profiler_folder, real_profiler_folder

MiB = 1 << 20


async def _settle(pilot) -> None:
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _level(app) -> int:
    cursor = app.cursor
    timeline = app.timeline(cursor.device)
    return timeline.levels_at_event(timeline.event_of(cursor)).allocated


def _trend_rows(app) -> list[tuple[str, int]]:
    """The live table's rows as drawn (label, bytes)."""
    _, _, _, _, (groups, rest), total, count, _, _ = app.screen._live_shown
    height = app.screen.query_one("#live-table").size.height
    shown = max(height - 1 - len(rest) - 1, 1)
    rows = live_rows(groups.head(shown), total, count, rest)
    return list(zip(rows["where"].to_list(), rows["bytes"].to_list(), strict=True))


async def _every_screen_sums_to_the_level(app, pilot) -> dict[str, str]:
    """At the cursor (the peak): the Trend's rows, the Stacks tree's root, the Pool's and
    the Tables' headers all come to the status bar's level.  The screens' text."""
    level = _level(app)
    texts = {}
    await _settle(pilot)
    rows = _trend_rows(app)
    assert sum(b for _, b in rows) == level
    assert any(label == BEFORE_CAPTURE for label, _ in rows)
    texts["trend"] = screen_text(app)
    await pilot.press("4")
    await _settle(pilot)
    assert app.screen.tree_view.figures.total == level
    texts["stacks"] = screen_text(app)
    await pilot.press("3")
    await _settle(pilot)
    texts["pool"] = screen_text(app)
    await pilot.press("5", "w")
    await _settle(pilot)
    texts["tables"] = screen_text(app)
    await pilot.press("2")
    await _settle(pilot)
    texts["blocks"] = screen_text(app)
    return texts


async def test_hand_profiler_folder_every_screen_sums_at_the_peak(tmp_path):
    app = MemtuiApp(load_trace(hand_profiler_folder(tmp_path), use_cache=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("p")
        await _settle(pilot)
        assert _level(app) == 135 * MiB
        assert _trend_rows(app) == [("aten::b", 20 * MiB), ("aten::a", 10 * MiB),
                                    (BEFORE_CAPTURE, 100 * MiB), (IN_NO_OPERATOR, 5 * MiB)]
        texts = await _every_screen_sums_to_the_level(app, pilot)
        assert "by operator" in texts["trend"]  # profiler captures group by operator
        assert "74" in texts["trend"].split("alive before the capture")[0].splitlines()[-1]
        assert "by owner layer" in texts["stacks"]
        assert "in no operator" in texts["stacks"]
        assert "allocated 135.0 MiB" in texts["pool"]
        assert ("30.0 MiB in blocks + 100.0 MiB alive before the capture, 5.0 MiB in no "
                "operator") in texts["pool"]
        assert ("30.0 MiB in these rows + 100.0 MiB alive before the capture, 5.0 MiB in no "
                "operator = 135.0 MiB") in texts["tables"]
        assert ("+ 100.0 MiB alive before the capture, 5.0 MiB in no operator not drawn"
                in texts["blocks"])


def test_findings_detail_lists_operators_first_on_a_profiler_capture(tmp_path):
    trace = load_trace(hand_profiler_folder(tmp_path), use_cache=False)
    (peak,) = find_peak(trace, "rank0/npu0")
    text = detail_text(peak, None).plain
    assert text.index("by operator:") < text.index("by stack:")
    assert "100.0 MiB  74%      0 blocks  alive before the capture" in text


async def test_real_profiler_folder_every_screen_sums_at_the_peak(tmp_path):
    root = real_profiler_folder(tmp_path)
    if root is None:
        pytest.skip("../shared/data/profiler is absent")
    app = MemtuiApp(load_trace(root, use_cache=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("p")
        await _settle(pilot)
        assert _level(app) == 10782243840  # alloc 10.0 GiB on the status bar
        texts = await _every_screen_sums_to_the_level(app, pilot)
        assert "aten::matmul" in texts["trend"] and "4.2 GiB" in texts["trend"]
        assert "5.8 GiB in blocks + 4.2 GiB alive before the capture" in texts["pool"]
        assert "623 of 3,103 rows" in texts["tables"]
        assert ("5.8 GiB in these rows + 4.2 GiB alive before the capture = 10.0 GiB"
                in texts["tables"])


# -- the stack under a click -----------------------------------------------------------------

async def test_a_click_on_the_trend_shows_the_largest_blocks_stack():
    app = MemtuiApp(load_trace(REPO / "snapshots" / "demo_training.pickle", use_cache=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        plot = app.screen.query_one(TrendPlot)
        column = plot.plot_width // 2
        await pilot.click(plot, offset=(plot.axis_width + column, 2))
        await _settle(pilot)
        cursor = app.cursor
        live = app.live_blocks(cursor.device)
        timeline = app.timeline(cursor.device)
        event = timeline.event_of(cursor)
        alive = live.blocks.filter(live.mask(cursor.t, event))
        largest = alive.sort("size", descending=True).row(0, named=True)
        assert cursor.block_id == largest["block_id"]
        assert app.screen.query_one("#trend-block").has_class("-shown")
        text = screen_text(app)
        assert "Largest block here" in text
        assert format_stack(app.trace, largest["stack_id"], limit=4)[0] in text
        await pilot.press("l")  # the cursor leaves the clicked point: the pane goes
        await _settle(pilot)
        assert not app.screen.query_one("#trend-block").has_class("-shown")


async def test_a_click_on_a_band_shows_its_blocks_stack():
    app = MemtuiApp(load_trace(REPO / "snapshots" / "demo_training.pickle", use_cache=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        app.move_cursor(t=app.timeline(app.cursor.device).end)
        await pilot.press("2")
        await _settle(pilot)
        screen = app.screen
        raster = screen.map.raster
        x, y = 30, screen.map.size.height - 2
        band = raster.band_at(x, 2 * y)
        assert band >= 0
        await pilot.click("#block-map", offset=(x + 7, y))
        await _settle(pilot)
        stack_id = int(screen.index.stack_id[band])
        assert app.cursor.block_id == int(screen.index.block_id[band])
        detail = screen_text(app)  # the Slice Detail pane as drawn
        for frame in format_stack(app.trace, stack_id)[:3]:
            assert frame in detail
