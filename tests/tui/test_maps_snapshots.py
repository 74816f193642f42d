"""SVG snapshots of the Blocks, Pool and Stacks screens on the demo captures (snapshots/),
at 80x24 and 120x40.  Regenerate with ``--snapshot-update`` after a deliberate change,
and look at the pictures (tests/tui/__snapshots__/) before committing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp

DEMOS = Path(__file__).resolve().parents[2] / "snapshots"
SIZES = [(80, 24), (120, 40)]


KEYS = {"blocks": "2", "pool": "3", "stacks": "4"}


def _app(name: str) -> MemtuiApp:
    return MemtuiApp(open_capture(DEMOS / name))


async def _settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _at_peak_on(screen: str, *keys: str):
    """Open ``screen`` with the cursor at the peak (``p``), then press ``keys``."""
    async def run(pilot) -> None:
        await _settle(pilot)
        await pilot.press("p", KEYS[screen])
        await _settle(pilot)
        await pilot.press(*keys)
        await _settle(pilot)
    return run


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_blocks_screen(snap_compare, size):
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size,
                        run_before=_at_peak_on("blocks"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pool_screen(snap_compare, size):
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size,
                        run_before=_at_peak_on("pool"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_stacks_screen(snap_compare, size):
    assert snap_compare(_app("demo_training.pickle"), terminal_size=size,
                        run_before=_at_peak_on("stacks", "down", "down", "down", "enter"))


def test_pool_screen_at_the_oom(snap_compare):
    app = _app("demo_oom.pickle")

    async def at_oom(pilot) -> None:
        await _settle(pilot)
        await pilot.press("3")
        await _settle(pilot)
        await pilot.press("o")  # the next OOM event
        await _settle(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=at_oom)
