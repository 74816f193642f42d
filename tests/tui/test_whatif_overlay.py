"""The Trend screen's what-if overlay: ``w`` cycles the settings; a proven capture gets the
predicted reserved curve drawn over the recorded one and its peak in the legend; a capture
whose replay is not proven says so; after the last setting the overlay is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.analysis.replay.settings import WHAT_IF_CHOICES
from memtui.loading import load_trace
from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.curve import TrendPlot
from tests.conftest import REPO
from tests.helpers.map_pilot import screen_text

H100 = Path(__file__).resolve().parents[1] / "data"


async def press_w(pilot) -> str:
    await pilot.press("w")
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return screen_text(pilot.app).splitlines()[0]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_overlay_on_a_proven_capture(size):
    app = MemtuiApp(load_trace(H100 / "cuda_oom_fragmented.pickle", use_cache=False))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        plot = app.screen.query_one(TrendPlot)
        drawn = len(plot.series)
        legend = await press_w(pilot)
        # expandable segments: the predicted reserved peak 1.9 GiB against 2.0 GiB recorded
        # (a narrow legend names the setting short)
        assert ("if expandable_segments:True: peak 2.0G→1.9G" if size[0] >= 90
                else "if expandable: peak 2.0G→1.9G") in legend
        assert len(plot.series) == drawn + 1
        assert plot.series[-1].label == "reserved if expandable_segments:True"
        for _ in WHAT_IF_CHOICES[1:]:
            legend = await press_w(pilot)
            assert len(plot.series) == drawn + 1
        legend = await press_w(pilot)  # past the last: off
        assert " if " not in legend and len(plot.series) == drawn


async def test_overlay_refused_where_the_replay_is_not_proven():
    app = MemtuiApp(load_trace(REPO / "snapshots" / "demo_oom.pickle", use_cache=False))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        drawn = len(app.screen.query_one(TrendPlot).series)
        legend = await press_w(pilot)
        assert "if expandable_segments:True: not proven" in legend
        assert len(app.screen.query_one(TrendPlot).series) == drawn
