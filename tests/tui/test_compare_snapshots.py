"""SVG snapshots of compare mode at 80x24: the Trend of both runs with B - A, the Diff.

The pair is tests/helpers/compare_traces.py's clean loop against the same loop leaking
1 MiB a step.  Accept deliberate changes with
``pytest tests/tui/test_compare_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import pytest

from memtui.sources import open_capture
from memtui.tui.compare_app import CompareApp
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.toy_traces import ready, settle


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_snap")
    return (open_capture(write_loop(folder / "clean.pickle")),
            open_capture(write_loop(folder / "leak.pickle", leak=MiB)))


def before(*keys):
    async def run(pilot):
        await ready(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await settle(pilot)

    return run


def test_compare_trend_at_the_end(snap_compare, pair):
    """Both curves on A's axis, the cursor on A's last event, B - A under them."""
    assert snap_compare(CompareApp(*pair), terminal_size=(80, 24), run_before=before("G"))


def test_compare_diff(snap_compare, pair):
    """The Diff screen: the leaking stack first, at B's end and at its peak, only in B."""
    assert snap_compare(CompareApp(*pair), terminal_size=(80, 24), run_before=before("7"))
