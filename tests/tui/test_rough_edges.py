"""The rough edges a new user hit (issue 17), each pinned at 80x24 and 120x40 with Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.sources import open_capture
from tests.helpers.map_pilot import maps_app, open_screen, screen_text

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ["blocks", "pool", "stacks"])
async def test_search_box_shows_what_is_typed(demo, size, name):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, name)
        await pilot.press("slash")
        await pilot.press(*"0x7f")
        await pilot.pause()
        box = app.screen.query_one("#search")
        assert box.has_focus
        assert box.content_region.height == 1
        assert "0x7f" in screen_text(app)
