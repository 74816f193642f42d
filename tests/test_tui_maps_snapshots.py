"""SVG snapshots of the Blocks, Pool and Stacks screens on the demo captures (snapshots/),
at 80x24 and 120x40.  Regenerate with ``--snapshot-update`` after a deliberate change,
and look at the pictures (tests/__snapshots__/) before committing them."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.levels import allocated_level
from memtui.sources import open_capture
from tests.ui2_app import StandInApp

DEMOS = Path(__file__).resolve().parents[1] / "snapshots"
SIZES = [(80, 24), (120, 40)]


def _app(name: str, screen: str) -> StandInApp:
    return StandInApp(open_capture(DEMOS / name), screen)


def _at_peak(app: StandInApp):
    async def run(pilot) -> None:
        await pilot.pause()
        level = allocated_level(app.trace, app.cursor.device)
        _, at = level.peak()
        app.move_cursor(t=int(level.t[at]))
        await pilot.pause()
    return run


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_blocks_screen(snap_compare, size):
    app = _app("demo_training.pickle", "blocks")
    assert snap_compare(app, terminal_size=size, run_before=_at_peak(app))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pool_screen(snap_compare, size):
    app = _app("demo_training.pickle", "pool")
    assert snap_compare(app, terminal_size=size, run_before=_at_peak(app))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_stacks_screen(snap_compare, size):
    app = _app("demo_training.pickle", "stacks")
    assert snap_compare(app, terminal_size=size, press=["down", "down", "down", "enter"],
                        run_before=_at_peak(app))


def test_pool_screen_at_the_oom(snap_compare):
    app = _app("demo_oom.pickle", "pool")

    async def at_oom(pilot) -> None:
        await pilot.pause()
        oom = app.trace.events.filter(pl.col("action") == "oom")
        app.move_cursor(t=int(oom["t"][0]))
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=at_oom)
