"""SVG snapshots of the screens on the demo capture, at 80x24 and 120x40.

The baselines live in tests/tui/__snapshots__/test_snapshots/; after a deliberate change
to the looks, look at the new ones and accept them with
``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from tests.conftest import REPO
from tests.helpers.toy_traces import profiler_trace, ready, settle, toy_trace

DEMO = REPO / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def _ids(size):
    return f"{size[0]}x{size[1]}"


def before(*keys):
    """A run_before that waits for the app, presses ``keys`` and lets everything settle."""

    async def run(pilot):
        await ready(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await settle(pilot)

    return run


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_trend_at_the_peak(snap_compare, demo, size):
    """Trend on the demo: the cursor on the peak, live bytes by stack top below."""
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=before("p"))


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_trend_window_zoomed(snap_compare, demo, size):
    """A window selected around the peak, then zoomed a step out of it."""
    keys = ("p", "H", "left_square_bracket", "L", "L", "right_square_bracket", "z", "Z", "h")
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=before(*keys))


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_tables_blocks(snap_compare, demo, size):
    """Block View at the peak, sorted by size, largest first."""
    keys = ("p", "5", "right", "s")
    assert snap_compare(MemtuiApp(demo), terminal_size=size, run_before=before(*keys))


@pytest.mark.parametrize("size", SIZES, ids=_ids)
def test_tables_events(snap_compare, demo, size):
    """Event View following the cursor at the peak."""
    assert snap_compare(MemtuiApp(demo), terminal_size=size,
                        run_before=before("p", "5", "tab"))


def test_trend_60_columns(snap_compare, demo):
    """The narrow layout."""
    assert snap_compare(MemtuiApp(demo), terminal_size=(60, 24), run_before=before("p"))


def test_tables_60_columns(snap_compare, demo):
    """The narrow layout: the call stack under the table."""
    assert snap_compare(MemtuiApp(demo), terminal_size=(60, 24),
                        run_before=before("p", "5"))


def test_help(snap_compare):
    assert snap_compare(MemtuiApp(toy_trace()), terminal_size=(120, 40),
                        run_before=before("question_mark"))


def test_profiler_trend(snap_compare):
    """Profiler curves (Overall) on a hand-built trace."""
    assert snap_compare(MemtuiApp(profiler_trace()), terminal_size=(80, 24),
                        run_before=before("p"))
